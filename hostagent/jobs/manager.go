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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/guestapi/outring"
)

// Manager runs the jobs of one host agent (one backend). It is safe for
// concurrent use.
//
// One mutex guards all of its state, including the rings: every bound is
// checked and applied in the same critical section as the change it bounds.
// Critical sections are short and bounded: a Sink write copies at most
// RingBytes+ChunkBytes bytes, a poll at most MaxPollBytes; backend calls
// (start, Wait, Kill) are never made with the lock held.
type Manager struct {
	limits Limits
	clock  Clock
	log    logr.Logger

	// ctx is the parent of every Wait and Kill the manager makes; Close
	// cancels it to abandon them.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts what the manager has in flight (starts, kills, the
	// watchers of held jobs); Close waits for it.
	wg sync.WaitGroup

	mu               sync.Mutex
	jobs             map[string]*job
	activeByTenant   map[string]int
	retainedByTenant map[string]int
	active           int
	// halts holds, by sandbox ID, the sandboxes whose job admission is
	// halted because a kill there could not be proven.
	halts map[string]*halt
	// keys holds the retained jobs started with an idempotency key
	// (WithKey), by tenant and key: at most one entry a job, removed
	// with it, so the retained bounds bound it.
	keys map[jobKey]*job
	// parked holds, by sandbox ID, the sandboxes suspended with their
	// memory: a channel closed when they resume.
	parked  map[string]*parking
	closed  bool
	sweeper Timer
	stats   Stats
	// onEnd is told of each job's end (WithOnEnd).
	onEnd func(Ended)
}

// jobKey is a tenant's idempotency key.
type jobKey struct{ tenant, key string }

// halt is one sandbox's halted admission.
type halt struct {
	status AdmissionStatus
	cause  error
}

// job is one job's state, guarded by Manager.mu.
type job struct {
	id, tenant, sandbox string
	command             string // WithCommand's summary
	// key and request are the job's idempotency key and the request it
	// was given to (WithKey), or empty.
	key, request string
	// input says the job takes input (WithInput, or a terminal); tty is
	// its terminal's size, as last set (WithTTY, Resize), or nil.
	input bool
	tty   *TTYSize
	state State
	// starting is true from admission until the start func returns; such a
	// job holds capacity but is invisible to lookups. started is closed
	// when it turns false, or the start failed.
	starting bool
	started  chan struct{}
	// held is the connection to the job's holder, in its sandbox, which
	// keeps the job's processes and output.
	held *heldConn
	// oomAtStart and oomCount are a held job's sandbox's OOM kills when
	// it started, and how to count them now (WithOOMCounter).
	oomAtStart *uint64
	oomCount   func() (uint64, bool)

	timeout Timer

	// Kill bookkeeping: cause is why the job is killed, killing that the
	// kill is in flight.
	cause   killCause
	killing bool

	result    *Result
	startedAt time.Time
	endedAt   time.Time
	lastPoll  time.Time

	// ran is the time the job ran up to runSince; runSince, when set, is
	// since when it runs: zero while its sandbox is parked (suspended
	// with its memory, or frozen), and once it ended.
	ran      time.Duration
	runSince time.Time
	// takenOver: another agent process took the job over, and accounts
	// for its run. adopted: this one took it over from an earlier one.
	takenOver, adopted bool

	// doneSent: a poll has returned Done; acked: a later one acknowledged it.
	doneSent bool
	acked    bool

	// done is closed when the job turns terminal.
	done chan struct{}
}

type killCause int

const (
	causeCancel killCause = iota + 1
	causeTimeout
)

// Option configures a Manager.
type Option func(*Manager)

// WithLogger makes the manager log the detail of a job's internal failure
// (a backend's error, which may name the node's paths) under the ID that
// the job's result gives its tenant instead. Without it the detail is
// dropped.
func WithLogger(l logr.Logger) Option {
	return func(m *Manager) {
		if l.GetSink() != nil {
			m.log = l
		}
	}
}

// WithOnEnd has the manager call f as each job ends, with the time it
// ran, for the agent's account of its sandbox's usage; not for a job
// that another agent process took over (that one calls its own). f is
// called with the manager's lock held: it must return at once and not
// call the manager.
func WithOnEnd(f func(Ended)) Option {
	return func(m *Manager) { m.onEnd = f }
}

