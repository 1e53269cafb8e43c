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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

func TestDefaultLimits(t *testing.T) {
	l := DefaultLimits()
	want := Limits{
		ActivePerTenant: 8, ActivePerAgent: 32, RetainedPerTenant: 8, RetainedPerAgent: 64,
		RingBytes: 4 << 20, RingChunks: 1024, ChunkBytes: 64 << 10,
		TerminalTTL: time.Hour, SweepInterval: time.Minute,
		DefaultPollBytes: 1 << 20, MaxPollBytes: 4 << 20, MaxPollWait: 30 * time.Second,
	}
	if l != want {
		t.Fatalf("DefaultLimits() = %+v\nwant %+v", l, want)
	}
	for _, bad := range []Limits{
		{ActivePerTenant: -1},
		{RingBytes: 100, ChunkBytes: 200},
		{DefaultPollBytes: 10, MaxPollBytes: 5},
		{RingBytes: 2 << 30},
	} {
		if _, err := New(bad, nil); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
}

// TestAdmissionDefaults is DESIGN.md's acceptance: the 9th active job of a
// tenant and the 33rd overall are refused with a clear message, and a
// refusal kills nothing.
func TestAdmissionDefaults(t *testing.T) {
	h := newHarness(t, Limits{})
	var procs []*fakeProc
	var ids []string
	for range 8 {
		info, p := h.start("ns/a", nil)
		procs, ids = append(procs, p), append(ids, info.ID)
	}
	_, _, err := h.tryStart("ns/a", nil)
	wantMsg := "tenant ns/a has 8 active jobs (limit 8): wait for one to finish or cancel one with job_cancel"
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != BoundActivePerTenant || le.Limit != 8 || le.Count != 8 || err.Error() != wantMsg {
		t.Fatalf("9th job of ns/a: %v\nwant %s", err, wantMsg)
	}
	if !errors.Is(err, ErrCapacity) {
		t.Fatal("LimitError is not ErrCapacity")
	}

	for _, tenant := range []string{"ns/b", "ns/c", "ns/d"} {
		for range 8 {
			info, p := h.start(tenant, nil)
			procs, ids = append(procs, p), append(ids, info.ID)
		}
	}
	_, _, err = h.tryStart("ns/e", nil)
	wantMsg = "this node has 32 active jobs across all tenants (limit 32): retry when some have finished, or cancel one of yours with job_cancel"
	if !errors.As(err, &le) || le.Bound != BoundActivePerAgent || le.Limit != 32 || le.Count != 32 || err.Error() != wantMsg {
		t.Fatalf("33rd job: %v\nwant %s", err, wantMsg)
	}
	for i, p := range procs {
		if p.kills.Load() != 0 {
			t.Fatalf("job %d was killed by a refusal", i)
		}
	}
	if s := h.m.Stats(); s.Active != 32 || s.Retained != 32 || s.Started != 32 || s.Refused != 2 {
		t.Fatalf("stats %+v", s)
	}

	// A job ending frees an active slot for everyone but its tenant, whose
	// retained bound (8) still counts the unread terminal job.
	h.finish(ids[8], procs[8], 0) // a job of ns/b
	h.start("ns/e", nil)
	if _, _, err := h.tryStart("ns/b", nil); !errors.As(err, &le) || le.Bound != BoundActivePerAgent {
		t.Fatalf("after ns/e took the freed slot: %v", err)
	}
}

// TestAdmissionTable covers every bound and every way capacity is freed,
// with small limits. The sweeper is slowed down so that only admission
// recycles.
func TestAdmissionTable(t *testing.T) {
	base := Limits{
		ActivePerTenant: 2, ActivePerAgent: 3, RetainedPerTenant: 3, RetainedPerAgent: 5,
		SweepInterval: 1000 * time.Hour,
	}
	type step func(h *harness) // prepares the state
	run := func(tenant string, n int) step {
		return func(h *harness) {
			for range n {
				h.start(tenant, nil)
			}
		}
	}
	// ended starts n jobs and lets them exit; ack additionally polls them to
	// the end and once more; read polls them to the end only.
	ended := func(tenant string, n int, mode string) step {
		return func(h *harness) {
			for range n {
				info, p := h.start(tenant, nil)
				p.sink.Write(backend.Stdout, []byte("out"))
				h.finish(info.ID, p, 0)
				switch mode {
				case "ack":
					cur, _ := h.drain(tenant, info.ID, "")
					if r := h.poll(tenant, info.ID, cur, 0); !r.Done {
						h.t.Fatal("ack poll not done")
					}
				case "read":
					h.drain(tenant, info.ID, "")
				}
			}
		}
	}
	advance := func(d time.Duration) step { return func(h *harness) { h.clock.Advance(d) } }

	tests := []struct {
		name      string
		steps     []step
		tenant    string
		wantBound Bound // "" means admitted
		wantMsg   string
	}{
		{name: "under all bounds", steps: []step{run("a", 1)}, tenant: "a"},
		{name: "active per tenant", steps: []step{run("a", 2)}, tenant: "a", wantBound: BoundActivePerTenant},
		{name: "active per tenant is per tenant", steps: []step{run("a", 2)}, tenant: "b"},
		{name: "active per agent", steps: []step{run("a", 2), run("b", 1)}, tenant: "c", wantBound: BoundActivePerAgent},
		{name: "retained per tenant: unread", steps: []step{ended("a", 3, "")}, tenant: "a", wantBound: BoundRetainedPerTenant,
			wantMsg: "tenant a holds 3 jobs that are still running or whose results were not collected (limit 3): " +
				"poll terminal jobs to their end (until done, then once more) so they can be recycled, cancel jobs you no longer need, " +
				"or wait for unread results to expire after 1h0m0s (the first in 1h0m0s)"},
		{name: "retained per tenant: read to done but not acknowledged", steps: []step{ended("a", 3, "read")}, tenant: "a", wantBound: BoundRetainedPerTenant},
		{name: "retained per tenant: freed by acknowledgement", steps: []step{ended("a", 2, ""), ended("a", 1, "ack")}, tenant: "a"},
		{name: "retained per tenant: freed by expiry", steps: []step{ended("a", 3, ""), advance(time.Hour)}, tenant: "a"},
		{name: "retained per tenant: not yet expired", steps: []step{ended("a", 3, ""), advance(time.Hour - time.Second)}, tenant: "a", wantBound: BoundRetainedPerTenant},
		{name: "active bound is reported before retained", steps: []step{ended("a", 1, ""), run("a", 2)}, tenant: "a", wantBound: BoundActivePerTenant},
		{name: "retained per tenant: mixed running and unread", steps: []step{ended("a", 2, ""), run("a", 1)}, tenant: "a", wantBound: BoundRetainedPerTenant},
		{name: "retained per agent: fair share takes an unread result of the tenant holding the most", steps: []step{ended("a", 3, ""), ended("b", 2, "")}, tenant: "c"},
		{name: "retained per agent: refused at a fair share", steps: []step{ended("a", 2, ""), ended("b", 2, ""), ended("c", 1, "")}, tenant: "c", wantBound: BoundRetainedPerAgent,
			wantMsg: "this node holds 5 jobs across all tenants that are still running or whose results were not collected (limit 5), " +
				"and you hold as many as any other tenant (the node's slots are shared fairly): poll your terminal jobs to their end " +
				"(until done, then once more) so they can be recycled, or retry when a running job ends, or in 1h0m0s, when the first unread result expires"},
		{name: "retained per agent: freed by another tenant's acknowledgement", steps: []step{ended("a", 3, ""), ended("b", 1, ""), ended("b", 1, "ack")}, tenant: "c"},
		{name: "retained per agent: freed by expiry", steps: []step{ended("a", 3, ""), ended("b", 2, ""), advance(2 * time.Hour)}, tenant: "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, base)
			for _, s := range tt.steps {
				s(h)
			}
			before := h.m.Stats()
			_, _, err := h.tryStart(tt.tenant, nil)
			if tt.wantBound == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || le.Bound != tt.wantBound {
				t.Fatalf("got %v, want a %s refusal", err, tt.wantBound)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Fatalf("message:\n%s\nwant\n%s", err, tt.wantMsg)
			}
			after := h.m.Stats()
			if after.Active != before.Active {
				t.Fatalf("a refusal changed the active count: %d -> %d", before.Active, after.Active)
			}
		})
	}
}

