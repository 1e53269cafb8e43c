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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// stepClock is a clock the test moves; timers run in real time.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) jobs.Timer { return time.AfterFunc(d, f) }

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestIdleSleepAndWake is idle suspension's rules, on a backend that keeps
// no memory (the test double; gVisor's is TestIdleSuspendGVisor): a sandbox
// sleeps once it went its idle period without a call, not while a call is
// in progress nor, by default, while a job runs; the next call on a session
// opened before wakes it and is served; with WithRunningJobs a running job
// does not keep it awake, and ends, saying why.
func TestIdleSleepAndWake(t *testing.T) {
	ctx := context.Background()
	be := backendtest.New("oci", backendtest.Writes(backendtest.Piece{Stream: backend.Stdout, Data: []byte("ok")}))
	// Every command ends at once but "block", which runs until killed.
	be.ExecFunc = func(_ string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
		p := &blocked{done: make(chan struct{})}
		if req.Command != "block" {
			sink.Write(backend.Stdout, []byte("ok"))
			p.end()
		}
		return p, nil
	}
	clock := &stepClock{now: time.Unix(1_000_000, 0)}
	a, err := New(Options{Backends: []backend.Backend{be}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(ctx) })
	spec := backend.Spec{ID: "idle-1", Tenant: "ns/t"}
	if err := a.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	a.Idleness().SetIdlePolicy(spec.ID, IdlePolicy{After: time.Minute})
	h, err := a.Sessions().Open(ctx, spec.Tenant, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	sleepsAfter := func(d time.Duration) bool {
		t.Helper()
		clock.advance(d)
		a.idle.sleepIdle(ctx)
		return a.Idleness().Asleep(spec.ID)
	}

	if sleepsAfter(59 * time.Second) {
		t.Fatal("asleep before its idle period")
	}
	// A call in progress keeps it awake, however long it lasts; the idle
	// period counts from its end.
	_, done, err := a.idle.awaken(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sleepsAfter(10 * time.Minute) {
		t.Fatal("asleep during a call")
	}
	done()
	if sleepsAfter(59 * time.Second) {
		t.Fatal("asleep before its idle period after the call's end")
	}
	if !sleepsAfter(2 * time.Second) {
		t.Fatal("awake after its idle period")
	}
	if !a.Alive(spec.ID) {
		t.Error("an asleep sandbox reads as dead, which the reconciler would restart")
	}
	// The reconciler's Ensure leaves it asleep.
	if err := a.Ensure(ctx, spec); err != nil || !a.Idleness().Asleep(spec.ID) {
		t.Fatalf("Ensure of an asleep sandbox: %v, asleep %v", err, a.Idleness().Asleep(spec.ID))
	}

	// The next call, on the session opened before, is served.
	res, err := a.Execs().Exec(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "echo"})
	if err != nil || string(res.Stdout) != "ok" {
		t.Fatalf("the call that wakes the sandbox: %+v, %v", res, err)
	}
	if a.Idleness().Asleep(spec.ID) {
		t.Fatal("still asleep after a call")
	}

	// A running job keeps it awake by default.
	job, err := a.Execs().StartJob(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "block"})
	if err != nil {
		t.Fatal(err)
	}
	if sleepsAfter(time.Hour) {
		t.Fatal("asleep while a job runs")
	}
	// Unless the policy says otherwise: the job ends with the sandbox's
	// processes, saying why.
	a.Idleness().SetIdlePolicy(spec.ID, IdlePolicy{After: time.Minute, WithRunningJobs: true})
	if !sleepsAfter(time.Minute) {
		t.Fatal("awake with a running job and WithRunningJobs")
	}
	p, err := a.Execs().PollJob(ctx, spec.Tenant, job.ID, "", 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Job.State != jobs.StateFailed || p.Job.Result == nil || !strings.Contains(p.Job.Result.Error, "without calls") {
		t.Fatalf("the job after an idle suspension that stopped its sandbox: %+v", p.Job)
	}
	if a.Idleness().Asleep(spec.ID) {
		t.Error("the poll did not wake the sandbox")
	}
}

// blocked is a process that runs until it is killed (or was made ended).
type blocked struct {
	once   sync.Once
	done   chan struct{}
	killed bool
}

func (p *blocked) end() { p.once.Do(func() { close(p.done) }) }

func (p *blocked) Wait(ctx context.Context) (backend.ExitStatus, error) {
	select {
	case <-p.done:
		if p.killed {
			return backend.ExitStatus{ExitCode: -1, Signal: "SIGKILL", Killed: true}, nil
		}
		return backend.ExitStatus{}, nil
	case <-ctx.Done():
		return backend.ExitStatus{}, ctx.Err()
	}
}

func (p *blocked) Kill(context.Context) error {
	p.once.Do(func() { p.killed = true; close(p.done) })
	return nil
}

// gatedStart is the test double whose Start waits, once armed, until the
// test lets it go: a wake that takes as long as the test likes.
type gatedStart struct {
	*backendtest.Fake
	mu   sync.Mutex
	gate chan struct{}
}

func (g *gatedStart) arm() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	return g.gate
}