// New returns a manager with the given limits (zero fields take their
// defaults) and clock (nil means the wall clock). Close it to stop its
// background work.
func New(limits Limits, clock Clock, opts ...Option) (*Manager, error) {
	limits = limits.withDefaults()
	if err := limits.validate(); err != nil {
		return nil, err
	}
	if clock == nil {
		clock = RealClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		limits:           limits,
		clock:            clock,
		ctx:              ctx,
		cancel:           cancel,
		jobs:             make(map[string]*job),
		activeByTenant:   make(map[string]int),
		retainedByTenant: make(map[string]int),
		halts:            make(map[string]*halt),
		keys:             make(map[jobKey]*job),
		parked:           make(map[string]*parking),
		log:              logr.Discard(),
	}
	for _, o := range opts {
		o(m)
	}
	m.mu.Lock()
	m.sweeper = clock.AfterFunc(limits.SweepInterval, m.sweepTick)
	m.mu.Unlock()
	return m, nil
}

// isClosed says whether Close was called.
func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Limits returns the manager's effective limits.
func (m *Manager) Limits() Limits { return m.limits }

// reserve admits a job for tenant in sandboxID and inserts it, starting:
// it holds capacity from now on. The caller starts it, then calls
// unreserveLocked if that failed, and m.wg.Done in any case. A start
// whose key names a job the tenant holds gets that job's state instead
// (prior), once the job has started: the start of the same key in
// flight is waited for, within ctx.
func (m *Manager) reserve(ctx context.Context, tenant, sandboxID string, o *startOptions) (j *job, prior *JobInfo, err error) {
	if tenant == "" {
		return nil, nil, errors.New("jobs: empty tenant")
	}
	for {
		var starting <-chan struct{}
		j, prior, starting, err = m.reserveOnce(ctx, tenant, sandboxID, o)
		if starting == nil {
			return j, prior, err
		}
		select {
		case <-starting:
		case <-ctx.Done():
		}
	}
}

// reserveOnce is one attempt of reserve: starting, when not nil, is the
// start of the key's job to wait for before the next.
func (m *Manager) reserveOnce(ctx context.Context, tenant, sandboxID string, o *startOptions) (*job, *JobInfo, <-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, nil, ErrClosed
	}
	if k := m.keyedLocked(tenant, o.key); k != nil {
		switch {
		case k.request != o.request:
			return nil, nil, nil, &KeyConflictError{Key: o.key, JobID: k.id}
		case k.starting:
			return nil, nil, k.started, nil
		}
		info := k.infoLocked()
		return nil, &info, nil, nil
	}
	if err := m.admitLocked(tenant, sandboxID); err != nil {
		m.stats.Refused++
		return nil, nil, nil, err
	}
	j := m.insertLocked(m.newIDLocked(), tenant, sandboxID, m.clock.Now())
	j.command = o.command
	m.keyLocked(j, o.key, o.request)
	return j, nil, nil, nil
}

// keyedLocked is the job that tenant's key names, if it is retained:
// one acknowledged or expired is recycled, its key free again.
func (m *Manager) keyedLocked(tenant, key string) *job {
	if key == "" {
		return nil
	}
	j := m.keys[jobKey{tenant, key}]
	if j == nil {
		return nil
	}
	if j.state.Terminal() && (j.acked || m.expiredLocked(j, m.clock.Now())) {
		m.recycleLocked(j)
		return nil
	}
	return j
}

// keyLocked gives j its idempotency key, unless it is empty or another
// job of the tenant has it (two adopted records that say the same).
func (m *Manager) keyLocked(j *job, key, request string) {
	k := jobKey{j.tenant, key}
	if key == "" || m.keys[k] != nil {
		return
	}
	j.key, j.request = key, request
	m.keys[k] = j
}

// unkeyLocked removes j's key from the index.
func (m *Manager) unkeyLocked(j *job) {
	k := jobKey{j.tenant, j.key}
	if j.key != "" && m.keys[k] == j {
		delete(m.keys, k)
	}
}

// startedLocked ends j's start: it is visible to lookups, and the starts
// of its key that waited for it see it.
func (j *job) startedLocked() {
	if j.starting {
		j.starting = false
		close(j.started)
	}
}

// insertLocked inserts a starting job and counts it against the bounds; it
// adds to m.wg for the caller's start.
func (m *Manager) insertLocked(id, tenant, sandboxID string, started time.Time) *job {
	j := &job{
		id:        id,
		tenant:    tenant,
		sandbox:   sandboxID,
		state:     StateRunning,
		starting:  true,
		started:   make(chan struct{}),
		startedAt: started,
		lastPoll:  m.clock.Now(),
		done:      make(chan struct{}),
	}
	if m.parked[sandboxID] == nil {
		j.runSince = started
	}
	m.jobs[j.id] = j
	m.activeByTenant[tenant]++
	m.retainedByTenant[tenant]++
	m.active++
	m.wg.Add(1)
	return j
}

