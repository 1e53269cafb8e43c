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

package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpen opens a regular file, and refuses what a hostile writer of the
// directory could put in its place: a link to a file elsewhere, a FIFO
// (which, opened with O_NONBLOCK, does not hang the open), a directory.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, st, err := Open(file, os.O_RDWR)
	if err != nil {
		t.Fatalf("Open(a regular file): %v", err)
	}
	if _, err := f.WriteString("KEY"); err != nil {
		t.Errorf("writing the file opened O_RDWR: %v", err)
	}
	f.Close()
	if st.Size != 3 || st.Mode&0o777 != 0o600 {
		t.Errorf("the status of the file is size %d mode %o, want 3 and 600", st.Size, st.Mode&0o777)
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(link, os.O_RDONLY); !errors.Is(err, unix.ELOOP) {
		t.Errorf("Open(a link to a regular file) = %v, want ELOOP", err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(fifo, os.O_RDONLY|unix.O_NONBLOCK); err == nil || !strings.Contains(err.Error(), "fifo is not a regular file") {
		t.Errorf("Open(a FIFO) = %v, want not a regular file", err)
	}
	if _, _, err := Open(dir, os.O_RDONLY); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("Open(a directory) = %v, want not a regular file", err)
	}
}
