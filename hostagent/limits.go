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
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// Usage limits the kernel enforces. A sandbox that has spent its CPU limit
// of the period is frozen (backend.Pauser: the cgroup freezer, as an idle
// pause), not throttled: frozen, it uses no CPU at all until its period
// resets, its limit is raised or removed, or it is restarted (and then
// frozen again while the limit stays spent). Its processes and held jobs
// are kept, frozen; its jobs are parked (their polls, and every call that
// would run something in it or reach it, are refused with the limit and
// when it resets); a synchronous command it was running ends its call
// with that refusal and is killed, with proof, when the sandbox thaws.
//
// The limiter reads a limited sandbox's counter not only at the sampling
// interval but sooner as its budget shrinks: the next check comes before
// the sandbox can have spent max(remaining, overshoot) at the most its CPU
// limit lets it use, so that what it uses past the limit is at most the
// overshoot (Options.UsageLimitOvershoot) plus the freeze's latency times
// its cores. One goroutine keeps every sandbox's time of next check.

// MinUsageLimitOvershoot is the smallest overshoot the limiter takes: a
// smaller one would have it read the counters of a sandbox near its limit
// every few milliseconds, and a freeze takes longer than that anyway.
const MinUsageLimitOvershoot = 0.1

// minLimitCheck bounds how often the limiter checks one sandbox.
const minLimitCheck = 10 * time.Millisecond

// limitWorkers is how many sandboxes the limiter checks, freezes or thaws
// at once.
const limitWorkers = 4

// pauseTimeout bounds a freeze's or a thaw's call to the backend.
const pauseTimeout = 30 * time.Second

// errFrozen is the cause of the cancellation of the calls in progress in a
// sandbox the limiter froze.
var errFrozen = errors.New("the sandbox was frozen: its usage limit is spent")

// frozenCause says whether ctx ended because its sandbox was frozen.
func frozenCause(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), errFrozen)
}

// frozen says whether the book says that the agent froze sandbox id for
// its usage limit.
func (b *UsageBook) frozen(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[id]
	return ok && r.Frozen
}

// setFrozen records whether sandbox id is frozen for its usage limit, in
// the book written to disk.
func (b *UsageBook) setFrozen(id string, frozen bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[id]
	if !ok || r.Frozen == frozen {
		return
	}
	r.Frozen = frozen
	if err := b.saveLocked(); err != nil {
		b.log.Error(err, "Writing the usage book")
	}
}

// thawDue says whether the limit sandbox id is frozen for is no longer
// spent (its period ended, its limit was raised), or the book has no
// record of it.
func (b *UsageBook) thawDue(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.records[id]; ok {
		until, spent := r.exhaustedUntil()
		return !spent || !b.clock.Now().Before(until)
	}
	return true
}

// markDue has the limiter's next pass check sandbox id, if it has a limit
// or is frozen for one; known says whether the book has it.
func (b *UsageBook) markDue(id string) (known bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[id]
	if ok && (r.Limits.CPUSeconds > 0 || r.Frozen) {
		r.due = time.Time{}
	}
	return ok
}

// dueAmong is which of the sandboxes (by ID, each with whether the agent
// holds it frozen) the limiter checks now: those with a limit, or frozen
// for one, whose time has come; and when the next of the others is due,
// next at the latest.
func (b *UsageBook) dueAmong(sandboxes map[string]bool, now, next time.Time) ([]string, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var due []string
	for id, limited := range sandboxes {
		r, ok := b.records[id]
		if !ok || (r.Limits.CPUSeconds <= 0 && !r.Frozen && !limited) {
			continue
		}
		if r.due.After(now) {
			next = minTime(next, r.due)
			continue
		}
		due = append(due, id)
	}
	return due, next
}

// limitStanding is where a sandbox stands against its limit, as of a
// reading.
type limitStanding struct {
	// from is when its check was due (or the reading, for one asked at
	// once), from which a freeze's latency counts.
	from time.Time
	// spent: it spent its limit, which resets at until; used is what it
	// used in the period, which ends at periodEnd.
	spent            bool
	until, periodEnd time.Time
	limits           UsageLimits
	used             float64
}