// unreserveLocked removes a job whose start failed, and its counts.
func (m *Manager) unreserveLocked(j *job) {
	m.active--
	decr(m.activeByTenant, j.tenant)
	decr(m.retainedByTenant, j.tenant)
	delete(m.jobs, j.id)
	m.unkeyLocked(j)
	close(j.started)
}

// callStart runs a start func, turning a panic into an error so that the
// reservation is released.
func callStart[T any](start func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, fmt.Errorf("start panicked: %v", r)
		}
	}()
	return start()
}

func decr(counts map[string]int, k string) {
	if counts[k] <= 1 {
		delete(counts, k) // keep the maps as small as the live tenants
		return
	}
	counts[k]--
}

// admitLocked is the admission check. Active bounds are checked first: their
// advice (wait or cancel) is what helps when both are hit. Retained bounds
// first try to free capacity by recycling acknowledged and expired jobs,
// then, for the node-wide bound, by taking a slot from the tenant that holds
// the most (shareLocked); nothing active is ever touched.
func (m *Manager) admitLocked(tenant, sandboxID string) error {
	l := m.limits
	switch {
	case m.closed:
		return ErrClosed
	case m.halts[sandboxID] != nil:
		h := m.halts[sandboxID]
		return &HaltedError{SandboxID: sandboxID, Since: h.status.Since, Cause: h.cause}
	case m.activeByTenant[tenant] >= l.ActivePerTenant:
		return &LimitError{Bound: BoundActivePerTenant, Tenant: tenant, Count: m.activeByTenant[tenant], Limit: l.ActivePerTenant}
	case m.active >= l.ActivePerAgent:
		return &LimitError{Bound: BoundActivePerAgent, Tenant: tenant, Count: m.active, Limit: l.ActivePerAgent}
	}
	if m.retainedByTenant[tenant] >= l.RetainedPerTenant || len(m.jobs) >= l.RetainedPerAgent {
		m.sweepLocked()
	}
	if m.retainedByTenant[tenant] >= l.RetainedPerTenant {
		return &LimitError{Bound: BoundRetainedPerTenant, Tenant: tenant, Count: m.retainedByTenant[tenant], Limit: l.RetainedPerTenant,
			TTL: l.TerminalTTL, RetryAfter: m.nextExpiryLocked(tenant)}
	}
	if len(m.jobs) >= l.RetainedPerAgent && !m.shareLocked(tenant) {
		return &LimitError{Bound: BoundRetainedPerAgent, Tenant: tenant, Count: len(m.jobs), Limit: l.RetainedPerAgent,
			TTL: l.TerminalTTL, RetryAfter: m.nextExpiryLocked("")}
	}
	return nil
}

// shareLocked makes room for tenant when the node's retained slots are all
// taken, by the fair-share rule: the tenant holding the most retained jobs
// gives up its oldest terminal one (its result unread) if it holds at least
// two more than tenant. Repeated, this converges on equal shares among the
// tenants that want slots, so that no tenant can keep another out by
// leaving results unread. Running jobs are never taken.
func (m *Manager) shareLocked(tenant string) bool {
	top, most := "", 0
	for t, n := range m.retainedByTenant {
		if t != tenant && (n > most || (n == most && t < top)) {
			top, most = t, n
		}
	}
	if most < m.retainedByTenant[tenant]+2 {
		return false
	}
	var oldest *job
	for _, j := range m.jobs {
		if j.tenant == top && j.state.Terminal() && (oldest == nil || j.endedAt.Before(oldest.endedAt)) {
			oldest = j
		}
	}
	if oldest == nil {
		return false
	}
	m.recycleLocked(oldest)
	m.stats.Reclaimed++
	return true
}

// nextExpiryLocked is how long until the first of tenant's terminal jobs
// (every tenant's when tenant is empty) expires, or zero if none is
// terminal yet.
func (m *Manager) nextExpiryLocked(tenant string) time.Duration {
	now := m.clock.Now()
	var next time.Duration
	for _, j := range m.jobs {
		if !j.state.Terminal() || (tenant != "" && j.tenant != tenant) {
			continue
		}
		last := j.endedAt
		if j.lastPoll.After(last) {
			last = j.lastPoll
		}
		if d := last.Add(m.limits.TerminalTTL).Sub(now); next == 0 || d < next {
			next = max(d, time.Second)
		}
	}
	return next
}

