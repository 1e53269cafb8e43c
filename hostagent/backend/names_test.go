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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "sb-1", "A_b.c", "x" + strings.Repeat("y", 62)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a..b", "../x", "a/b", "-a", ".a", "_a", "a b", "a\x00", "x" + strings.Repeat("y", 63)} {
		if err := ValidateID(id); err == nil {
			t.Errorf("ValidateID(%q) admitted it", id)
		}
	}
}

func TestValidateLogin(t *testing.T) {
	if err := ValidateLogin(Spec{Persona: "p", LoginScript: "cd", LoginEnv: []EnvVar{{Name: "_A1", Value: "it's"}}}); err != nil {
		t.Errorf("a valid login profile: %v", err)
	}
	for what, s := range map[string]Spec{
		"a name with a space": {LoginEnv: []EnvVar{{Name: "A B"}}},
		"a name of a digit":   {LoginEnv: []EnvVar{{Name: "1A"}}},
		"an empty name":       {LoginEnv: []EnvVar{{Name: ""}}},
		"a NUL in a value":    {LoginEnv: []EnvVar{{Name: "A", Value: "a\x00b"}}},
		"a NUL in a persona":  {Persona: "\x00"},
		"a NUL in a script":   {LoginScript: "echo\x00"},
	} {
		if err := ValidateLogin(s); err == nil {
			t.Errorf("ValidateLogin admitted %s", what)
		}
	}
}

func TestFileExists(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"": true, "dangling": true, "nowhere": false} {
		if got := FileExists(filepath.Join(dir, name)); got != want {
			t.Errorf("FileExists(%q) = %v, want %v", name, got, want)
		}
	}
}
