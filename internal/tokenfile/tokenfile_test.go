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

package tokenfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		minLen        int
		want          []string
		err           string
	}{
		{name: "one per line", content: "token-one-0123456789\ntoken-two-0123456789\n", minLen: MinLen,
			want: []string{"token-one-0123456789", "token-two-0123456789"}},
		{name: "no final newline", content: "token-one-0123456789", minLen: MinLen, want: []string{"token-one-0123456789"}},
		{name: "blank lines skipped", content: "\n\ntoken-one-0123456789\n\n\ntoken-two-0123456789\n\n", minLen: MinLen,
			want: []string{"token-one-0123456789", "token-two-0123456789"}},
		{name: "white space around a token trimmed, CRLF too", content: "  token-one-0123456789\t\r\n \t \r\n\ttoken-two-0123456789  \n", minLen: MinLen,
			want: []string{"token-one-0123456789", "token-two-0123456789"}},
		{name: "empty", content: "", minLen: MinLen, want: nil},
		{name: "only white space", content: " \n\t\n\r\n", minLen: MinLen, want: nil},
		{name: "no comments: a # line is a token", content: "# rotated 2026-01-01\n", minLen: MinLen, want: []string{"# rotated 2026-01-01"}},
		{name: "short token refused by its line, not echoed", content: "token-one-0123456789\n\nsh0rt\n", minLen: MinLen,
			err: "the token on line 3 is shorter than 16 bytes"},
		{name: "any length without a minimum", content: "short\n", minLen: 0, want: []string{"short"}},
		{name: "exactly the minimum", content: strings.Repeat("x", MinLen), minLen: MinLen, want: []string{strings.Repeat("x", MinLen)}},
		{name: "at the bound", content: strings.Repeat("x", MaxSize), minLen: MinLen, want: []string{strings.Repeat("x", MaxSize)}},
		{name: "over the bound", content: strings.Repeat("x", MaxSize) + "\n", minLen: MinLen, err: "over 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.content), tc.minLen)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.err)
				}
				if strings.Contains(err.Error(), "sh0rt") || strings.Contains(err.Error(), "xxxx") {
					t.Fatalf("the error %q echoes the file", err)
				}
				return
			}
			if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(filepath.Join(dir, "missing"), MinLen); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v, want not-exist", err)
	}
	big := filepath.Join(dir, "big")
	write(t, big, strings.Repeat("token-0123456789\n", MaxSize/10))
	if _, err := Read(big, MinLen); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("a file over the bound: %v", err)
	}
	if _, err := Read(dir, MinLen); err == nil {
		t.Fatal("a directory read as a token file")
	}
}

// Reload takes a rotated file, keeps the previous tokens when the file
// goes bad, and takes a good file again afterwards.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	write(t, p, "old-token-0123456789\n")
	f, err := Open(p, MinLen)
	if err != nil {
		t.Fatal(err)
	}
	want := func(changed bool, err error, wantChanged bool, wantErr string, tokens ...string) {
		t.Helper()
		if wantErr == "" && err != nil || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
			t.Fatalf("error %v, want %q", err, wantErr)
		}
		if changed != wantChanged {
			t.Fatalf("changed %v, want %v", changed, wantChanged)
		}
		if got := f.Tokens(); strings.Join(got, "|") != strings.Join(tokens, "|") {
			t.Fatalf("tokens %q, want %q", got, tokens)
		}
	}
	want(false, nil, false, "", "old-token-0123456789")

	changed, err := f.Reload(false)
	want(changed, err, false, "", "old-token-0123456789") // unchanged

	// A rotation: the new token above the old one, then the new one alone.
	write(t, p, "new-token-0123456789\nold-token-0123456789\n")
	changed, err = f.Reload(false)
	want(changed, err, true, "", "new-token-0123456789", "old-token-0123456789")
	write(t, p, "new-token-0123456789\n")
	changed, err = f.Reload(false)
	want(changed, err, true, "", "new-token-0123456789")

	// Gone wrong: emptied, a short token, removed. The previous token stays.
	write(t, p, "\n")
	changed, err = f.Reload(false)
	want(changed, err, false, "holds no token", "new-token-0123456789")
	if !errors.Is(err, ErrNoToken) {
		t.Fatalf("an emptied file: %v, want ErrNoToken", err)
	}
	write(t, p, "short\n")
	changed, err = f.Reload(false)
	want(changed, err, false, "line 1 is shorter", "new-token-0123456789")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	changed, err = f.Reload(false)
	want(changed, err, false, "no such file", "new-token-0123456789")

	// Fixed: taken again.
	write(t, p, "next-token-0123456789\n")
	changed, err = f.Reload(false)
	want(changed, err, true, "", "next-token-0123456789")

	// Emptied where no token will do (the agent has static tokens too).
	write(t, p, "")
	changed, err = f.Reload(true)
	want(changed, err, true, "")
}

// A mounted Secret changes by a swap of the ..data link the key's link
// points through (the kubelet's atomic writer); Reload follows it.
func TestReloadMountedSecret(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, v, "token"), "token-of-"+v+"-0123456789\n")
	}
	link := func(target string) {
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	link("v1")
	if err := os.Symlink("..data/token", filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	f, err := Open(filepath.Join(dir, "token"), MinLen)
	if err != nil {
		t.Fatal(err)
	}
	link("v2")
	if changed, err := f.Reload(false); err != nil || !changed {
		t.Fatalf("after the swap: changed %v, %v", changed, err)
	}
	if got := f.Tokens(); len(got) != 1 || got[0] != "token-of-v2-0123456789" {
		t.Fatalf("tokens %q after the swap", got)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
