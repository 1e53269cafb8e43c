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
	"strconv"
	"strings"
)

// Cursor addresses a byte of a job's output: the chunk the client wants next
// and the byte's position in the job's whole output. seq alone cannot say how
// many bytes an eviction skipped; pos alone cannot say how many chunks. Both
// are monotonic, so a cursor from the past is still meaningful after its
// chunk was evicted.
type Cursor struct {
	Seq uint64
	Pos uint64
}

// maxCursorLen is two 20-digit uint64s and the separator.
const maxCursorLen = 41

// String is the wire form: "<seq>.<pos>" in canonical decimal.
func (c Cursor) String() string {
	var b [maxCursorLen]byte
	out := strconv.AppendUint(b[:0], c.Seq, 10)
	out = append(out, '.')
	out = strconv.AppendUint(out, c.Pos, 10)
	return string(out)
}

// ParseCursor decodes a client-supplied cursor. It accepts only the
// canonical form String produces (and "" for the start), so every accepted
// cursor has exactly one spelling; anything else is a CursorError, never a
// panic or a guess.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	if len(s) > maxCursorLen {
		return Cursor{}, &CursorError{Reason: "too long"}
	}
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		return Cursor{}, &CursorError{Reason: "malformed"}
	}
	seq, ok := parseCanonicalUint(a)
	if !ok {
		return Cursor{}, &CursorError{Reason: "malformed"}
	}
	pos, ok := parseCanonicalUint(b)
	if !ok {
		return Cursor{}, &CursorError{Reason: "malformed"}
	}
	return Cursor{Seq: seq, Pos: pos}, nil
}

// parseCanonicalUint accepts decimal digits only, without sign or leading
// zeros, within uint64.
func parseCanonicalUint(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// ErrBadCursor says the cursor is malformed or does not fit the job's output.
var ErrBadCursor = errors.New("bad cursor")

// CursorError refuses a cursor.
type CursorError struct {
	Reason string
}

func (e *CursorError) Error() string {
	return "bad cursor: " + e.Reason + "; pass the next_cursor of your previous poll of this job, or an empty cursor to start from the oldest output kept"
}

// Is makes errors.Is(err, ErrBadCursor) true.
func (e *CursorError) Is(target error) bool { return target == ErrBadCursor }
