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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playground-dev/playground/hostagent/agentapi"
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

// SetIdlePolicy sets when sandbox id sleeps for idleness; the zero policy
// keeps it awake. The time without calls counts from the last call, or
// from now for a sandbox that had none.
func (a *Agent) SetIdlePolicy(id string, p IdlePolicy) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sandboxes[id]; ok {
		s.idle = p
		a.calls.touch(id, true)
	}
}

// Asleep says whether sandbox id sleeps for idleness.
func (a *Agent) Asleep(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sandboxes[id]
	return ok && s.asleep
}

// suspendedCounts counts the sandboxes suspended by their spec and those
// asleep for idleness.
func (a *Agent) suspendedCounts() (spec, idle int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sandboxes {
		switch {
		case s.suspended:
			spec++
		case s.asleep:
			idle++
		}
	}
	return spec, idle
}

// awaken marks a call to sandbox id in progress, which keeps it awake, and
// wakes it first when it sleeps; done ends the call. The call runs with
// the context returned, which the sandbox's freeze for its usage limit
// cancels (limits.go). A sandbox frozen for its usage limit, or asleep
// with it spent, is not woken: the call is refused. A sandbox this agent
// does not serve is left to the caller's own checks.
func (a *Agent) awaken(ctx context.Context, id string) (_ context.Context, done func(), err error) {
	a.mu.Lock()
	s, ok := a.sandboxes[id]
	a.mu.Unlock()
	if !ok {
		return ctx, func() {}, nil
	}
	a.awaitThaw(ctx, s)
	a.mu.Lock()
	if a.sandboxes[id] != s {
		// Removed meanwhile: as one not served.
		a.mu.Unlock()
		return ctx, func() {}, nil
	}
	if err := a.limitRefusalLocked(s); err != nil {
		a.mu.Unlock()
		return nil, nil, err
	}
	asleep := s.asleep
	cctx, cancel := context.WithCancelCause(ctx)
	// Under the agent's lock, with the refusal above: a freeze that
	// comes after finds the call in progress, and cancels it.
	end := a.calls.begin(id, cancel)
	a.mu.Unlock()
	done = func() {
		end()
		cancel(nil)
	}
	if asleep {
		if err := a.wake(cctx, s); err != nil {
			done()
			return nil, nil, err
		}
	}
	return cctx, done, nil
}

// wake restores (or starts again) a sleeping sandbox, once for all the
// calls that wait for it.
func (a *Agent) wake(ctx context.Context, s *sandbox) error {
	s.transit.Lock()
	defer s.transit.Unlock()
	a.mu.Lock()
	asleep, paused, spec := s.asleep, s.paused, s.spec
	a.mu.Unlock()
	if !asleep {
		return nil // woken by a call that came first
	}
	// A wake that takes long is a state of its own, said once it has
	// lasted WakeNotice; a quick one goes from asleep to Running.
	notice := a.clock.AfterFunc(a.opts.WakeNotice, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if s.asleep {
			s.wakeNoticed = true
			a.noteStateLocked(s)
		}
	})
	defer func() {
		notice.Stop()
		a.mu.Lock()
		s.wakeNoticed = false
		a.noteStateLocked(s) // asleep again if the wake failed
		a.mu.Unlock()
	}()
	start := time.Now()
	if paused {
		if err := s.be.Capabilities().Pauser.Unpause(ctx, spec.ID); err != nil {
			a.opts.Logger.Error(err, "Thawing a sandbox paused for idleness", "sandbox", spec.ID)
			return errorf(agentapi.CodeUnavailable, "the sandbox was paused for idleness and could not be resumed: %v; retry, or ask an operator to restart it", err)
		}
		a.jobs.UnparkSandbox(spec.ID)
		a.mu.Lock()
		s.asleep, s.paused = false, false
		s.wakeNoticed = false
		a.noteStateLocked(s)
		a.mu.Unlock()
		a.wakes.Observe(time.Since(start).Seconds())
		return nil
	}
	if _, err := a.ensure(ctx, spec, true); err != nil {
		a.opts.Logger.Error(err, "Waking a sandbox that slept for idleness", "sandbox", spec.ID)
		return errorf(agentapi.CodeUnavailable, "the sandbox was suspended for idleness and could not be resumed: %v; retry, or ask an operator to restart it", err)
	}
	a.wakes.Observe(time.Since(start).Seconds())
	a.opts.Logger.V(1).Info("Woke a sandbox that slept for idleness", "sandbox", spec.ID, "took", time.Since(start))
	return nil
}

