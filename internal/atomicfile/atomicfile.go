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

// Package atomicfile writes files that a crash leaves whole or absent: a
// temporary file beside the target, synced, renamed over it, and the
// directory synced, so that once Write returns the file survives a power
// cut, and a reader never sees half of it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the name of Write's temporary files: whoever owns the
// directory removes leftovers of an interrupted Write by it.
const TempPrefix = ".tmp-"

// Write replaces path with data, mode perm, durably.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, TempPrefix+filepath.Base(path)+".")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after a successful rename
	if _, err = tmp.Write(data); err == nil {
		if err = tmp.Chmod(perm); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// SyncDir makes a directory's entries (creations, renames, removals)
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// IsTemp reports whether name is a temporary file of Write.
func IsTemp(name string) bool { return strings.HasPrefix(filepath.Base(name), TempPrefix) }
