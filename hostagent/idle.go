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
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// Idle suspension. A sandbox whose Sandbox asks for it (spec.idleSuspend)
// is put to sleep by the agent after a while without calls: paused (frozen,
// backend.Pauser) when its policy says so and its backend can, else
// suspended with its memory where its backend keeps it (backend.Suspender),
// its processes stopped otherwise. Unlike a suspension of the spec it keeps its session
// handles and its tenant's token: the next call wakes it (restores or
// starts it again) before it is served, so the caller sees latency, not an
// error. The agent decides alone, on the node; each sleep and wake is a
// change of the sandbox's runtime state (runtime.go), which the node agent
// reports in its Sandbox's status, paced.

// IdlePolicy is when a sandbox is put to sleep for idleness.
type IdlePolicy struct {
	// After is how long the sandbox goes without a call before it sleeps;
	// zero means never.
	After time.Duration
	// WithRunningJobs puts it to sleep even while jobs run in it.
	WithRunningJobs bool
	// Pause freezes it (backend.Pauser: no CPU, memory kept in RAM)
	// instead of suspending it, where its backend can.
	Pause bool
}

// Idleness is the idle service: each sandbox's idle policy and whether it
// sleeps, the loop that puts idle sandboxes to sleep (RunIdle) and the
// wake of a sleeping sandbox on a call (awaken). It owns that state behind
// its own lock, a record per sandbox the sandboxes service serves (track,
// forget); it reaches the sandboxes' lifecycle (their transit lock, a
// suspension, a resume, their runtime state) through idleSandboxes, and
// the limiter through idleLimits.
type Idleness struct {
	sandboxes idleSandboxes
	limits    idleLimits
	calls     *callTracker
	jobs      *jobs.Manager
	clock     jobs.Clock
	log       logr.Logger
	// notice is Options.WakeNotice.
	notice time.Duration
	// sleeps and wakes count idle suspensions and time their resumes.
	sleeps *prometheus.CounterVec
	wakes  prometheus.Histogram

	mu      sync.Mutex
	records map[string]*idleRecord // by sandbox ID, one per sandbox served
}

// idleRecord is a sandbox's idleness: its policy, whether it sleeps and
// how. asleep is set from a sleep's start to its wake's end; slept once
// the sleep is complete, keptMemory if it kept the sandbox's memory;
// paused, asleep frozen (backend.Pauser); wakeNoticed, a wake past
// WakeNotice.
type idleRecord struct {
	policy                             IdlePolicy
	asleep, paused, slept, wakeNoticed bool
	keptMemory                         bool
}

// idleSandboxes is what the idle service asks of the sandboxes service.
type idleSandboxes interface {
	// hold takes sandbox id's transit lock, which serialises its sleep,
	// wake, suspension, restart and freeze, until release; false when it
	// is not served.
	hold(id string) (_ sandboxView, release func(), ok bool)
	// noteState records sandbox id's runtime state, after a change.
	noteState(id string)
	// resume starts again (or restores) sandbox spec, asleep, whose
	// transit lock the caller holds.
	resume(ctx context.Context, spec backend.Spec) error
	suspendOrStop(ctx context.Context, be backend.Backend, id, why string) (Suspension, error)
}

// idleLimits is what the idle service asks of the limiter.
type idleLimits interface {
	// admitCall counts a call to sandbox id in progress, unless its usage
	// limit refuses it (limits.go).
	admitCall(ctx context.Context, id string) (_ context.Context, done func(), err error)
	// frozen says whether sandbox id is frozen for its usage limit.
	frozen(id string) bool
}

func newIdleness(sandboxes idleSandboxes, calls *callTracker, jm *jobs.Manager, opts Options) *Idleness {
	return &Idleness{sandboxes: sandboxes, calls: calls, jobs: jm, clock: opts.Clock, log: opts.Logger, notice: opts.WakeNotice,
		sleeps: newSleeps(), wakes: newWakes(), records: map[string]*idleRecord{}}
}

// track starts the record of sandbox id, newly served; forget ends it.
func (d *Idleness) track(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records[id] = &idleRecord{}
}

func (d *Idleness) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.records, id)
}

// SetIdlePolicy sets when sandbox id sleeps for idleness; the zero policy
// keeps it awake. The time without calls counts from the last call, or
// from now for a sandbox that had none.
func (d *Idleness) SetIdlePolicy(id string, p IdlePolicy) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.records[id]; ok {
		r.policy = p
		d.calls.touch(id, true)
	}
}

// Asleep says whether sandbox id sleeps for idleness.
func (d *Idleness) Asleep(id string) bool {
	asleep, _ := d.sleeping(id)
	return asleep
}

// sleeping says whether sandbox id sleeps for idleness, and whether
// paused.
func (d *Idleness) sleeping(id string) (asleep, paused bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.records[id]
	return ok && r.asleep, ok && r.paused
}

