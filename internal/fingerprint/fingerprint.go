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

// Package fingerprint computes the content fingerprint of a FacultyBundle:
// a SHA-256 over its source tree (file names, permission bits and bytes, in
// a canonical order), its build command, its allowlist of binaries and the
// identity of the builder. The same inputs give the same fingerprint on
// every node and in the manager; any change gives another. The manager
// computes it for ConfigMap sources; agents compute it for host paths.
package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Version is the format of the digest's input. It is part of every
// fingerprint, so that a change of format never reuses an old build.
const Version = "playground.dev/faculty-fingerprint/v1"

// Builder is the builder identity of every fingerprint today: the contract
// of the throwaway builder (the source read-only at /src, an empty /out, no
// network, the node's base userland, run as the sandbox user). Builds are
// node-local, so each node's build links against the base its sandboxes
// run on; a change of this contract changes Builder, so that no build made
// under the old one is reused.
const Builder = "playground.dev/builder/v1"

// Limits of a source tree read from a host path: past them the tree is
// refused, so that a mistaken path (a whole disk) cannot stall an agent.
const (
	MaxFiles = 10000
	MaxBytes = 1 << 30
)

// File is one entry of a source tree. Name is slash-separated and relative
// to the tree's root; Mode holds the permission bits of a regular file
// (fs.ModeDir for a directory, fs.ModeSymlink with Data as the target for a
// symbolic link).
type File struct {
	Name string
	Mode fs.FileMode
	Data []byte
}

// Inputs is everything a build depends on.
type Inputs struct {
	// Files is the source tree, in any order.
	Files []File
	// Command is the build's argv; empty when the source is taken as is.
	Command []string
	// Binaries is the allowlist of staged files, in any order.
	Binaries []string
	// Builder identifies what runs the build (the backend class and its
	// builder's base), so that another builder never reuses a build.
	Builder string
}

// Of returns the fingerprint of in: 64 lowercase hex digits.
func Of(in Inputs) (string, error) {
	files := slices.Clone(in.Files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	field(h, Version)
	field(h, "builder", in.Builder)
	field(h, append([]string{"command"}, in.Command...)...)
	bins := slices.Clone(in.Binaries)
	slices.Sort(bins)
	field(h, append([]string{"binaries"}, bins...)...)
	for i, f := range files {
		if err := checkName(f.Name); err != nil {
			return "", err
		}
		if i > 0 && files[i-1].Name == f.Name {
			return "", fmt.Errorf("the source tree names %q twice", f.Name)
		}
		var kind string
		switch {
		case f.Mode.IsDir():
			kind = "dir"
		case f.Mode&fs.ModeSymlink != 0:
			kind = "symlink"
		case f.Mode.IsRegular():
			kind = "file"
		default:
			return "", fmt.Errorf("%s is neither a regular file, a directory nor a symbolic link", f.Name)
		}
		field(h, kind, f.Name, fmt.Sprintf("%04o", f.Mode.Perm()), string(f.Data))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// field writes one record: its element count, then each element with its
// length, so that no two different inputs write the same bytes.
func field(h hash.Hash, elems ...string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(elems)))
	h.Write(n[:])
	for _, e := range elems {
		binary.BigEndian.PutUint64(n[:], uint64(len(e)))
		h.Write(n[:])
		_, _ = io.WriteString(h, e) // a hash does not fail
	}
}

// checkName accepts a clean, relative, slash-separated path.
func checkName(name string) error {
	if name == "" || name == "." || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("%q is not a clean relative path in the source tree", name)
	}
	return nil
}

// ConfigMapFiles is the source tree of a ConfigMap: each key of data and
// binaryData is a file at the root, mode 0644, as a ConfigMap volume
// projects it.
func ConfigMapFiles(data map[string]string, binaryData map[string][]byte) []File {
	files := make([]File, 0, len(data)+len(binaryData))
	for k, v := range data {
		files = append(files, File{Name: k, Mode: 0o644, Data: []byte(v)})
	}
	for k, v := range binaryData {
		files = append(files, File{Name: k, Mode: 0o644, Data: v})
	}
	return files
}

