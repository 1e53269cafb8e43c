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
	"strings"
	"testing"
)

func TestIDs(t *testing.T) {
	for range 1000 {
		h, j := NewHandle(), NewJobID()
		if !ValidHandle(h) || ValidJobID(h) {
			t.Fatalf("issued handle %q: ValidHandle %v, ValidJobID %v", h, ValidHandle(h), ValidJobID(h))
		}
		if !ValidJobID(j) || ValidHandle(j) {
			t.Fatalf("issued job ID %q: ValidJobID %v, ValidHandle %v", j, ValidJobID(j), ValidHandle(j))
		}
	}
	if good := HandlePrefix + strings.Repeat("a", 25) + "q"; !ValidHandle(good) || !ValidJobID(JobPrefix+good[2:]) {
		t.Fatalf("%q or its job ID refused", good)
	}
	for _, s := range []string{
		"", ".", "..", "../x", "h_", "job_", "h_nope", "h_/../../etc/passwd",
		"h_" + strings.Repeat("a", 25) + "b", // a last character base32 of 128 bits never ends in
		"h_" + strings.Repeat("a", 26) + "a", // too long
		"h_" + strings.Repeat("a", 25),       // too short
		"H_" + strings.Repeat("a", 26),
		"h_" + strings.Repeat("A", 26),
		"h_" + strings.Repeat("a", 24) + "1a", // 0, 1, 8, 9 are not base32
		"h_" + strings.Repeat("a", 24) + "=a",
		"h_" + strings.Repeat("a", 24) + "\x00a",
		"h_" + strings.Repeat("a", 24) + "\xffa",
		" h_" + strings.Repeat("a", 26),
	} {
		if ValidHandle(s) {
			t.Errorf("ValidHandle(%q) = true", s)
		}
		if j := strings.Replace(s, "h_", "job_", 1); ValidJobID(j) {
			t.Errorf("ValidJobID(%q) = true", j)
		}
	}
}

// FuzzValidHandle: whatever a caller sends, a valid handle is exactly the
// prefix and 26 characters of lower-case base32, so it can be quoted in a
// message and used as a map key or a path element without harm.
func FuzzValidHandle(f *testing.F) {
	for _, s := range []string{"", ".", "..", "h_" + strings.Repeat("a", 26), NewHandle(), NewJobID()} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []struct {
			prefix string
			valid  func(string) bool
		}{{HandlePrefix, ValidHandle}, {JobPrefix, ValidJobID}} {
			if !c.valid(s) {
				continue
			}
			if len(s) != len(c.prefix)+idRandomChars || !strings.HasPrefix(s, c.prefix) ||
				strings.Trim(s[len(c.prefix):], "abcdefghijklmnopqrstuvwxyz234567") != "" {
				t.Fatalf("%q accepted", s)
			}
		}
	})
}