// newIDLocked returns a fresh job ID (agentapi.NewJobID). IDs are
// unguessable, so knowing one proves it was handed out; the collision check
// only guards the live map, since a repeat of a recycled ID is as likely as
// guessing one.
func (m *Manager) newIDLocked() string {
	for {
		id := agentapi.NewJobID()
		if _, dup := m.jobs[id]; !dup {
			return id
		}
	}
}

// internalErrorLocked is what a job's result tells its tenant of an
// internal failure: what happened, and the ID under which the detail is
// logged.
func (m *Manager) internalErrorLocked(j *job, what string, err error) string {
	id := agentapi.NewErrorID()
	m.log.Error(err, "A job failed inside the agent", "errorID", id, "job", j.id, "tenant", j.tenant, "sandbox", j.sandbox)
	return fmt.Sprintf("%s (internal error %s: give the operator this ID if it recurs)", what, id)
}

// lookupLocked finds tenant's job. Unknown, malformed, starting, recycled,
// expired and other tenants' jobs all give the same error.
func (m *Manager) lookupLocked(tenant, id string) (*job, error) {
	if m.closed {
		return nil, ErrClosed
	}
	if !agentapi.ValidJobID(id) {
		return nil, notFound(id)
	}
	j := m.jobs[id]
	if j == nil || j.starting || j.tenant != tenant {
		return nil, notFound(id)
	}
	if m.expiredLocked(j, m.clock.Now()) {
		m.recycleLocked(j)
		return nil, notFound(id)
	}
	return j, nil
}

// expiredLocked is the TTL rule: a terminal job expires TerminalTTL after
// the later of when it became terminal and when it was last polled.
func (m *Manager) expiredLocked(j *job, now time.Time) bool {
	if !j.state.Terminal() {
		return false
	}
	last := j.endedAt
	if j.lastPoll.After(last) {
		last = j.lastPoll
	}
	return !now.Before(last.Add(m.limits.TerminalTTL))
}

// sweepLocked recycles every acknowledged or expired terminal job.
func (m *Manager) sweepLocked() {
	now := m.clock.Now()
	for _, j := range m.jobs {
		if j.state.Terminal() && (j.acked || m.expiredLocked(j, now)) {
			m.recycleLocked(j)
		}
	}
}

func (m *Manager) sweepTick() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.sweepLocked()
	m.sweeper = m.clock.AfterFunc(m.limits.SweepInterval, m.sweepTick)
}

func (m *Manager) recycleLocked(j *job) {
	delete(m.jobs, j.id)
	m.unkeyLocked(j)
	decr(m.retainedByTenant, j.tenant)
	if j.held != nil {
		j.held.release()
	}
	m.stats.Recycled++
}

// Poll returns tenant's job's output after cursor ("" for the start), at
// most maxBytes of it (<= 0 means Limits.DefaultPollBytes; capped at
// Limits.MaxPollBytes). When there is nothing new and the job is active, it
// waits up to wait (capped at Limits.MaxPollWait) for output or a state
// change; a wait that times out returns an empty page, not an error, while
// ctx ending returns ctx's error.
//
// Errors: *NotFoundError (also for other tenants' jobs), *CursorError,
// ErrClosed.
func (m *Manager) Poll(ctx context.Context, tenant, jobID, cursorText string, maxBytes int, wait time.Duration) (PollResult, error) {
	cur, err := outring.ParseCursor(cursorText)
	if err != nil {
		return PollResult{}, err
	}
	if maxBytes <= 0 {
		maxBytes = m.limits.DefaultPollBytes
	}
	maxBytes = min(maxBytes, m.limits.MaxPollBytes)
	wait = min(max(wait, 0), m.limits.MaxPollWait)

	m.mu.Lock()
	j, err := m.lookupLocked(tenant, jobID)
	m.mu.Unlock()
	if err != nil {
		return PollResult{}, err
	}
	return m.pollHeld(ctx, j, cur, maxBytes, wait)
}

// doneLocked completes a page: whether it is Done, the acknowledgement of
// the final page, and the job's state.
func (m *Manager) doneLocked(j *job, res *PollResult, done bool) {
	res.Done = done
	if done {
		// A page with nothing new, after a page that was already Done: the
		// client has the final page.
		if j.doneSent && len(res.Chunks) == 0 && res.Gap == nil {
			j.acked = true
		}
		j.doneSent = true
	}
	res.Job = j.infoLocked()
}

