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

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs"
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

// Limiter is the usage limiter: it freezes a sandbox that spent its CPU
// limit and thaws it when the limit no longer is (RunLimits), and admits
// each call to a sandbox against its limit (admitCall, chargeable). It
// owns, behind its own lock, a record per sandbox the sandboxes service
// serves (track, forget): whether it froze it, whether its held jobs are
// still to be adopted, and what its thaw finishes. It reads and marks the
// usage book through the book's methods, and reaches the sandboxes'
// lifecycle through limitSandboxes and their idleness through limitIdle.
type Limiter struct {
	sandboxes limitSandboxes
	idle      limitIdle
	usage     *UsageBook
	snaps     interface{ taking(id string) bool }
	adopter   jobAdopter
	calls     *callTracker
	jobs      *jobs.Manager
	clock     jobs.Clock
	log       logr.Logger
	// overshoot is Options.UsageLimitOvershoot, adoptTimeout
	// Options.AdoptTimeout, killTimeout Options.KillTimeout.
	overshoot                 float64
	adoptTimeout, killTimeout time.Duration
	// overshoots measures the CPU used past a limit at each freeze, and
	// freezeLatency the time the freeze took.
	overshoots, freezeLatency prometheus.Histogram
	// kick wakes the limiter for a sandbox due at once.
	kick chan struct{}

	mu      sync.Mutex
	records map[string]*limitRecord // by sandbox ID, one per sandbox served
}

// limitRecord is a sandbox's standing with the limiter: limited, frozen
// for a spent limit; unadopted, taken over frozen by this agent process,
// its held jobs adopted when it thaws; afterThaw, the kills of commands
// the freeze caught, finished after the thaw. A freeze cancels the calls
// in progress in it (callTracker.cancelAll).
type limitRecord struct {
	limited   bool
	unadopted bool
	afterThaw []func(context.Context)
	// thawed is closed when a freeze ends (setLimitedLocked).
	thawed chan struct{}
}

// limitSandboxes is what the limiter asks of the sandboxes service.
type limitSandboxes interface {
	served(id string) (sandboxView, bool)
	// servedIDs are the IDs of the sandboxes this agent serves.
	servedIDs() []string
	// tryHold takes sandbox id's transit lock if it is free, until
	// release; release is nil when it is not (a sleep, a wake, a
	// suspension runs), and ok false when the sandbox is not served.
	tryHold(id string) (_ sandboxView, release func(), ok bool)
	// noteState records sandbox id's runtime state, after a change.
	noteState(id string)
}

// limitIdle is what the limiter asks of the idle service.
type limitIdle interface {
	sleeping(id string) (asleep, paused bool)
	// frozenAsleep takes sandbox id, paused for idleness, out of its
	// sleep: frozen for its limit now.
	frozenAsleep(id string)
}

// jobAdopter is what the limiter asks of the exec service: to adopt the
// jobs a sandbox taken over frozen holds, once it thaws.
type jobAdopter interface {
	adoptJobs(ctx context.Context, be backend.Backend, spec backend.Spec) error
}

func newLimiter(sandboxes limitSandboxes, book *UsageBook, calls *callTracker, jm *jobs.Manager, opts Options) *Limiter {
	return &Limiter{sandboxes: sandboxes, usage: book, calls: calls, jobs: jm, clock: opts.Clock, log: opts.Logger,
		overshoot: opts.UsageLimitOvershoot, adoptTimeout: opts.AdoptTimeout, killTimeout: opts.KillTimeout,
		overshoots: newOvershoots(), freezeLatency: newFreezeLatency(), kick: make(chan struct{}, 1),
		records: map[string]*limitRecord{}}
}

// track starts the record of sandbox id, newly served: frozen when this
// agent process took it over frozen for its usage limit, its held jobs
// not adopted yet. forget ends it.
func (l *Limiter) track(id string, frozen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &limitRecord{unadopted: frozen}
	setLimitedLocked(r, frozen)
	l.records[id] = r
}

func (l *Limiter) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.records, id)
}

// frozen says whether sandbox id is frozen for its usage limit.
func (l *Limiter) frozen(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.records[id]
	return ok && r.limited
}

// unadopted says whether the jobs that sandboxID holds may not all be
// taken over by this agent process yet.
func (l *Limiter) unadopted(sandboxID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.records[sandboxID]
	return ok && r.unadopted
}

// adopted records that sandbox id's held jobs were adopted, or are gone
// with its processes.
func (l *Limiter) adopted(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.records[id]; ok {
		r.unadopted = false
	}
}

