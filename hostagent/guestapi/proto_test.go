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

package guestapi

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	start, err := AppendJSONFrame(nil, FrameStart, StartRequest{Version: ProtocolVersion, Command: "echo hi", Login: true})
	if err != nil {
		t.Fatal(err)
	}
	stream = append(stream, start...)
	stream = AppendFrame(stream, FrameStdin, []byte{0, 0xff, 'x'})
	stream = AppendFrame(stream, FrameStdinEnd, nil)

	fr := NewFrameReader(bytes.NewReader(stream))
	want := []struct {
		t FrameType
		n int
	}{{FrameStart, len(start) - HeaderSize}, {FrameStdin, 3}, {FrameStdinEnd, 0}}
	for i, w := range want {
		ft, p, err := fr.ReadFrame()
		if err != nil || ft != w.t || len(p) != w.n {
			t.Fatalf("frame %d: %v %d bytes %v, want %v %d", i, ft, len(p), err, w.t, w.n)
		}
		// ParseFrame agrees with the reader on the same bytes.
		pt, pp, used, err := ParseFrame(stream)
		if err != nil || pt != ft || !bytes.Equal(pp, p) {
			t.Fatalf("ParseFrame %d: %v %q %v", i, pt, pp, err)
		}
		stream = stream[used:]
	}
	if _, _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestFrameBounds(t *testing.T) {
	huge := []byte{byte(FrameStdout), 0xff, 0xff, 0xff, 0xff}
	if _, _, err := NewFrameReader(bytes.NewReader(huge)).ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("reader: %v", err)
	}
	if _, _, _, err := ParseFrame(huge); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("parse: %v", err)
	}
	truncated := AppendFrame(nil, FrameStdout, []byte("abc"))[:6]
	if _, _, err := NewFrameReader(bytes.NewReader(truncated)).ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated: %v", err)
	}
	if _, _, n, err := ParseFrame(truncated); n != 0 || err != nil {
		t.Fatalf("partial parse: %d %v", n, err)
	}
}

// FuzzParseFrame feeds arbitrary bytes, as a compromised sandbox could send
// them to the agent, to both decoders: they must agree and never panic or
// return more than MaxFrame.
func FuzzParseFrame(f *testing.F) {
	f.Add(AppendFrame(nil, FrameExit, []byte(`{"code":0}`)))
	f.Add([]byte{byte(FrameStdout), 0, 0, 0, 2, 'h'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		pt, pp, n, perr := ParseFrame(b)
		rt, rp, rerr := NewFrameReader(bytes.NewReader(b)).ReadFrame()
		if len(pp) > MaxFrame || len(rp) > MaxFrame {
			t.Fatal("payload beyond MaxFrame")
		}
		if n > 0 {
			if perr != nil || rerr != nil || pt != rt || !bytes.Equal(pp, rp) || n != HeaderSize+len(pp) {
				t.Fatalf("decoders disagree: %v %q %v / %v %q %v", pt, pp, perr, rt, rp, rerr)
			}
		} else if rerr == nil {
			t.Fatalf("reader decoded a frame the parser found incomplete: %v", perr)
		}
	})
}
