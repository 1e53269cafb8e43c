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

package oci

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/playground-dev/playground/hostagent/backend"
)

var _ backend.UsageMeter = (*Backend)(nil)

// SandboxUsage implements backend.UsageMeter from the sandbox's cgroups
// (runc's, or those gVisor's sandbox runs in) in either hierarchy: v1's
// cpuacct.usage and memory.usage_in_bytes / max_usage_in_bytes, else
// v2's cpu.stat usage_usec and memory.current / memory.peak.
func (b *Backend) SandboxUsage(id string, storage bool) (backend.SandboxUsage, bool) {
	var u backend.SandboxUsage
	cpu, mem := false, false
	for _, dir := range b.runtimeOf(id).cgroupPaths(containerID(id)) {
		if v, ok := readCgroupUint(filepath.Join(dir, "cpuacct.usage")); ok && !cpu {
			u.CPUSeconds, cpu = float64(v)/1e9, true
		}
		if v, ok := readCgroupUint(filepath.Join(dir, "memory.usage_in_bytes")); ok && !mem {
			u.MemoryBytes, mem = v, true
			u.MemoryPeakBytes, _ = readCgroupUint(filepath.Join(dir, "memory.max_usage_in_bytes"))
		}
	}
	for _, dir := range b.runtimeOf(id).cgroupPaths(containerID(id)) {
		if v, ok := cgroupCount(filepath.Join(dir, "cpu.stat"), "usage_usec "); ok && !cpu {
			u.CPUSeconds, cpu = float64(v)/1e6, true
		}
		if v, ok := readCgroupUint(filepath.Join(dir, "memory.current")); ok && !mem {
			u.MemoryBytes, mem = v, true
			u.MemoryPeakBytes, _ = readCgroupUint(filepath.Join(dir, "memory.peak"))
		}
	}
	if !cpu {
		return backend.SandboxUsage{}, false
	}
	u.MemoryPeakBytes = max(u.MemoryPeakBytes, u.MemoryBytes)
	if storage {
		if sb, err := b.load(id); err == nil {
			u.WorkspaceBytes = b.layerUsed(sb)
		}
		// The disk the pile's (sparse) image takes, or its directory's
		// where storage is unbounded.
		pile := filepath.Join(b.sandboxDir(id), pileName)
		if img := pile + imageSuffix; backend.FileExists(img) {
			pile = img
		}
		u.PileBytes = backend.DiskUsage(pile)
	}
	return u, true
}

// readCgroupUint reads a cgroup file that holds one number.
func readCgroupUint(file string) (uint64, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}
