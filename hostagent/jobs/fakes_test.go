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
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
)

// fakeClock is a Clock that moves only when a test advances it. Timer
// callbacks run on the advancing goroutine, outside the clock's lock.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	f    func()
	done bool // fired or stopped
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock and fires due timers in deadline order, including
// timers that the callbacks themselves set within the new time.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.done {
				continue
			}
			live = append(live, t)
			if !t.at.After(c.now) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		c.timers = live
		if next != nil {
			next.done = true
		}
		c.mu.Unlock()
		if next == nil {
			return
		}
		next.f()
	}
}

// pending counts timers that have neither fired nor been stopped.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// fakeProc is a backend.Process driven by the test.
type fakeProc struct {
	sink backend.Sink

	exited   chan struct{}
	exitOnce sync.Once
	status   backend.ExitStatus
	waitErr  error

	// killErr is what Kill returns; killGate, when set, makes Kill wait for
	// it to be closed (or its context to end) first.
	killErr  error
	killGate chan struct{}
	// keepRunningOnKill makes a successful Kill not end the process, as a
	// backend that is slow to deliver the last output would.
	keepRunningOnKill bool

	kills       atomic.Int32
	waited      atomic.Int32 // Waits that returned the process's end
	killStarted chan struct{}
	killOnce    sync.Once
}

func newFakeProc(sink backend.Sink) *fakeProc {
	return &fakeProc{sink: sink, exited: make(chan struct{}), killStarted: make(chan struct{})}
}

// exit ends the process; only the first call counts.
func (p *fakeProc) exit(st backend.ExitStatus, err error) {
	p.exitOnce.Do(func() {
		p.status, p.waitErr = st, err
		close(p.exited)
	})
}

func (p *fakeProc) Wait(ctx context.Context) (backend.ExitStatus, error) {
	select {
	case <-p.exited:
		p.waited.Add(1)
		return p.status, p.waitErr
	case <-ctx.Done():
		return backend.ExitStatus{}, ctx.Err()
	}
}

