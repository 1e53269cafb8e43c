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
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi/outring"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// Held is the manager's connection to a job that its sandbox holds
// (*guestexec.Job, the guest's client, which turns the values of package
// heldjob into the guest protocol's): the job's processes, output ring
// and result are in the sandbox, and outlive the connection and the
// agent.
type Held interface {
	// Poll reads a page of the job's output (see guestexec.Job.Poll); a
	// cursor that does not fit is a *CursorError.
	Poll(ctx context.Context, req heldjob.PollRequest) (heldjob.Page, error)
	// Kill asks the holder to kill the job with proof; the end comes
	// through Ended.
	Kill(ctx context.Context) error
	// Release ends the holder (the job is over) and closes the connection.
	Release(ctx context.Context) (heldjob.Page, error)
	// Ended is closed when the holder said how the job ended or the
	// connection broke; End says which.
	Ended() <-chan struct{}
	End() (exit *heldjob.Exit, proofLost string, err error)
	// Close closes the connection; the job goes on.
	Close() error
	// Input, Resize and Screen control a job that takes input or has a
	// terminal (see guestexec.Job); a refusal wraps ErrInputRefused.
	Input(ctx context.Context, p []byte, end bool) error
	Resize(ctx context.Context, size TTYSize) error
	Screen(ctx context.Context, req heldjob.ScreenRequest) (Screen, error)
}

// HeldStartFunc starts a command as a job its sandbox holds, under spec
// (the job's ID, its ring's bounds, its TTL, its input and terminal, and
// the manager's record).
type HeldStartFunc func(spec backend.JobSpec) (Held, error)

// Attacher connects again to the holder of job jobID, taking over from
// any earlier connection. Its error wraps backend.ErrNotFound when the
// holder is gone while its sandbox runs (the job's processes may live
// on, unproven), and backend.ErrNotRunning when the sandbox stopped
// (every process of it went with its init).
type Attacher func(ctx context.Context, jobID string) (Held, error)

// heldMeta is the manager's record of a held job, kept with it in the
// sandbox (backend.JobSpec.Meta) for the next agent.
type heldMeta struct {
	Tenant string `json:"tenant"`
	// Command is the job's command as a listing shows it (WithCommand).
	Command string `json:"command,omitempty"`
	// Deadline is when the job's timeout kills it; zero means none.
	Deadline time.Time `json:"deadline,omitzero"`
	// OOMKills is the sandbox's count of OOM kills when the job started,
	// if the backend counts them.
	OOMKills *uint64 `json:"oomKills,omitempty"`
	// Key and Request are the job's idempotency key and the request it
	// was given to (WithKey), so that the next agent honours the key.
	Key     string `json:"key,omitempty"`
	Request string `json:"request,omitempty"`
}

// maxRequestBytes bounds the request a sandbox's record of a job says its
// key was given to: the agent's is a digest, far shorter.
const maxRequestBytes = 128

// attachTimeout bounds one attempt to reach a job's holder.
const attachTimeout = 10 * time.Second

// maxReattachBackoff caps the wait between attempts to reach a holder
// that does not answer.
const maxReattachBackoff = 5 * time.Second

// errLetGo: the manager let go of the job's holder (the job was recycled,
// its sandbox stopped, or the manager closed).
var errLetGo = errors.New("jobs: the job's holder was let go")

// errTakenOver: another agent process attached to the job's holder.
var errTakenOver = errors.New("jobs: another agent process took the job over")

// superseded says whether c ended because a newer attachment took over.
func superseded(c Held) bool {
	select {
	case <-c.Ended():
		_, _, err := c.End()
		return errors.Is(err, heldjob.ErrSuperseded)
	default:
		return false
	}
}

// heldConn is a held job's connection, replaced when it breaks.
type heldConn struct {
	id     string
	attach Attacher
	// attaching serializes attachments: the newest wins in the holder, so
	// two at once would only take the job from each other.
	attaching sync.Mutex
	mu        sync.Mutex // guards conn and gone; never held across a call
	conn      Held
	gone      bool
}

