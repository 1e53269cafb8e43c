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

package jobs

import (
	"encoding/base64"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Chunk is a piece of a job's output as a poll returns it.
type Chunk struct {
	Stream backend.Stream
	// Seq numbers the chunk in the job's output, from 0, across both streams.
	Seq uint64
	// Offset is where Data starts within the chunk; it is non-zero only when
	// a poll's byte budget split the chunk and this is a later part.
	Offset int
	// Data is the chunk's bytes, owned by the caller.
	Data []byte
}

// Chunk encodings.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// EncodedChunk is a chunk in a form that survives JSON byte for byte.
type EncodedChunk struct {
	Stream   string `json:"stream"`
	Seq      uint64 `json:"seq"`
	Offset   int    `json:"offset,omitempty"`
	Encoding string `json:"encoding"`
	Data     string `json:"data"`
}

// Encode returns the chunk in the encoding that is smaller in JSON: text
// when its bytes are valid UTF-8 and their JSON string (escapes counted) is
// no longer than their base64, else standard base64. Either way Decode
// gives back the exact bytes: JSON would replace invalid UTF-8 with U+FFFD,
// so text is used only when there is nothing to replace. A chunk that ends
// or starts in the middle of a multi-byte character (the process wrote it
// in two pieces) is not valid UTF-8 on its own and goes as base64; so does
// output full of control bytes or NULs, which JSON escapes to six bytes
// each (\u0001) where base64 spends four bytes on three.
func (c Chunk) Encode() EncodedChunk {
	e := EncodedChunk{Stream: c.Stream.String(), Seq: c.Seq, Offset: c.Offset}
	e.Encoding, e.Data = EncodeData(c.Data)
	return e
}

// EncodeData encodes a chunk's bytes as Chunk.Encode does.
func EncodeData(b []byte) (encoding, data string) {
	if PreferText(b) {
		return EncodingText, string(b)
	}
	return EncodingBase64, base64.StdEncoding.EncodeToString(b)
}

// PreferText says whether b goes as text: it is valid UTF-8 and its JSON
// string is no longer than its base64.
func PreferText(b []byte) bool {
	return jsonTextFits(b, base64.StdEncoding.EncodedLen(len(b))) && utf8.Valid(b)
}

// jsonTextFits says whether JSONTextLen(b) <= limit, stopping as soon as
// it is not: output full of control bytes is told after a fifth of it.
func jsonTextFits(b []byte, limit int) bool {
	_, fits := jsonTextLen(b, limit)
	return fits
}

// JSONTextLen is the length of valid UTF-8 b as the inside of a JSON
// string, escaped as encoding/json escapes it without HTML escaping (the
// way go-sdk writes JSON-RPC messages): quote and backslash and the
// control characters that have a short form take two bytes, other control
// characters six (\u00XX), U+2028 and U+2029 six instead of three.
func JSONTextLen(b []byte) int {
	n, _ := jsonTextLen(b, math.MaxInt)
	return n
}

// jsonTextLen counts JSONTextLen(b) until it passes limit; fits says
// whether it did not.
func jsonTextLen(b []byte, limit int) (n int, fits bool) {
	n = len(b)
	for i, c := range b {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			n++
		case c < 0x20:
			n += 5
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			n += 3
		default:
			continue
		}
		if n > limit {
			return n, false
		}
	}
	return n, n <= limit
}

// Bytes decodes the chunk's data; it is the inverse of Chunk.Encode and is
// strict about the encoding name and base64 padding.
func (e EncodedChunk) Bytes() ([]byte, error) {
	switch e.Encoding {
	case EncodingText:
		return []byte(e.Data), nil
	case EncodingBase64:
		return base64.StdEncoding.Strict().DecodeString(e.Data)
	}
	return nil, fmt.Errorf("unknown chunk encoding %q", e.Encoding)
}

// Gap reports output the client had not read when the ring evicted it.
// Chunks FromSeq up to, not including, ToSeq were lost (Chunks of them, the
// first possibly after the client had read part of it) and Bytes bytes of
// them the client never received. The poll resumes at ToSeq.
type Gap struct {
	FromSeq uint64 `json:"from_seq"`
	ToSeq   uint64 `json:"to_seq"`
	Chunks  uint64 `json:"chunks"`
	Bytes   uint64 `json:"bytes"`
}

// isContinuation reports whether b is a UTF-8 continuation byte.
func isContinuation(b byte) bool { return b&0xC0 == 0x80 }

// runeCut moves a cut at n (0 < n) back to the start of the character that
// the byte at n belongs to, when that start is within utf8.UTFMax bytes, so
// that splitting output does not split a character and both halves can stay
// text. at(i) returns the byte at i; it is called for i in (n-UTFMax, n]. If
// there is no such start, or it is at 0 (the cut would make no progress), n
// is returned unchanged: splitting is always allowed, it only costs the text
// encoding of the two halves.
func runeCut(n int, at func(int) byte) int {
	if c := runeStart(n, at); c > 0 {
		return c
	}
	return n
}

// runeStart returns the largest i in [max(0, n-UTFMax+1), n] where at(i) is
// not a continuation byte, or -1 if there is none.
func runeStart(n int, at func(int) byte) int {
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if !isContinuation(at(i)) {
			return i
		}
	}
	return -1
}