// stand takes u (when ok), read at at, into sandbox id's record and says
// where it stands; false when the book has no record of it.
func (b *UsageBook) stand(id string, u backend.SandboxUsage, ok bool, at time.Time) (limitStanding, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, known := b.records[id]
	if !known {
		return limitStanding{}, false
	}
	if ok {
		r.update(u, at)
	}
	st := limitStanding{from: at, limits: r.Limits, used: r.total() - r.PeriodBase}
	if !r.due.IsZero() && r.due.Before(at) {
		st.from = r.due
	}
	st.until, st.spent = r.exhaustedUntil()
	st.periodEnd = r.PeriodStart.Add(r.Limits.Period)
	return st, true
}

// setDue is when the limiter checks sandbox id next.
func (b *UsageBook) setDue(id string, next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.records[id]; ok {
		r.due = next
	}
}

// periodUse takes u, read at now, into sandbox id's record and says what
// it used in the period; false when the book has no record of it.
func (b *UsageBook) periodUse(id string, u backend.SandboxUsage, now time.Time) (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[id]
	if !ok {
		return 0, false
	}
	r.update(u, now)
	return r.total() - r.PeriodBase, true
}

// refusal is the answer to a call of tenant's that would reach sandbox id
// when its limit is spent or it is frozen for it (usageRecord.refusal);
// nil when the book has no record of it.
func (b *UsageBook) refusal(id, tenant string, frozen, freezes bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[id]
	if !ok {
		return nil
	}
	return r.refusal(tenant, frozen, freezes)
}

// sampleNow takes u, read at now, into sandbox id's record and writes the
// book.
func (b *UsageBook) sampleNow(id string, u backend.SandboxUsage, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, known := b.records[id]
	if !known {
		return
	}
	r.update(u, now)
	if err := b.saveLocked(); err != nil {
		b.log.Error(err, "Writing the usage book")
	}
}

// checkpoints says whether be suspends the sandbox of spec with its
// memory (a checkpoint, which needs the sandbox to run).
func checkpoints(be backend.Backend, spec backend.Spec) bool {
	sus := be.Capabilities().Suspender
	return sus != nil && slices.Contains(sus.CheckpointIsolations(), backend.IsolationOf(spec))
}

// freezeTakenOver keeps frozen a sandbox that the last agent process
// froze, which Reattach left paused (or started, if it had stopped): its
// held jobs are parked, and adopted when it thaws.
func (a *Agent) freezeTakenOver(ctx context.Context, be backend.Backend, id string) bool {
	if err := be.Capabilities().Pauser.Pause(ctx, id); err != nil {
		a.opts.Logger.Error(err, "Keeping frozen a sandbox frozen for its usage limit; the limiter tries again", "sandbox", id)
		return false
	}
	a.jobs.ParkSandbox(id)
	return true
}

// unfreezeLocked forgets that s is frozen for its usage limit: it was
// stopped, restarted or suspended, and what the freeze caught with it.
// The caller holds a.mu.
func (a *Agent) unfreezeLocked(s *sandbox) {
	if !s.limited {
		return
	}
	setLimitedLocked(s, false)
	s.afterThaw = nil
	a.usage.setFrozen(s.spec.ID, false)
}

// setLimitedLocked marks s frozen for its usage limit, or not; a call
// waiting for its thaw (awaitThaw) is let go. The caller holds a.mu.
func setLimitedLocked(s *sandbox, limited bool) {
	switch {
	case limited && !s.limited:
		s.thawed = make(chan struct{})
	case !limited && s.limited:
		close(s.thawed)
	}
	s.limited = limited
}

// thawWait bounds how long a call waits for the limiter to thaw a sandbox
// whose period just ended, or whose limit was just raised.
const thawWait = 5 * time.Second

// awaitThaw waits, a moment, for the limiter to thaw sandbox s if it is
// frozen for a limit no longer spent (its period just ended, its limit
// was raised), so that a call then is served rather than refused.
func (a *Agent) awaitThaw(ctx context.Context, s *sandbox) {
	a.mu.Lock()
	if !s.limited {
		a.mu.Unlock()
		return
	}
	thawed, id := s.thawed, s.spec.ID
	a.mu.Unlock()
	if !a.usage.thawDue(id) {
		return
	}
	a.checkLimitSoon(id)
	t := time.NewTimer(thawWait)
	defer t.Stop()
	select {
	case <-thawed:
	case <-t.C:
	case <-ctx.Done():
	}
}

// checkLimitSoon has the limiter check sandbox id at once, if it has a
// limit or is frozen for one.
func (a *Agent) checkLimitSoon(id string) {
	if a.usage.markDue(id) {
		select {
		case a.limitKick <- struct{}{}:
		default:
		}
	}
}