// freezeTakenOver keeps frozen a sandbox that the last agent process
// froze, which Reattach left paused (or started, if it had stopped): its
// held jobs are parked, and adopted when it thaws.
func (l *Limiter) freezeTakenOver(ctx context.Context, be backend.Backend, id string) bool {
	if err := be.Capabilities().Pauser.Pause(ctx, id); err != nil {
		l.log.Error(err, "Keeping frozen a sandbox frozen for its usage limit; the limiter tries again", "sandbox", id)
		return false
	}
	l.jobs.ParkSandbox(id)
	return true
}

// unfreeze forgets that sandbox id is frozen for its usage limit: it was
// stopped, restarted or suspended, and what the freeze caught with it.
func (l *Limiter) unfreeze(id string) {
	l.mu.Lock()
	r, ok := l.records[id]
	if !ok || !r.limited {
		l.mu.Unlock()
		return
	}
	setLimitedLocked(r, false)
	r.afterThaw = nil
	l.mu.Unlock()
	l.usage.setFrozen(id, false)
}

// setLimited marks sandbox id frozen for its usage limit, or not, if it
// is served.
func (l *Limiter) setLimited(id string, limited bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.records[id]; ok {
		setLimitedLocked(r, limited)
	}
}

// setLimitedLocked marks r frozen for its usage limit, or not; a call
// waiting for its thaw (awaitThaw) is let go. The caller holds l.mu.
func setLimitedLocked(r *limitRecord, limited bool) {
	switch {
	case limited && !r.limited:
		r.thawed = make(chan struct{})
	case !limited && r.limited:
		close(r.thawed)
	}
	r.limited = limited
}

// thawWait bounds how long a call waits for the limiter to thaw a sandbox
// whose period just ended, or whose limit was just raised.
const thawWait = 5 * time.Second

// awaitThaw waits, a moment, for the limiter to thaw sandbox id if it is
// frozen for a limit no longer spent (its period just ended, its limit
// was raised), so that a call then is served rather than refused.
func (l *Limiter) awaitThaw(ctx context.Context, id string) {
	l.mu.Lock()
	r, ok := l.records[id]
	if !ok || !r.limited {
		l.mu.Unlock()
		return
	}
	thawed := r.thawed
	l.mu.Unlock()
	if !l.usage.thawDue(id) {
		return
	}
	l.checkLimitSoon(id)
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
func (l *Limiter) checkLimitSoon(id string) {
	if l.usage.markDue(id) {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// RunLimits keeps the CPU limits of the sandboxes that have them until ctx
// ends: it freezes a sandbox that spent its limit, and thaws it when the
// limit no longer is. every bounds the time between two checks of a
// sandbox with a limit.
func (l *Limiter) RunLimits(ctx context.Context, every time.Duration) error {
	var thaws sync.WaitGroup // the kills finished after thaws
	defer thaws.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.kick:
		}
		next := l.checkLimits(ctx, every, &thaws)
		t.Reset(max(time.Until(next), minLimitCheck))
	}
}

// checkLimits checks the sandboxes whose time has come, limitWorkers at a
// time, and returns when the next one is due.
func (l *Limiter) checkLimits(ctx context.Context, every time.Duration, thaws *sync.WaitGroup) time.Time {
	now := l.clock.Now()
	next := now.Add(every)
	served := l.sandboxes.servedIDs()
	limited := make(map[string]bool, len(served))
	l.mu.Lock()
	for _, id := range served {
		r, ok := l.records[id]
		limited[id] = ok && r.limited
	}
	l.mu.Unlock()
	due, next := l.usage.dueAmong(limited, now, next)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, limitWorkers)
	)
	for _, id := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			at := l.enforceLimit(ctx, id, every, thaws)
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

