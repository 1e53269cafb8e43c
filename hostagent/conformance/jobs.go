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

package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// testJobs checks background jobs through the kernel: the job manager
// keeps what the backend's sink receives and cancels with its Kill.
func testJobs(t *testing.T, n *node) {
	s := n.open(t, n.spec("jobs"))
	if !n.be.Capabilities().ProvesCleanup {
		_, err := s.startJob(agentapi.ExecRequest{Command: "true"})
		if hostagent.CodeOf(err) != agentapi.CodeUnavailable {
			t.Fatalf("a job on a backend that cannot prove cleanup: %v, want unavailable", err)
		}
		t.Skip("the backend does not prove cleanup, so the kernel admits no jobs on it")
	}

	t.Run("byte-exact output", func(t *testing.T) {
		n.known(t)
		// Random bytes (rarely valid UTF-8: base64 on the wire) and text
		// whose multi-byte characters the chunks may split, both larger
		// than a chunk and than a poll's page.
		bin := make([]byte, 1<<20)
		_, _ = rand.Read(bin)
		text := []byte(strings.Repeat("héllo wörld ✓ 𝄞\n", 20000))
		for path, data := range map[string][]byte{"bin": bin, "text": text} {
			if _, err := s.agent.Files().WriteFile(context.Background(), s.tenant, s.handle, path, "", data); err != nil {
				t.Fatal(err)
			}
		}
		job, err := s.startJob(agentapi.ExecRequest{Command: "cat bin; cat text >&2; exit 3"})
		if err != nil {
			t.Fatal(err)
		}
		r := s.follow(job.ID)
		r.untilDone(t)
		if r.info.State != jobs.StateExited || r.info.Result.ExitCode != 3 {
			t.Fatalf("the job ended %s with %+v, want exited 3", r.info.State, r.info.Result)
		}
		if !bytes.Equal(r.stdout.Bytes(), bin) {
			t.Errorf("stdout: %d bytes that differ from the %d written", r.stdout.Len(), len(bin))
		}
		if !bytes.Equal(r.stderr.Bytes(), text) {
			t.Errorf("stderr: %d bytes that differ from the %d written", r.stderr.Len(), len(text))
		}
	})

	t.Run("terminal and input", func(t *testing.T) {
		n.known(t)
		ctx := context.Background()
		job, err := s.startJob(agentapi.ExecRequest{Command: "sh", TTY: &agentapi.TTYSize{Rows: 24, Cols: 80}})
		if err != nil {
			t.Fatal(err)
		}
		r := s.follow(job.ID)
		screen := func(want string) jobs.Screen {
			t.Helper()
			for {
				scr, _, err := s.agent.Execs().JobScreen(ctx, s.tenant, job.ID, 0)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(strings.Join(scr.Lines, "\n"), want) {
					return scr
				}
				r.poll(t) // the next output, or a second
				if r.done {
					t.Fatalf("the terminal job ended without showing %q:\n%s", want, strings.Join(scr.Lines, "\n"))
				}
			}
		}
		if _, err := s.agent.Execs().JobResize(ctx, s.tenant, job.ID, jobs.TTYSize{Rows: 30, Cols: 100}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.agent.Execs().JobInput(ctx, s.tenant, job.ID, []byte("echo size=$(tput lines)x$(tput cols)\r"), false); err != nil {
			t.Fatal(err)
		}
		if scr := screen("size=30x100"); scr.Rows != 30 || scr.Cols != 100 {
			t.Errorf("the screen is %dx%d; want 30x100", scr.Rows, scr.Cols)
		}
		// A title of 2 MB, over guestapi.MaxTerminalString, is dropped at
		// the emulator's input: the screen still answers (it never did,
		// the title past a frame), with the title the program set before.
		if _, err := s.agent.Execs().JobInput(ctx, s.tenant, job.ID, []byte("printf '\\033]2;short\\007'; head -c 2097152 /dev/zero | tr '\\0' t | { printf '\\033]2;'; cat; printf '\\007'; }; echo title-$((6*7))\r"), false); err != nil {
			t.Fatal(err)
		}
		if scr := screen("title-42"); scr.Title != "short" {
			t.Errorf("after a title of 2 MB the screen's title is %d bytes (%.20q); want the one before it", len(scr.Title), scr.Title)
		}
		if _, err := s.agent.Execs().JobInput(ctx, s.tenant, job.ID, nil, true); err != nil { // Ctrl-D
			t.Fatal(err)
		}
		r.untilDone(t)
		if r.info.State != jobs.StateExited || r.info.Result.ExitCode != 0 {
			t.Errorf("the shell ended %s with %+v; want exited 0 at Ctrl-D", r.info.State, r.info.Result)
		}

		cat, err := s.startJob(agentapi.ExecRequest{Command: "cat", Input: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.agent.Execs().JobInput(ctx, s.tenant, cat.ID, []byte("piped\n"), true); err != nil {
			t.Fatal(err)
		}
		cr := s.follow(cat.ID)
		cr.untilDone(t)
		if cr.stdout.String() != "piped\n" || cr.info.Result.ExitCode != 0 {
			t.Errorf("cat wrote %q and ended %+v; want the input, exit 0", cr.stdout.String(), cr.info.Result)
		}
		if _, err := s.agent.Execs().JobInput(ctx, s.tenant, cat.ID, []byte("late"), false); hostagent.CodeOf(err) != agentapi.CodeInvalid {
			t.Errorf("input to a job that ended: %v; want invalid_argument", err)
		}
	})

	t.Run("cancel proves descendants dead", func(t *testing.T) {
		n.known(t)
		sh := s.shell(t)
		sentinel := startSentinel(sh)
		for round := range 5 {
			e := newEscapees(round)
			job, err := s.startJob(agentapi.ExecRequest{Command: e.command()})
			if err != nil {
				t.Fatal(err)
			}
			r := s.follow(job.ID)
			r.until(t, func() bool { return strings.Contains(r.stdout.String(), "ready") })
			pids := e.pids(t, sh)
			info, err := s.agent.Execs().CancelJob(context.Background(), s.tenant, job.ID)
			if err != nil || info.State != jobs.StateKilled || !info.Result.Killed {
				t.Fatalf("round %d: cancel answered %+v, %v; want killed", round, info, err)
			}
			checkProof(t, sh, fmt.Sprintf("round %d", round), pids, sentinel)
			r.untilDone(t)
		}
	})

	t.Run("bounds", func(t *testing.T) {
		n.known(t)
		// A tenant of its own, so that no earlier job counts.
		b := n.open(t, n.spec("jobs-bounds"))
		limit := n.agent.Jobs().Limits().ActivePerTenant
		var ids []string
		for i := range limit {
			job, err := b.startJob(agentapi.ExecRequest{Command: "sleep 1000"})
			if err != nil {
				t.Fatalf("job %d of %d: %v", i+1, limit, err)
			}
			ids = append(ids, job.ID)
		}
		_, err := b.startJob(agentapi.ExecRequest{Command: "sleep 1000"})
		if hostagent.CodeOf(err) != agentapi.CodeExhausted || !strings.Contains(err.Error(), fmt.Sprintf("(limit %d)", limit)) {
			t.Fatalf("job %d: %v, want resource_exhausted naming the limit", limit+1, err)
		}
		// The refusal killed nothing.
		for _, id := range ids {
			page, err := n.agent.Execs().PollJob(context.Background(), b.tenant, id, "", 0, 0)
			if err != nil || page.Job.State != jobs.StateRunning {
				t.Fatalf("job %s after the refusal: %+v, %v; want running", id, page.Job, err)
			}
		}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if info, err := n.agent.Execs().CancelJob(context.Background(), b.tenant, id); err != nil || info.State != jobs.StateKilled {
					t.Errorf("cancelling %s: %+v, %v", id, info, err)
				}
			})
		}
		wg.Wait()
	})
}

