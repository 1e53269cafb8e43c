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
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestConcurrentCallsAfterRestart: a restarted agent under load, several
// calls at once to a VM that the previous agent left. The VM's port takes
// one client at a time, so they must share one connection: each succeeds,
// rather than waiting behind another's connection until it times out.
func TestConcurrentCallsAfterRestart(t *testing.T) {
	kernel, modules, root := vmImage(t)
	dir := newStateDir(t)
	ctx := context.Background()
	open := func() *Backend {
		be, err := New(ctx, Options{StateDir: dir, GuestBinary: guestBinary(t), Kernel: kernel, Modules: modules, Root: root, Accel: AccelTCG})
		if err != nil {
			t.Fatal(err)
		}
		return be
	}
	first := open()
	spec := backend.Spec{ID: "concurrent", Tenant: "t/concurrent"}
	running(ctx, t, first, spec)
	first.Close() // the agent's exit

	second := open()
	const calls = 6
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out collect
			p, err := second.Exec(ctx, spec.ID, backend.ExecRequest{Command: "echo ok", Shell: backend.ShellClean}, &out)
			if err == nil {
				var st backend.ExitStatus
				if st, err = p.Wait(ctx); err == nil && (st.ExitCode != 0 || out.String() != "ok\n") {
					t.Errorf("a call got exit %d, output %q", st.ExitCode, out.String())
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a call after the restart: %v", err)
		}
	}
	if n := second.starts.Starts(spec.ID); n != 0 {
		t.Errorf("the new agent booted the VM %d times; it should have taken over the running one", n)
	}
}

// collect is a backend.Sink that keeps stdout.
type collect struct {
	mu  sync.Mutex
	out []byte
}

func (c *collect) Write(s backend.Stream, p []byte) {
	if s == backend.Stdout {
		c.mu.Lock()
		c.out = append(c.out, p...)
		c.mu.Unlock()
	}
}

func (c *collect) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.out)
}

// openWithReserve opens a vm backend (TCG) over the state directory dir
// that keeps reserve bytes of its filesystem free.
func openWithReserve(t *testing.T, dir string, reserve int64) *Backend {
	t.Helper()
	kernel, modules, root := vmImage(t)
	be, err := New(context.Background(), Options{StateDir: dir, GuestBinary: guestBinary(t), Kernel: kernel, Modules: modules, Root: root, Accel: AccelTCG, StorageReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestProvisionKeepsTheReserve: below the node's free-space reserve no new
// sandbox gets disks (a clear, typed error, nothing left behind); one
// already provisioned is provisioned again.
func TestProvisionKeepsTheReserve(t *testing.T) {
	dir := newStateDir(t)
	ctx := context.Background()
	open := func(reserve int64) *Backend { return openWithReserve(t, dir, reserve) }
	old := backend.Spec{ID: "before", Tenant: "t/before"}
	if err := open(0).Provision(ctx, old); err != nil {
		t.Fatal(err)
	}
	full := open(1 << 62) // more than any disk: the node is "full"
	err := full.Provision(ctx, backend.Spec{ID: "after", Tenant: "t/after"})
	if !errors.Is(err, backend.ErrInsufficientStorage) || !strings.Contains(err.Error(), "free in "+dir) {
		t.Fatalf("provisioning below the reserve: %v, want ErrInsufficientStorage saying how much is free", err)
	}
	if backend.FileExists(filepath.Join(dir, "sandboxes", "after")) {
		t.Error("a refused sandbox left its directory")
	}
	if err := full.Provision(ctx, old); err != nil {
		t.Errorf("provisioning an existing sandbox again below the reserve: %v", err)
	}
}
