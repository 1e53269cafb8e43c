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
	"strconv"
	"strings"
)

// cursor addresses a byte of a job's output: the chunk the client wants next
// and the byte's position in the job's whole output. seq alone cannot say how
// many bytes an eviction skipped; pos alone cannot say how many chunks. Both
// are monotonic, so a cursor from the past is still meaningful after its
// chunk was evicted.
type cursor struct {
	seq uint64
	pos uint64
}

// maxCursorLen is two 20-digit uint64s and the separator.
const maxCursorLen = 41

// String is the wire form: "<seq>.<pos>" in canonical decimal.
func (c cursor) String() string {
	var b [maxCursorLen]byte
	out := strconv.AppendUint(b[:0], c.seq, 10)
	out = append(out, '.')
	out = strconv.AppendUint(out, c.pos, 10)
	return string(out)
}

// parseCursor decodes a client-supplied cursor. It accepts only the
// canonical form String produces (and "" for the start), so every accepted
// cursor has exactly one spelling; anything else is a CursorError, never a
// panic or a guess.
func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	if len(s) > maxCursorLen {
		return cursor{}, &CursorError{Reason: "too long"}
	}
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		return cursor{}, &CursorError{Reason: "malformed"}
	}
	seq, ok := parseCanonicalUint(a)
	if !ok {
		return cursor{}, &CursorError{Reason: "malformed"}
	}
	pos, ok := parseCanonicalUint(b)
	if !ok {
		return cursor{}, &CursorError{Reason: "malformed"}
	}
	return cursor{seq: seq, pos: pos}, nil
}

// parseCanonicalUint accepts decimal digits only, without sign or leading
// zeros, within uint64.
func parseCanonicalUint(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