// testJobsAcrossRestarts checks what a sandbox that holds its jobs
// (backend.JobHolder) promises: a job outlives the agent process, and the
// next one adopts it under its ID: its output reads on from the client's
// cursor with nothing lost, its cancel still proves its descendants dead,
// and its tenant's bounds still count it. A backend that runs no jobs
// (it cannot prove their cleanup) skips the group.
func testJobsAcrossRestarts(t *testing.T, n *node) {
	if n.be.Capabilities().JobHolder == nil || !n.be.Capabilities().ProvesCleanup {
		t.Skip("the backend runs no background jobs: it cannot prove their cleanup")
	}
	spec := n.spec("jobs-restart")
	s := n.open(t, spec)
	sh := s.shell(t)
	sentinel := startSentinel(sh)
	lines := 30
	counter, err := s.startJob(agentapi.ExecRequest{Command: fmt.Sprintf(
		`i=0; while [ $i -lt %d ]; do echo line $i; i=$((i+1)); sleep 0.1; done; echo end >&2; exit 7`, lines)})
	if err != nil {
		t.Fatal(err)
	}
	if held := n.agent.Jobs().Stats().Held; held != 1 {
		t.Fatalf("the job manager counts %d jobs held by sandboxes, want 1", held)
	}
	e := newEscapees(0)
	escaping, err := s.startJob(agentapi.ExecRequest{Command: e.command()})
	if err != nil {
		t.Fatal(err)
	}
	r := s.follow(counter.ID)
	r.until(t, func() bool { return strings.Contains(r.stdout.String(), "line 2\n") })
	er := s.follow(escaping.ID)
	er.until(t, func() bool { return strings.Contains(er.stdout.String(), "ready") })
	pids := e.pids(t, sh)
	limit := n.agent.Jobs().Limits().ActivePerTenant
	keyed := agentapi.ExecRequest{Command: "sleep 1000", IdempotencyKey: "conformance-restart"}
	keyedJob, err := s.startJob(keyed)
	if err != nil {
		t.Fatal(err)
	}
	for range limit - 3 {
		if _, err := s.startJob(agentapi.ExecRequest{Command: "sleep 1000"}); err != nil {
			t.Fatal(err)
		}
	}

	// The agent process goes; the next one serves the same node.
	n = n.restarted(t)
	s = n.open(t, spec)
	sh = s.shell(t)
	r.s, er.s = s, s

	t.Run("the tenant's bounds count its adopted jobs", func(t *testing.T) {
		n.known(t)
		_, err := s.startJob(agentapi.ExecRequest{Command: "sleep 1000"})
		if hostagent.CodeOf(err) != agentapi.CodeExhausted || !strings.Contains(err.Error(), fmt.Sprintf("(limit %d)", limit)) {
			t.Fatalf("job %d right after the restart: %v, want resource_exhausted naming the limit", limit+1, err)
		}
	})
	t.Run("an idempotency key names its adopted job", func(t *testing.T) {
		// A client whose job_exec answer was lost as the agent went
		// sends it again: the job the next agent adopted, not a new one
		// (and not a refusal at the bound it fills).
		n.known(t)
		info, err := s.startJob(keyed)
		if err != nil || info.ID != keyedJob.ID || info.State != jobs.StateRunning {
			t.Fatalf("the keyed start again after the restart: %+v, %v; want job %s running", info, err, keyedJob.ID)
		}
	})
	t.Run("output reads on from the cursor", func(t *testing.T) {
		n.known(t)
		r.untilDone(t)
		var want strings.Builder
		for i := range lines {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		if r.stdout.String() != want.String() || r.stderr.String() != "end\n" {
			t.Errorf("read across the restart: stdout %q, stderr %q; want every line once, in order, then end", r.stdout.String(), r.stderr.String())
		}
		if r.info.State != jobs.StateExited || r.info.Result.ExitCode != 7 {
			t.Errorf("the job ended %s with %+v, want exited 7", r.info.State, r.info.Result)
		}
	})
	t.Run("cancel proves descendants dead", func(t *testing.T) {
		n.known(t)
		info, err := s.agent.Execs().CancelJob(context.Background(), s.tenant, escaping.ID)
		if err != nil || info.State != jobs.StateKilled || !info.Result.Killed {
			t.Fatalf("cancel after the restart answered %+v, %v; want killed", info, err)
		}
		checkProof(t, sh, "cancel after an agent restart", pids, sentinel)
		er.untilDone(t)
	})
}

func (s *session) startJob(req agentapi.ExecRequest) (jobs.JobInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return s.agent.Execs().StartJob(ctx, s.tenant, s.handle, req)
}

// jobReader pages through a job's output as a client does (the wire
// encoding of the chunks is the protocol's, tested in agentapi).
type jobReader struct {
	s              *session
	id             string
	cursor         string
	stdout, stderr bytes.Buffer
	info           jobs.JobInfo
	done           bool
}

func (s *session) follow(jobID string) *jobReader {
	return &jobReader{s: s, id: jobID}
}

// poll reads one page, waiting a while for one.
func (r *jobReader) poll(t testing.TB) {
	t.Helper()
	// Pages smaller than the output, so that chunks are split across them.
	page, err := r.s.agent.Execs().PollJob(context.Background(), r.s.tenant, r.id, r.cursor, 100_000, time.Second)
	if err != nil {
		t.Fatalf("polling job %s: %v", r.id, err)
	}
	for _, c := range page.Chunks {
		map[backend.Stream]*bytes.Buffer{backend.Stdout: &r.stdout, backend.Stderr: &r.stderr}[c.Stream].Write(c.Data)
	}
	if page.Gap != nil || page.DroppedBytes > 0 {
		t.Fatalf("job %s dropped output: gap %+v, %d bytes", r.id, page.Gap, page.DroppedBytes)
	}
	r.cursor, r.info, r.done = page.NextCursor, page.Job, page.Done
}

// until polls until cond holds.
func (r *jobReader) until(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if r.done || time.Now().After(deadline) {
			t.Fatalf("job %s (%s): the awaited output did not come; stdout %q, stderr %q", r.id, r.info.State, r.stdout.String(), r.stderr.String())
		}
		r.poll(t)
	}
}

// untilDone reads to the end and acknowledges it, so that the job's slot
// is free for the next.
func (r *jobReader) untilDone(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !r.done {
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after %v", r.id, r.info.State, patience)
		}
		r.poll(t)
	}
	r.poll(t)
}
