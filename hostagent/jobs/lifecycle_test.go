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

package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

func TestAckThenRecycle(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	p.sink.Write(backend.Stdout, []byte("result"))
	h.finish(info.ID, p, 0)

	cur, out := h.drain("a", info.ID, "")
	if string(out[backend.Stdout]) != "result" {
		t.Fatalf("output %q", out[backend.Stdout])
	}
	// Polls from an earlier cursor re-read; they do not acknowledge.
	if r := h.poll("a", info.ID, "", 0); !r.Done || len(r.Chunks) != 1 {
		t.Fatalf("re-read %+v", r)
	}
	h.clock.Advance(DefaultSweepInterval)
	if h.job(info.ID) == nil {
		t.Fatal("recycled without acknowledgement")
	}
	// The acknowledgement: a later poll at the end. It still answers.
	if r := h.poll("a", info.ID, cur, 0); !r.Done || len(r.Chunks) != 0 || r.Job.Result.ExitCode != 0 {
		t.Fatalf("ack poll %+v", r)
	}
	h.clock.Advance(DefaultSweepInterval)
	_, err := h.m.Poll(context.Background(), "a", info.ID, cur, 0, 0)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("poll after recycling: %v", err)
	}
	if s := h.m.Stats(); s.Retained != 0 || s.Recycled != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDonePageIsNotAnAck: the page that first says Done is not the
// acknowledgement, even when it carries no chunks (the client had drained
// the output while the job ran).
func TestDonePageIsNotAnAck(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	p.sink.Write(backend.Stdout, []byte("x"))
	cur := h.poll("a", info.ID, "", 0).NextCursor
	h.finish(info.ID, p, 0)
	if r := h.poll("a", info.ID, cur, 0); !r.Done || len(r.Chunks) != 0 {
		t.Fatalf("%+v", r)
	}
	h.clock.Advance(DefaultSweepInterval)
	if h.job(info.ID) == nil {
		t.Fatal("recycled on the first done page")
	}
}

func TestTTL(t *testing.T) {
	t.Run("unread terminal job expires", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, p := h.start("a", nil)
		h.finish(info.ID, p, 0)
		for range 59 {
			h.clock.Advance(time.Minute) // the sweeper runs each minute
		}
		if h.job(info.ID) == nil {
			t.Fatal("expired before the TTL")
		}
		h.clock.Advance(time.Minute)
		if h.job(info.ID) != nil {
			t.Fatal("sweeper did not recycle the expired job")
		}
		if _, err := h.m.Poll(context.Background(), "a", info.ID, "", 0, 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("poll: %v", err)
		}
	})
	t.Run("measured from the last poll", func(t *testing.T) {
		h := newHarness(t, Limits{SweepInterval: 1000 * time.Hour})
		info, p := h.start("a", nil)
		p.sink.Write(backend.Stdout, make([]byte, 3<<20))
		h.finish(info.ID, p, 0)
		h.clock.Advance(50 * time.Minute)
		r := h.poll("a", info.ID, "", 1<<20) // a client paging slowly
		h.clock.Advance(50 * time.Minute)
		r = h.poll("a", info.ID, r.NextCursor, 1<<20)
		h.clock.Advance(time.Hour - time.Nanosecond)
		h.poll("a", info.ID, r.NextCursor, 1<<20)
		h.clock.Advance(time.Hour)
		// Found lazily by the lookup, without the sweeper.
		if _, err := h.m.Poll(context.Background(), "a", info.ID, "", 0, 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("poll after the TTL: %v", err)
		}
		if s := h.m.Stats(); s.Retained != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
	t.Run("running jobs never expire", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, _ := h.start("a", nil)
		h.clock.Advance(48 * time.Hour)
		h.poll("a", info.ID, "", 0)
	})
}