// current is the connection, or nil once the manager let go.
func (h *heldConn) current() Held {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return nil
	}
	return h.conn
}

// reconnect replaces old, a connection that failed, by a new attachment,
// unless another caller did already (its connection is returned then).
func (h *heldConn) reconnect(ctx context.Context, old Held) (Held, error) {
	h.attaching.Lock()
	defer h.attaching.Unlock()
	h.mu.Lock()
	gone, cur := h.gone, h.conn
	h.mu.Unlock()
	switch {
	case gone:
		return nil, errLetGo
	case cur != old:
		return cur, nil
	case superseded(old):
		// Not by this manager: another agent process took the job over
		// (two running at once); taking it back would only start a tug
		// of war.
		return nil, errTakenOver
	}
	c, err := h.attach(ctx, h.id)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		c.Close()
		return nil, errLetGo
	}
	old.Close()
	h.conn = c
	return c, nil
}

// letGo ends the manager's hold: the connection is returned, open, for a
// Release; nil when it was let go already.
func (h *heldConn) letGo() Held {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return nil
	}
	h.gone = true
	return h.conn
}

// disconnect lets go and closes the connection: the job goes on in its
// sandbox (the manager closes) or is gone with it.
func (h *heldConn) disconnect() {
	if c := h.letGo(); c != nil {
		c.Close()
	}
}

// release lets go and ends the holder of a job that is over, in the
// background: the holder releases itself after its TTL anyway.
func (h *heldConn) release() {
	c := h.letGo()
	if c == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), attachTimeout)
		defer cancel()
		if _, err := c.Release(ctx); err != nil {
			_ = Release(ctx, h.attach, h.id)
		}
	}()
}

// Release ends the holder of job id, attaching to it anew (killing the
// job with proof if it still runs): for a job no manager accounts for,
// which nothing else would bound. A holder that is not there is
// backend.ErrNotFound.
func Release(ctx context.Context, attach Attacher, id string) error {
	j, err := attach(ctx, id)
	if err != nil {
		return err
	}
	_, err = j.Release(ctx)
	return err
}

// StartHeld admits a job for tenant in sandboxID and starts it with start
// as a job its sandbox holds. It refuses with a *LimitError when a bound is
// hit and no capacity can be freed, a *HaltedError while admission is
// halted, or ErrClosed. Admission reserves the capacity before start is
// called, so concurrent starts cannot both take the last slot; if start
// fails the reservation is released and its error returned. ctx bounds
// only the admission. Then the manager keeps the job's bookkeeping (bounds,
// timeout, TTL, acknowledgement) and routes polls and cancels to the
// holder, reached again through attach when the connection breaks. The
// job outlives the manager: Close leaves it running, and the next
// manager takes it over with Adopt.
func (m *Manager) StartHeld(ctx context.Context, tenant, sandboxID string, start HeldStartFunc, attach Attacher, opts ...StartOption) (JobInfo, error) {
	if start == nil || attach == nil {
		return JobInfo{}, errors.New("jobs: a held job needs a start func and an attacher")
	}
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	j, prior, err := m.reserve(ctx, tenant, sandboxID, &o)
	if err != nil {
		return JobInfo{}, err
	}
	if prior != nil {
		return *prior, nil
	}
	defer m.wg.Done()
	meta := heldMeta{Tenant: tenant, Command: o.command, Key: j.key, Request: j.request}
	if o.timeout > 0 {
		meta.Deadline = j.startedAt.Add(o.timeout)
	}
	if o.oom != nil {
		if n, ok := o.oom(); ok {
			meta.OOMKills = &n
		}
	}
	spec, err := m.heldSpec(j.id, meta)
	spec.Input, spec.TTY = o.input, ttySpec(o.tty)
	var conn Held
	if err == nil {
		conn, err = callStart(func() (Held, error) { return start(spec) })
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && conn == nil {
		err = errors.New("start returned no connection")
	}
	if err != nil {
		m.unreserveLocked(j)
		m.stats.StartFailed++
		return JobInfo{}, fmt.Errorf("starting job: %w", err)
	}
	m.stats.Started++
	j.oomAtStart, j.oomCount = meta.OOMKills, o.oom
	j.input, j.tty = o.input || o.tty != nil, o.tty
	m.holdLocked(j, conn, attach, o.timeout)
	if m.closed {
		// Close ran while the command was starting: the job goes on in
		// its sandbox, as every held job does at Close.
		j.held.disconnect()
		return JobInfo{}, ErrClosed
	}
	return j.infoLocked(), nil
}

// heldSpec is the JobSpec of a held job: the manager's bounds (the
// holder caps them with its own) and its record.
func (m *Manager) heldSpec(id string, meta heldMeta) (backend.JobSpec, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return backend.JobSpec{}, err
	}
	return backend.JobSpec{
		ID:         id,
		RingBytes:  m.limits.RingBytes,
		RingChunks: m.limits.RingChunks,
		ChunkBytes: min(m.limits.ChunkBytes, m.limits.RingBytes),
		TTL:        m.limits.TerminalTTL,
		Meta:       b,
	}, nil
}

