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

// Package regularfile opens a regular file without following a symbolic
// link, for the guest binary and the agent alike: both open files in
// directories a tenant or a guest may have written, where a link could
// point anywhere. It imports nothing of this module.
package regularfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Open opens path with flag and O_NOFOLLOW (a symbolic link is refused,
// ELOOP) and returns it with its status, read from the open descriptor, so
// that what was checked is what was opened. It refuses a path that is not
// a regular file (a FIFO, a device, a directory), closing it. Callers
// that may meet a FIFO pass O_NONBLOCK, so that the open itself does not
// wait for a writer.
func Open(path string, flag int) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, st, err
	}
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, st, fmt.Errorf("%s is not a regular file", path)
	}
	return f, st, nil
}