func (p *fakeProc) Kill(ctx context.Context) error {
	p.kills.Add(1)
	p.killOnce.Do(func() { close(p.killStarted) })
	if p.killGate != nil {
		select {
		case <-p.killGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if p.killErr != nil {
		return p.killErr
	}
	if !p.keepRunningOnKill {
		p.exit(backend.ExitStatus{ExitCode: -1, Signal: "SIGKILL", Killed: true, Duration: time.Second}, nil)
	}
	return nil
}

// harness bundles a manager on a fake clock with helpers.
type harness struct {
	t     *testing.T
	m     *Manager
	clock *fakeClock
	log   *syncBuffer // what the manager logged, as JSON lines
	// holders are the jobs' holders, by job ID.
	holders sync.Map
}

func newHarness(t *testing.T, l Limits, opts ...Option) *harness {
	t.Helper()
	clock := newFakeClock()
	log := new(syncBuffer)
	opts = append(opts, WithLogger(funcr.NewJSON(func(obj string) { _, _ = log.Write([]byte(obj + "\n")) }, funcr.Options{})))
	m, err := New(l, clock, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Logf("Close: %v", err)
		}
	})
	return &harness{t: t, m: m, clock: clock, log: log}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// internalError checks that a result's error tells its tenant what
// happened and an error ID, but not detail, and that the manager logged
// detail under that ID.
func (h *harness) internalError(r *Result, what, detail string) {
	h.t.Helper()
	if r == nil || !strings.Contains(r.Error, what) || strings.Contains(r.Error, detail) {
		h.t.Fatalf("result %+v: want %q and an error ID, not %q", r, what, detail)
	}
	_, after, _ := strings.Cut(r.Error, "(internal error ")
	id, _, _ := strings.Cut(after, ":")
	for _, line := range strings.Split(h.log.String(), "\n") {
		if id != "" && strings.Contains(line, `"errorID":"`+id+`"`) && strings.Contains(line, detail) {
			return
		}
	}
	h.t.Fatalf("no log line with error ID %q and %q in:\n%s", id, detail, h.log.String())
}

// start starts a job with a fakeProc, configured by setup before the
// manager sees it, held by an in-memory holder over the guest protocol
// (backendtest.Holder), as a sandbox holds it.
func (h *harness) start(tenant string, setup func(*fakeProc), opts ...StartOption) (JobInfo, *fakeProc) {
	h.t.Helper()
	info, p, err := h.tryStart(tenant, setup, opts...)
	if err != nil {
		h.t.Fatalf("Start(%s): %v", tenant, err)
	}
	return info, p
}

func (h *harness) tryStart(tenant string, setup func(*fakeProc), opts ...StartOption) (JobInfo, *fakeProc, error) {
	var p *fakeProc
	holder := backendtest.NewHolder(func(_ backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
		p = newFakeProc(sink)
		if setup != nil {
			setup(p)
		}
		return p, nil
	})
	info, err := startWith(h.t, h.m, holder, tenant, "sb-"+tenant, opts...)
	if err == nil {
		h.holders.Store(info.ID, holder)
	}
	return info, p, err
}

// startOn starts a job of tenant in sandboxID on m whose command is the
// process proc returns, held by an in-memory holder over the guest
// protocol (backendtest.Holder), as a sandbox holds it.
func startOn(t testing.TB, m *Manager, tenant, sandboxID string, proc func(backend.Sink) (backend.Process, error), opts ...StartOption) (JobInfo, error) {
	holder := backendtest.NewHolder(func(_ backend.ExecRequest, sink backend.Sink) (backend.Process, error) { return proc(sink) })
	return startWith(t, m, holder, tenant, sandboxID, opts...)
}

// startWith starts a job on m that holder holds.
func startWith(t testing.TB, m *Manager, holder *backendtest.Holder, tenant, sandboxID string, opts ...StartOption) (JobInfo, error) {
	t.Cleanup(holder.Close)
	start := func(js backend.JobSpec) (Held, error) {
		return guestexec.StartJob(context.Background(), holder.Conn(), backend.ExecRequest{Command: "fake"}, js)
	}
	attach := func(_ context.Context, id string) (Held, error) {
		c, err := holder.Attach(id)
		if err != nil {
			return nil, err
		}
		return guestexec.HeldJob(c), nil
	}
	return m.StartHeld(context.Background(), tenant, sandboxID, start, attach, opts...)
}

// job returns the manager's record of id.
func (h *harness) job(id string) *job {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.m.jobs[id]
}

// waitDone waits (in real time, bounded) until the job is terminal.
func (h *harness) waitDone(id string) JobInfo {
	h.t.Helper()
	j := h.job(id)
	if j == nil {
		h.t.Fatalf("job %s not in manager", id)
	}
	select {
	case <-j.done:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("job %s did not end", id)
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return j.infoLocked()
}

// finish ends a job's process with code and waits until it is terminal.
func (h *harness) finish(id string, p *fakeProc, code int) {
	h.t.Helper()
	p.exit(backend.ExitStatus{ExitCode: code, Duration: time.Second}, nil)
	h.waitDone(id)
}

func (h *harness) poll(tenant, id, cur string, maxBytes int) PollResult {
	h.t.Helper()
	r, err := h.m.Poll(context.Background(), tenant, id, cur, maxBytes, 0)
	if err != nil {
		h.t.Fatalf("Poll(%s, %q): %v", id, cur, err)
	}
	return r
}

// drain polls from cur until Done, returning the last page's cursor and all
// the data, per stream.
func (h *harness) drain(tenant, id, cur string) (string, map[backend.Stream][]byte) {
	h.t.Helper()
	out := map[backend.Stream][]byte{}
	for i := 0; ; i++ {
		if i > 100000 {
			h.t.Fatal("drain does not end")
		}
		r := h.poll(tenant, id, cur, 0)
		for _, c := range r.Chunks {
			out[c.Stream] = append(out[c.Stream], c.Data...)
		}
		cur = r.NextCursor
		if r.Done {
			return cur, out
		}
	}
}

// eventually retries cond in real time; for states reached by goroutines.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
