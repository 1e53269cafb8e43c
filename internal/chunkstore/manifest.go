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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// manifestVersion is the format of a manifest.
const manifestVersion = 1

// Manifest is what names a snapshot: its files and, for each, where its
// bytes are among the tenant's chunks. It is stored sealed like a chunk.
type Manifest struct {
	Version  int    `json:"version"`
	Snapshot string `json:"snapshot"`
	Files    []File `json:"files"`
}

// File is a file or directory of a snapshot.
type File struct {
	// Path is relative to the snapshot's directory, slash-separated.
	Path string `json:"path"`
	// Mode is its type (directory or regular file) and permissions.
	Mode fs.FileMode `json:"mode"`
	// Size is a regular file's length, holes included.
	Size int64 `json:"size,omitempty"`
	// Extents are where it has data, in order: what lies between is a
	// hole, restored as one (a sandbox's layer is a sparse ext4 image).
	Extents []Extent `json:"extents,omitempty"`
}

// Extent is a run of a file's bytes, from Offset, that are the
// concatenation of Chunks.
type Extent struct {
	Offset int64      `json:"offset"`
	Chunks []ChunkRef `json:"chunks"`
}

// ChunkRef names a chunk and its plaintext's size.
type ChunkRef struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// holeMerge is the shortest hole kept as one: shorter ones are read as
// data (zeros), so that a fragmented image does not become many tiny
// extents, each cut into its own small chunks.
const holeMerge = 1 << 20

// dataExtents is where f (of size bytes) has data: [start, end) pairs,
// found with SEEK_DATA and SEEK_HOLE, holes shorter than holeMerge read as
// data. A filesystem that does not report holes reports the whole file.
func dataExtents(f *os.File, size int64) ([][2]int64, error) {
	var out [][2]int64
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from off to the end
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return [][2]int64{{off, size}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("finding data in %s: %w", f.Name(), err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("finding holes in %s: %w", f.Name(), err)
		}
		end = min(end, size)
		if n := len(out); n > 0 && start-out[n-1][1] < holeMerge {
			out[n-1][1] = end
		} else {
			out = append(out, [2]int64{start, end})
		}
		off = end
	}
	return out, nil
}

// validate checks what a manifest says before a restore acts on it: its
// paths stay inside the target and each file's extents fit it, in order.
func (m *Manifest) validate(snapshot string, maxChunk int64) error {
	if m.Version != manifestVersion {
		return fmt.Errorf("its format is %d, this agent reads %d", m.Version, manifestVersion)
	}
	if m.Snapshot != snapshot {
		return fmt.Errorf("it names snapshot %q", m.Snapshot)
	}
	seen := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == ".." || strings.HasPrefix(f.Path, "../") {
			return fmt.Errorf("file path %q is not a clean relative path", f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("file %q is listed twice", f.Path)
		}
		seen[f.Path] = true
		if dir := path.Dir(f.Path); dir != "." && !seen[dir] {
			return fmt.Errorf("file %q comes before its directory", f.Path)
		}
		switch {
		case f.Mode.IsDir():
			if f.Size != 0 || len(f.Extents) != 0 {
				return fmt.Errorf("directory %q has contents", f.Path)
			}
		case f.Mode.IsRegular():
			end := int64(0)
			for _, e := range f.Extents {
				if e.Offset < end {
					return fmt.Errorf("file %q's extents overlap or are out of order", f.Path)
				}
				end = e.Offset
				for _, c := range e.Chunks {
					if c.Size <= 0 || c.Size > maxChunk || len(c.Name) != 64 {
						return fmt.Errorf("file %q has a malformed chunk %q", f.Path, c.Name)
					}
					end += c.Size
				}
			}
			if f.Size < end || f.Size < 0 {
				return fmt.Errorf("file %q's extents run past its size", f.Path)
			}
		default:
			return fmt.Errorf("file %q is of type %v, neither a regular file nor a directory", f.Path, f.Mode.Type())
		}
		if f.Mode&^(fs.ModeDir|fs.ModePerm) != 0 {
			return fmt.Errorf("file %q has mode bits %v beyond its type and permissions", f.Path, f.Mode)
		}
	}
	return nil
}

// isZero says whether b is all zeros: such a chunk is restored as a hole.
func isZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
