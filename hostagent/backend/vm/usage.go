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

package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/playground-dev/playground/hostagent/backend"
)

var _ backend.UsageMeter = (*Backend)(nil)

// Each sandbox's QEMU runs in a cgroup of its own, below the agent's in
// each hierarchy (as the oci backend's containers), for the kernel to
// count what the VM uses of the node: its vCPUs' and its devices' CPU
// time, and the memory QEMU holds (the guest's RAM as it touches it).
// The cgroup is made at the sandbox's first boot and stays until it is
// destroyed, through its stops and suspensions and the agent's restarts,
// so its CPU counter runs over every start of it, with nothing to carry
// from one QEMU to the next; a node's reboot starts it again. QEMU is
// moved in as soon as it has started: the few milliseconds before are
// not counted.

// cgroupRel is sandbox id's cgroup, relative to the agent's own: a name
// per state directory, so that two agents on one node (tests, or
// playground dev beside an installed one) do not share one.
func (b *Backend) cgroupRel(id string) string {
	h := sha256.Sum256([]byte(b.opts.StateDir))
	return filepath.Join("playground-vm", hex.EncodeToString(h[:])[:12], id)
}

// cgroupDirs is the directory of the cgroup rel below the agent's own in
// each hierarchy that counts CPU or memory (/proc/self/cgroup): v1's
// cpuacct and memory controllers, and the unified one (v2, or its
// controller-less mount on a hybrid host, whose cpu.stat counts anyway).
func cgroupDirs(rel string) []string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var mnt string
		switch ctls := strings.Split(parts[1], ","); {
		case parts[1] == "" && backend.FileExists("/sys/fs/cgroup/unified"):
			mnt = "/sys/fs/cgroup/unified"
		case parts[1] == "":
			mnt = "/sys/fs/cgroup"
		case slices.Contains(ctls, "cpuacct") || slices.Contains(ctls, "memory"):
			mnt = filepath.Join("/sys/fs/cgroup", parts[1])
			if !backend.FileExists(mnt) {
				mnt = filepath.Join("/sys/fs/cgroup", ctls[0])
			}
		default:
			continue
		}
		dirs = append(dirs, filepath.Join(mnt, parts[2], rel))
	}
	return dirs
}

// enterCgroup moves the sandbox's QEMU, pid, into its cgroup in each
// hierarchy, making the cgroup first. A hierarchy that refuses is
// skipped: its counters are not read then (SandboxUsage says what it
// could read), and the VM runs as before.
func (b *Backend) enterCgroup(id string, pid int) error {
	var errs []error
	for _, dir := range cgroupDirs(b.cgroupRel(id)) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			errs = append(errs, err)
			continue
		}
		// v1 keeps the peak since the cgroup was made: this start's
		// starts from now.
		_ = os.WriteFile(filepath.Join(dir, "memory.max_usage_in_bytes"), []byte("0"), 0)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("vm: placing sandbox %s's QEMU in its cgroup: %w", id, err)
	}
	return nil
}

// removeCgroup removes the sandbox's cgroup, its QEMU gone, and the
// state directory's parent when it is empty.
func (b *Backend) removeCgroup(id string) {
	for _, dir := range cgroupDirs(b.cgroupRel(id)) {
		_ = os.Remove(dir)
		_ = os.Remove(filepath.Dir(dir))
		_ = os.Remove(filepath.Dir(filepath.Dir(dir)))
	}
}

// SandboxUsage implements backend.UsageMeter from the sandbox's cgroup
// (cgroup v1's cpuacct.usage, memory.usage_in_bytes and
// max_usage_in_bytes, else v2's cpu.stat usage_usec, memory.current and
// memory.peak): CPU over every start of the VM, memory while it runs.
// Storage is the disk the sandbox's images take (sparse until written).
// ok is false for a sandbox the backend does not have.
func (b *Backend) SandboxUsage(id string, storage bool) (backend.SandboxUsage, bool) {
	if backend.ValidateID(id) != nil || !backend.FileExists(filepath.Join(b.sandboxDir(id), recordFile)) {
		return backend.SandboxUsage{}, false
	}
	dirs := cgroupDirs(b.cgroupRel(id))
	c := backend.ReadCgroups(dirs)
	u := backend.SandboxUsage{CPUSeconds: c.CPUSeconds, MemoryBytes: c.MemoryBytes, MemoryPeakBytes: c.MemoryPeakBytes}
	cpu := c.CPUOK
	running := false
	for _, dir := range dirs {
		if procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil && strings.TrimSpace(string(procs)) != "" {
			running = true
		}
	}
	if !running {
		// Its cgroup empty, or not there (QEMU could not be moved in):
		// its pid file says whether it runs.
		data, _ := os.ReadFile(filepath.Join(b.sandboxDir(id), pidFile))
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		running = err == nil && pid > 1 && isQEMUOf(pid, b.sandboxDir(id))
	}
	if u.Stopped = !running; u.Stopped {
		u.MemoryBytes, u.MemoryPeakBytes = 0, 0
	}
	u.MemoryPeakBytes = max(u.MemoryPeakBytes, u.MemoryBytes)
	if !cpu && running {
		// Running uncounted: unreadable, not zero, so that a usage
		// limit refuses its calls rather than letting them run free.
		return backend.SandboxUsage{}, false
	}
	if storage {
		u.WorkspaceBytes = backend.DiskUsage(filepath.Join(b.sandboxDir(id), diskImage))
		u.PileBytes = backend.DiskUsage(filepath.Join(b.sandboxDir(id), "pile", pileImage))
	}
	return u, true
}