// holdLocked makes the reserved job j a running held job on conn.
func (m *Manager) holdLocked(j *job, conn Held, attach Attacher, timeout time.Duration) {
	j.startedLocked()
	j.held = &heldConn{id: j.id, attach: attach, conn: conn}
	m.wg.Add(1)
	go m.watchHeld(j)
	if timeout > 0 {
		j.timeout = m.clock.AfterFunc(timeout, func() { m.timedOut(j) })
	}
}

// Adopt takes over a job that sandboxID holds, started by an earlier
// manager (an agent before a restart), under its ID, and counts it
// against tenant's bounds again; its timeout runs on from the deadline it
// was started with. A job is tenant's only if the record kept with it
// says so; the active bounds are not checked (the job runs already), but
// the retained ones are, per tenant and per agent (a sandbox cannot list
// its way past them, nor can a restart with smaller bounds). A job adopted already is
// returned as it is. On an error the job is not adopted: the caller
// releases it, or nothing would bound it.
func (m *Manager) Adopt(ctx context.Context, tenant, sandboxID string, rec backend.JobRecord, attach Attacher, opts ...StartOption) (JobInfo, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	id := rec.Spec.ID
	if !agentapi.ValidJobID(id) {
		return JobInfo{}, fmt.Errorf("jobs: sandbox %s holds a job %q whose ID this agent did not issue", sandboxID, id)
	}
	var meta heldMeta
	if err := json.Unmarshal(rec.Spec.Meta, &meta); err != nil || meta.Tenant != tenant {
		return JobInfo{}, fmt.Errorf("jobs: sandbox %s holds job %s with a record that is not tenant %s's", sandboxID, id, tenant)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return JobInfo{}, ErrClosed
	}
	if j := m.jobs[id]; j != nil {
		defer m.mu.Unlock()
		if j.sandbox != sandboxID || j.tenant != tenant || j.held == nil {
			return JobInfo{}, fmt.Errorf("jobs: sandbox %s holds job %s, an ID this agent gave another job", sandboxID, id)
		}
		return j.infoLocked(), nil
	}
	if err := m.adoptableLocked(tenant); err != nil {
		m.mu.Unlock()
		return JobInfo{}, err
	}
	now := m.clock.Now()
	started := rec.Started
	if started.IsZero() || started.After(now) {
		started = now
	}
	j := m.insertLocked(id, tenant, sandboxID, started)
	j.adopted = true
	j.command = commandSummary(meta.Command)
	if agentapi.CheckIdempotencyKey(meta.Key) == nil && len(meta.Request) <= maxRequestBytes {
		// The record is the sandbox's to keep, and to spoil: a key that
		// no start would have given is not honoured.
		m.keyLocked(j, meta.Key, meta.Request)
	}
	j.input, j.tty = rec.Spec.Input || rec.Spec.TTY != nil, ttyOf(rec.Spec.TTY)
	m.mu.Unlock()
	defer m.wg.Done()

	conn, err := attach(ctx, id)

	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && conn == nil {
		err = errors.New("attach returned no connection")
	}
	if errors.Is(err, backend.ErrNotFound) {
		// Its record is there and its holder is not (killed in the
		// sandbox, say): the job's processes may live on, unproven. The
		// tenant sees it failed, and admission halts as it would have
		// had this agent seen the holder go.
		m.stats.Adopted++
		j.startedLocked()
		j.held = &heldConn{id: id, attach: attach, gone: true}
		j.oomAtStart, j.oomCount = meta.OOMKills, o.oom
		m.heldEndedLocked(j, nil, fmt.Sprintf("the job's holder in the sandbox is gone: %v", err))
		return j.infoLocked(), nil
	}
	if err != nil {
		m.unreserveLocked(j)
		return JobInfo{}, fmt.Errorf("jobs: attaching to job %s in sandbox %s: %w (%v)", id, sandboxID, ErrUnreachable, err)
	}
	m.stats.Adopted++
	j.oomAtStart, j.oomCount = meta.OOMKills, o.oom
	var timeout time.Duration
	if !meta.Deadline.IsZero() {
		timeout = max(meta.Deadline.Sub(m.clock.Now()), time.Millisecond)
	}
	m.holdLocked(j, conn, attach, timeout)
	if m.closed {
		j.held.disconnect()
		return JobInfo{}, ErrClosed
	}
	return j.infoLocked(), nil
}