// Cancel asks the backend to kill tenant's job. The job is "cancelling" at
// once; Cancel then waits until it is terminal or ctx ends, and returns the
// job's state at that moment (possibly still cancelling: the kill goes on in
// the background). Cancelling a terminal job changes nothing and returns its
// state. Errors: *NotFoundError (also for other tenants' jobs), ErrClosed.
func (m *Manager) Cancel(ctx context.Context, tenant, jobID string) (JobInfo, error) {
	m.mu.Lock()
	j, err := m.lookupLocked(tenant, jobID)
	if err != nil {
		m.mu.Unlock()
		return JobInfo{}, err
	}
	if j.state.Terminal() {
		info := j.infoLocked()
		m.mu.Unlock()
		return info, nil
	}
	m.beginKillLocked(j, causeCancel)
	m.mu.Unlock()

	select {
	case <-j.done:
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return j.infoLocked(), nil
}

// timedOut is the job timeout's timer callback.
func (m *Manager) timedOut(j *job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j.state == StateRunning {
		m.beginKillLocked(j, causeTimeout)
	}
}

// beginKillLocked moves a running job to cancelling and kills it in a
// goroutine owned by the manager. A job already cancelling keeps its first
// cause.
func (m *Manager) beginKillLocked(j *job, cause killCause) {
	if j.state != StateRunning || j.held == nil {
		return
	}
	j.state = StateCancelling
	j.cause = cause
	j.killing = true
	m.wg.Add(1)
	go m.killHeld(j)
}

// finishLocked turns j terminal: it releases its active capacity (it stays
// retained until recycled) and stops its timers.
func (m *Manager) finishLocked(j *job, state State, r *Result) {
	j.state = state
	j.result = r
	j.endedAt = m.clock.Now()
	j.pauseLocked(j.endedAt)
	if j.adopted && r != nil && r.Duration > 0 && r.Duration < j.ran {
		// Its holder's measure, from its start to its end: shorter when
		// it ended while no agent followed it.
		j.ran = r.Duration
	}
	if m.onEnd != nil && !j.takenOver {
		m.onEnd(Ended{ID: j.id, Tenant: j.tenant, SandboxID: j.sandbox, Ran: j.ran})
	}
	m.active--
	decr(m.activeByTenant, j.tenant)
	if j.timeout != nil {
		j.timeout.Stop()
	}
	close(j.done)
}

func (j *job) infoLocked() JobInfo {
	info := JobInfo{
		ID:        j.id,
		Tenant:    j.tenant,
		SandboxID: j.sandbox,
		Command:   j.command,
		State:     j.state,
		StartedAt: j.startedAt,
		EndedAt:   j.endedAt,
		Input:     j.input,
	}
	if j.tty != nil {
		t := *j.tty
		info.TTY = &t
	}
	if j.result != nil {
		r := *j.result
		info.Result = &r
	}
	return info
}

// List returns the tenant's jobs in sandboxID that it can still poll or
// cancel (running, and ended but not yet acknowledged or expired: those
// that count against its retained bound), oldest first.
func (m *Manager) List(tenant, sandboxID string) []JobInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.sweepLocked()
	var out []JobInfo
	for _, j := range m.jobs {
		if j.tenant == tenant && j.sandbox == sandboxID && !j.starting {
			out = append(out, j.infoLocked())
		}
	}
	slices.SortFunc(out, func(a, b JobInfo) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// pauseLocked banks the time j ran until now: it runs no more (its
// sandbox parked, or it ended).
func (j *job) pauseLocked(now time.Time) {
	if !j.runSince.IsZero() {
		j.ran += max(now.Sub(j.runSince), 0)
		j.runSince = time.Time{}
	}
}

// ranLocked is the time j ran until now.
func (j *job) ranLocked(now time.Time) time.Duration {
	if j.runSince.IsZero() {
		return j.ran
	}
	return j.ran + max(now.Sub(j.runSince), 0)
}

// RunTime is the time the jobs of a sandbox that have not ended ran so
// far, summed: each from its start, less the time the sandbox was parked
// (the jobs that ended are told to WithOnEnd's func).
func (m *Manager) RunTime(sandboxID string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var d time.Duration
	for _, j := range m.jobs {
		if j.sandbox == sandboxID && !j.starting && !j.state.Terminal() {
			d += j.ranLocked(now)
		}
	}
	return d
}

// SandboxOf is the sandbox that holds the tenant's job jobID, if the
// tenant has such a job.
func (m *Manager) SandboxOf(tenant, jobID string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.lookupLocked(tenant, jobID)
	if err != nil {
		return "", false
	}
	return j.sandbox, true
}

// Running counts the jobs of a sandbox that have not ended (starting ones
// included).
func (m *Manager) Running(sandboxID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, j := range m.jobs {
		if j.sandbox == sandboxID && !j.state.Terminal() {
			n++
		}
	}
	return n
}

// Stats returns the current counters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Active = m.active
	s.Retained = len(m.jobs)
	for _, j := range m.jobs {
		if j.held != nil {
			s.Held++
		}
	}
	s.HaltedSandboxes = len(m.halts)
	return s
}

// AdmissionStatus reports whether admission is halted in a sandbox, and why.
func (m *Manager) AdmissionStatus(sandboxID string) AdmissionStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.halts[sandboxID]; h != nil {
		return h.status
	}
	return AdmissionStatus{}
}

