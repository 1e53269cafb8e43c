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
	"errors"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// AppendPage appends to dst what a job's holder answers a Poll with: the
// Page of at most budget bytes of the ring's output from cur, then its
// chunks' bytes as Stdout and Stderr frames; exit and proofLost say how the
// job ended, if it did. A cursor the ring refuses is a Page with its
// Error.
func (r *Ring) AppendPage(dst []byte, cur Cursor, budget int, exit *guestapi.End, proofLost string) ([]byte, error) {
	cur, gap, err := r.Resolve(cur)
	if err != nil {
		return guestapi.AppendJSONFrame(dst, guestapi.FramePage, guestapi.Page{Error: Reason(err)})
	}
	chunks, next := r.Read(cur, budget)
	page := guestapi.Page{Next: next.String(), AtEnd: r.AtEnd(next), Exit: exit, ProofLost: proofLost}
	for _, ch := range chunks {
		page.Chunks = append(page.Chunks, guestapi.PageChunk{Stream: ch.Stream, Seq: ch.Seq, Offset: ch.Offset, Len: len(ch.Data)})
	}
	if gap != nil {
		page.Gap = &guestapi.PageGap{FromSeq: gap.FromSeq, ToSeq: gap.ToSeq, Chunks: gap.Chunks, Bytes: gap.Bytes}
	}
	page.DroppedBytes, page.DroppedChunks = r.Dropped()
	f, err := guestapi.AppendJSONFrame(dst, guestapi.FramePage, page)
	if err != nil {
		return dst, err
	}
	for _, ch := range chunks {
		t := guestapi.FrameStdout
		if ch.Stream == guestapi.Stderr {
			t = guestapi.FrameStderr
		}
		f = guestapi.AppendFrame(f, t, ch.Data)
	}
	return f, nil
}

// Reason is why the ring refused a cursor, for a Page's Error.
func Reason(err error) string {
	if ce, ok := errors.AsType[*CursorError](err); ok {
		return ce.Reason
	}
	return err.Error()
}
