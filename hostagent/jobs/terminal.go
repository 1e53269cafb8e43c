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

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// ErrInputRefused says that the job's holder refused a control request (input to
// a job whose input is closed or full, a terminal request of a job
// without a terminal); the job is as it was. The error says why.
var ErrInputRefused = heldjob.ErrRefused

// ErrEnded says that the job has ended, and takes no input.
var ErrEnded = errors.New("the job has ended: it takes no more input (poll it for its output and result)")

// Input writes p to tenant's job jobID's standard input (its terminal,
// for a terminal job), at most bounds.MaxInputBytes bytes; end then ends
// its input (a pipe is closed, a terminal gets Ctrl-D). The bytes are
// queued in the holder, which writes them as the job reads: Input does
// not wait for the job to read them, and refuses (ErrInputRefused) past
// the holder's bound of pending input unread. Errors: *NotFoundError (also for
// other tenants' jobs), ErrEnded, ErrInputRefused, ErrSuspended,
// ErrUnreachable. An Input whose connection broke is not repeated: it may
// or may not have reached the job, and the error says so.
func (m *Manager) Input(ctx context.Context, tenant, jobID string, p []byte, end bool) (JobInfo, error) {
	if len(p) > bounds.MaxInputBytes {
		return JobInfo{}, fmt.Errorf("%w: %d bytes of input at once, over the %d-byte bound: send it in parts", ErrInputRefused, len(p), bounds.MaxInputBytes)
	}
	return m.control(ctx, tenant, jobID, false, func(ctx context.Context, j *job, c Held) error {
		if !j.input {
			return fmt.Errorf("%w: the job does not take input: start it with its input open (or a terminal) to write to it", ErrInputRefused)
		}
		return c.Input(ctx, p, end)
	})
}

// Resize sets the size of tenant's terminal job jobID (the job gets
// SIGWINCH); errors as Input's.
func (m *Manager) Resize(ctx context.Context, tenant, jobID string, size TTYSize) (JobInfo, error) {
	size.Scrollback = 0
	if err := bounds.CheckTTY(size.Rows, size.Cols, 0); err != nil {
		return JobInfo{}, fmt.Errorf("%w: %v", ErrInputRefused, err)
	}
	return m.control(ctx, tenant, jobID, true, func(ctx context.Context, j *job, c Held) error {
		if j.tty == nil {
			return fmt.Errorf("%w: the job has no terminal: start it with a tty to resize it", ErrInputRefused)
		}
		if err := c.Resize(ctx, size); err != nil {
			return err
		}
		m.mu.Lock()
		j.tty = &TTYSize{Rows: size.Rows, Cols: size.Cols, Scrollback: j.tty.Scrollback}
		m.mu.Unlock()
		return nil
	})
}

// Screen reads tenant's terminal job jobID's screen as its holder's
// emulator renders it, with up to scrollback lines that scrolled off its
// top; a job that ended shows its last screen until it is recycled.
// Errors as Input's, but ErrEnded.
func (m *Manager) Screen(ctx context.Context, tenant, jobID string, scrollback int) (Screen, JobInfo, error) {
	var scr Screen
	info, err := m.control(ctx, tenant, jobID, true, func(ctx context.Context, j *job, c Held) error {
		if j.tty == nil {
			return fmt.Errorf("%w: the job has no terminal: start it with a tty to read its screen, or read its output with a poll", ErrInputRefused)
		}
		var err error
		scr, err = c.Screen(ctx, heldjob.ScreenRequest{Scrollback: scrollback})
		return err
	})
	return scr, info, err
}

// control runs do on tenant's job jobID's holder connection: for a
// running job, or, with ended, also for one that ended whose holder is
// still held. A broken connection is attached again; do is repeated on
// the new one only when it is idempotent (ended: Resize, Screen).
func (m *Manager) control(ctx context.Context, tenant, jobID string, idempotent bool, do func(context.Context, *job, Held) error) (JobInfo, error) {
	m.mu.Lock()
	j, err := m.lookupLocked(tenant, jobID)
	var running bool
	if err == nil {
		running = !j.state.Terminal()
	}
	m.mu.Unlock()
	if err != nil {
		return JobInfo{}, err
	}
	info := func() JobInfo {
		m.mu.Lock()
		defer m.mu.Unlock()
		return j.infoLocked()
	}
	h := j.held
	conn := h.current()
	switch {
	case conn == nil:
		// Let go: the job ended with its sandbox, or was released, and
		// its terminal with its holder.
		return info(), ErrEnded
	case !running && !idempotent:
		return info(), ErrEnded
	}
	if err := m.waitUnparked(ctx, j.sandbox); err != nil {
		return info(), err
	}
	cctx, cancel := context.WithTimeout(ctx, attachTimeout)
	defer cancel()
	err = do(cctx, j, conn)
	if err == nil || errors.Is(err, ErrInputRefused) || ctx.Err() != nil {
		return info(), err
	}
	c, rerr := h.reconnect(cctx, conn)
	switch {
	case errors.Is(rerr, errLetGo), errors.Is(rerr, errTakenOver):
		return info(), ErrEnded
	case rerr != nil:
		return info(), fmt.Errorf("%w (%v)", ErrUnreachable, rerr)
	case !idempotent:
		return info(), fmt.Errorf("%w: the connection to the job broke while the input was sent, so it may or may not have reached the job (%v)", ErrUnreachable, err)
	}
	if err := do(cctx, j, c); err != nil && !errors.Is(err, ErrInputRefused) {
		return info(), fmt.Errorf("%w (%v)", ErrUnreachable, err)
	} else if err != nil {
		return info(), err
	}
	return info(), nil
}

// TTYSize is a terminal job's terminal: its size, and, at the job's
// start, how many lines that scroll off its top it keeps (0: the
// holder's default).
type TTYSize = heldjob.TTYSize

// Screen is a terminal job's screen as its holder's emulator renders it.
type Screen = heldjob.Screen

// ttySpec is t as a held job's spec says it; nil for none.
func ttySpec(t *TTYSize) *agentapi.TTYSize {
	if t == nil {
		return nil
	}
	return &agentapi.TTYSize{Rows: t.Rows, Cols: t.Cols, Scrollback: t.Scrollback}
}

// ttyOf is a held job's spec's t as the engine's.
func ttyOf(t *agentapi.TTYSize) *TTYSize {
	if t == nil {
		return nil
	}
	return &TTYSize{Rows: t.Rows, Cols: t.Cols, Scrollback: t.Scrollback}
}