func TestStartFailureReleasesCapacity(t *testing.T) {
	h := newHarness(t, Limits{ActivePerTenant: 1})
	boom := errors.New("the sandbox refused the job")
	attach := func(context.Context, string) (Held, error) { return nil, ErrUnreachable }
	_, err := h.m.StartHeld(context.Background(), "a", "sb", func(backend.JobSpec) (Held, error) { return nil, boom }, attach)
	if !errors.Is(err, boom) {
		t.Fatalf("StartHeld: %v, want %v", err, boom)
	}
	_, err = h.m.StartHeld(context.Background(), "a", "sb", func(backend.JobSpec) (Held, error) { panic("bug") }, attach)
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("StartHeld with a panicking start func: %v", err)
	}
	_, err = h.m.StartHeld(context.Background(), "a", "sb", func(backend.JobSpec) (Held, error) { return nil, nil }, attach)
	if err == nil {
		t.Fatal("StartHeld with no connection succeeded")
	}
	if s := h.m.Stats(); s.Active != 0 || s.Retained != 0 || s.StartFailed != 3 {
		t.Fatalf("stats after failed starts: %+v", s)
	}
	h.start("a", nil) // the slot is free
}

// TestAdmissionIsAtomic races many Starts against a bound: exactly the bound
// is admitted, even though start funcs run outside the lock.
func TestAdmissionIsAtomic(t *testing.T) {
	h := newHarness(t, Limits{ActivePerTenant: 5, RetainedPerTenant: 5})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := startOn(t, h.m, "a", "sb", func(s backend.Sink) (backend.Process, error) {
				time.Sleep(time.Millisecond) // widen the window a TOCTOU would need
				return newFakeProc(s), nil
			})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted++
			} else if errors.Is(err, ErrCapacity) {
				refused++
			} else {
				t.Errorf("Start: %v", err)
			}
		}()
	}
	wg.Wait()
	if admitted != 5 || refused != 45 {
		t.Fatalf("admitted %d refused %d, want 5 and 45", admitted, refused)
	}
}

