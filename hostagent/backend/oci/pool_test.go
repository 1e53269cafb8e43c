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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// newPooledBackend is a backend over stateDir with a warm pool of size,
// refilled without a rate that would slow the test down; its pool runs
// until the test ends or stop is called, with owned as the node's records
// (nil: every ID has an owner).
func newPooledBackend(t *testing.T, stateDir string, size int, owned func(id string) bool) (b *Backend, stop func()) {
	t.Helper()
	var n atomic.Int64
	prefix := fmt.Sprintf("pool%d-", time.Now().UnixNano()%1e6)
	b, err := New(Options{StateDir: stateDir, GuestBinary: guestBinary, Runtime: testRuntime,
		WarmPool: size, WarmPoolRate: 100, NewID: func() string { return prefix + strconv.FormatInt(n.Add(1), 10) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.RunPool(ctx, owned) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return b, stop
}

// waitPoolReady waits until the pool holds n ready sandboxes (the refill
// is a background loop; a test waits for its result, not for a time).
func waitPoolReady(t *testing.T, b *Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for b.PoolStats().Ready != n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d ready sandboxes, not %d: %+v", b.PoolStats().Ready, n, b.PoolStats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWarmPoolClaimIsLikeAColdStart: a tenant's sandbox claimed from the
// pool is started by nobody on its way (no new init), and is then what a
// cold-started sandbox of the same spec is, as its tenant and the node see
// it: its identity and /etc, its login profile, its limits (set in place,
// since the spec's are not the pool's), its disk, its persistence across a
// restart, and no view of other sandboxes. The pool refills behind it,
// and a spec that does not fit the pool is a miss.
func TestWarmPoolClaimIsLikeAColdStart(t *testing.T) {
	requireRunc(t)
	ctx := context.Background()
	b, _ := newPooledBackend(t, newStateDir(t), 2, nil)
	waitPoolReady(t, b, 2)

	spec := backend.Spec{
		Tenant: "team/alice", Persona: "a careful reviewer",
		LoginEnv:    []backend.EnvVar{{Name: "GREETING", Value: "hello 'there'"}},
		LoginScript: "export FROM_SCRIPT=yes",
		Resources:   backend.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, PIDs: 64},
	}
	id, ok := b.Claim(spec)
	if !ok {
		t.Fatalf("no claim from a pool of %+v", b.PoolStats())
	}
	startsBefore := b.starts.Starts(id)
	warm := spec
	warm.ID = id
	if err := b.Reattach(ctx, warm); !strings.Contains(fmt.Sprint(err), backend.ErrNotFound.Error()) {
		t.Fatalf("Reattach of a claimed, unprovisioned sandbox: %v, want not found (the agent then provisions it)", err)
	}
	startSandbox(t, b, warm)
	if got := b.starts.Starts(id); got != startsBefore {
		t.Errorf("claiming started the sandbox's init again (%d starts, %d before): the claim is not a warm one", got, startsBefore)
	}
	cold := spec
	cold.ID = "cold"
	startSandbox(t, b, cold)

	// What the tenant sees, the sandbox's own ID written as <id>. ps runs
	// alone (not beside the pipeline's sort, which it may or may not see
	// as such yet); the lines with "ps -eo" are the probe's shell and ps.
	// Which processes run, not how many of each: init forks its spare
	// shepherds when it likes, and a child between its fork and its exec
	// still reads as init.
	probe := `hostname; cat /etc/hostname /etc/hosts /etc/passwd /etc/group; id; echo "$PERSONA|$GREETING|$FROM_SCRIPT"
		stat -c '%n %a %U:%G' / /workspace ~ /tmp /pile /pile/*; ulimit -n; ulimit -u
		df -B1 --output=size,itotal /workspace /pile | tail -n +2; ls -A /workspace /tmp; cat /proc/self/cgroup
		procs=$(ps -eo user,args); echo "$procs" | grep -v 'ps -eo' | sort -u`
	see := func(id string) string {
		r := run(t, b, id, backend.ExecRequest{Command: probe, Shell: backend.ShellLogin})
		if r.Status.ExitCode != 0 {
			t.Fatalf("probe in %s: %+v %s", id, r.Status, r.Stderr)
		}
		return strings.ReplaceAll(r.Stdout, id, "<id>")
	}
	if w, c := see(id), see(cold.ID); w != c {
		t.Errorf("the claimed sandbox differs from a cold-started one\nclaimed:\n%s\ncold:\n%s", w, c)
	}

	// What the node enforces: the spec's limits, not the pool's defaults.
	for _, sid := range []string{id, cold.ID} {
		pid, err := b.initPID(sid)
		if err != nil {
			t.Fatal(err)
		}
		if got := cgroupValue(t, pid, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(256<<20) {
			t.Errorf("%s: memory limit %s", sid, got)
		}
		if got, want := cgroupValue(t, pid, "pids", "pids.max", "pids.max"), strconv.Itoa(int(hostPIDs(64))); got != want {
			t.Errorf("%s: pids limit %s", sid, got)
		}
		if got := cgroupValue(t, pid, "cpu", "cpu.cfs_quota_us", "cpu.max"); got != "50000" && got != "50000 100000" {
			t.Errorf("%s: cpu quota %s", sid, got)
		}
	}
	sh(t, b, id, "echo kept > /workspace/mine")
	if got := sh(t, b, cold.ID, "ls -A /workspace"); got != "" {
		t.Errorf("the cold sandbox sees files it did not write: %q", got)
	}
	if err := b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, id, "cat /workspace/mine; hostname"); got != "kept\n"+id+"\n" {
		t.Errorf("after a restart the claimed sandbox holds %q", got)
	}
	if got := b.starts.Starts(id); got != startsBefore+1 {
		t.Errorf("a restart counted %d starts, want %d", got, startsBefore+1)
	}

	waitPoolReady(t, b, 2)
	if slices.Contains(b.pooledIDs(), id) {
		t.Errorf("the claimed sandbox %s is back in the pool", id)
	}
	big := spec
	big.Storage.LayerBytes = b.opts.DefaultStorage.LayerBytes * 2
	if other, ok := b.Claim(big); ok {
		t.Errorf("a spec with storage of its own claimed pooled sandbox %s", other)
	}
	if s := b.PoolStats(); s.Hits != 1 || s.Misses != 1 || s.Empty != 0 || s.Started < 3 {
		t.Errorf("pool stats %+v: want 1 hit, 1 miss that did not fit, at least 3 started", s)
	}
}

// TestWarmPoolAcrossAgents: the pooled sandboxes outlive the agent. The
// next one puts back in its pool those still running and unclaimed,
// destroys the one whose init died, leaves a claimed one to its tenant's
// Provision, destroys a claimed one whose owner the agent died before
// recording, and refills to its size. Destroying a claimed sandbox before
// it was provisioned leaves nothing.
func TestWarmPoolAcrossAgents(t *testing.T) {
	requireRunc(t)
	ctx := context.Background()
	dir := newStateDir(t)
	first, stop := newPooledBackend(t, dir, 3, nil)
	waitPoolReady(t, first, 3)
	claimed, ok := first.Claim(backend.Spec{})
	if !ok {
		t.Fatal("no claim")
	}
	lost, ok := first.Claim(backend.Spec{})
	if !ok {
		t.Fatal("no claim")
	}
	waitPoolReady(t, first, 3)
	stop()
	ids := first.pooledIDs()
	dead, alive := ids[0], ids[1:]
	pid, err := first.initPID(dead)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for first.Alive(dead) {
		time.Sleep(10 * time.Millisecond)
	}

	next, _ := newPooledBackend(t, dir, 3, func(id string) bool { return id == claimed })
	waitPoolReady(t, next, 3)
	got := next.pooledIDs()
	if left := leftovers(t, dir, lost); len(left) > 0 || backend.FileExists(next.sandboxDir(lost)) {
		t.Errorf("the claimed sandbox %s that no record owns is still there: %v", lost, left)
	}
	for _, id := range alive {
		if !slices.Contains(got, id) {
			t.Errorf("the next agent's pool %v lacks %s, which still ran", got, id)
		}
	}
	if slices.Contains(got, dead) || backend.FileExists(next.sandboxDir(dead)) {
		t.Errorf("the pooled sandbox whose init died is still there (pool %v)", got)
	}
	if slices.Contains(got, claimed) {
		t.Errorf("the claimed sandbox %s went back to the pool", claimed)
	}
	if s := next.PoolStats(); s.Started != 1 {
		t.Errorf("the next agent started %d pooled sandboxes, want 1 (for the dead one)", s.Started)
	}
	starts := next.starts.Starts(claimed)
	startSandbox(t, next, backend.Spec{ID: claimed, Tenant: "team/bob"})
	if next.starts.Starts(claimed) != starts {
		t.Error("the claimed sandbox was started again when its tenant provisioned it")
	}
	if got := sh(t, next, claimed, "hostname"); got != claimed+"\n" {
		t.Errorf("hostname %q", got)
	}

	// Claimed, never provisioned, destroyed: nothing left.
	gone, ok := next.Claim(backend.Spec{})
	if !ok {
		t.Fatal("no claim")
	}
	if err := next.Destroy(ctx, gone, false); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, dir, gone); len(left) > 0 {
		t.Errorf("destroying a claimed sandbox left %v", left)
	}
	if _, err := os.Stat(next.sandboxDir(gone)); !os.IsNotExist(err) {
		t.Errorf("its directory: %v", err)
	}
}

// pooledIDs are the pool's ready sandboxes, oldest first.
func (b *Backend) pooledIDs() []string {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return slices.Clone(b.pool.ready)
}

// sandboxProcs counts the processes of sandbox id (its pids cgroup's).
func sandboxProcs(t *testing.T, b *Backend, id string) int {
	t.Helper()
	pids, err := b.runc.processes(containerID(id))
	if err != nil {
		t.Fatal(err)
	}
	return len(pids)
}

// TestPooledSandboxRunsInitAlone: a sandbox waiting in the pool runs its
// init alone, no spare shepherd (P6: one Go process of memory, not two),
// and stays so while init answers the agent itself (a job listing). Its
// first call, an exec or a job started before any claim, is served all
// the same and leaves init keeping its spare; a claim wakes init before
// any call, so that the tenant's first command finds a spare.
func TestPooledSandboxRunsInitAlone(t *testing.T) {
	requireRunc(t)
	ctx := context.Background()
	b, _ := newPooledBackend(t, newStateDir(t), 3, nil)
	waitPoolReady(t, b, 3)
	ids := b.pooledIDs()
	for _, id := range ids {
		if recs, err := b.Capabilities().JobHolder.ListJobs(ctx, id); err != nil || len(recs) != 0 {
			t.Fatalf("jobs of pooled sandbox %s: %+v (%v)", id, recs, err)
		}
		if n := sandboxProcs(t, b, id); n != 1 {
			t.Errorf("pooled sandbox %s runs %d processes, want init alone", id, n)
		}
	}
	spare := func(id string) {
		t.Helper()
		eventually(t, "init keeping a spare shepherd in "+id, func() error {
			if n := sandboxProcs(t, b, id); n < 2 {
				return fmt.Errorf("%d processes", n)
			}
			return nil
		})
	}

	// The first call on a sandbox that no claim woke.
	if got := sh(t, b, ids[0], "echo first"); got != "first\n" {
		t.Errorf("the first command of a pooled sandbox printed %q", got)
	}
	spare(ids[0])
	conn, err := b.dial(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: "echo held", Shell: backend.ShellClean}, jobSpec("first"))
	if err != nil {
		t.Fatalf("the first call of a pooled sandbox, a job: %v", err)
	}
	defer j.Close()
	if out, _, _ := jobOutput(t, j, ""); out != "held\n" {
		t.Errorf("the first job of a pooled sandbox printed %q", out)
	}
	spare(ids[1])

	// A claim wakes init: its spare starts before the tenant's first call.
	if err := b.Provision(ctx, backend.Spec{ID: ids[2], Tenant: "team/alice"}); err != nil {
		t.Fatal(err)
	}
	spare(ids[2])
}

// TestPooledSandboxFirstCallWithoutShepherd: the first call on a pooled
// sandbox whose init cannot start a shepherd (here the guest binary is
// hidden under /dev/null in the sandbox's mount namespace, so its exec
// fails) fails within the start's bound, as a call does today in a sandbox
// whose spares cannot start, rather than waiting in the socket's backlog
// for good; init lives on, retrying, and serves the call that follows
// once a shepherd starts again.
func TestPooledSandboxFirstCallWithoutShepherd(t *testing.T) {
	requireRunc(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter is not installed")
	}
	ctx := context.Background()
	b, _ := newPooledBackend(t, newStateDir(t), 1, nil)
	waitPoolReady(t, b, 1)
	id := b.pooledIDs()[0]
	init, err := b.initPID(id)
	if err != nil {
		t.Fatal(err)
	}
	inSandbox := func(args ...string) {
		t.Helper()
		cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(init), "-m", "-p"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd.Args, err, out)
		}
	}
	inSandbox("mount", "--bind", "/dev/null", guestapi.Binary)
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	p, err := b.Exec(sctx, id, backend.ExecRequest{Command: "true"}, nil)
	if err == nil {
		_, err = p.Wait(ctx)
		t.Fatalf("a command started in a sandbox whose shepherd cannot start (%v)", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the failed start took %s, beyond its 3s bound", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the failed start: %v, want it out of time, as a start that no shepherd takes is today", err)
	}
	inSandbox("umount", guestapi.Binary)
	if now, err := b.initPID(id); err != nil || now != init {
		t.Fatalf("init is %d (%v), was %d; its log:\n%s", now, err, init, tail(filepath.Join(b.sandboxDir(id), "init.log")))
	}
	if got := sh(t, b, id, "echo served"); got != "served\n" {
		t.Errorf("a command once a shepherd can start printed %q", got)
	}
}
