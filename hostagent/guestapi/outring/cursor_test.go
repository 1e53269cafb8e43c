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
	"testing"
)

func TestParseCursor(t *testing.T) {
	good := []struct {
		in   string
		want Cursor
	}{
		{"", Cursor{}},
		{"0.0", Cursor{}},
		{"12.345", Cursor{12, 345}},
		{"18446744073709551615.18446744073709551615", Cursor{1<<64 - 1, 1<<64 - 1}},
	}
	for _, tt := range good {
		got, err := ParseCursor(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseCursor(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	bad := []string{
		"0", "1.", ".1", ".", "01.1", "1.01", "-1.0", "+1.0", "1.2.3", " 1.2", "1.2 ",
		"18446744073709551616.0", "0.18446744073709551616", "a.b", "1,2", "١.٢", "0x1.0",
		"1e3.0", "00000000000000000000000000000000000001.0",
	}
	for _, in := range bad {
		if c, err := ParseCursor(in); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParseCursor(%q) = %+v, %v; want ErrBadCursor", in, c, err)
		}
	}
}

// FuzzParseCursor: cursors come from clients. Decoding never panics, accepts
// only canonical spellings, and round-trips.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0.0", "12.345", "18446744073709551615.18446744073709551615", "01.1", "1..2", "-1.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("ParseCursor(%q): error %v is not ErrBadCursor", s, err)
			}
			return
		}
		if s != "" && c.String() != s {
			t.Fatalf("ParseCursor(%q) accepted a non-canonical spelling of %q", s, c.String())
		}
		back, err := ParseCursor(c.String())
		if err != nil || back != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, back, err)
		}
	})
}
