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
	"sync"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/internal/atomicfile"
)

var _ backend.UsageMeter = (*Backend)(nil)

// A container's cgroup counts its CPU from zero, and goes with it. So
// that a sandbox's CPU counts over all its containers (backend.UsageMeter),
// what a container's cgroup counted is added to the sandbox's ended CPU
// just before the container is deleted (a stop, a suspension, a snapshot's
// checkpoint, a start over a container whose init died), and kept in the
// sandbox's directory (cpuEndedName) for the next agent process. CPU used
// between that last reading and the kill (the runtime's delete starting)
// is not counted: milliseconds.

// cpuEndedName is the file of a sandbox's directory that holds the CPU
// seconds of its ended containers.
const cpuEndedName = "cpu-ended"

// cpuLedger is the ended CPU of the backend's sandboxes.
type cpuLedger struct {
	mu sync.Mutex
	// ended is, by sandbox ID, its ended containers' CPU seconds, read
	// from its file on first use.
	ended map[string]float64
	// retiring holds the sandboxes whose container is being deleted, its
	// counter already in ended: a reading meanwhile takes ended alone.
	retiring map[string]bool
}

// endedLocked is sandbox id's ended CPU; the caller holds mu.
func (b *Backend) endedLocked(id string) float64 {
	if v, ok := b.cpu.ended[id]; ok {
		return v
	}
	v := 0.0
	if data, err := os.ReadFile(filepath.Join(b.sandboxDir(id), cpuEndedName)); err == nil {
		if f, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64); err == nil && f >= 0 {
			v = f
		}
	}
	if b.cpu.ended == nil {
		b.cpu.ended, b.cpu.retiring = map[string]float64{}, map[string]bool{}
	}
	b.cpu.ended[id] = v
	return v
}

// retireCPU adds what the cgroup of sandbox id's container cid (of
// runtime rt) counted to the sandbox's ended CPU, before the container is
// deleted; finish says whether it went (its counter with it), which keeps
// the sum, or stayed, which takes it back.
func (b *Backend) retireCPU(id string, rt *runc, cid string) (finish func(gone bool)) {
	b.cpu.mu.Lock()
	defer b.cpu.mu.Unlock()
	ended := b.endedLocked(id)
	c := backend.ReadCgroups(rt.cgroupPaths(cid))
	if !c.CPUOK {
		return func(bool) {}
	}
	b.cpu.ended[id] = ended + c.CPUSeconds
	b.cpu.retiring[id] = true
	return func(gone bool) {
		b.cpu.mu.Lock()
		defer b.cpu.mu.Unlock()
		delete(b.cpu.retiring, id)
		if !gone {
			b.cpu.ended[id] = ended
			return
		}
		// Written once the container went: an agent that dies between
		// the two loses what it counted rather than counting it twice.
		data := []byte(strconv.FormatFloat(ended+c.CPUSeconds, 'f', -1, 64) + "\n")
		if dir := b.sandboxDir(id); backend.FileExists(dir) {
			_ = atomicfile.Write(filepath.Join(dir, cpuEndedName), data, 0o600)
		}
	}
}

// forgetCPU drops sandbox id's ended CPU from memory (destroyed).
func (b *Backend) forgetCPU(id string) {
	b.cpu.mu.Lock()
	defer b.cpu.mu.Unlock()
	delete(b.cpu.ended, id)
	delete(b.cpu.retiring, id)
}

// SandboxUsage implements backend.UsageMeter from the sandbox's cgroups
// (runc's, or those gVisor's sandbox runs in) in either hierarchy: v1's
// cpuacct.usage and memory.usage_in_bytes / max_usage_in_bytes, else
// v2's cpu.stat usage_usec and memory.current / memory.peak; its CPU
// over every container it had (cpuLedger). A sandbox whose container is
// not running uses its ended CPU and no memory.
func (b *Backend) SandboxUsage(id string, storage bool) (backend.SandboxUsage, bool) {
	if backend.ValidateID(id) != nil {
		return backend.SandboxUsage{}, false
	}
	b.cpu.mu.Lock()
	ended := b.endedLocked(id)
	var c backend.CgroupReading
	if !b.cpu.retiring[id] {
		c = backend.ReadCgroups(b.runtimeOf(id).cgroupPaths(containerID(id)))
	}
	b.cpu.mu.Unlock()
	if !c.CPUOK && !backend.FileExists(filepath.Join(b.sandboxDir(id), "sandbox.json")) {
		return backend.SandboxUsage{}, false
	}
	u := backend.SandboxUsage{CPUSeconds: ended + c.CPUSeconds, MemoryBytes: c.MemoryBytes, MemoryPeakBytes: max(c.MemoryPeakBytes, c.MemoryBytes), Stopped: !c.CPUOK}
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