// adoptableLocked checks the retained bounds for one more adopted job of
// tenant, as admission does but for the active bounds (the job runs
// already): expired and acknowledged jobs are recycled first, then the
// node-wide bound is shared fairly. Past them the job is not adopted.
func (m *Manager) adoptableLocked(tenant string) error {
	l := m.limits
	if m.retainedByTenant[tenant] >= l.RetainedPerTenant || len(m.jobs) >= l.RetainedPerAgent {
		m.sweepLocked()
	}
	if n := m.retainedByTenant[tenant]; n >= l.RetainedPerTenant {
		return &LimitError{Bound: BoundRetainedPerTenant, Tenant: tenant, Count: n, Limit: l.RetainedPerTenant, TTL: l.TerminalTTL}
	}
	if len(m.jobs) >= l.RetainedPerAgent && !m.shareLocked(tenant) {
		return &LimitError{Bound: BoundRetainedPerAgent, Tenant: tenant, Count: len(m.jobs), Limit: l.RetainedPerAgent, TTL: l.TerminalTTL}
	}
	return nil
}

// watchHeld follows a held job's connection until the job ends: the
// holder says so unasked, and the manager releases the job's active
// slot. A connection that breaks is made again (the newest wins), with
// backoff while the holder does not answer; a holder that is gone while
// its sandbox runs lost the job's proof of cleanup.
func (m *Manager) watchHeld(j *job) {
	defer m.wg.Done()
	h := j.held
	backoff := 100 * time.Millisecond
	for {
		conn := h.current()
		if conn == nil {
			return
		}
		select {
		case <-conn.Ended():
		case <-m.ctx.Done():
			return
		}
		exit, lost, err := conn.End()
		if err == nil {
			m.mu.Lock()
			m.heldEndedLocked(j, exit, lost)
			m.mu.Unlock()
			h.mu.Lock()
			done := h.conn == conn
			h.mu.Unlock()
			if done {
				return
			}
			continue // a newer connection took over; it says the same
		}
		for {
			if park := m.parkedChan(j.sandbox); park != nil {
				// Suspended with its memory, the holder with it: it is
				// reached again once the sandbox resumes.
				select {
				case <-park:
				case <-m.ctx.Done():
					return
				}
			}
			if m.ctx.Err() != nil || h.current() == nil {
				return
			}
			actx, cancel := context.WithTimeout(m.ctx, attachTimeout)
			c, err := h.reconnect(actx, conn)
			if err == nil && m.cancelling(j) {
				// The kill may not have reached the holder before the
				// connection broke: ask again (a second kill is ignored).
				_ = c.Kill(actx)
			}
			cancel()
			switch {
			case err == nil:
				backoff = 100 * time.Millisecond
			case errors.Is(err, errLetGo):
				return
			case errors.Is(err, errTakenOver):
				m.heldTakenOver(j)
				return
			case errors.Is(err, backend.ErrNotRunning):
				m.heldSandboxStopped(j)
				return
			case errors.Is(err, backend.ErrNotFound):
				m.heldLost(j, err)
				return
			default:
				select {
				case <-time.After(backoff):
				case <-m.ctx.Done():
					return
				}
				backoff = min(2*backoff, maxReattachBackoff)
				continue
			}
			break
		}
	}
}

