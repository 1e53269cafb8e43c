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
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestSnapshotAndFork: a snapshot of a running VM holds its disk, taken
// while the guest is stopped, which then goes on; a fork boots over a copy
// of it (the tenant's files, the tenant's), then lives on its own; deleting
// the snapshot leaves the fork running, and a fork of it is refused.
func TestSnapshotAndFork(t *testing.T) {
	ctx := context.Background()
	be := newBackend(ctx, t)
	src := backend.Spec{ID: "vm-snap-src", Tenant: "t/src"}
	fork := backend.Spec{ID: "vm-snap-fork", Tenant: "t/fork", FromSnapshot: "vm-snap"}
	t.Cleanup(func() {
		_ = be.Destroy(context.Background(), src.ID, false)
		_ = be.Destroy(context.Background(), fork.ID, false)
	})
	run := func(id, cmd string) string {
		t.Helper()
		var out collect
		p, err := be.Exec(ctx, id, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}, &out)
		if err != nil {
			t.Fatalf("%s: %q: %v", id, cmd, err)
		}
		if st, err := p.Wait(ctx); err != nil || st.ExitCode != 0 {
			t.Fatalf("%s: %q: exit %+v, %v, output %q", id, cmd, st, err, out.String())
		}
		return out.String()
	}
	for _, spec := range []backend.Spec{src} {
		running(ctx, t, be, spec)
	}
	run(src.ID, "mkdir -p /workspace/repo && echo code > /workspace/repo/main.go && echo base > ~/note")
	info, err := be.snapshots().Snapshot(ctx, src.ID, "vm-snap")
	if err != nil {
		t.Fatal(err)
	}
	if info.Memory || info.Bytes <= 0 || info.Note == "" {
		t.Fatalf("a VM's snapshot: %+v; want its disk, a size, and why not its memory", info)
	}
	if got := run(src.ID, "echo running"); got != "running\n" {
		t.Fatalf("the source after its snapshot: %q", got)
	}
	running(ctx, t, be, fork)
	if got := run(fork.ID, "cat ~/note /workspace/repo/main.go; stat -c %U ~/note; echo mine > ~/mine"); got != "base\ncode\nsandbox\n" {
		t.Errorf("the fork: %q; want the snapshot's files, the tenant's", got)
	}
	if got := run(src.ID, "cat ~/mine 2>/dev/null; true"); got != "" {
		t.Errorf("the source sees the fork's file: %q", got)
	}
	if err := be.snapshots().DeleteSnapshot(ctx, "vm-snap"); err != nil {
		t.Fatal(err)
	}
	if got := run(fork.ID, "cat ~/mine"); got != "mine\n" {
		t.Errorf("the fork after its snapshot's delete: %q", got)
	}
	err = be.Provision(ctx, backend.Spec{ID: "vm-snap-late", Tenant: "t/late", FromSnapshot: "vm-snap"})
	t.Cleanup(func() { _ = be.Destroy(context.Background(), "vm-snap-late", false) })
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a fork of a deleted snapshot: %v; want ErrNotFound", err)
	}
}
