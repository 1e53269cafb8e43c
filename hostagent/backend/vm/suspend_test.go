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
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestSuspendKeepsMemory: a VM suspended with its memory leaves no QEMU
// on the node and is restored as it was, not booted: a shell that counts
// in memory (never reading its count back from a file) goes on from its
// count, its PID unchanged, and a file written just before the
// suspension is there. A Stop discards the saved state: the next start
// boots afresh.
func TestSuspendKeepsMemory(t *testing.T) {
	kernel, modules, root := vmImage(t)
	ctx := context.Background()
	dir := newStateDir(t)
	be, err := New(ctx, Options{StateDir: dir, GuestBinary: guestBinary(t), Kernel: kernel, Modules: modules, Root: root, Accel: AccelTCG, BootTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Destroy(context.Background(), "vm-suspend", false) })
	spec := backend.Spec{ID: "vm-suspend", Tenant: "t/vm-suspend"}
	running(ctx, t, be, spec)
	if be.Capabilities().Suspender == nil {
		t.Fatal("the vm backend offers no Suspender")
	}
	run := func(cmd string) string {
		t.Helper()
		var out collect
		p, err := be.Exec(ctx, spec.ID, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}, &out)
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		if st, err := p.Wait(ctx); err != nil || st.ExitCode != 0 {
			t.Fatalf("%q: exit %+v, %v, output %q", cmd, st, err, out.String())
		}
		return out.String()
	}
	run(`(i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.1; done) >/dev/null 2>&1 & echo $! > /tmp/counter.pid; echo kept > ~/note`)
	count := func() int {
		t.Helper()
		n, err := strconv.Atoi(strings.TrimSpace(run("cat /tmp/c 2>/dev/null || echo 0")))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(time.Minute)
	for count() < 5 {
		if time.Now().After(deadline) {
			t.Fatal("the counter did not count")
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := run("cat /tmp/counter.pid")

	start := time.Now()
	if err := be.Suspend(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("suspended in %s", time.Since(start))
	if be.Alive(spec.ID) || !be.Checkpointed(spec.ID) {
		t.Fatalf("after Suspend: alive %v, checkpointed %v; want no QEMU and a saved state", be.Alive(spec.ID), be.Checkpointed(spec.ID))
	}
	starts := be.starts.Starts(spec.ID)
	start = time.Now()
	if err := be.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("restored in %s", time.Since(start))
	if be.starts.Starts(spec.ID) != starts || be.Checkpointed(spec.ID) {
		log, _ := os.ReadFile(filepath.Join(dir, "sandboxes", spec.ID, qemuLog))
		t.Errorf("the restore booted the VM (starts %d, were %d) or kept its saved state (%v); qemu.log:\n%s", be.starts.Starts(spec.ID), starts, be.Checkpointed(spec.ID), log)
	}
	if got := run("cat /tmp/counter.pid; kill -0 $(cat /tmp/counter.pid) && echo alive; cat ~/note"); got != pid+"alive\nkept\n" {
		t.Fatalf("after the restore: %q; want the counter's PID %s alive and the file", got, strings.TrimSpace(pid))
	}
	at := count()
	deadline = time.Now().Add(time.Minute)
	for count() <= at+3 {
		if time.Now().After(deadline) {
			t.Fatal("the restored counter does not count on")
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := be.Suspend(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if err := be.Stop(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if be.Checkpointed(spec.ID) {
		t.Error("a Stop kept the suspension's state")
	}
	if err := be.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if be.starts.Starts(spec.ID) != starts+1 {
		t.Errorf("after a Stop the VM was not booted afresh (starts %d, were %d)", be.starts.Starts(spec.ID), starts)
	}
	if got := run("cat ~/note; test -e /tmp/c && echo tmp-kept || echo tmp-fresh"); !strings.HasPrefix(got, "kept\n") {
		t.Errorf("after a fresh boot: %q; want the home's file", got)
	}
}
