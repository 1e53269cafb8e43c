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

package hostagent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

// freezingMeter is the test double with a freezer and a CPU meter whose
// reading the test sets.
type freezingMeter struct {
	*backendtest.Fake
	mu       sync.Mutex
	cpu      float64
	paused   map[string]bool
	unpauses int
}

func newFreezingMeter() *freezingMeter {
	return &freezingMeter{Fake: backendtest.New("oci", backendtest.Writes(backendtest.Piece{Stream: backend.Stdout, Data: []byte("ok")})), paused: map[string]bool{}}
}

func (f *freezingMeter) Capabilities() backend.Capabilities {
	c := f.Fake.Capabilities()
	c.Pauser, c.UsageMeter = f, f
	return c
}

func (f *freezingMeter) Pause(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused[id] = true
	return nil
}

func (f *freezingMeter) Unpause(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused[id] = false
	f.unpauses++
	return nil
}

func (f *freezingMeter) SandboxUsage(string, bool) (backend.SandboxUsage, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return backend.SandboxUsage{CPUSeconds: f.cpu}, true
}

func (f *freezingMeter) setCPU(s float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cpu = s
}

func (f *freezingMeter) state(id string) (paused bool, unpauses int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused[id], f.unpauses
}

// TestIdlePausedThenLimited: a sandbox paused for idleness that has spent
// its CPU limit is handed from its sleep to the limiter, frozen where it
// is: a call is refused with the limit, and does not wake it (it stays
// paused, its state CPULimitReached, no longer asleep); at the period's
// reset the limiter thaws it, it is Running again and the call is served.
func TestIdlePausedThenLimited(t *testing.T) {
	ctx := t.Context()
	be := newFreezingMeter()
	clock := &stepClock{now: time.Unix(3600*1000, 0)} // the start of an hour
	a, err := New(Options{Backends: []backend.Backend{be}, Clock: clock, HandleTTL: 3 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	spec := backend.Spec{ID: "paused-limited", Tenant: "ns/t"}
	h := EnsureOpen(ctx, t, a, spec)
	a.Usage().SetUsageLimits(spec.ID, UsageLimits{CPUSeconds: 10, Period: time.Hour})
	a.Idleness().SetIdlePolicy(spec.ID, IdlePolicy{After: time.Minute, Pause: true})
	state := func() RuntimeState {
		t.Helper()
		rt, ok := a.RuntimeOf(spec.ID)
		if !ok {
			t.Fatal("no runtime state for a sandbox the agent serves")
		}
		return rt.State
	}
	var thaws sync.WaitGroup
	t.Cleanup(thaws.Wait)
	a.limits.checkLimits(ctx, time.Minute, &thaws) // the period's first reading

	clock.advance(2 * time.Minute)
	a.idle.sleepIdle(ctx)
	if st := state(); st != RuntimeIdlePaused {
		t.Fatalf("after its idle period: %s, want IdlePaused", st)
	}

	be.setCPU(20)
	a.limits.checkLimits(ctx, time.Minute, &thaws)
	if st := state(); st != RuntimeFrozen {
		t.Fatalf("paused for idleness, its limit spent: %s, want %s", st, RuntimeFrozen)
	}
	if a.Idleness().Asleep(spec.ID) {
		t.Error("frozen for its limit, it is still asleep for idleness: a call would wake it")
	}
	_, err = a.Execs().Exec(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "echo"})
	if CodeOf(err) != agentapi.CodeExhausted {
		t.Fatalf("a call to a sandbox frozen for its spent limit: %v, want exhausted", err)
	}
	if paused, unpauses := be.state(spec.ID); !paused || unpauses != 0 {
		t.Fatalf("the refused call woke the sandbox: paused %v, %d unpauses", paused, unpauses)
	}

	clock.advance(time.Hour)
	a.limits.checkLimits(ctx, time.Minute, &thaws)
	if st := state(); st != RuntimeRunning {
		t.Fatalf("after its period's reset: %s, want Running", st)
	}
	if paused, unpauses := be.state(spec.ID); paused || unpauses != 1 {
		t.Fatalf("after its period's reset: paused %v, %d unpauses, want thawed once", paused, unpauses)
	}
	res, err := a.Execs().Exec(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "echo"})
	if err != nil || string(res.Stdout) != "ok" {
		t.Fatalf("a call after the thaw: %+v, %v", res, err)
	}
	if _, unpauses := be.state(spec.ID); unpauses != 1 {
		t.Fatalf("the call after the thaw woke it again: %d unpauses", unpauses)
	}
}