// ErrTooLarge is returned by Dir and Tree for a tree past MaxFiles or
// MaxBytes.
var ErrTooLarge = errors.New("the source tree is too large")

// Dir reads the source tree rooted at dir, a directory on this machine,
// as Tree does beneath it.
func Dir(dir string) ([]File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the source tree: %w", err)
	}
	defer root.Close()
	return Tree(root)
}

// readBatch is how many directory entries are read at a time, so that a
// huge directory fails at MaxFiles without being listed whole.
const readBatch = 256

// Tree reads the source tree of root. Every open goes through root, so
// nothing outside it is read: a symbolic link of the tree is recorded
// (its target, as text), never followed; a directory or file swapped for
// a link while the tree is read is followed only where the link stays
// beneath root. Devices, sockets and pipes are refused, and a file is
// opened without blocking and checked on the open file before it is read.
// Past MaxFiles entries or MaxBytes of file content the tree is refused
// with ErrTooLarge, without reading the rest.
func Tree(root *os.Root) ([]File, error) {
	t := treeReader{root: root}
	fi, err := root.Stat(".")
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%s is not a directory", root.Name())
	}
	if err == nil {
		err = t.dir(".")
	}
	if err != nil {
		return nil, fmt.Errorf("reading the source tree: %w", err)
	}
	return t.files, nil
}

type treeReader struct {
	root  *os.Root
	files []File
	total int64
}

// dir reads the directory name (slash-separated, relative to the root)
// and, depth first, what it holds.
func (t *treeReader) dir(name string) error {
	names, err := t.list(name)
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		rel := n
		if name != "." {
			rel = name + "/" + n
		}
		if len(t.files) >= MaxFiles {
			return fmt.Errorf("%w: more than %d entries under %s", ErrTooLarge, MaxFiles, t.root.Name())
		}
		info, err := t.root.Lstat(rel)
		if err != nil {
			return err
		}
		f := File{Name: rel, Mode: info.Mode() & (fs.ModeDir | fs.ModeSymlink | fs.ModePerm)}
		switch {
		case info.IsDir():
			t.files = append(t.files, f)
			if err := t.dir(rel); err != nil {
				return err
			}
			continue
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := t.root.Readlink(rel)
			if err != nil {
				return err
			}
			f.Data = []byte(target)
		case info.Mode().IsRegular():
			if f.Data, f.Mode, err = t.file(rel); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is neither a regular file, a directory nor a symbolic link", path.Join(t.root.Name(), rel))
		}
		t.files = append(t.files, f)
	}
	return nil
}

// list is the names in the directory, read in batches and no more than
// MaxFiles in all.
func (t *treeReader) list(name string) ([]string, error) {
	d, err := t.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var names []string
	for {
		entries, err := d.ReadDir(readBatch)
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(t.files)+len(names) > MaxFiles {
			return nil, fmt.Errorf("%w: more than %d entries under %s", ErrTooLarge, MaxFiles, t.root.Name())
		}
		if errors.Is(err, io.EOF) || err == nil && len(entries) == 0 {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// file reads a regular file and its permission bits from the open file,
// within what is left of MaxBytes.
func (t *treeReader) file(name string) ([]byte, fs.FileMode, error) {
	fh, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is neither a regular file, a directory nor a symbolic link", path.Join(t.root.Name(), name))
	}
	left := int64(MaxBytes) - t.total
	if info.Size() > left {
		return nil, 0, fmt.Errorf("%w: more than %d bytes under %s", ErrTooLarge, int64(MaxBytes), t.root.Name())
	}
	data, err := io.ReadAll(io.LimitReader(fh, left+1))
	if err != nil {
		return nil, 0, err
	}
	if t.total += int64(len(data)); t.total > MaxBytes {
		return nil, 0, fmt.Errorf("%w: more than %d bytes under %s", ErrTooLarge, int64(MaxBytes), t.root.Name())
	}
	return data, info.Mode().Perm(), nil
}
