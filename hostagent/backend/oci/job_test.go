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
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/guestapi/outring"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

func jobSpec(id string) backend.JobSpec {
	return backend.JobSpec{ID: id, RingBytes: 4 << 20, RingChunks: 1024, ChunkBytes: 64 << 10, TTL: 600 * time.Second, Meta: []byte(`{"tenant":"t1"}`)}
}

// jobOutput polls j from cursor until the job has ended and all its
// output is read, and returns stdout, stderr and the last page.
func jobOutput(t *testing.T, j *guestexec.Job, cursor string) (string, string, heldjob.Page) {
	t.Helper()
	var out, errOut strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		p, err := j.Poll(ctx, heldjob.PollRequest{Cursor: cursor, Max: 4096, Wait: time.Second})
		if err != nil {
			t.Fatalf("poll at %q: %v", cursor, err)
		}
		if p.Gap != nil {
			t.Fatalf("poll at %q: a gap of %d bytes", cursor, p.Gap.Bytes)
		}
		for _, c := range p.Chunks {
			if c.Stream == backend.Stderr {
				errOut.Write(c.Data)
			} else {
				out.Write(c.Data)
			}
		}
		cursor = p.Next
		if (p.Exit != nil || p.ProofLost != "") && p.AtEnd {
			return out.String(), errOut.String(), p
		}
	}
}

// TestJobTakenOverInOneWake: the holder of a job finds, in one wake, the
// agent's new connection and its old one closed (an agent that restarted
// while the holder was not scheduled: here it is stopped meanwhile). It
// serves the new one, which learns how the job ended. It used to read the
// new connection as if it were the old one that woke it, and blocked
// there, the job's end never delivered (a CI run of
// TestJobOutlivesItsConnection saw it on a loaded machine).
func TestJobTakenOverInOneWake(t *testing.T) {
	ctx := context.Background()
	b, id, j := heldJob(t, "sleep 1; exit 3")
	holder := holderPID(t, b, id, j.PID)
	if err := unix.Kill(holder, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Kill(holder, unix.SIGCONT) }()
	// The signal is delivered in its time: wait until the holder is
	// stopped, so that it sees nothing of what follows until it goes on.
	for deadline := time.Now().Add(10 * time.Second); ; {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", holder))
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "T" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder did not stop: %s", stat)
		}
		time.Sleep(time.Millisecond)
	}
	j.Close() // the old agent goes
	// Init relays the new agent's connection to the holder's socket and
	// answers at once: the connection waits in the holder's backlog.
	ac, err := guestexec.Control(b.jobConn).AttachJob(ctx, id, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(holder, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	j2 := guestexec.HeldJob(ac)
	select {
	case <-j2.Ended():
	case <-time.After(30 * time.Second):
		t.Fatal("the holder did not tell the new connection that the job ended")
	}
	if exit, lost, err := j2.End(); err != nil || lost != "" || exit == nil || exit.ExitCode != 3 {
		t.Fatalf("End() = %+v, %q, %v; want exit code 3", exit, lost, err)
	}
}

// heldJob starts command (a clean shell's) as job job-1, held by a new
// sandbox, over a connection of its own.
func heldJob(t *testing.T, command string) (*Backend, string, *guestexec.Job) {
	t.Helper()
	b, id := newSandbox(t, backend.Spec{ID: "jobs"})
	conn, err := b.dial(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	j, err := guestexec.StartJob(context.Background(), conn, backend.ExecRequest{Command: command, Shell: backend.ShellClean}, jobSpec("job-1"))
	if err != nil {
		t.Fatal(err)
	}
	return b, id, j
}

// holderPID is the node's PID of the process that holds job PID jobPID
// (in the sandbox's PID namespace) of sandbox id: the job's parent.
func holderPID(t *testing.T, b *Backend, id string, jobPID int) int {
	t.Helper()
	pids, err := b.runc.processes(containerID(id))
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		var nspid []string
		ppid := 0
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				nspid = strings.Fields(v)
			}
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if len(nspid) > 0 && nspid[len(nspid)-1] == strconv.Itoa(jobPID) && ppid > 0 {
			return ppid
		}
	}
	t.Fatalf("no process of sandbox %s is its job %d", id, jobPID)
	return 0
}

