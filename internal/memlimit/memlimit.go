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

// Package memlimit gives the Go runtime a soft memory limit below the
// container's hard one, so that a component near its limit collects
// garbage harder instead of being OOM-killed with every tenant's work in
// it. The gateway's and the agent's budgets bound what callers may make
// them hold; this keeps the garbage of what they held from adding to it.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultFraction of the cgroup's limit becomes the runtime's: the rest is
// headroom for memory the runtime does not count (thread stacks, the
// binary, the kernel's buffers for the process).
const DefaultFraction = 0.9

// noLimit is what cgroup v1 reports for an unlimited group (a page-aligned
// maximum); anything above it is no limit too.
const noLimit = 1 << 62

// Set sets the runtime's memory limit to fraction of the memory limit of
// the process's cgroup, unless GOMEMLIMIT is set (the operator's choice
// wins) or the cgroup has no limit. It returns the limit set (0: none) and
// where it came from, for the log.
func Set(fraction float64) (int64, string, error) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return 0, "GOMEMLIMIT=" + v, nil
	}
	limit, source, err := cgroupLimit("/")
	if err != nil || limit == 0 {
		return 0, source, err
	}
	set := int64(float64(limit) * fraction)
	debug.SetMemoryLimit(set)
	return set, source, nil
}

// cgroupLimit reads the memory limit of the process's cgroup under root
// (the file system's root; a test gives another): cgroup v2's memory.max,
// else v1's memory.limit_in_bytes. 0 means no limit.
func cgroupLimit(root string) (int64, string, error) {
	self, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, "", fmt.Errorf("reading the process's cgroups: %w", err)
	}
	var candidates []string
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = append(candidates,
				filepath.Join(root, "sys/fs/cgroup", parts[2], "memory.max"),
				filepath.Join(root, "sys/fs/cgroup/unified", parts[2], "memory.max"))
		case hasController(parts[1], "memory"):
			candidates = append(candidates,
				filepath.Join(root, "sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"),
				filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))
		}
	}
	for _, f := range candidates {
		b, err := os.ReadFile(f) //nolint:gosec // G703: paths under root named by the kernel's /proc/self/cgroup
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, f, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, f, fmt.Errorf("%s holds %q, not a number of bytes", f, v)
		}
		if n <= 0 || n >= noLimit {
			return 0, f, nil
		}
		return n, f, nil
	}
	return 0, "", nil
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