// Halts lists the sandboxes whose admission is halted, oldest first.
func (m *Manager) Halts() []AdmissionStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]AdmissionStatus, 0, len(m.halts))
	for _, h := range m.halts {
		out = append(out, h.status)
	}
	slices.SortFunc(out, func(a, b AdmissionStatus) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.SandboxID, b.SandboxID)
	})
	return out
}

// HaltAdmission stops admitting jobs in a sandbox because a kill outside
// the manager (a timed-out synchronous command) could not prove its
// processes dead. Like a job's failed kill, it holds until
// ResumeAdmission; the first cause is kept. Other sandboxes are unaffected.
func (m *Manager) HaltAdmission(reason, tenant, sandboxID string, cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.haltLocked(reason, "", tenant, sandboxID, cause)
}

func (m *Manager) haltLocked(reason, jobID, tenant, sandboxID string, cause error) {
	if m.halts[sandboxID] != nil {
		return
	}
	m.halts[sandboxID] = &halt{
		status: AdmissionStatus{
			Halted:    true,
			Reason:    reason,
			Since:     m.clock.Now(),
			JobID:     jobID,
			Tenant:    tenant,
			SandboxID: sandboxID,
		},
		cause: cause,
	}
}

// ResumeAdmission lifts a sandbox's halt once its cause is dealt with: the
// sandbox was restarted (every process of it killed) or destroyed. It
// returns the status it cleared.
func (m *Manager) ResumeAdmission(sandboxID string) AdmissionStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var prev AdmissionStatus
	if h := m.halts[sandboxID]; h != nil {
		prev = h.status
	}
	delete(m.halts, sandboxID)
	return prev
}

// EndSandbox ends every job of a sandbox whose processes are about to be
// killed wholesale (a restart, a suspension, a destroy) or already were (its
// init died): running jobs turn failed with why, their slots are released,
// and their output stays readable until acknowledged or expired as usual.
// When forget is true (the sandbox is destroyed), its terminal jobs are
// recycled at once instead, so that a destroyed tenant holds no slot.
// It returns how many jobs were running.
func (m *Manager) EndSandbox(sandboxID, why string, forget bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	ended := 0
	for _, j := range m.jobs {
		if j.sandbox != sandboxID || j.starting {
			continue
		}
		if j.held != nil {
			// The holder goes with the sandbox's processes, and the
			// output it held with it.
			j.held.disconnect()
		}
		if !j.state.Terminal() {
			ended++
			m.finishLocked(j, StateFailed, &Result{ExitStatus: agentapi.ExitStatus{ExitCode: -1, Duration: m.clock.Now().Sub(j.startedAt)}, Error: why})
		}
		if forget {
			m.recycleLocked(j)
		}
	}
	if forget {
		delete(m.halts, sandboxID)
	}
	// Its jobs ended, none waits for it to resume.
	m.unparkLocked(sandboxID)
	return ended
}

// Close stops the manager. It refuses new calls, lets go of the jobs
// (their sandboxes hold them: they run on, for the next manager to adopt)
// and waits for its own goroutines (kills in flight, watchers) to end. If
// ctx ends first it abandons them: it cancels their context, waits for
// them to return, and returns ctx's error. A second Close returns nil at
// once.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	if m.sweeper != nil {
		m.sweeper.Stop()
	}
	for _, j := range m.jobs {
		if j.held != nil {
			j.held.disconnect()
		}
	}
	m.mu.Unlock()

	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("jobs: abandoning work still in flight at close: %w", ctx.Err())
		m.cancel()
		<-done
	}
	m.cancel()
	return err
}
