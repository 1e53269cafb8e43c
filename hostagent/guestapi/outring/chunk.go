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
	"unicode/utf8"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Chunk is a piece of a job's output as a poll returns it.
type Chunk struct {
	Stream guestapi.Stream
	// Seq numbers the chunk in the job's output, from 0, across both streams.
	Seq uint64
	// Offset is where Data starts within the chunk; it is non-zero only when
	// a poll's byte budget split the chunk and this is a later part.
	Offset int
	// Data is the chunk's bytes, owned by the caller.
	Data []byte
}

// Gap reports output the client had not read when the ring evicted it.
// Chunks FromSeq up to, not including, ToSeq were lost (Chunks of them, the
// first possibly after the client had read part of it) and Bytes bytes of
// them the client never received. The poll resumes at ToSeq.
type Gap struct {
	FromSeq uint64
	ToSeq   uint64
	Chunks  uint64
	Bytes   uint64
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