func TestJobIDs(t *testing.T) {
	h := newHarness(t, Limits{})
	seen := map[string]bool{}
	h.m.mu.Lock()
	for range 10000 {
		id := h.m.newIDLocked()
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
		if !strings.HasPrefix(id, "job_") || len(id) != 4+26 || strings.ToLower(id) != id {
			t.Fatalf("id %q is not job_ and 26 lower-case base32 characters", id)
		}
	}
	h.m.mu.Unlock()
}

func TestStartValidates(t *testing.T) {
	h := newHarness(t, Limits{})
	start := func(backend.JobSpec) (Held, error) { return nil, nil }
	attach := func(context.Context, string) (Held, error) { return nil, ErrUnreachable }
	if _, err := h.m.StartHeld(context.Background(), "", "sb", start, attach); err == nil {
		t.Error("empty tenant accepted")
	}
	if _, err := h.m.StartHeld(context.Background(), "a", "sb", nil, attach); err == nil {
		t.Error("nil start func accepted")
	}
	if _, err := h.m.StartHeld(context.Background(), "a", "sb", start, nil); err == nil {
		t.Error("nil attacher accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.m.StartHeld(ctx, "a", "sb", start, attach); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

// TestFairShare is issue 11's hoarding attack: tenants that leave finished
// jobs unread cannot keep another tenant out of the node's retained slots,
// and a tenant's running jobs are never what is taken.
func TestFairShare(t *testing.T) {
	h := newHarness(t, Limits{SweepInterval: 1000 * time.Hour})
	// Eight tenants leave eight unread results each: the node's 64 slots.
	for _, tenant := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		for range 8 {
			info, p := h.start(tenant, nil)
			h.finish(info.ID, p, 0)
		}
	}
	if s := h.m.Stats(); s.Retained != 64 {
		t.Fatalf("retained %d", s.Retained)
	}
	// A newcomer gets in, by taking the oldest unread result of a tenant
	// holding the most; so does the next, and the newcomer again.
	h.start("new", nil)
	h.start("new2", nil)
	h.start("new", nil)
	if s := h.m.Stats(); s.Retained != 64 || s.Reclaimed != 3 {
		t.Fatalf("stats %+v", s)
	}
	// Shares converge: once "new" holds as many as each of the others
	// (7 of the 64), it is refused, and told when to retry.
	for range 5 {
		h.start("new", nil)
	}
	_, _, err := h.tryStart("new", nil)
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != BoundRetainedPerAgent || le.RetryAfter != time.Hour || !strings.Contains(err.Error(), "shared fairly") {
		t.Fatalf("eighth job of new: %v", err)
	}
	if s := h.m.Stats(); s.Retained != 64 || s.Reclaimed != 8 {
		t.Fatalf("stats %+v", s)
	}

	// Running jobs are never taken.
	h2 := newHarness(t, Limits{ActivePerTenant: 4, ActivePerAgent: 8, RetainedPerTenant: 4, RetainedPerAgent: 4, SweepInterval: 1000 * time.Hour})
	var running []*fakeProc
	for range 3 {
		_, p := h2.start("a", nil)
		running = append(running, p)
	}
	info, p := h2.start("a", nil)
	h2.finish(info.ID, p, 0)
	h2.start("b", nil) // takes a's unread result
	_, _, err = h2.tryStart("c", nil)
	if !errors.As(err, &le) || le.Bound != BoundRetainedPerAgent || le.RetryAfter != 0 {
		t.Fatalf("c while a's jobs all run: %v", err)
	}
	for i, p := range running {
		if p.kills.Load() != 0 {
			t.Fatalf("running job %d was killed", i)
		}
	}
}

// TestEndSandbox: a sandbox's processes all end at once (restart,
// suspension, deletion): its running jobs turn failed with why, and a
// deleted sandbox's jobs free their slots at once, read or not.
func TestEndSandbox(t *testing.T) {
	h := newHarness(t, Limits{SweepInterval: 1000 * time.Hour})
	other, _ := h.start("b", nil)
	running, _ := h.start("a", nil)
	done, p := h.start("a", nil)
	p.sink.Write(backend.Stdout, []byte("kept"))
	h.finish(done.ID, p, 0)

	if n := h.m.EndSandbox("sb-a", "the sandbox was restarted", false); n != 1 {
		t.Fatalf("EndSandbox ended %d running jobs, want 1", n)
	}
	got := h.poll("a", running.ID, "", 0)
	if got.Job.State != StateFailed || got.Job.Result == nil || got.Job.Result.Error != "the sandbox was restarted" {
		t.Fatalf("%+v %+v", got.Job, got.Job.Result)
	}
	// Its output went with the sandbox's processes (its holder held it);
	// its result stays.
	if r := h.poll("a", done.ID, "", 0); !r.Done || r.Job.State != StateExited || len(r.Chunks) != 0 {
		t.Fatalf("a finished job after a restart: %+v", r)
	}
	if r := h.poll("b", other.ID, "", 0); r.Job.State != StateRunning {
		t.Fatalf("another sandbox's job: %s", r.Job.State)
	}
	if s := h.m.Stats(); s.Active != 1 || s.Retained != 3 {
		t.Fatalf("after a restart: %+v", s)
	}

	h.m.EndSandbox("sb-a", "the sandbox was deleted", true)
	if s := h.m.Stats(); s.Active != 1 || s.Retained != 1 {
		t.Fatalf("after a deletion: %+v", s)
	}
	if _, err := h.m.Poll(context.Background(), "a", done.ID, "", 0, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted sandbox's job: %v", err)
	}
}