func (g *gatedStart) Start(ctx context.Context, id string) error {
	g.mu.Lock()
	gate := g.gate
	g.gate = nil
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Fake.Start(ctx, id)
}

// TestRuntimeStates: each sleep and wake is a change of the sandbox's
// runtime state, noted once complete and announced on StateChanges: an
// idle sandbox (on a backend that keeps no memory) is IdleStopped from
// when it slept; a wake that takes longer than WakeNotice is Waking
// meanwhile, and Running once the call is served; a suspension of the
// spec is Stopped, and the Ensure that resumes it Running again. A
// sandbox's first state is announced by nobody: its provisioning says it.
func TestRuntimeStates(t *testing.T) {
	ctx := context.Background()
	be := &gatedStart{Fake: backendtest.New("oci", backendtest.Writes(backendtest.Piece{Stream: backend.Stdout, Data: []byte("ok")}))}
	clock := &stepClock{now: time.Unix(1_000_000, 0)}
	a, err := New(Options{Backends: []backend.Backend{be}, Clock: clock, WakeNotice: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(ctx) })
	spec := backend.Spec{ID: "states-1", Tenant: "ns/t"}
	if err := a.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	state := func() RuntimeState {
		t.Helper()
		rt, ok := a.RuntimeOf(spec.ID)
		if !ok {
			t.Fatal("no runtime state for a sandbox the agent serves")
		}
		return rt.State
	}
	announced := func() []string {
		var ids []string
		for {
			select {
			case id := <-a.StateChanges():
				ids = append(ids, id)
			default:
				return ids
			}
		}
	}
	if st := state(); st != RuntimeRunning {
		t.Fatalf("a new sandbox is %s", st)
	}
	if ids := announced(); len(ids) != 0 {
		t.Fatalf("a new sandbox's state was announced: %v", ids)
	}
	a.Idleness().SetIdlePolicy(spec.ID, IdlePolicy{After: time.Minute})
	h, err := a.Sessions().Open(ctx, spec.Tenant, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Minute)
	slept := clock.Now()
	a.idle.sleepIdle(ctx)
	rt, _ := a.RuntimeOf(spec.ID)
	if rt.State != RuntimeIdleStopped || !rt.Since.Equal(slept) || rt.KeptMemory || rt.Idle.After != time.Minute {
		t.Fatalf("after its idle period: %+v", rt)
	}
	if ids := announced(); len(ids) != 1 || ids[0] != spec.ID {
		t.Fatalf("the sleep announced %v", ids)
	}

	// A wake held up past WakeNotice: Waking, until the call is served.
	gate := be.arm()
	served := make(chan error, 1)
	go func() {
		_, err := a.Execs().Exec(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "echo"})
		served <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for state() != RuntimeWaking {
		if time.Now().After(deadline) {
			t.Fatalf("a wake held up is %s, not Waking", state())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(gate)
	if err := <-served; err != nil {
		t.Fatalf("the call that woke the sandbox: %v", err)
	}
	if st := state(); st != RuntimeRunning {
		t.Fatalf("after the wake: %s", st)
	}
	if ids := announced(); len(ids) != 2 {
		t.Fatalf("a slow wake announced %v: want Waking, then Running", ids)
	}

	// A suspension of the spec, and its end.
	if _, err := a.Suspend(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if st := state(); st != RuntimeStopped {
		t.Fatalf("suspended through its spec, on a backend that keeps no memory: %s", st)
	}
	if err := a.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if st := state(); st != RuntimeRunning {
		t.Fatalf("resumed: %s", st)
	}
	if ids := announced(); len(ids) != 2 {
		t.Fatalf("a suspension and its end announced %v", ids)
	}
}
