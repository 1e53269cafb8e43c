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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// TestGVisorSuspendKeepsMemory: a gVisor sandbox suspended with its memory
// leaves no process on the node, and is restored as it was: a process that
// counts in its memory (a shell variable, never written to a file) goes on
// from its count, its PID unchanged; a job the sandbox held before the
// suspension delivers its output from the cursor the agent had; nothing was
// started again; and the sandbox serves commands, suspends and restores
// again.
func TestGVisorSuspendKeepsMemory(t *testing.T) {
	runsc := requireRunsc(t)
	b := newGVisorBackend(t, newStateDir(t), runsc)
	spec := backend.Spec{ID: "gv-suspend", Tenant: "t/gv-suspend", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, spec)
	ctx := context.Background()
	id := spec.ID
	if b.Capabilities().Suspender == nil {
		t.Fatal("a backend with runsc offers no Suspender")
	}

	count := startCounter(t, b, id)
	pid := strings.TrimSpace(sh(t, b, id, "cat /tmp/counter.pid"))
	eventually(t, "the counter to count past 5", func() error { return check(count() > 5) })

	conn, err := b.jobConn(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cmd := `i=0; while [ $i -lt 60 ]; do echo line $i; i=$((i+1)); sleep 0.05; done`
	j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}, jobSpec("held-1"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := j.Poll(ctx, heldjob.PollRequest{Max: 4096, Wait: 5 * time.Second})
	if err != nil || len(p.Chunks) == 0 {
		t.Fatalf("first page: %+v, %v", p, err)
	}
	var got strings.Builder
	for _, c := range p.Chunks {
		got.Write(c.Data)
	}
	cursor := p.Next
	starts := b.starts.Starts(id)
	before := count()

	began := time.Now()
	if err := b.Suspend(ctx, id); err != nil {
		l, _ := os.ReadFile(filepath.Join(b.sandboxDir(id), "init.log"))
		t.Fatalf("%v\n%s", err, l)
	}
	t.Logf("suspended in %s", time.Since(began))
	j.Close() // broken by the checkpoint: the agent attaches again
	if !b.Checkpointed(id) {
		t.Fatal("Checkpointed is false after Suspend")
	}
	if nodeProcessesOf(t, b, id) {
		t.Fatal("the suspended sandbox still has processes on the node")
	}

	began = time.Now()
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Logf("restored in %s", time.Since(began))
	if b.Checkpointed(id) {
		t.Error("the checkpoint is still there after the restore")
	}
	if b.starts.Starts(id) != starts {
		t.Errorf("the restore counted as a start of init (%d, then %d)", starts, b.starts.Starts(id))
	}
	// Nothing starts the counter again: a sandbox started afresh would
	// have none, and its count would stay where the file left it.
	if args := sh(t, b, id, "ps -o args= -p "+pid+" || true"); !strings.Contains(args, "sh") || strings.Contains(args, "playground-sandbox") {
		t.Fatalf("the counter (PID %s) is not running after the restore: %q", pid, args)
	}
	eventually(t, "the counter to go on from its count", func() error { return check(count() > before+3) })

	ac, err := b.Capabilities().JobHolder.AttachJob(ctx, id, "held-1")
	if err != nil {
		t.Fatal(err)
	}
	j2 := guestexec.HeldJob(ac)
	defer j2.Close()
	out, _, last := jobOutput(t, j2, cursor)
	got.WriteString(out)
	var want strings.Builder
	for i := range 60 {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if got.String() != want.String() {
		t.Errorf("the held job's output across the suspension:\n%q\nwant\n%q", got.String(), want.String())
	}
	if last.Exit == nil || last.Exit.ExitCode != 0 {
		t.Errorf("the held job ended %+v; want exit code 0", last.Exit)
	}

	// And again: a restored sandbox suspends as the first time.
	if err := b.Suspend(ctx, id); err != nil {
		t.Fatalf("a second suspension: %v", err)
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, id, "echo still here"); got != "still here\n" {
		t.Fatalf("after a second restore: %q", got)
	}

	// A Stop of a suspended sandbox discards its checkpoint: the next
	// start is a fresh one (an operator's restart).
	if err := b.Suspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if b.Checkpointed(id) {
		t.Fatal("the checkpoint outlived a Stop")
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if b.starts.Starts(id) != starts+1 {
		t.Errorf("the start after a Stop was not a fresh one (%d starts, %d before)", b.starts.Starts(id), starts)
	}
	if args := sh(t, b, id, "ps -o args= -p "+pid+" || true"); strings.Contains(args, "while") {
		t.Errorf("the counter runs after a Stop and a Start: %q", args)
	}
}

// TestGVisorSuspendRefusals: a tenant process listening on a unix
// socket in its home (a socket of the node's under gVisor, which no
// checkpoint saves) makes Suspend refuse, naming it, and the sandbox runs
// on as it was; so does one whose image would take the node's free space
// below its reserve, and a runc sandbox, which has no checkpoint here.
func TestGVisorSuspendRefusals(t *testing.T) {
	runsc := requireRunsc(t)
	b := newGVisorBackend(t, newStateDir(t), runsc)
	spec := backend.Spec{ID: "gv-sock", Tenant: "t/gv-sock", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, spec)
	ctx := context.Background()
	sh(t, b, spec.ID, `python3 -c 'import socket,time; s=socket.socket(socket.AF_UNIX); s.bind("/home/sandbox/app.sock"); s.listen(); open("/tmp/ready","w"); time.sleep(3600)' >/dev/null 2>&1 &`)
	eventually(t, "the tenant's socket", func() error { return check(sh(t, b, spec.ID, "test -e /tmp/ready && echo yes || true") == "yes\n") })

	err := b.Suspend(ctx, spec.ID)
	if !errors.Is(err, backend.ErrNoCheckpoint) || !strings.Contains(err.Error(), "/home/sandbox/app.sock") {
		t.Fatalf("Suspend with a tenant's socket of the node's: %v; want ErrNoCheckpoint naming it", err)
	}
	if b.Checkpointed(spec.ID) {
		t.Error("a refused suspension left a checkpoint")
	}
	if got := sh(t, b, spec.ID, "echo running"); got != "running\n" {
		t.Fatalf("after a refused suspension: %q", got)
	}

	// A node whose free space, less the sandbox's memory image, would be
	// below its reserve keeps the sandbox running, saying why.
	other := backend.Spec{ID: "gv-full", Tenant: "t/gv-full", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, other)
	b.opts.StorageReserve = 1 << 60
	err = b.Suspend(ctx, other.ID)
	b.opts.StorageReserve = 0
	if !errors.Is(err, backend.ErrNoCheckpoint) || !strings.Contains(err.Error(), "reserve") {
		t.Fatalf("Suspend on a node short of space: %v; want ErrNoCheckpoint naming the reserve", err)
	}
	if got := sh(t, b, other.ID, "echo running"); got != "running\n" || b.Checkpointed(other.ID) {
		t.Fatalf("after a suspension refused for space: %q, checkpointed %v", got, b.Checkpointed(other.ID))
	}

	rb, rid := newSandbox(t, backend.Spec{ID: "runc-suspend"})
	if err := rb.Suspend(ctx, rid); !errors.Is(err, backend.ErrNoCheckpoint) {
		t.Fatalf("Suspend of a runc sandbox: %v; want ErrNoCheckpoint", err)
	}
	if got := sh(t, rb, rid, "echo running"); got != "running\n" {
		t.Fatalf("after a refused suspension: %q", got)
	}
}

// check is nil when ok holds, for eventually.
func check(ok bool) error {
	if ok {
		return nil
	}
	return errors.New("not yet")
}

// startCounter starts, in the background of sandbox id, a shell that
// counts in its memory, 20 times a second, and writes each count to
// /tmp/count (by rename: a read never sees it truncated) and its PID to
// /tmp/counter.pid; count reads the count (0 before the first).
func startCounter(t *testing.T, b *Backend, id string) (count func() int) {
	t.Helper()
	sh(t, b, id, `(i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done) >/dev/null 2>&1 & echo $! > /tmp/counter.pid`)
	return func() int {
		t.Helper()
		n, err := strconv.Atoi(strings.TrimSpace(sh(t, b, id, "cat /tmp/count 2>/dev/null || echo 0")))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}
