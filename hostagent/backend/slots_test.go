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

package backend

import (
	"errors"
	"testing"
)

// TestSlots: the table is read from the records once, a slot is held by
// one sandbox at a time, a sandbox asking again gets its own, a full
// table says so, and a released slot is taken again.
func TestSlots(t *testing.T) {
	loads := 0
	tbl := Slots{First: 1, N: 3, Load: func() (map[int]string, error) {
		loads++
		return map[int]string{2: "on-disk", 0: "out-of-range", 9: "out-of-range"}, nil
	}}
	if s, ok, err := tbl.Claim("a", 2); err != nil || !ok || s == 2 {
		t.Fatalf("claim of a held slot: %d %v %v, want another slot", s, ok, err)
	}
	a, _ := tbl.Holds("a")
	if s, ok, _ := tbl.Claim("a", -1); !ok || s != a {
		t.Fatalf("a again: %d, want its own %d", s, a)
	}
	b, ok, _ := tbl.Claim("b", -1)
	if !ok || b == a || b == 2 || b < 1 || b > 3 {
		t.Fatalf("b: %d (a holds %d, on-disk 2)", b, a)
	}
	if _, ok, err := tbl.Claim("c", -1); ok || err != nil {
		t.Fatalf("a full table gave c a slot (err %v)", err)
	}
	tbl.Release("a")
	if s, ok, _ := tbl.Claim("c", a); !ok || s != a {
		t.Fatalf("c after a's release: %d %v, want %d", s, ok, a)
	}
	if loads != 1 {
		t.Fatalf("the records were read %d times, want once", loads)
	}

	broken := Slots{First: 0, N: 4, Load: func() (map[int]string, error) { return nil, errors.New("unreadable") }}
	if _, _, err := broken.Claim("x", -1); err == nil {
		t.Fatal("an unreadable table gave a slot")
	}
}
