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
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestGVisorSnapshotAndFork: a snapshot of a running gVisor sandbox keeps
// its memory and files, the sandbox going on as it was (its counter
// counting on, its PID unchanged); two forks of it each start where the
// snapshot was (the counter's process, its count at least the snapshot's,
// the files), then live on their own: a file one writes is not in the
// other nor in the source. The forks' files are theirs (the tenant owns
// its home), and a fork keeps running after its snapshot is deleted.
func TestGVisorSnapshotAndFork(t *testing.T) {
	runsc := requireRunsc(t)
	b := newGVisorBackend(t, newStateDir(t), runsc)
	ctx := context.Background()
	src := backend.Spec{ID: "gv-snap-src", Tenant: "t/src", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, src)
	count := startCounter(t, b, src.ID)
	pid := strings.TrimSpace(sh(t, b, src.ID, "cat /tmp/counter.pid"))
	sh(t, b, src.ID, "echo before > ~/note; mkdir -p /workspace/repo && echo code > /workspace/repo/main.go")
	eventually(t, "the counter to count past 5", func() error { return check(count() > 5) })

	before := count()
	info, err := b.snapshots().Snapshot(ctx, src.ID, "snap-1")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Memory || info.Bytes <= 0 || info.Isolation != backend.IsolationGVisor {
		t.Fatalf("snapshot of a running gVisor sandbox: %+v; want its memory, a size and gvisor", info)
	}
	at := count()
	// The source goes on: the same process, counting.
	if got := strings.TrimSpace(sh(t, b, src.ID, "cat /tmp/counter.pid; kill -0 $(cat /tmp/counter.pid) && echo alive")); got != pid+"\nalive" {
		t.Fatalf("the source's counter after the snapshot: %q; want %s alive", got, pid)
	}
	eventually(t, "the source to count on", func() error { return check(count() > at+3) })
	again, err := b.snapshots().Snapshot(ctx, src.ID, "snap-1")
	if err != nil || again != info {
		t.Fatalf("a second Snapshot under the same ID: %+v, %v; want the first's %+v", again, err, info)
	}

	forks := []string{"gv-fork-a", "gv-fork-b"}
	for _, id := range forks {
		startSandbox(t, b, backend.Spec{ID: id, Tenant: "t/" + id, Isolation: backend.IsolationGVisor, FromSnapshot: "snap-1"})
		if got := b.starts.Starts(id); got != 0 {
			t.Errorf("fork %s started its init %d times; want it restored, not started; its log:\n%s", id, got, tail(filepath.Join(b.sandboxDir(id), "init.log")))
		}
		fc := func() int {
			n, err := strconv.Atoi(strings.TrimSpace(sh(t, b, id, "cat /tmp/count")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		first := fc()
		if first < before {
			t.Errorf("fork %s's count starts at %d; want at least the snapshot's, %d", id, first, before)
		}
		eventually(t, "fork "+id+"'s counter to count on", func() error { return check(fc() > first+3) })
		if got := strings.TrimSpace(sh(t, b, id, "cat /tmp/counter.pid; cat ~/note /workspace/repo/main.go; stat -c %U ~/note")); got != pid+"\nbefore\ncode\nsandbox" {
			t.Errorf("fork %s: %q; want the counter's PID, the snapshot's files, owned by the tenant", id, got)
		}
		sh(t, b, id, "echo "+id+" > ~/mine")
	}
	for _, id := range append([]string{src.ID}, forks...) {
		got := strings.Fields(sh(t, b, id, "cat ~/mine 2>/dev/null; true"))
		if id == src.ID && len(got) != 0 || id != src.ID && (len(got) != 1 || got[0] != id) {
			t.Errorf("sandbox %s sees ~/mine %q; want only its own", id, got)
		}
	}

	if err := b.snapshots().DeleteSnapshot(ctx, "snap-1"); err != nil {
		t.Fatal(err)
	}
	if ids, err := b.snapshots().Snapshots(); err != nil || len(ids) != 0 {
		t.Fatalf("snapshots after the delete: %v, %v", ids, err)
	}
	if got := sh(t, b, forks[0], "echo still"); got != "still\n" {
		t.Errorf("a fork after its snapshot's delete: %q", got)
	}
	err = b.Provision(ctx, backend.Spec{ID: "gv-fork-c", Tenant: "t/c", Isolation: backend.IsolationGVisor, FromSnapshot: "snap-1"})
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a fork of a deleted snapshot: %v; want ErrNotFound", err)
	}

	// A suspended sandbox's snapshot is of its suspension: its memory,
	// without waking it; the suspension stays.
	if err := b.Suspend(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	info, err = b.snapshots().Snapshot(ctx, src.ID, "snap-2")
	if err != nil || !info.Memory {
		t.Fatalf("snapshot of a suspended sandbox: %+v, %v; want its memory", info, err)
	}
	if !b.Checkpointed(src.ID) || b.Alive(src.ID) {
		t.Errorf("the snapshot woke the suspended sandbox, or took its checkpoint")
	}
	startSandbox(t, b, backend.Spec{ID: "gv-fork-d", Tenant: "t/d", Isolation: backend.IsolationGVisor, FromSnapshot: "snap-2"})
	if got := strings.TrimSpace(sh(t, b, "gv-fork-d", "cat /tmp/counter.pid; kill -0 $(cat /tmp/counter.pid) && echo alive")); got != pid+"\nalive" || b.starts.Starts("gv-fork-d") != 0 {
		t.Errorf("a fork of a suspension: %q, %d starts; want the counter restored", got, b.starts.Starts("gv-fork-d"))
	}
}

// TestSnapshotFilesOnly: a runc sandbox, which has no memory checkpoint
// here, is snapshotted with its files, paused meanwhile and running again
// after; its fork has the files, owned by the fork's tenant, and starts
// its own init. A fork that asks for another isolation than its
// snapshot's is refused and leaves nothing behind.
func TestSnapshotFilesOnly(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "runc-snap"})
	ctx := context.Background()
	// The tenant's symlinks point at the node's files, which moving a
	// fork's files to its own IDs must not follow.
	sh(t, b, id, "echo kept > ~/note; touch /tmp/scratch; ln -s /etc/passwd ~/passwd; ln -s "+b.sandboxDir(id)+" ~/host")
	info, err := b.snapshots().Snapshot(ctx, id, "snap-runc")
	if err != nil {
		t.Fatal(err)
	}
	if info.Memory || info.Note == "" || info.Bytes <= 0 {
		t.Fatalf("snapshot of a runc sandbox: %+v; want files only, saying why", info)
	}
	if got := sh(t, b, id, "echo running"); got != "running\n" {
		t.Fatalf("the source after its snapshot: %q", got)
	}
	fork := backend.Spec{ID: "runc-fork", Tenant: "t/fork", FromSnapshot: "snap-runc"}
	startSandbox(t, b, fork)
	if got := sh(t, b, fork.ID, "cat ~/note; stat -c %U ~/note; ls /tmp/scratch; echo new > ~/note"); got != "kept\nsandbox\n/tmp/scratch\n" {
		t.Errorf("the fork: %q; want the snapshot's files, the tenant's", got)
	}
	for _, p := range []string{"/etc/passwd", b.sandboxDir(id)} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Uid != 0 {
			t.Errorf("%s, a tenant's symlink's target: owner %d, %v; the fork moved it", p, st.Uid, err)
		}
	}
	if got := sh(t, b, id, "cat ~/note"); got != "kept\n" {
		t.Errorf("the source after its fork wrote: %q", got)
	}
	if got := b.starts.Starts(fork.ID); got != 1 {
		t.Errorf("the fork of a files-only snapshot started %d times; want 1", got)
	}

	err = b.Provision(ctx, backend.Spec{ID: "gv-of-runc", Isolation: backend.IsolationGVisor, FromSnapshot: "snap-runc"})
	if err == nil || !strings.Contains(err.Error(), "isolation") {
		t.Errorf("a gVisor fork of a runc snapshot: %v; want a refusal naming the isolation", err)
	}
	if _, err := b.load("gv-of-runc"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a refused fork left its sandbox: %v", err)
	}
}