func TestOtherTenantsJobsAreNotFound(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	p.sink.Write(backend.Stdout, []byte("secret"))

	_, pollErr := h.m.Poll(context.Background(), "b", info.ID, "", 0, 0)
	_, cancelErr := h.m.Cancel(context.Background(), "b", info.ID)
	var nf *NotFoundError
	if !errors.As(pollErr, &nf) || !errors.As(cancelErr, &nf) {
		t.Fatalf("poll %v, cancel %v; want NotFoundError", pollErr, cancelErr)
	}
	if p.kills.Load() != 0 || h.poll("a", info.ID, "", 0).Job.State != StateRunning {
		t.Fatal("another tenant's cancel touched the job")
	}
	// The same message as for a job that never existed, and as for one
	// that was recycled.
	h.finish(info.ID, p, 0)
	cur, _ := h.drain("a", info.ID, "")
	h.poll("a", info.ID, cur, 0)
	h.clock.Advance(DefaultSweepInterval)
	_, goneErr := h.m.Poll(context.Background(), "a", info.ID, "", 0, 0)
	if pollErr.Error() != goneErr.Error() || cancelErr.Error() != goneErr.Error() {
		t.Fatalf("messages differ:\n%v\n%v\n%v", pollErr, cancelErr, goneErr)
	}
	if strings.Contains(pollErr.Error(), "tenant a") {
		t.Fatal("message names the owner")
	}
	// A long, made-up ID is not echoed in full.
	_, err := h.m.Poll(context.Background(), "a", strings.Repeat("x", 10000), "", 0, 0)
	if !errors.Is(err, ErrNotFound) || len(err.Error()) > 400 {
		t.Fatalf("long id: %d bytes: %v", len(err.Error()), err)
	}
}

func TestCancelWithProof(t *testing.T) {
	h := newHarness(t, Limits{})
	gate := make(chan struct{})
	info, p := h.start("a", func(p *fakeProc) { p.killGate = gate })
	p.sink.Write(backend.Stdout, []byte("before"))

	done := make(chan JobInfo, 1)
	go func() {
		ci, err := h.m.Cancel(context.Background(), "a", info.ID)
		if err != nil {
			t.Error(err)
		}
		done <- ci
	}()
	<-p.killStarted
	// Cancelling until the backend proves the tree dead; still active.
	r := h.poll("a", info.ID, "", 0)
	if r.Job.State != StateCancelling || r.Done || h.m.Stats().Active != 1 {
		t.Fatalf("during kill: %+v", r.Job)
	}
	close(gate)
	ci := <-done
	if ci.State != StateKilled || ci.Result == nil || !ci.Result.Killed || ci.Result.Signal != "SIGKILL" || ci.Result.TimedOut {
		t.Fatalf("after kill: %+v %+v", ci, ci.Result)
	}
	if s := h.m.Stats(); s.Active != 0 || s.Retained != 1 {
		t.Fatalf("stats %+v", s)
	}
	// Output written before the kill is still there.
	_, out := h.drain("a", info.ID, "")
	if string(out[backend.Stdout]) != "before" {
		t.Fatalf("output %q", out[backend.Stdout])
	}
	// Cancelling a terminal job changes nothing.
	again, err := h.m.Cancel(context.Background(), "a", info.ID)
	if err != nil || again.State != StateKilled || p.kills.Load() != 1 {
		t.Fatalf("second cancel: %+v %v, %d kills", again, err, p.kills.Load())
	}
	if h.m.AdmissionStatus("sb-a").Halted || len(h.m.Halts()) != 0 {
		t.Fatal("a proven kill halted admission")
	}
}

// TestCancelWaitsForProofEvenIfTheShellExits: the shell ending during the
// kill does not make the job terminal; only the kill's proof does.
func TestCancelWaitsForProofEvenIfTheShellExits(t *testing.T) {
	h := newHarness(t, Limits{})
	gate := make(chan struct{})
	info, p := h.start("a", func(p *fakeProc) { p.killGate = gate })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = h.m.Cancel(ctx, "a", info.ID)
	<-p.killStarted
	p.exit(backend.ExitStatus{ExitCode: 143, Signal: "SIGTERM"}, nil)
	eventually(t, "the holder to see the shell's end", func() bool { return p.waited.Load() > 0 })
	if st := h.poll("a", info.ID, "", 0).Job.State; st != StateCancelling {
		t.Fatalf("state %s before the proof", st)
	}
	close(gate)
	if got := h.waitDone(info.ID); got.State != StateKilled || got.Result.Signal != "SIGTERM" {
		t.Fatalf("%+v %+v", got, got.Result)
	}
}