// enforceLimit reads sandbox id's counter into the book, freezes it if it
// spent its limit or thaws it if no longer, and returns when to check it
// next.
func (l *Limiter) enforceLimit(ctx context.Context, id string, every time.Duration, thaws *sync.WaitGroup) time.Time {
	now := l.clock.Now()
	sbx, release, served := l.sandboxes.tryHold(id)
	if release == nil && served {
		// Going to sleep or waking (a checkpoint, a restore): after.
		return now.Add(50 * time.Millisecond)
	}
	if !served {
		return now.Add(every)
	}
	defer release()
	spec, be, suspended := sbx.spec, sbx.be, sbx.suspended
	limited := l.frozen(id)
	asleep, paused := l.idle.sleeping(id)
	snapshotting := l.snaps.taking(id)
	var (
		u  backend.SandboxUsage
		ok bool
	)
	if m := be.Capabilities().UsageMeter; m != nil {
		u, ok = m.SandboxUsage(id, false)
	}
	st, known := l.usage.stand(id, u, ok, l.clock.Now())
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
			// that no call wakes it (refused from the first).
			l.setLimited(id, true)
			l.idle.frozenAsleep(id)
			l.sandboxes.noteState(id)
			l.usage.setFrozen(id, true)
			break
		}
		if err := l.freeze(ctx, spec, be, p, limits, used, st.from); err != nil {
			l.log.Error(err, "Freezing a sandbox that spent its CPU limit; tried again", "sandbox", id)
			return now.Add(time.Second)
		}
	case spent && snapshotting && !limited:
		return now.Add(100 * time.Millisecond) // after the snapshot
	case !spent && limited:
		if err := l.thaw(ctx, spec, be, thaws); err != nil {
			l.log.Error(err, "Thawing a sandbox whose usage limit is no longer spent; tried again", "sandbox", id)
			return now.Add(time.Second)
		}
	}
	switch {
	case spent:
		next = minTime(next, until)
	case limits.CPUSeconds > 0 && !suspended && !asleep:
		// Before it can have spent max(remaining, overshoot) at full
		// speed: within the overshoot past the limit.
		left := max(limits.CPUSeconds-used, l.overshoot)
		dt := time.Duration(left / coresOf(spec) * float64(time.Second))
		next = minTime(next, now.Add(max(dt, minLimitCheck)))
		if !periodEnd.IsZero() {
			next = minTime(next, periodEnd)
		}
	}
	l.usage.setDue(id, next)
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

// freeze freezes sandbox spec for its spent limit: calls are refused from
// now, its processes frozen, its held jobs parked, and the calls in
// progress in it cancelled. The caller holds its transit lock.
func (l *Limiter) freeze(ctx context.Context, spec backend.Spec, be backend.Backend, p backend.Pauser, limits UsageLimits, used float64, from time.Time) error {
	id := spec.ID
	l.setLimited(id, true) // refused from here
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseTimeout)
	err := p.Pause(pctx, id)
	cancel()
	if err != nil {
		l.setLimited(id, false)
		return err
	}
	took := l.clock.Now().Sub(from)
	l.freezeLatency.Observe(took.Seconds())
	l.jobs.ParkSandbox(id)
	l.usage.setFrozen(id, true)
	l.sandboxes.noteState(id)
	l.calls.cancelAll(id, errFrozen)
	// Frozen, its counter is still: what it used past the limit.
	over := used - limits.CPUSeconds
	if m := be.Capabilities().UsageMeter; m != nil {
		if u, ok := m.SandboxUsage(id, false); ok {
			if used, ok := l.usage.periodUse(id, u, l.clock.Now()); ok {
				over = used - limits.CPUSeconds
			}
		}
	}
	l.overshoots.Observe(max(over, 0))
	l.log.Info("Froze a sandbox that spent its CPU limit", "sandbox", id, "tenant", spec.Tenant,
		"limit", limits.CPUSeconds, "period", limits.Period, "overshoot", fmt.Sprintf("%.3f", over), "took", took)
	return nil
}

