/*
Copyright 2026 The Playground Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package agentapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

func TestEncodeChunk(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		enc  string
	}{
		{"ascii", []byte("hello\n"), EncodingText},
		{"utf8", []byte("héllo €𝄞\x00\t"), EncodingText},
		{"invalid", []byte{0xff, 'a'}, EncodingBase64},
		{"split rune head", []byte("ab\xe2\x82"), EncodingBase64},
		{"split rune tail", []byte("\xacab"), EncodingBase64},
		{"surrogate", []byte("\xed\xa0\x80"), EncodingBase64},
		// Valid UTF-8, but six bytes a byte in JSON: base64 is smaller.
		{"control bytes", bytes.Repeat([]byte{1}, 4096), EncodingBase64},
		{"NULs", make([]byte, 300), EncodingBase64},
		{"text with some escapes", []byte("a\tb \"quoted\" \\ line\n\x1b[0m\n"), EncodingText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := EncodeChunk("stderr", 7, 3, tt.data)
			if e.Encoding != tt.enc || e.Stream != "stderr" || e.Seq != 7 || e.Offset != 3 {
				t.Fatalf("Encode = %+v, want encoding %s", e, tt.enc)
			}
			// Through JSON, as a client sees it.
			raw, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var back Chunk
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			got, err := back.Bytes()
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Fatalf("round trip: %q, %v; want %q", got, err, tt.data)
			}
		})
	}
}

// TestJSONTextLen: the length counted is the length encoding/json writes
// (without HTML escaping, as go-sdk writes messages).
func TestJSONTextLen(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "\x00", "\x01", "\x1f", "\n", "\r", "\t", "\b", "\f", "\"", "\\", "<", "&", "\x7f", "é", "€", "\u2028", "\u2029", "🙂", "\xe2\x80\xa7"}
	for range 2000 {
		var b []byte
		for j := rng.IntN(40); j > 0; j-- {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(b)); err != nil {
			t.Fatal(err)
		}
		want := buf.Len() - 3 // quotes and newline
		if JSONTextLen(b) != want {
			t.Fatalf("JSONTextLen(%q) = %d, encoding/json wrote %d: %s", b, JSONTextLen(b), want, buf.Bytes())
		}
		for _, limit := range []int{want - 1, want, want + 1} {
			if jsonTextFits(b, limit) != (want <= limit) {
				t.Fatalf("jsonTextFits(%q, %d) = %v with a length of %d", b, limit, want > limit, want)
			}
		}
	}
}

func TestChunkBytesRejects(t *testing.T) {
	for _, e := range []Chunk{
		{Encoding: "hex", Data: "00"},
		{Encoding: EncodingBase64, Data: "not base64!"},
		{Encoding: EncodingBase64, Data: "QQ"}, // unpadded
	} {
		if _, err := e.Bytes(); err == nil {
			t.Errorf("Bytes(%+v) accepted", e)
		}
	}
}

// TestSplitUTF8RoundTrip splits UTF-8 text at every byte offset into two
// chunks: both halves decode to the exact bytes whatever their encoding.
func TestSplitUTF8RoundTrip(t *testing.T) {
	text := []byte("a€b𝄞c héllo")
	for i := 0; i <= len(text); i++ {
		var got []byte
		for _, part := range [][]byte{text[:i], text[i:]} {
			e := EncodeChunk("stdout", 0, 0, part)
			if e.Encoding == EncodingText && !utf8.Valid(part) {
				t.Fatalf("split %d: invalid UTF-8 sent as text", i)
			}
			b, err := e.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b...)
		}
		if !bytes.Equal(got, text) {
			t.Fatalf("split %d: %q", i, got)
		}
	}
}

// FuzzChunkRoundTrip: any bytes survive EncodeChunk, JSON and Bytes exactly.
func FuzzChunkRoundTrip(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := make([]byte, rng.IntN(64))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Add([]byte("héllo"))
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := json.Marshal(EncodeChunk("stdout", 0, 0, data))
		if err != nil {
			t.Fatal(err)
		}
		var e Chunk
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		got, err := e.Bytes()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round trip of %q: %q, %v", data, got, err)
		}
	})
}
