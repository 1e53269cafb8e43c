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

package fingerprint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func sample() Inputs {
	return Inputs{
		Files:    ConfigMapFiles(map[string]string{"hello": "#!/bin/sh\necho hello\n", "lib.sh": "x=1\n"}, nil),
		Command:  []string{"/bin/sh", "-c", "cp /src/hello /out/hello"},
		Binaries: []string{"hello"},
		Builder:  "oci",
	}
}

func must(t *testing.T, in Inputs) string {
	t.Helper()
	fp, err := Of(in)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// The fingerprint depends on every input and on nothing else: not on the
// order files and binaries are listed in.
func TestEveryInputCounts(t *testing.T) {
	base := must(t, sample())
	if len(base) != 64 {
		t.Fatalf("fingerprint %q: want 64 hex digits", base)
	}
	reordered := sample()
	reordered.Files[0], reordered.Files[1] = reordered.Files[1], reordered.Files[0]
	reordered.Binaries = []string{"hello"}
	if got := must(t, reordered); got != base {
		t.Errorf("reordering the files changed the fingerprint: %s, then %s", base, got)
	}

	changes := map[string]func(*Inputs){
		"file bytes":      func(in *Inputs) { in.Files[0].Data = append([]byte{}, append(in.Files[0].Data, ' ')...) },
		"file name":       func(in *Inputs) { in.Files[0].Name += "2" },
		"file mode":       func(in *Inputs) { in.Files[0].Mode = 0o755 },
		"another file":    func(in *Inputs) { in.Files = append(in.Files, File{Name: "more", Mode: 0o644}) },
		"command":         func(in *Inputs) { in.Command[2] += " " },
		"argument split":  func(in *Inputs) { in.Command = []string{"/bin/sh", "-c cp", "/src/hello /out/hello"} },
		"no build":        func(in *Inputs) { in.Command = nil },
		"binaries":        func(in *Inputs) { in.Binaries = append(in.Binaries, "lib.sh") },
		"builder":         func(in *Inputs) { in.Builder = "vm" },
		"file as symlink": func(in *Inputs) { in.Files[0].Mode = fs.ModeSymlink | 0o777 },
	}
	seen := map[string]string{base: "the sample"}
	for name, change := range changes {
		in := sample()
		change(&in)
		fp, err := Of(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if other, dup := seen[fp]; dup {
			t.Errorf("changing the %s gave the fingerprint of %s", name, other)
		}
		seen[fp] = name
	}
}

// A host directory with the same files as a ConfigMap has the same
// fingerprint, so that nodes and the manager agree whatever the source.
func TestDirMatchesConfigMap(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"hello": "#!/bin/sh\necho hello\n", "lib.sh": "x=1\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := sample()
	want := must(t, in)
	in.Files = files
	if got := must(t, in); got != want {
		t.Errorf("the directory's fingerprint %s differs from the ConfigMap's %s", got, want)
	}

	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../hello", filepath.Join(dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	files, err = Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	in.Files = files
	if got := must(t, in); got == want {
		t.Error("a new directory with a symbolic link left the fingerprint unchanged")
	}
}

func TestBadTrees(t *testing.T) {
	for _, name := range []string{"", ".", "..", "../x", "/abs", "a//b", "a/../b"} {
		in := sample()
		in.Files = []File{{Name: name, Mode: 0o644}}
		if _, err := Of(in); err == nil {
			t.Errorf("file name %q was accepted", name)
		}
	}
	in := sample()
	in.Files = append(in.Files, in.Files[0])
	if _, err := Of(in); err == nil {
		t.Error("a name listed twice was accepted")
	}
	if _, err := Dir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing directory was read")
	}

	big := t.TempDir()
	for i := 0; i <= MaxFiles; i++ {
		if err := os.WriteFile(filepath.Join(big, "f"+string(rune('a'+i%26))+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Dir(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a tree of %d files: %v, want ErrTooLarge", MaxFiles+1, err)
	}
}

// Nothing outside the tree is read: symbolic links, to a file or a
// directory outside, relative or absolute, are recorded as links and not
// followed; a pipe is refused without blocking.
func TestTreeStaysBeneathRoot(t *testing.T) {
	const marker = "outside the tree: never read"
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tree")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"abs-file": filepath.Join(outside, "secret"),
		"abs-dir":  outside,
		"rel-file": filepath.Join("..", "..", filepath.Base(outside), "secret"),
		"etc":      "/etc",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"abs-file", "rel-file"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != marker {
			t.Fatalf("the link %s does not lead to the file outside: %q, %v", name, b, err)
		}
	}
	files, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		if strings.Contains(string(f.Data), marker) {
			t.Errorf("%s holds the bytes of a file outside the tree", f.Name)
		}
		if f.Mode&fs.ModeSymlink != 0 {
			got[f.Name] = string(f.Data)
		} else if f.Name != "tool" {
			t.Errorf("%s (%v) was read through a link", f.Name, f.Mode)
		}
	}
	if !reflect.DeepEqual(got, links) {
		t.Errorf("links recorded %v, want %v", got, links)
	}

	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(dir); err == nil || !strings.Contains(err.Error(), "neither a regular file") {
		t.Errorf("a tree with a named pipe: %v, want a refusal", err)
	}
}