func (m *Manager) cancelling(j *job) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return j.state == StateCancelling
}

// heldEndedLocked turns a held job terminal as its holder reports: an
// exit (killed when a Kill ended it, with proof), or a cleanup it could
// not prove, which halts admission in the sandbox as a failed kill does.
func (m *Manager) heldEndedLocked(j *job, exit *heldjob.Exit, proofLost string) {
	if j.state.Terminal() {
		return
	}
	if exit == nil {
		err := fmt.Errorf("%w: %s", backend.ErrProofLost, proofLost)
		m.haltLocked(fmt.Sprintf("job %s of tenant %s in sandbox %s: %v", j.id, j.tenant, j.sandbox, err), j.id, j.tenant, j.sandbox, err)
		why := "the sandbox lost track of the command, so some of its processes may still run in the sandbox"
		oom := j.oomGrew()
		switch {
		case j.state == StateCancelling:
			why = "the kill could not prove that the job's processes are gone, so some may still run in the sandbox"
		case oom:
			why = "the sandbox ran out of memory and the OOM killer took the job's supervision, so some of its processes may still run in the sandbox"
		}
		m.finishLocked(j, StateFailed, &Result{ExitStatus: agentapi.ExitStatus{ExitCode: -1, OOMKilled: oom, Duration: m.clock.Now().Sub(j.startedAt)}, Error: m.internalErrorLocked(j, why, err)})
		return
	}
	m.stats.OutputBytes += exit.Output
	m.stats.DroppedBytes += exit.DroppedBytes
	m.stats.Evictions += exit.DroppedChunks
	st := exit.Status
	if !st.Killed {
		oom := (st.Signal != "" || st.ExitCode > 128) && j.oomGrew()
		m.finishLocked(j, StateExited, &Result{ExitStatus: agentapi.ExitStatus{ExitCode: st.ExitCode, Signal: st.Signal, OOMKilled: oom, Duration: st.Duration}})
		return
	}
	state, timedOut := StateKilled, j.cause == causeTimeout
	if timedOut {
		state = StateTimedOut
	}
	m.finishLocked(j, state, &Result{ExitStatus: agentapi.ExitStatus{ExitCode: st.ExitCode, Signal: st.Signal, Killed: true, TimedOut: timedOut, Duration: st.Duration}})
}

// oomGrew says whether the sandbox's OOM killer killed something since the
// held job started, when its backend counts that.
func (j *job) oomGrew() bool {
	if j.oomAtStart == nil || j.oomCount == nil {
		return false
	}
	now, ok := j.oomCount()
	return ok && now > *j.oomAtStart
}

// heldSandboxStopped ends a held job whose sandbox stopped: every process
// of it went with the sandbox's init, and so did the job's output.
func (m *Manager) heldSandboxStopped(j *job) {
	j.held.disconnect()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !j.state.Terminal() {
		m.finishLocked(j, StateFailed, &Result{ExitStatus: agentapi.ExitStatus{ExitCode: -1, Duration: m.clock.Now().Sub(j.startedAt)}, Error: heldStoppedWhy})
	}
}

const heldStoppedWhy = "the sandbox stopped (its init exited: out of memory, killed, or stopped), and every process in it with it, including the output the sandbox held for this job"

