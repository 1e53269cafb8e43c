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

package chunkstore

import (
	"io/fs"
	"strings"
	"testing"
)

// A manifest opens only under the tenant's key, so only the tenant's own
// agent could have written a bad one; a restore still checks that it
// stays inside its target and is consistent before it acts on it.
func TestManifestValidation(t *testing.T) {
	name := strings.Repeat("a", 64)
	file := func(p string, size int64, extents ...Extent) File {
		return File{Path: p, Mode: 0o600, Size: size, Extents: extents}
	}
	dir := func(p string) File { return File{Path: p, Mode: fs.ModeDir | 0o700} }
	ext := func(off int64, sizes ...int64) Extent {
		e := Extent{Offset: off}
		for _, s := range sizes {
			e.Chunks = append(e.Chunks, ChunkRef{Name: name, Size: s})
		}
		return e
	}
	for _, c := range []struct {
		name  string
		files []File
		want  string // "" for valid
	}{
		{"valid", []File{dir("d"), file("d/f", 300, ext(0, 100), ext(200, 100)), file("g", 0)}, ""},
		{"absolute path", []File{file("/etc/passwd", 0)}, "not a clean relative path"},
		{"dot-dot", []File{file("../x", 0)}, "not a clean relative path"},
		{"unclean", []File{dir("d"), file("d/../../x", 0)}, "not a clean relative path"},
		{"twice", []File{file("f", 0), file("f", 0)}, "listed twice"},
		{"before its directory", []File{file("d/f", 0), dir("d")}, "before its directory"},
		{"past its size", []File{file("f", 100, ext(0, 101))}, "run past its size"},
		{"overlapping", []File{file("f", 300, ext(0, 100), ext(50, 100))}, "overlap"},
		{"chunk too large", []File{file("f", 2<<20, ext(0, 2<<20))}, "malformed chunk"},
		{"symlink", []File{{Path: "l", Mode: fs.ModeSymlink | 0o777}}, "neither a regular file nor a directory"},
		{"setuid", []File{{Path: "f", Mode: fs.ModeSetuid | 0o755}}, "beyond its type and permissions"},
		{"directory with contents", []File{{Path: "d", Mode: fs.ModeDir | 0o700, Size: 5}}, "has contents"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := Manifest{Version: manifestVersion, Snapshot: "s", Files: c.files}
			err := m.validate("s", maxChunk)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("a valid manifest refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
	m := Manifest{Version: manifestVersion, Snapshot: "other"}
	if err := m.validate("s", maxChunk); err == nil {
		t.Error("a manifest naming another snapshot was taken")
	}
}
