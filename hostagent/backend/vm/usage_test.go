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
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestUsageCountsTheVM: a burn in the guest shows up as CPU seconds in the
// sandbox's usage (QEMU's cgroup counts its vCPU), with the memory the
// VM holds; the CPU stays counted across a stop and a start again, and
// the cgroup goes with the sandbox.
func TestUsageCountsTheVM(t *testing.T) {
	ctx := context.Background()
	be := newBackend(ctx, t)
	t.Cleanup(func() { _ = be.Close() })
	spec := backend.Spec{ID: "usage", Tenant: "t/usage"}
	running(ctx, t, be, spec)
	be.mu.Lock()
	pid := be.vms[spec.ID].pid
	be.mu.Unlock()
	before, ok := be.SandboxUsage(spec.ID, false)
	qemuBefore := processCPU(t, pid)
	if !ok || before.Stopped || before.MemoryBytes == 0 {
		t.Fatalf("usage of the running VM: %+v, %v; want it running, holding memory", before, ok)
	}
	// Three seconds of a busy loop in the guest.
	var out collect
	p, err := be.Exec(ctx, spec.ID, backend.ExecRequest{Command: `end=$(($(date +%s) + 3)); while [ "$(date +%s)" -lt $end ]; do :; done; echo done`, Shell: backend.ShellClean}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx); err != nil || st.ExitCode != 0 || out.String() != "done\n" {
		t.Fatalf("the burn: %+v, %v, %q", st, err, out.String())
	}
	after, ok := be.SandboxUsage(spec.ID, true)
	qemu := processCPU(t, pid) - qemuBefore
	// On a loaded machine the burn gets what the scheduler gives QEMU:
	// what the kernel says QEMU used is what the usage must count.
	if got := after.CPUSeconds - before.CPUSeconds; !ok || qemu < 0.5 || got < 0.9*qemu-0.05 {
		t.Fatalf("the VM's CPU went from %.2f s to %.2f s over a 3 s burn (%v) while QEMU used %.2f s: want it all counted", before.CPUSeconds, after.CPUSeconds, ok, qemu)
	}
	if after.WorkspaceBytes <= 0 {
		t.Errorf("the disk the sandbox takes: %d bytes", after.WorkspaceBytes)
	}
	t.Logf("usage: %.2f s CPU before the burn, %.2f s after (QEMU's own count of the burn: %.2f s); memory %d bytes (peak %d)", before.CPUSeconds, after.CPUSeconds, qemu, after.MemoryBytes, after.MemoryPeakBytes)

	if err := be.Stop(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	stopped, ok := be.SandboxUsage(spec.ID, false)
	if !ok || !stopped.Stopped || stopped.MemoryBytes != 0 || stopped.CPUSeconds < after.CPUSeconds {
		t.Fatalf("usage of the stopped VM: %+v, %v; want it stopped, no memory, its CPU (%.2f s) kept", stopped, ok, after.CPUSeconds)
	}
	if err := be.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	again, ok := be.SandboxUsage(spec.ID, false)
	if !ok || again.Stopped || again.CPUSeconds < stopped.CPUSeconds {
		t.Fatalf("usage after a start again: %+v, %v; want it running, counting on from %.2f s", again, ok, stopped.CPUSeconds)
	}

	if err := be.Destroy(ctx, spec.ID, false); err != nil {
		t.Fatal(err)
	}
	for _, dir := range cgroupDirs(be.cgroupRel(spec.ID)) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the destroyed sandbox's cgroup %s is left: %v", dir, err)
		}
	}
	if _, ok := be.SandboxUsage(spec.ID, false); ok {
		t.Error("a destroyed sandbox has usage")
	}
}

// processCPU is the CPU seconds process pid used, all its threads, as its
// /proc stat says (user and system, in clock ticks of 1/100 s).
func processCPU(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: state is the
	// first, utime and stime the 12th and 13th.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %s", pid, data)
	}
	return float64(utime+stime) / 100
}