// TestJobOutlivesItsConnection: a job the sandbox holds (guest protocol
// 4) keeps running and keeps its output when the agent's connection goes
// (an agent restart); a new connection finds it, attaches and reads every
// byte in order from where the first left off.
func TestJobOutlivesItsConnection(t *testing.T) {
	ctx := context.Background()
	b, id, j := heldJob(t, `i=0; while [ $i -lt 40 ]; do echo line $i; i=$((i+1)); sleep 0.05; done; echo done >&2; exit 3`)
	if j.PID == 0 {
		t.Error("Started carried no PID")
	}
	p, err := j.Poll(ctx, heldjob.PollRequest{Max: 4096, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Chunks) == 0 || !strings.HasPrefix(string(p.Chunks[0].Data), "line 0\n") {
		t.Fatalf("first page: %+v", p)
	}
	first := string(p.Chunks[0].Data)
	for _, c := range p.Chunks[1:] {
		first += string(c.Data)
	}
	cursor := p.Next
	j.Close() // the agent goes away mid-job

	recs, err := guestexec.Control(b.jobConn).ListJobs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Spec.ID != "job-1" || recs[0].PID != j.PID || string(recs[0].Spec.Meta) != `{"tenant":"t1"}` {
		t.Fatalf("ListJobs = %+v; want job-1, PID %d, with its record", recs, j.PID)
	}

	ac, err := guestexec.Control(b.jobConn).AttachJob(ctx, id, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	j2 := guestexec.HeldJob(ac)
	select {
	case <-j2.Ended():
	case <-time.After(time.Minute):
		t.Fatal("the holder did not say that the job ended")
	}
	if exit, lost, err := j2.End(); err != nil || lost != "" || exit == nil || exit.ExitCode != 3 {
		t.Fatalf("End() = %+v, %q, %v; want exit code 3", exit, lost, err)
	}
	out, errOut, last := jobOutput(t, j2, cursor)
	var want strings.Builder
	for i := range 40 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if first+out != want.String() || errOut != "done\n" {
		t.Errorf("output across the reconnection:\n%q + %q\nwant %q, stderr %q", first, out, want.String(), errOut)
	}
	if last.Exit == nil || last.Exit.ExitCode != 3 || last.Exit.Killed {
		t.Errorf("end: %+v; want exit code 3", last.Exit)
	}
	// Read again from the start: the ring keeps it all until released.
	if all, _, _ := jobOutput(t, j2, ""); all != want.String() {
		t.Errorf("from the start again: %q", all)
	}
	if _, err := j2.Poll(ctx, heldjob.PollRequest{Cursor: "999.99999", Max: 10}); !errors.Is(err, outring.ErrBadCursor) {
		t.Errorf("poll at a cursor past the end: %v; want a bad cursor", err)
	}
	if _, err := j2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, err := guestexec.Control(b.jobConn).ListJobs(ctx, id); err != nil || len(recs) != 0 {
		t.Errorf("after Release: jobs %+v, %v; want none", recs, err)
	}
	if _, err := guestexec.Control(b.jobConn).AttachJob(ctx, id, "job-1"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("attaching a released job: %v; want ErrNotFound", err)
	}
}

// TestJobKilledWithProofAfterReattach: a job cancelled through a later
// connection still ends with proof, its TERM-ignoring detached
// descendant dead, the rest of the sandbox untouched.
func TestJobKilledWithProofAfterReattach(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "jobkill"})
	ctx := context.Background()
	sentinel := conformance.StartSentinel(t, b, id)
	conn, err := b.dial(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cmd := `setsid sh -c 'trap "" TERM; sleep 1000' </dev/null >/dev/null 2>&1 & echo $!; trap "" TERM; sleep 1000`
	j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}, jobSpec("k"))
	if err != nil {
		t.Fatal(err)
	}
	var pid string
	for cursor := ""; pid == ""; {
		p, err := j.Poll(ctx, heldjob.PollRequest{Cursor: cursor, Max: 100, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Chunks {
			pid += strings.TrimSpace(string(c.Data))
		}
		cursor = p.Next
	}
	j.Close()
	if got := conformance.Alive(t, b, id, pid); !got[0] {
		t.Fatalf("descendant %s died with the connection; the job should hold it", pid)
	}

	ac, err := guestexec.Control(b.jobConn).AttachJob(ctx, id, "k")
	if err != nil {
		t.Fatal(err)
	}
	j2 := guestexec.HeldJob(ac)
	if err := j2.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, last := jobOutput(t, j2, "")
	if last.Exit == nil || !last.Exit.Killed {
		t.Fatalf("after Kill: %+v, proof lost %q; want killed with proof", last.Exit, last.ProofLost)
	}
	if got := conformance.Alive(t, b, id, pid, sentinel); got[0] || !got[1] {
		t.Errorf("after the proven kill: descendant alive %v, sentinel alive %v", got[0], got[1])
	}
	if _, err := j2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestJobRefusals: a job the holder would not bound, or an ID taken, is
// refused before anything runs. The specs go out as they are, on the
// wire: the agent's client (guestexec.StartJob) caps a ring to the
// holder's bounds before it asks, and the holder must refuse on its own.
func TestJobRefusals(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "jobbad"})
	ctx := context.Background()
	for name, spec := range map[string]guestapi.JobSpec{
		"bad ID":      {ID: "../x", RingBytes: 1 << 20, RingChunks: 16, ChunkBytes: 1024, TTLSeconds: 1},
		"huge ring":   {ID: "a", RingBytes: guestapi.MaxJobRingBytes + 1, RingChunks: 16, ChunkBytes: 1024, TTLSeconds: 1},
		"no TTL":      {ID: "a", RingBytes: 1 << 20, RingChunks: 16, ChunkBytes: 1024},
		"huge record": {ID: "a", RingBytes: 1 << 20, RingChunks: 16, ChunkBytes: 1024, TTLSeconds: 1, Meta: []byte(`"` + strings.Repeat("x", guestapi.MaxJobMeta) + `"`)},
	} {
		conn, err := b.dial(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		frames, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStart, guestapi.StartRequest{Version: guestapi.ProtocolVersion, Command: "true", Job: &spec})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(guestapi.AppendFrame(frames, guestapi.FrameStdinEnd, nil)); err != nil {
			t.Fatal(err)
		}
		ft, payload, err := guestapi.NewFrameReader(bufio.NewReader(conn)).ReadFrame()
		if err != nil || ft != guestapi.FrameError || bytes.HasPrefix(payload, []byte(guestapi.ExhaustedPrefix)) || bytes.HasPrefix(payload, []byte(guestapi.UnsupportedVersionPrefix)) {
			t.Errorf("%s: %v frame %q, %v; want an Error frame refusing the request", name, ft, payload, err)
		}
		conn.Close()
	}
	conn, _ := b.dial(ctx, id)
	j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: "sleep 1000"}, jobSpec("same"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = j.Release(ctx) }()
	conn, _ = b.dial(ctx, id)
	if _, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: "true"}, jobSpec("same")); !errors.Is(err, backend.ErrInvalidRequest) || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a second job of the same ID: %v; want refused", err)
	}
}

// TestJobExpiresUnpolled: a job that ended and that no agent polls for its
// TTL is released by its holder: the sandbox does not keep its output for
// an agent that is gone for good.
func TestJobExpiresUnpolled(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "jobttl"})
	ctx := context.Background()
	conn, err := b.dial(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	spec := jobSpec("short")
	spec.TTL = time.Second
	j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: "echo hi"}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _ := jobOutput(t, j, ""); out != "hi\n" {
		t.Fatalf("output %q", out)
	}
	j.Close()
	list := func() []backend.JobRecord {
		recs, err := guestexec.Control(b.jobConn).ListJobs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(list()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the job is still held 30 s after its 1 s TTL")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