// heldTakenOver lets go of a held job that another agent process took
// over: it is that one's to account for now. Here it ends, without a
// halt (nothing was lost), so that it holds no slot.
func (m *Manager) heldTakenOver(j *job) {
	j.held.disconnect()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.Info("Another agent process took over a held job", "job", j.id, "tenant", j.tenant, "sandbox", j.sandbox)
	if !j.state.Terminal() {
		j.takenOver = true
		m.finishLocked(j, StateFailed, &Result{ExitStatus: agentapi.ExitStatus{ExitCode: -1, Duration: m.clock.Now().Sub(j.startedAt)}, Error: "another agent process took this job over; poll it there"})
	}
}

// heldLost ends a held job whose holder is gone while its sandbox runs:
// the job's processes may live on, unproven, as after a failed kill.
func (m *Manager) heldLost(j *job, cause error) {
	j.held.disconnect()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !j.state.Terminal() {
		m.heldEndedLocked(j, nil, fmt.Sprintf("the job's holder in the sandbox is gone: %v", cause))
	}
}

// killHeld asks a held job's holder to kill it; the job turns terminal
// when the holder reports the end (watchHeld, or a poll's page).
func (m *Manager) killHeld(j *job) {
	defer m.wg.Done()
	defer func() {
		m.mu.Lock()
		j.killing = false
		m.mu.Unlock()
	}()
	h := j.held
	conn := h.current()
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, attachTimeout)
	defer cancel()
	if err := conn.Kill(ctx); err != nil {
		// A broken connection: watchHeld attaches again and repeats the
		// kill of a cancelling job; doing it here is only sooner.
		if c, err := h.reconnect(ctx, conn); err == nil {
			_ = c.Kill(ctx)
		}
	}
}

