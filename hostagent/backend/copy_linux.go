//go:build linux

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
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// CopyPreserving copies a file or a tree with its owners, modes and holes,
// sharing blocks (a reflink) where the filesystem can.
func CopyPreserving(ctx context.Context, src, dst string) error {
	out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", "--sparse=always", "--", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("copying %s: %w: %s", src, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DiskUsage is the disk the files under p take (their allocated blocks).
func DiskUsage(p string) int64 {
	var n int64
	// An entry that cannot be read counts for nothing.
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil {
			if fi, ierr := d.Info(); ierr == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return n
}
