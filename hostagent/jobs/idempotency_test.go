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
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

// TestKeyReturnsTheSameJob is a client that lost job_exec's answer: it
// sends the same request with the same key and gets the job it started,
// in its state now, and no second job runs; even at its active bound,
// since the retry asks for nothing new.
func TestKeyReturnsTheSameJob(t *testing.T) {
	h := newHarness(t, Limits{ActivePerTenant: 1})
	first, p := h.start("ns/a", nil, WithKey("k-1", "req-1"))
	again, p2, err := h.tryStart("ns/a", nil, WithKey("k-1", "req-1"))
	if err != nil {
		t.Fatalf("retry with the same key at the active bound: %v", err)
	}
	if again.ID != first.ID || again.State != StateRunning || p2 != nil {
		t.Fatalf("retry got job %s (%s, new process %v), want job %s running and no new process", again.ID, again.State, p2 != nil, first.ID)
	}
	if s := h.m.Stats(); s.Started != 1 || s.Active != 1 || s.Refused != 0 {
		t.Fatalf("stats after the retry: %+v, want 1 started, 1 active, none refused", s)
	}
	// Ended, the job is still the key's until its final page is
	// acknowledged: the retry sees how it ended.
	h.finish(first.ID, p, 7)
	again, _, err = h.tryStart("ns/a", nil, WithKey("k-1", "req-1"))
	if err != nil || again.ID != first.ID || again.State != StateExited || again.Result == nil || again.Result.ExitCode != 7 {
		t.Fatalf("retry after the end: %+v, %v; want job %s exited 7", again, err, first.ID)
	}
	// Acknowledged, the job is recycled and its key free: the same key
	// starts a new job.
	cur, _ := h.drain("ns/a", first.ID, "")
	h.poll("ns/a", first.ID, cur, 0)
	next, p3, err := h.tryStart("ns/a", nil, WithKey("k-1", "req-1"))
	if err != nil || next.ID == first.ID || p3 == nil {
		t.Fatalf("the key after its job was acknowledged: job %s (first %s), %v; want a new job", next.ID, first.ID, err)
	}
}

// TestKeyOfAnotherRequestIsRefused: a key reused for another command is
// refused, naming the job that has it, and starts nothing.
func TestKeyOfAnotherRequestIsRefused(t *testing.T) {
	h := newHarness(t, Limits{})
	first, _ := h.start("ns/a", nil, WithKey("k-1", "req-1"))
	_, p, err := h.tryStart("ns/a", nil, WithKey("k-1", "req-2"))
	var ke *KeyConflictError
	if !errors.As(err, &ke) || !errors.Is(err, ErrKeyConflict) || ke.JobID != first.ID || p != nil {
		t.Fatalf("the key with another request: %v (process started: %v), want a KeyConflictError naming %s", err, p != nil, first.ID)
	}
	if s := h.m.Stats(); s.Started != 1 || s.Active != 1 {
		t.Fatalf("stats: %+v, want one job", s)
	}
}

// TestKeysAreTheTenants: another tenant's same key never reaches the
// job; it starts that tenant's own.
func TestKeysAreTheTenants(t *testing.T) {
	h := newHarness(t, Limits{})
	a, _ := h.start("ns/a", nil, WithKey("shared", "req-1"))
	b, pb, err := h.tryStart("ns/b", nil, WithKey("shared", "req-1"))
	if err != nil || b.ID == a.ID || pb == nil || b.Tenant != "ns/b" {
		t.Fatalf("ns/b's start with ns/a's key: %+v, %v; want a job of ns/b's own", b, err)
	}
	// And a's key still gives a's job to a alone.
	again, _, err := h.tryStart("ns/a", nil, WithKey("shared", "req-1"))
	if err != nil || again.ID != a.ID {
		t.Fatalf("ns/a's retry: %s, %v; want %s", again.ID, err, a.ID)
	}
}

// TestKeysBoundedByRetainedJobs: the manager keeps a key only with a
// retained job, so a client that sends a new key each time holds no more
// keys than jobs, and is refused at its retained bound like any other.
func TestKeysBoundedByRetainedJobs(t *testing.T) {
	h := newHarness(t, Limits{ActivePerTenant: 8, RetainedPerTenant: 3, RetainedPerAgent: 4})
	for i := range 3 {
		info, p := h.start("ns/a", nil, WithKey(string(rune('a'+i)), "req"))
		h.finish(info.ID, p, 0)
	}
	_, _, err := h.tryStart("ns/a", nil, WithKey("d", "req"))
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != BoundRetainedPerTenant {
		t.Fatalf("a fourth key past the retained bound: %v, want the retained bound", err)
	}
	// Expired, the jobs go, and their keys with them.
	h.clock.Advance(2 * time.Hour)
	h.m.mu.Lock()
	h.m.sweepLocked()
	n := len(h.m.keys)
	h.m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d keys kept after every job was recycled", n)
	}
}

// TestKeyConcurrentStarts: starts of one key at once make one job, which
// every one of them gets.
func TestKeyConcurrentStarts(t *testing.T) {
	h := newHarness(t, Limits{})
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, _, err := h.tryStart("ns/a", nil, WithKey("once", "req"))
			if err != nil {
				t.Errorf("start %d: %v", i, err)
			}
			ids[i] = info.ID
		}()
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("concurrent starts of one key got jobs %v, want one", ids)
		}
	}
	if s := h.m.Stats(); s.Started != 1 {
		t.Fatalf("%d jobs started, want 1", s.Started)
	}
}

// TestKeySurvivesAdoption: an agent that adopts a held job after a
// restart honours its key, from the record the sandbox keeps with it.
func TestKeySurvivesAdoption(t *testing.T) {
	h := newHarness(t, Limits{})
	first, _ := h.start("ns/a", nil, WithKey("k-1", "req-1"))
	holder, _ := h.holders.Load(first.ID)
	var rec backend.JobRecord
	for _, r := range holder.(*backendtest.Holder).List() {
		if r.Spec.ID == first.ID {
			rec = r
		}
	}
	if rec.Spec.ID == "" {
		t.Fatal("the holder keeps no record of the job")
	}

	// The next agent process.
	next := newHarness(t, Limits{})
	attach := func(context.Context, string) (Held, error) { return newRunningHeld(), nil }
	if _, err := next.m.Adopt(context.Background(), "ns/a", "sb-ns/a", rec, attach); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	again, p, err := next.tryStart("ns/a", nil, WithKey("k-1", "req-1"))
	if err != nil || again.ID != first.ID || p != nil {
		t.Fatalf("retry after the restart: job %s (new process %v), %v; want %s", again.ID, p != nil, err, first.ID)
	}
	if _, _, err := next.tryStart("ns/a", nil, WithKey("k-1", "req-2")); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("another request with the adopted key: %v, want a conflict", err)
	}
}