// woken forgets that sandbox id sleeps, and how it slept: it was started
// again, restored or suspended for its spec. afresh is a restart's, which
// forgets only that it sleeps.
func (d *Idleness) woken(id string, afresh bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.records[id]; ok {
		r.asleep, r.paused = false, false
		if !afresh {
			r.slept, r.keptMemory, r.wakeNoticed = false, false, false
		}
	}
}

// frozenAsleep hands sandbox id, paused for idleness, to the limiter,
// which holds it frozen for its usage limit from now: no call wakes it.
func (d *Idleness) frozenAsleep(id string) {
	d.woken(id, true)
}

// runtimeOf is sandbox id's part of its runtime state: how it sleeps
// ("" when awake, or on its way to sleep: a sleep that fails leaves it
// running), whether with its memory, and its policy.
func (d *Idleness) runtimeOf(id string) (_ RuntimeState, keptMemory bool, _ IdlePolicy) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.records[id]
	if !ok {
		return "", false, IdlePolicy{}
	}
	var st RuntimeState
	switch {
	case !r.asleep:
	case r.wakeNoticed:
		st = RuntimeWaking
	case r.paused:
		st = RuntimeIdlePaused
	case r.slept && r.keptMemory:
		st = RuntimeIdleSuspended
	case r.slept:
		st = RuntimeIdleStopped
	}
	return st, r.keptMemory, r.policy
}

// asleepCount is the number of sandboxes asleep for idleness.
func (d *Idleness) asleepCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, r := range d.records {
		if r.asleep {
			n++
		}
	}
	return n
}

// awaken marks a call to sandbox id in progress, which keeps it awake, and
// wakes it first when it sleeps; done ends the call. The call runs with
// the context returned, which the sandbox's freeze for its usage limit
// cancels (limits.go). A sandbox frozen for its usage limit, or asleep
// with it spent, is not woken: the limiter refuses the call. A sandbox
// this agent does not serve is left to the caller's own checks.
func (d *Idleness) awaken(ctx context.Context, id string) (_ context.Context, done func(), err error) {
	// Counted before its sleep is read: a sleep that comes after finds
	// the call in progress, and does not put it to sleep.
	cctx, done, err := d.limits.admitCall(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if asleep, _ := d.sleeping(id); asleep {
		if err := d.wake(cctx, id); err != nil {
			done()
			return nil, nil, err
		}
	}
	return cctx, done, nil
}

// wake restores (or starts again) a sleeping sandbox, once for all the
// calls that wait for it.
func (d *Idleness) wake(ctx context.Context, id string) error {
	sbx, release, ok := d.sandboxes.hold(id)
	if !ok {
		return nil // removed meanwhile: as one not served
	}
	defer release()
	spec := sbx.spec
	asleep, paused := d.sleeping(id)
	if !asleep {
		return nil // woken by a call that came first
	}
	// A wake that takes long is a state of its own, said once it has
	// lasted WakeNotice; a quick one goes from asleep to Running.
	notice := d.clock.AfterFunc(d.notice, func() {
		d.mu.Lock()
		r, ok := d.records[id]
		ok = ok && r.asleep
		if ok {
			r.wakeNoticed = true
		}
		d.mu.Unlock()
		if ok {
			d.sandboxes.noteState(id)
		}
	})
	defer func() {
		notice.Stop()
		d.mu.Lock()
		if r, ok := d.records[id]; ok {
			r.wakeNoticed = false
		}
		d.mu.Unlock()
		d.sandboxes.noteState(id) // asleep again if the wake failed
	}()
	start := time.Now()
	if paused {
		if err := sbx.be.Capabilities().Pauser.Unpause(ctx, id); err != nil {
			d.log.Error(err, "Thawing a sandbox paused for idleness", "sandbox", id)
			return errorf(agentapi.CodeUnavailable, "the sandbox was paused for idleness and could not be resumed: %v; retry, or ask an operator to restart it", err)
		}
		d.jobs.UnparkSandbox(id)
		d.mu.Lock()
		if r, ok := d.records[id]; ok {
			r.asleep, r.paused = false, false
			r.wakeNoticed = false
		}
		d.mu.Unlock()
		d.sandboxes.noteState(id)
		d.wakes.Observe(time.Since(start).Seconds())
		return nil
	}
	if err := d.sandboxes.resume(ctx, spec); err != nil {
		d.log.Error(err, "Waking a sandbox that slept for idleness", "sandbox", id)
		return errorf(agentapi.CodeUnavailable, "the sandbox was suspended for idleness and could not be resumed: %v; retry, or ask an operator to restart it", err)
	}
	d.wakes.Observe(time.Since(start).Seconds())
	d.log.V(1).Info("Woke a sandbox that slept for idleness", "sandbox", id, "took", time.Since(start))
	return nil
}

// RunIdle puts to sleep, every interval, the sandboxes that have been idle
// for longer than their policy allows, until ctx ends.
func (d *Idleness) RunIdle(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			d.sleepIdle(ctx)
		}
	}
}