// thaw thaws sandbox spec, frozen for a limit no longer spent: its jobs go
// on (adopted first, if this agent process took it over frozen), and the
// commands the freeze caught are killed, with proof, in the background
// (thaws). The caller holds its transit lock.
func (l *Limiter) thaw(ctx context.Context, spec backend.Spec, be backend.Backend, thaws *sync.WaitGroup) error {
	id := spec.ID
	if p := be.Capabilities().Pauser; p != nil {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseTimeout)
		err := p.Unpause(pctx, id)
		cancel()
		if err != nil {
			return err
		}
	}
	var (
		after     []func(context.Context)
		unadopted bool
	)
	l.mu.Lock()
	if r, ok := l.records[id]; ok {
		after, unadopted = r.afterThaw, r.unadopted
		r.afterThaw = nil
	}
	l.mu.Unlock()
	l.usage.setFrozen(id, false)
	l.jobs.UnparkSandbox(id)
	if unadopted {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.adoptTimeout)
		err := l.adopter.adoptJobs(actx, be, spec)
		cancel()
		if err != nil {
			l.log.Error(err, "Adopting the jobs of a sandbox thawed; its next Ensure tries again", "sandbox", id)
		} else {
			l.adopted(id)
		}
	}
	// Calls are served from here: its jobs are known.
	l.setLimited(id, false)
	l.sandboxes.noteState(id)
	l.log.Info("Thawed a sandbox whose usage limit is no longer spent", "sandbox", id, "tenant", spec.Tenant)
	if len(after) > 0 {
		thaws.Add(1)
		go func() {
			defer thaws.Done()
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.killTimeout)
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
func (l *Limiter) killAtThaw(id, tenant string, proc backend.Process) {
	sent, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := proc.Kill(sent)
	cancel()
	if err == nil {
		return // it had ended
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.records[id]
	if !ok || !r.limited {
		return // stopped meanwhile: nothing of it is left
	}
	r.afterThaw = append(r.afterThaw, func(ctx context.Context) {
		if err := proc.Kill(ctx); err != nil {
			l.jobs.HaltAdmission(fmt.Sprintf("killing a command of tenant %s in sandbox %s that its freeze for its usage limit caught: %v", tenant, id, err), tenant, id, err)
		}
	})
}

// releaseAtThaw ends a job whose start the sandbox's freeze cut short,
// once it thaws: the job manager never admitted it.
func (l *Limiter) releaseAtThaw(id string, release func(context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.records[id]; ok && r.limited {
		r.afterThaw = append(r.afterThaw, release)
	}
}

// refusalOf is the answer to a call that would reach sandbox sbx while it
// is frozen for its usage limit (limited), or has spent it (frozen within
// moments; one asleep is not woken); nil otherwise.
func (l *Limiter) refusalOf(sbx sandboxView, limited bool) error {
	if sbx.suspended {
		return nil // its suspension is the answer
	}
	return l.usage.refusal(sbx.spec.ID, sbx.spec.Tenant, limited, sbx.be.Capabilities().Pauser != nil)
}

// admitCall counts a call to sandbox id in progress, until done, unless
// its usage limit refuses it: it is frozen for it, or has spent it. The
// call runs with the context returned, which the sandbox's freeze
// cancels. A sandbox this agent does not serve is left to the caller's
// own checks.
func (l *Limiter) admitCall(ctx context.Context, id string) (_ context.Context, done func(), err error) {
	sbx, ok := l.sandboxes.served(id)
	if !ok {
		return ctx, func() {}, nil
	}
	l.mu.Lock()
	r := l.records[id]
	l.mu.Unlock()
	l.awaitThaw(ctx, id)
	l.mu.Lock()
	if r == nil || l.records[id] != r {
		// Removed meanwhile: as one not served.
		l.mu.Unlock()
		return ctx, func() {}, nil
	}
	if err := l.refusalOf(sbx, r.limited); err != nil {
		l.mu.Unlock()
		return nil, nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	// Under the limiter's lock, with the refusal above: a freeze that
	// comes after finds the call in progress, and cancels it.
	end := l.calls.begin(id, cancel)
	l.mu.Unlock()
	return cctx, func() {
		end()
		cancel(nil)
	}, nil
}

// chargeable refuses a call that would run something in sandbox spec when
// it has spent a limit of its period (and has the limiter freeze it now,
// if it has not yet).
func (l *Limiter) chargeable(ctx context.Context, spec backend.Spec, be backend.Backend) error {
	// Its period just ended, or its limit was raised: served once
	// thawed.
	l.awaitThaw(ctx, spec.ID)
	return l.usage.admit(spec, be, l.frozen(spec.ID))
}

// limitRefusal is the answer to a call that would reach sandbox id while
// its usage limit is spent, or it is frozen for it (nil: none), and
// whether it is frozen.
func (l *Limiter) limitRefusal(id string) (frozen bool, refusal error) {
	sbx, ok := l.sandboxes.served(id)
	if !ok {
		return false, nil
	}
	frozen = l.frozen(id)
	return frozen, l.refusalOf(sbx, frozen)
}

// frozenRefusal is the answer to a call caught in progress by the freeze
// of sandbox id.
func (l *Limiter) frozenRefusal(id string) error {
	if _, err := l.limitRefusal(id); err != nil {
		return err
	}
	return errorf(agentapi.CodeExhausted, "the sandbox was frozen for its spent usage limit while the call ran: retry after its period resets")
}

// frozenUnadopted is the answer to a call on a job not found, when the
// tenant has a sandbox this agent process took over frozen, whose jobs it
// has not adopted yet; nil otherwise.
func (l *Limiter) frozenUnadopted(tenant string) error {
	l.mu.Lock()
	var ids []string
	for id, r := range l.records {
		if r.unadopted && r.limited {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	for _, id := range ids {
		if sbx, ok := l.sandboxes.served(id); ok && sbx.spec.Tenant == tenant {
			return l.refusalOf(sbx, true)
		}
	}
	return nil
}

// frozenCount is the number of sandboxes frozen for their usage limits.
func (l *Limiter) frozenCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.limited {
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
