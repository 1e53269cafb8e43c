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

package outring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// TestAppendPage: a holder's answer to a poll is the Page, then each
// chunk's bytes in a frame of its stream, which a reader takes back as
// they were written; a refused cursor is a Page with its reason.
func TestAppendPage(t *testing.T) {
	r := New(1<<10, 16, 8)
	r.Write(guestapi.Stdout, []byte("hello, "))
	r.Write(guestapi.Stderr, []byte("warning"))
	exit := &guestapi.End{Status: guestapi.Exit{ExitCode: 3}}
	f, err := r.AppendPage(nil, Cursor{}, 100, exit, "")
	if err != nil {
		t.Fatal(err)
	}
	fr := guestapi.NewFrameReader(bufio.NewReader(bytes.NewReader(f)))
	typ, payload, err := fr.ReadFrame()
	if err != nil || typ != guestapi.FramePage {
		t.Fatalf("first frame %v, %v", typ, err)
	}
	var p guestapi.Page
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	if !p.AtEnd || p.Exit == nil || p.Exit.ExitCode != 3 || len(p.Chunks) != 2 || p.Next != "2.14" {
		t.Fatalf("page %+v", p)
	}
	for i, want := range []struct {
		typ  guestapi.FrameType
		data string
	}{{guestapi.FrameStdout, "hello, "}, {guestapi.FrameStderr, "warning"}} {
		typ, data, err := fr.ReadFrame()
		if err != nil || typ != want.typ || string(data) != want.data || p.Chunks[i].Len != len(want.data) {
			t.Fatalf("chunk %d: %v %q %v; want %v %q", i, typ, data, err, want.typ, want.data)
		}
	}

	f, err = r.AppendPage(nil, Cursor{Seq: 9, Pos: 99}, 100, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	_, payload, _ = guestapi.NewFrameReader(bufio.NewReader(bytes.NewReader(f))).ReadFrame()
	var refused guestapi.Page
	if err := json.Unmarshal(payload, &refused); err != nil || refused.Error == "" || len(refused.Chunks) != 0 {
		t.Fatalf("a cursor past the end: %+v %v", refused, err)
	}
}