// RunLimits keeps the CPU limits of the sandboxes that have them until ctx
// ends: it freezes a sandbox that spent its limit, and thaws it when the
// limit no longer is. every bounds the time between two checks of a
// sandbox with a limit.
func (a *Agent) RunLimits(ctx context.Context, every time.Duration) error {
	var thaws sync.WaitGroup // the kills finished after thaws
	defer thaws.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.limitKick:
		}
		next := a.checkLimits(ctx, every, &thaws)
		t.Reset(max(time.Until(next), minLimitCheck))
	}
}

// checkLimits checks the sandboxes whose time has come, limitWorkers at a
// time, and returns when the next one is due.
func (a *Agent) checkLimits(ctx context.Context, every time.Duration, thaws *sync.WaitGroup) time.Time {
	now := a.clock.Now()
	next := now.Add(every)
	a.mu.Lock()
	served := make(map[string]*sandbox, len(a.sandboxes))
	limited := make(map[string]bool, len(a.sandboxes))
	for id, s := range a.sandboxes {
		served[id], limited[id] = s, s.limited
	}
	a.mu.Unlock()
	ids, next := a.usage.dueAmong(limited, now, next)
	due := make([]*sandbox, 0, len(ids))
	for _, id := range ids {
		due = append(due, served[id])
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, limitWorkers)
	)
	for _, s := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			at := a.enforceLimit(ctx, s, every, thaws)
			mu.Lock()
			next = minTime(next, at)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return next
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// enforceLimit reads sandbox s's counter into the book, freezes it if it
// spent its limit or thaws it if no longer, and returns when to check it
// next.
func (a *Agent) enforceLimit(ctx context.Context, s *sandbox, every time.Duration, thaws *sync.WaitGroup) time.Time {
	now := a.clock.Now()
	if !s.transit.TryLock() {
		// Going to sleep or waking (a checkpoint, a restore): after.
		return now.Add(50 * time.Millisecond)
	}
	defer s.transit.Unlock()
	a.mu.Lock()
	served := a.sandboxes[s.spec.ID] == s
	spec, be := s.spec, s.be
	limited, suspended, asleep, paused := s.limited, s.suspended, s.asleep, s.paused
	snapshotting := a.snaps.taking(spec.ID)
	a.mu.Unlock()
	if !served {
		return now.Add(every)
	}
	id := spec.ID
	var (
		u  backend.SandboxUsage
		ok bool
	)
	if m := be.Capabilities().UsageMeter; m != nil {
		u, ok = m.SandboxUsage(id, false)
	}
	st, known := a.usage.stand(id, u, ok, a.clock.Now())
	if !known {
		return now.Add(every)
	}
	spent, until, limits, used, periodEnd := st.spent, st.until, st.limits, st.used, st.periodEnd

	p := be.Capabilities().Pauser
	next := now.Add(every)
	switch {
	case spent && !limited && p != nil && !suspended && !snapshotting && (!asleep || paused):
		if asleep {
			// Paused for idleness already: frozen for its limit now, so
			// that no call wakes it.
			a.mu.Lock()
			s.asleep, s.paused = false, false
			setLimitedLocked(s, true)
			a.noteStateLocked(s)
			a.mu.Unlock()
			a.usage.setFrozen(id, true)
			break
		}
		if err := a.freeze(ctx, s, spec, p, limits, used, st.from); err != nil {
			a.opts.Logger.Error(err, "Freezing a sandbox that spent its CPU limit; tried again", "sandbox", id)
			return now.Add(time.Second)
		}
	case spent && snapshotting && !limited:
		return now.Add(100 * time.Millisecond) // after the snapshot
	case !spent && limited:
		if err := a.thaw(ctx, s, spec, be, thaws); err != nil {
			a.opts.Logger.Error(err, "Thawing a sandbox whose usage limit is no longer spent; tried again", "sandbox", id)
			return now.Add(time.Second)
		}
	}
	switch {
	case spent:
		next = minTime(next, until)
	case limits.CPUSeconds > 0 && !suspended && !asleep:
		// Before it can have spent max(remaining, overshoot) at full
		// speed: within the overshoot past the limit.
		left := max(limits.CPUSeconds-used, a.opts.UsageLimitOvershoot)
		dt := time.Duration(left / coresOf(spec) * float64(time.Second))
		next = minTime(next, now.Add(max(dt, minLimitCheck)))
		if !periodEnd.IsZero() {
			next = minTime(next, periodEnd)
		}
	}
	a.usage.setDue(id, next)
	return next
}

