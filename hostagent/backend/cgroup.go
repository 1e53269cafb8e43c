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
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CgroupReading is what a sandbox's cgroups count: its CPU seconds and
// memory, each when readable.
type CgroupReading struct {
	CPUSeconds float64
	CPUOK      bool
	// MemoryBytes and MemoryPeakBytes are 0 when unreadable.
	MemoryBytes, MemoryPeakBytes uint64
}

// ReadCgroups reads the counters of the cgroup directories dirs (those of
// either hierarchy a sandbox's processes are in): v1's cpuacct.usage and
// memory.usage_in_bytes / max_usage_in_bytes first, else v2's cpu.stat
// usage_usec and memory.current / memory.peak. The oci and vm backends
// both meter their sandboxes' usage this way.
func ReadCgroups(dirs []string) CgroupReading {
	var c CgroupReading
	mem := false
	for _, dir := range dirs {
		if v, ok := CgroupUint(filepath.Join(dir, "cpuacct.usage")); ok && !c.CPUOK {
			c.CPUSeconds, c.CPUOK = float64(v)/1e9, true
		}
		if v, ok := CgroupUint(filepath.Join(dir, "memory.usage_in_bytes")); ok && !mem {
			c.MemoryBytes, mem = v, true
			c.MemoryPeakBytes, _ = CgroupUint(filepath.Join(dir, "memory.max_usage_in_bytes"))
		}
	}
	for _, dir := range dirs {
		if v, ok := CgroupCount(filepath.Join(dir, "cpu.stat"), "usage_usec "); ok && !c.CPUOK {
			c.CPUSeconds, c.CPUOK = float64(v)/1e6, true
		}
		if v, ok := CgroupUint(filepath.Join(dir, "memory.current")); ok && !mem {
			c.MemoryBytes, mem = v, true
			c.MemoryPeakBytes, _ = CgroupUint(filepath.Join(dir, "memory.peak"))
		}
	}
	return c
}

// CgroupUint reads a cgroup file that holds one number.
func CgroupUint(file string) (uint64, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}

// CgroupCount reads the count of a cgroup stat or events file's line that
// starts with key ("usage_usec ", "oom_kill ", "max "), if file names one
// and it has the line.
func CgroupCount(file, key string) (uint64, bool) {
	if file == "" {
		return 0, false
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