// pollHeld is Poll of a held job: a page from its holder, bookkept here.
// A page is filled to maxBytes from as many of the holder's pages as it
// takes, the first of which may wait.
func (m *Manager) pollHeld(ctx context.Context, j *job, cur outring.Cursor, maxBytes int, wait time.Duration) (PollResult, error) {
	h := j.held
	conn := h.current()
	if conn == nil {
		// Let go: the job ended with its sandbox, or was released; only
		// its result is left.
		return m.heldFinalPage(j, cur), nil
	}
	if err := m.waitUnparked(ctx, j.sandbox); err != nil {
		return PollResult{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, wait+attachTimeout)
	defer cancel()
	req := heldjob.PollRequest{Cursor: cur.String(), Max: maxBytes, Wait: wait}
	page, err := conn.Poll(pctx, req)
	if m.isClosed() {
		// The manager let go of its jobs while this poll waited.
		return PollResult{}, ErrClosed
	}
	if err != nil && !errors.Is(err, outring.ErrBadCursor) && ctx.Err() == nil {
		// The connection broke: attach again, and ask once more.
		var c Held
		c, err = h.reconnect(pctx, conn)
		if errors.Is(err, errLetGo) || errors.Is(err, errTakenOver) {
			return m.heldFinalPage(j, cur), nil
		}
		if err == nil {
			conn = c
			page, err = conn.Poll(pctx, req)
		}
		if err != nil && !errors.Is(err, outring.ErrBadCursor) && ctx.Err() == nil {
			return PollResult{}, fmt.Errorf("%w (%v)", ErrUnreachable, err)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return PollResult{}, ctx.Err()
		}
		return PollResult{}, err
	}
	chunks, total, gap := page.Chunks, 0, page.Gap
	for _, c := range chunks {
		total += len(c.Data)
	}
	// The holder's pages are gathered up to the budget; a chunk a page
	// ended inside goes on in the next, and is joined again. Below
	// utf8.UTFMax bytes of budget the ring could only split a character:
	// the rest comes next time.
	for !page.AtEnd && maxBytes-total >= utf8.UTFMax {
		more, err := conn.Poll(pctx, heldjob.PollRequest{Cursor: page.Next, Max: maxBytes - total})
		if err != nil || more.Gap != nil || len(more.Chunks) == 0 {
			break // what there is makes a page; the rest comes next time
		}
		for _, c := range more.Chunks {
			total += len(c.Data)
			if n := len(chunks); n > 0 && chunks[n-1].Seq == c.Seq && chunks[n-1].Stream == c.Stream && chunks[n-1].Offset+len(chunks[n-1].Data) == c.Offset {
				chunks[n-1].Data = append(chunks[n-1].Data, c.Data...)
				continue
			}
			chunks = append(chunks, c)
		}
		page = more
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return PollResult{}, ErrClosed
	}
	if page.Exit != nil || page.ProofLost != "" {
		m.heldEndedLocked(j, page.Exit, page.ProofLost)
	}
	j.lastPoll = m.clock.Now()
	res := PollResult{Chunks: chunks, NextCursor: page.Next, DroppedBytes: page.DroppedBytes, DroppedChunks: page.DroppedChunks, Gap: gap}
	ended := page.Exit != nil || page.ProofLost != ""
	m.doneLocked(j, &res, j.state.Terminal() && ended && page.AtEnd)
	return res, nil
}

// ParkSandbox keeps the held jobs of a sandbox that is being suspended
// with its memory (backend.Suspender): their holders are saved with it, so
// their broken connections are not taken for the sandbox's end. They are
// attached again after UnparkSandbox; meanwhile polls say ErrSuspended.
// Parking a parked sandbox does nothing.
func (m *Manager) ParkSandbox(sandboxID string) { m.park(sandboxID, false) }

// ParkSandboxBriefly is ParkSandbox for a moment's absence (a snapshot's
// checkpoint and restore): polls wait for unpark, within their own
// deadline, instead of saying ErrSuspended. A sandbox parked already
// stays as it is, and unpark does nothing.
func (m *Manager) ParkSandboxBriefly(sandboxID string) (unpark func()) {
	if !m.park(sandboxID, true) {
		return func() {}
	}
	return func() { m.UnparkSandbox(sandboxID) }
}

// park parks sandboxID, unless it is parked already (false).
func (m *Manager) park(sandboxID string, brief bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parked[sandboxID] != nil {
		return false
	}
	m.parked[sandboxID] = &parking{done: make(chan struct{}), brief: brief}
	// Its jobs run no more until it resumes.
	now := m.clock.Now()
	for _, j := range m.jobs {
		if j.sandbox == sandboxID && !j.state.Terminal() {
			j.pauseLocked(now)
		}
	}
	return true
}

// parking is a parked sandbox's: done is closed when it resumes.
type parking struct {
	done  chan struct{}
	brief bool
}

// UnparkSandbox undoes ParkSandbox: the sandbox was restored (or its
// suspension given up), and its holders are reached again.
func (m *Manager) UnparkSandbox(sandboxID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unparkLocked(sandboxID)
}

func (m *Manager) unparkLocked(sandboxID string) {
	if p := m.parked[sandboxID]; p != nil {
		close(p.done)
		delete(m.parked, sandboxID)
		now := m.clock.Now()
		for _, j := range m.jobs {
			if j.sandbox == sandboxID && !j.state.Terminal() && j.runSince.IsZero() {
				j.runSince = now
			}
		}
	}
}

// parkedChan is closed when sandboxID resumes; nil when it is not parked.
func (m *Manager) parkedChan(sandboxID string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.parked[sandboxID]; p != nil {
		return p.done
	}
	return nil
}

// waitUnparked waits, for a poll, while sandboxID is parked briefly; it
// is ErrSuspended while it is suspended.
func (m *Manager) waitUnparked(ctx context.Context, sandboxID string) error {
	m.mu.Lock()
	p := m.parked[sandboxID]
	m.mu.Unlock()
	switch {
	case p == nil:
		return nil
	case !p.brief:
		return ErrSuspended
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heldFinalPage is the page of a held job whose holder the manager let
// go: its result, and no output.
func (m *Manager) heldFinalPage(j *job, cur outring.Cursor) PollResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	j.lastPoll = m.clock.Now()
	res := PollResult{NextCursor: cur.String()}
	m.doneLocked(j, &res, j.state.Terminal())
	return res
}