// coresOf is the CPU a sandbox may use at most, in cores: its limit, or
// the node's when it has none.
func coresOf(spec backend.Spec) float64 {
	if spec.Resources.CPUMillis > 0 {
		return float64(spec.Resources.CPUMillis) / 1000
	}
	return float64(runtime.NumCPU())
}

// freeze freezes sandbox s for its spent limit: calls are refused from
// now, its processes frozen, its held jobs parked, and the calls in
// progress in it cancelled. The caller holds s.transit.
func (a *Agent) freeze(ctx context.Context, s *sandbox, spec backend.Spec, p backend.Pauser, limits UsageLimits, used float64, from time.Time) error {
	id := spec.ID
	a.mu.Lock()
	setLimitedLocked(s, true) // refused from here
	a.mu.Unlock()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseTimeout)
	err := p.Pause(pctx, id)
	cancel()
	if err != nil {
		a.mu.Lock()
		setLimitedLocked(s, false)
		a.mu.Unlock()
		return err
	}
	took := a.clock.Now().Sub(from)
	a.freezeLatency.Observe(took.Seconds())
	a.jobs.ParkSandbox(id)
	a.usage.setFrozen(id, true)
	a.mu.Lock()
	a.noteStateLocked(s)
	a.mu.Unlock()
	a.calls.cancelAll(id, errFrozen)
	// Frozen, its counter is still: what it used past the limit.
	over := used - limits.CPUSeconds
	if m := s.be.Capabilities().UsageMeter; m != nil {
		if u, ok := m.SandboxUsage(id, false); ok {
			if used, ok := a.usage.periodUse(id, u, a.clock.Now()); ok {
				over = used - limits.CPUSeconds
			}
		}
	}
	a.overshoots.Observe(max(over, 0))
	a.opts.Logger.Info("Froze a sandbox that spent its CPU limit", "sandbox", id, "tenant", spec.Tenant,
		"limit", limits.CPUSeconds, "period", limits.Period, "overshoot", fmt.Sprintf("%.3f", over), "took", took)
	return nil
}

// thaw thaws sandbox s, frozen for a limit no longer spent: its jobs go
// on (adopted first, if this agent process took it over frozen), and the
// commands the freeze caught are killed, with proof, in the background
// (thaws). The caller holds s.transit.
func (a *Agent) thaw(ctx context.Context, s *sandbox, spec backend.Spec, be backend.Backend, thaws *sync.WaitGroup) error {
	id := spec.ID
	if p := be.Capabilities().Pauser; p != nil {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseTimeout)
		err := p.Unpause(pctx, id)
		cancel()
		if err != nil {
			return err
		}
	}
	a.mu.Lock()
	after, unadopted := s.afterThaw, s.unadopted
	s.afterThaw = nil
	a.mu.Unlock()
	a.usage.setFrozen(id, false)
	a.jobs.UnparkSandbox(id)
	if unadopted {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.AdoptTimeout)
		err := a.execs.adoptJobs(actx, be, spec)
		cancel()
		if err != nil {
			a.opts.Logger.Error(err, "Adopting the jobs of a sandbox thawed; its next Ensure tries again", "sandbox", id)
		} else {
			a.mu.Lock()
			s.unadopted = false
			a.mu.Unlock()
		}
	}
	// Calls are served from here: its jobs are known.
	a.mu.Lock()
	setLimitedLocked(s, false)
	a.noteStateLocked(s)
	a.mu.Unlock()
	a.opts.Logger.Info("Thawed a sandbox whose usage limit is no longer spent", "sandbox", id, "tenant", spec.Tenant)
	if len(after) > 0 {
		thaws.Add(1)
		go func() {
			defer thaws.Done()
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.KillTimeout)
			defer cancel()
			for _, f := range after {
				f(kctx)
			}
		}()
	}
	return nil
}