// TestCancelReturnsWhenCtxEnds: a slow kill does not hold the caller.
func TestCancelReturnsWhenCtxEnds(t *testing.T) {
	h := newHarness(t, Limits{})
	gate := make(chan struct{})
	info, _ := h.start("a", func(p *fakeProc) { p.killGate = gate })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ci, err := h.m.Cancel(ctx, "a", info.ID)
	if err != nil || ci.State != StateCancelling {
		t.Fatalf("%+v %v", ci, err)
	}
	close(gate)
	if got := h.waitDone(info.ID); got.State != StateKilled {
		t.Fatalf("%+v", got)
	}
}

func TestCancelProofLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		killErr error
	}{
		{"ErrProofLost", fmt.Errorf("cgroup.kill: descendants remain: %w", backend.ErrProofLost)},
		{"other error", errors.New("runc: exit status 1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Limits{})
			bystander, bp := h.start("b", nil)
			info, _ := h.start("a", func(p *fakeProc) { p.killErr = tc.killErr })

			ci, err := h.m.Cancel(context.Background(), "a", info.ID)
			if err != nil || ci.State != StateFailed || ci.Result == nil || ci.Result.Killed {
				t.Fatalf("%+v %+v %v", ci, ci.Result, err)
			}
			h.internalError(ci.Result, "could not prove", tc.killErr.Error())
			// Admission stops in that sandbox only, saying why but not whose job.
			_, _, err = h.tryStart("a", nil)
			var he *HaltedError
			if !errors.As(err, &he) || !errors.Is(err, ErrAdmissionHalted) || !errors.Is(err, backend.ErrProofLost) || he.SandboxID != "sb-a" {
				t.Fatalf("Start while halted: %v", err)
			}
			if !strings.Contains(err.Error(), "could not prove") || !strings.Contains(err.Error(), "restart") || strings.Contains(err.Error(), info.ID) {
				t.Fatalf("halt message: %s", err)
			}
			st := h.m.AdmissionStatus("sb-a")
			if !st.Halted || st.JobID != info.ID || st.Tenant != "a" || st.SandboxID != "sb-a" || !strings.Contains(st.Reason, tc.killErr.Error()) {
				t.Fatalf("admission status %+v", st)
			}
			if s := h.m.Stats(); s.HaltedSandboxes != 1 {
				t.Fatalf("stats do not show the halt: %+v", s)
			}
			if hs := h.m.Halts(); len(hs) != 1 || hs[0].SandboxID != "sb-a" {
				t.Fatalf("Halts() = %+v", hs)
			}
			// Every other sandbox admits as before.
			if h.m.AdmissionStatus("sb-c").Halted {
				t.Fatal("another sandbox is halted")
			}
			h.start("c", nil)
			// Running work is untouched; polls still work.
			if r := h.poll("b", bystander.ID, "", 0); r.Job.State != StateRunning || bp.kills.Load() != 0 {
				t.Fatal("the halt touched another job")
			}
			// Only resuming that sandbox (after its restart) lifts it.
			if prev := h.m.ResumeAdmission("sb-c"); prev.Halted {
				t.Fatalf("ResumeAdmission of another sandbox returned %+v", prev)
			}
			if _, _, err := h.tryStart("a", nil); !errors.Is(err, ErrAdmissionHalted) {
				t.Fatalf("Start after resuming another sandbox: %v", err)
			}
			if prev := h.m.ResumeAdmission("sb-a"); prev.JobID != info.ID {
				t.Fatalf("ResumeAdmission returned %+v", prev)
			}
			h.start("a", nil)
		})
	}
}