// RunIdle puts to sleep, every interval, the sandboxes that have been idle
// for longer than their policy allows, until ctx ends.
func (a *Agent) RunIdle(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			a.sleepIdle(ctx)
		}
	}
}

// sleepIdle puts the idle sandboxes to sleep, one after the other.
func (a *Agent) sleepIdle(ctx context.Context) {
	a.mu.Lock()
	var due []*sandbox
	for _, s := range a.sandboxes {
		if a.idleLocked(s) {
			due = append(due, s)
		}
	}
	a.mu.Unlock()
	for _, s := range due {
		if ctx.Err() != nil {
			return
		}
		a.sleep(ctx, s)
	}
}

// idleLocked says whether s has been idle for longer than its policy
// allows: no call in progress, none for After, and, unless the policy says
// otherwise, no job running.
func (a *Agent) idleLocked(s *sandbox) bool {
	// Frozen for its usage limit, it uses no CPU and is not put to sleep:
	// it thaws where it was.
	if s.idle.After <= 0 || s.suspended || s.asleep || s.limited || !a.calls.quietFor(s.spec.ID, s.idle.After) {
		return false
	}
	return s.idle.WithRunningJobs || a.jobs.Running(s.spec.ID) == 0
}

// sleep suspends s for idleness: with its memory where its backend keeps
// it, else by stopping its processes (its running jobs end).
func (a *Agent) sleep(ctx context.Context, s *sandbox) {
	s.transit.Lock()
	defer s.transit.Unlock()
	a.mu.Lock()
	if !a.idleLocked(s) {
		a.mu.Unlock()
		return // a call came meanwhile
	}
	// From here every call waits for the wake that follows the sleep.
	s.asleep = true
	spec, be := s.spec, s.be
	a.mu.Unlock()
	id := spec.ID
	caps := be.Capabilities()
	if p := caps.Pauser; s.idle.Pause && p != nil {
		a.jobs.ParkSandbox(id)
		err := p.Pause(ctx, id)
		if err == nil {
			a.mu.Lock()
			s.paused = true
			a.noteStateLocked(s)
			a.mu.Unlock()
			a.sleeps.WithLabelValues(sleepPaused).Inc()
			a.opts.Logger.V(1).Info("Paused a sandbox idle for its idle period", "sandbox", id)
			return
		}
		a.jobs.UnparkSandbox(id)
		a.opts.Logger.Error(err, "Pausing a sandbox idle for its idle period; suspending it instead", "sandbox", id)
	}
	sus, err := a.suspendOrStop(ctx, be, id, "the sandbox was suspended after a while without calls (its spec.idleSuspend), which stopped every process in it; the job's output so far is kept")
	switch {
	case errors.Is(err, errNotSuspended):
		// It stays awake, and is tried again after another idle period.
		a.opts.Logger.Error(err, "Suspending a sandbox idle for its idle period", "sandbox", id)
		a.mu.Lock()
		s.asleep = false
		if a.sandboxes[id] == s {
			a.calls.touch(id, false)
		}
		a.mu.Unlock()
		return
	case err != nil:
		a.opts.Logger.Error(err, "Stopping a sandbox idle for its idle period", "sandbox", id)
	}
	a.mu.Lock()
	s.slept, s.keptMemory = true, sus.KeptMemory
	a.noteStateLocked(s)
	a.mu.Unlock()
	if sus.KeptMemory {
		a.sleeps.WithLabelValues(sleepKeptMemory).Inc()
		a.opts.Logger.V(1).Info("Suspended a sandbox idle for its idle period, with its memory", "sandbox", id)
		return
	}
	a.sleeps.WithLabelValues(sleepStopped).Inc()
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