// sleepIdle puts the idle sandboxes to sleep, one after the other.
func (d *Idleness) sleepIdle(ctx context.Context) {
	d.mu.Lock()
	var due []string
	for id, r := range d.records {
		if r.policy.After > 0 && !r.asleep {
			due = append(due, id)
		}
	}
	d.mu.Unlock()
	for _, id := range due {
		if ctx.Err() != nil {
			return
		}
		d.sleep(ctx, id)
	}
}

// idleLocked says whether sandbox id (r) has been idle for longer than
// its policy allows: no call in progress, none for After, and, unless the
// policy says otherwise, no job running. Frozen for its usage limit, it
// uses no CPU and is not put to sleep: it thaws where it was. The caller
// holds d.mu.
func (d *Idleness) idleLocked(id string, r *idleRecord, suspended, frozen bool, running int) bool {
	if r.policy.After <= 0 || suspended || r.asleep || frozen || !d.calls.quietFor(id, r.policy.After) {
		return false
	}
	return r.policy.WithRunningJobs || running == 0
}

// sleep suspends sandbox id for idleness: with its memory where its
// backend keeps it, else by stopping its processes (its running jobs
// end).
func (d *Idleness) sleep(ctx context.Context, id string) {
	sbx, release, ok := d.sandboxes.hold(id)
	if !ok {
		return
	}
	defer release()
	// Under the transit lock, neither changes until release.
	frozen, running := d.limits.frozen(id), d.jobs.Running(id)
	d.mu.Lock()
	r, ok := d.records[id]
	if !ok || !d.idleLocked(id, r, sbx.suspended, frozen, running) {
		d.mu.Unlock()
		return // a call came meanwhile
	}
	// From here every call waits for the wake that follows the sleep.
	r.asleep = true
	pause := r.policy.Pause
	d.mu.Unlock()
	be := sbx.be
	caps := be.Capabilities()
	if p := caps.Pauser; pause && p != nil {
		d.jobs.ParkSandbox(id)
		err := p.Pause(ctx, id)
		if err == nil {
			d.mu.Lock()
			r.paused = true
			d.mu.Unlock()
			d.sandboxes.noteState(id)
			d.sleeps.WithLabelValues(sleepPaused).Inc()
			d.log.V(1).Info("Paused a sandbox idle for its idle period", "sandbox", id)
			return
		}
		d.jobs.UnparkSandbox(id)
		d.log.Error(err, "Pausing a sandbox idle for its idle period; suspending it instead", "sandbox", id)
	}
	sus, err := d.sandboxes.suspendOrStop(ctx, be, id, "the sandbox was suspended after a while without calls (its spec.idleSuspend), which stopped every process in it; the job's output so far is kept")
	switch {
	case errors.Is(err, errNotSuspended):
		// It stays awake, and is tried again after another idle period.
		d.log.Error(err, "Suspending a sandbox idle for its idle period", "sandbox", id)
		d.mu.Lock()
		r.asleep = false
		if d.records[id] == r {
			d.calls.touch(id, false)
		}
		d.mu.Unlock()
		return
	case err != nil:
		d.log.Error(err, "Stopping a sandbox idle for its idle period", "sandbox", id)
	}
	d.mu.Lock()
	r.slept, r.keptMemory = true, sus.KeptMemory
	d.mu.Unlock()
	d.sandboxes.noteState(id)
	if sus.KeptMemory {
		d.sleeps.WithLabelValues(sleepKeptMemory).Inc()
		d.log.V(1).Info("Suspended a sandbox idle for its idle period, with its memory", "sandbox", id)
		return
	}
	d.sleeps.WithLabelValues(sleepStopped).Inc()
}

// How an idle sandbox was put to sleep, the values of
// playground_idle_suspensions_total's kind label.
const (
	sleepKeptMemory = "memory_kept"
	sleepStopped    = "stopped"
	sleepPaused     = "paused"
)

func newSleeps() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_idle_suspensions_total",
		Help: "Sandboxes suspended after their idle period (spec.idleSuspend), by kind: paused (frozen, memory in RAM), with their memory kept (checkpointed), or their processes stopped.",
	}, []string{"kind"})
	c.WithLabelValues(sleepKeptMemory)
	c.WithLabelValues(sleepStopped)
	c.WithLabelValues(sleepPaused)
	return c
}

func newWakes() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "playground_idle_resume_seconds",
		Help:    "Time a call waited for the sandbox it called to be resumed from an idle suspension (its count is the number of such resumes).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	})
}