func TestTimeout(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil, WithTimeout(10*time.Second))
	h.clock.Advance(9 * time.Second)
	if p.kills.Load() != 0 {
		t.Fatal("killed early")
	}
	h.clock.Advance(time.Second)
	got := h.waitDone(info.ID)
	if got.State != StateTimedOut || !got.Result.TimedOut || !got.Result.Killed || p.kills.Load() != 1 {
		t.Fatalf("%+v %+v", got, got.Result)
	}

	// A job that ends first is not killed later.
	info, p = h.start("a", nil, WithTimeout(10*time.Second))
	h.finish(info.ID, p, 0)
	h.clock.Advance(time.Minute)
	if p.kills.Load() != 0 {
		t.Fatal("timeout fired after the job ended")
	}

	// A timeout whose kill is not proven halts admission like a cancel.
	info, _ = h.start("a", func(p *fakeProc) { p.killErr = backend.ErrProofLost }, WithTimeout(time.Second))
	h.clock.Advance(time.Second)
	if got := h.waitDone(info.ID); got.State != StateFailed {
		t.Fatalf("%+v", got)
	}
	if !h.m.AdmissionStatus("sb-a").Halted {
		t.Fatal("not halted")
	}
}

// TestWaitProofLost: a job whose holder lost track of it may leave
// processes behind: it fails, saying so, and its sandbox halts.
func TestWaitProofLost(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	p.exit(backend.ExitStatus{ExitCode: -1}, fmt.Errorf("%w: the shepherd went away", backend.ErrProofLost))
	got := h.waitDone(info.ID)
	if got.State != StateFailed || !strings.Contains(got.Result.Error, "may still run") {
		t.Fatalf("%+v %+v", got, got.Result)
	}
	if !h.m.AdmissionStatus("sb-a").Halted || h.m.AdmissionStatus("sb-b").Halted {
		t.Fatalf("halts %+v", h.m.Halts())
	}
}

// TestClose: a manager that closes (its agent process ends) leaves every
// job running in its sandbox, for the next manager to adopt, and refuses
// further calls.
func TestClose(t *testing.T) {
	t.Run("leaves the jobs to their sandboxes", func(t *testing.T) {
		clock := newFakeClock()
		m, err := New(Limits{}, clock)
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, m: m, clock: clock}
		a, pa := h.start("a", nil)
		_, pb := h.start("b", nil)
		c, pc := h.start("c", nil)
		h.finish(c.ID, pc, 0)
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*fakeProc{pa, pb, pc} {
			if p.kills.Load() != 0 {
				t.Fatal("Close killed a job its sandbox holds")
			}
		}
		if _, _, err := h.tryStart("a", nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
		if _, err := m.Poll(context.Background(), "a", a.ID, "", 0, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("Poll after Close: %v", err)
		}
		if err := m.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if n := clock.pending(); n != 0 {
			t.Fatalf("%d timers left", n)
		}
	})
	t.Run("leaves a job that was starting", func(t *testing.T) {
		m, err := New(Limits{}, newFakeClock())
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var p *fakeProc
		startErr := make(chan error, 1)
		go func() {
			_, err := startOn(t, m, "a", "sb", func(s backend.Sink) (backend.Process, error) {
				<-release
				p = newFakeProc(s)
				return p, nil
			})
			startErr <- err
		}()
		eventually(t, "the start to be admitted", func() bool { return m.Stats().Active == 1 })
		closed := make(chan error, 1)
		go func() { closed <- m.Close(context.Background()) }()
		eventually(t, "close to begin", func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.closed
		})
		close(release)
		if err := <-startErr; !errors.Is(err, ErrClosed) {
			t.Fatalf("Start: %v", err)
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if p.kills.Load() != 0 {
			t.Fatal("the started job was killed: its sandbox holds it, and the next manager adopts it")
		}
	})
}

func TestStats(t *testing.T) {
	h := newHarness(t, Limits{RingBytes: 100, ChunkBytes: 10})
	info, p := h.start("a", nil)
	h.start("a", nil)
	for i := range 15 {
		p.sink.Write(backend.Stream(1+i%2), []byte("0123456789"))
	}
	h.finish(info.ID, p, 0)
	s := h.m.Stats()
	want := Stats{Active: 1, Retained: 2, Held: 2, Started: 2, OutputBytes: 150, DroppedBytes: 50, Evictions: 5}
	if s != want {
		t.Fatalf("stats %+v\nwant %+v", s, want)
	}
}