// killAtThaw ends a synchronous command of sandbox id that its freeze
// caught: the kill is sent now and reaches it when the sandbox thaws, when
// its proof is waited for; a kill it cannot prove halts the sandbox's job
// admission, as any.
func (a *Agent) killAtThaw(id, tenant string, proc backend.Process) {
	sent, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := proc.Kill(sent)
	cancel()
	if err == nil {
		return // it had ended
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sandboxes[id]
	if !ok || !s.limited {
		return // stopped meanwhile: nothing of it is left
	}
	s.afterThaw = append(s.afterThaw, func(ctx context.Context) {
		if err := proc.Kill(ctx); err != nil {
			a.jobs.HaltAdmission(fmt.Sprintf("killing a command of tenant %s in sandbox %s that its freeze for its usage limit caught: %v", tenant, id, err), tenant, id, err)
		}
	})
}

// releaseAtThaw ends a job whose start the sandbox's freeze cut short,
// once it thaws: the job manager never admitted it.
func (a *Agent) releaseAtThaw(id string, release func(context.Context)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sandboxes[id]; ok && s.limited {
		s.afterThaw = append(s.afterThaw, release)
	}
}

// limitRefusalLocked is the answer to a call that would reach sandbox s
// while it is frozen for its usage limit, or has spent it (frozen within
// moments; one asleep is not woken); nil otherwise. The caller holds a.mu.
func (a *Agent) limitRefusalLocked(s *sandbox) error {
	if s.suspended {
		return nil // its suspension is the answer
	}
	return a.usage.refusal(s.spec.ID, s.spec.Tenant, s.limited, s.be.Capabilities().Pauser != nil)
}

// chargeable refuses a call that would run something in sandbox spec when
// it has spent a limit of its period (and has the limiter freeze it now,
// if it has not yet).
func (a *Agent) chargeable(ctx context.Context, spec backend.Spec, be backend.Backend) error {
	a.mu.Lock()
	s, ok := a.sandboxes[spec.ID]
	a.mu.Unlock()
	frozen := false
	if ok {
		// Its period just ended, or its limit was raised: served once
		// thawed.
		a.awaitThaw(ctx, s)
		a.mu.Lock()
		frozen = s.limited
		a.mu.Unlock()
	}
	return a.usage.admit(spec, be, frozen)
}

// limitRefusal is the answer to a call that would reach sandbox id while
// its usage limit is spent, or it is frozen for it (nil: none), and
// whether it is frozen.
func (a *Agent) limitRefusal(id string) (frozen bool, refusal error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sandboxes[id]; ok {
		return s.limited, a.limitRefusalLocked(s)
	}
	return false, nil
}

// frozenRefusal is the answer to a call caught in progress by the freeze
// of sandbox id.
func (a *Agent) frozenRefusal(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sandboxes[id]; ok {
		if err := a.limitRefusalLocked(s); err != nil {
			return err
		}
	}
	return errorf(agentapi.CodeExhausted, "the sandbox was frozen for its spent usage limit while the call ran: retry after its period resets")
}

// unadopted says whether the jobs that sandboxID holds may not all be
// taken over by this agent process yet.
func (a *Agent) unadopted(sandboxID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sandboxes[sandboxID]
	return ok && s.unadopted
}

// frozenUnadopted is the answer to a call on a job not found, when the
// tenant has a sandbox this agent process took over frozen, whose jobs it
// has not adopted yet; nil otherwise.
func (a *Agent) frozenUnadopted(tenant string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sandboxes {
		if s.spec.Tenant == tenant && s.unadopted && s.limited {
			return a.limitRefusalLocked(s)
		}
	}
	return nil
}

// sampleNow reads sandbox id's counters into the book at once (after a
// stop, whose last count the backend kept) and writes the book.
func (a *Agent) sampleNow(be backend.Backend, id string) {
	m := be.Capabilities().UsageMeter
	if m == nil {
		return
	}
	u, ok := m.SandboxUsage(id, false)
	if !ok {
		return
	}
	a.usage.sampleNow(id, u, a.clock.Now())
}

// frozenCount is the number of sandboxes frozen for their usage limits.
func (a *Agent) frozenCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, s := range a.sandboxes {
		if s.limited {
			n++
		}
	}
	return n
}

func newOvershoots() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "playground_usage_limit_overshoot_cpu_seconds",
		Help:    "CPU time a sandbox used past its spent CPU limit when the agent froze it (its count is the number of freezes); bounded by --usage-limit-overshoot plus its cores times the freeze's latency.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10},
	})
}

func newFreezeLatency() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "playground_usage_limit_freeze_seconds",
		Help:    "Time from when the agent was due to check a sandbox that had spent its CPU limit to its freeze done (the check's lateness, the counter's read and the runtime's pause): the sandbox's cores times this is what it may use past --usage-limit-overshoot.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	})
}
