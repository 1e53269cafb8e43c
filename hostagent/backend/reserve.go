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
	"fmt"

	"golang.org/x/sys/unix"
)

// CheckReserve refuses a new sandbox when the file system of dir (a state
// directory) has less free space than reserve bytes: an error wrapping
// ErrInsufficientStorage that says how much is free. A reserve of zero or
// less disables the check.
func CheckReserve(dir string, reserve int64) error {
	if reserve <= 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize) //nolint:unconvert // Bsize is int64 on Linux, uint64 on FreeBSD
	if free < reserve {
		return fmt.Errorf("the node has %s free in %s, below its reserve of %s; no new sandbox is provisioned here until space is freed: %w",
			HumanBytes(free), dir, HumanBytes(reserve), ErrInsufficientStorage)
	}
	return nil
}

// HumanBytes writes n in GiB, MiB or bytes, for messages.
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
