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

package guestexec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/guestapi/outring"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// Job is the agent's connection to a job the sandbox holds
// (guestapi.StartRequest.Job): the job's output is in a ring in the sandbox,
// read by Poll; the job outlives this connection, and a later one
// (another agent process, after a restart) takes over with AttachJob.
// Polls are serialized, and so are the requests that control the job
// (input, resize, screen), each kind on its own: the holder answers a
// control request at once, even while a long poll waits. A request whose
// ctx ends closes the connection (its answer would be out of step):
// attach again to go on. Its methods take and give the job engine's
// values (package heldjob): it is the engine's jobs.Held.
type Job struct {
	mu    sync.Mutex // serializes polls and releases
	conn  net.Conn
	pages chan pageOrErr
	// ctlMu serializes control requests, answered on ctl.
	ctlMu sync.Mutex
	ctl   chan ctlOrErr
	// wmu keeps the frames of concurrent requests whole on the wire.
	wmu sync.Mutex
	// PID is the job's shell in the sandbox (0 when attached).
	PID int

	ended     chan struct{} // closed once end or readErr is set
	endOnce   sync.Once
	exit      *heldjob.Exit
	proofLost string
	readErr   error
}

type pageOrErr struct {
	page heldjob.Page
	// refused is the holder's refusal of the poll (a cursor that does
	// not fit), instead of a page.
	refused string
	err     error
}

// ctlOrErr is the answer to a control request: an Ack, or a Screen.
type ctlOrErr struct {
	ack    *guestapi.Ack
	screen *guestapi.Screen
	err    error
}

func newJob(conn net.Conn, fr *guestapi.FrameReader, pid int) *Job {
	j := &Job{conn: conn, pages: make(chan pageOrErr, 1), ctl: make(chan ctlOrErr, 1), PID: pid, ended: make(chan struct{})}
	go j.read(fr)
	return j
}

// Ended is closed when the holder has said how the job ended, or the
// connection broke; End says which.
func (j *Job) Ended() <-chan struct{} { return j.ended }

// End is how the job ended (exit, or why its cleanup is unproven), or the
// connection's error if it broke first; valid once Ended is closed.
func (j *Job) End() (exit *heldjob.Exit, proofLost string, err error) {
	return j.exit, j.proofLost, j.readErr
}

// read receives the holder's frames: Pages for the request in flight,
// and the job's end, sent unasked.
func (j *Job) read(fr *guestapi.FrameReader) {
	defer close(j.pages)
	defer close(j.ctl)
	for {
		t, payload, err := fr.ReadFrame()
		if err != nil {
			j.endOnce.Do(func() { j.readErr = err; close(j.ended) })
			j.offer(pageOrErr{err: err})
			return
		}
		switch t {
		case guestapi.FrameAck:
			var a guestapi.Ack
			if err := json.Unmarshal(payload, &a); err != nil {
				j.fail(fmt.Errorf("protocol error: Ack: %w", err))
				return
			}
			j.ctl <- ctlOrErr{ack: &a}
		case guestapi.FrameScreenState:
			var s guestapi.Screen
			if err := json.Unmarshal(payload, &s); err != nil {
				j.fail(fmt.Errorf("protocol error: ScreenState: %w", err))
				return
			}
			j.ctl <- ctlOrErr{screen: &s}
		case guestapi.FrameExit:
			var e guestapi.End
			if err := json.Unmarshal(payload, &e); err != nil {
				j.fail(fmt.Errorf("protocol error: Exit: %w", err))
				return
			}
			j.endOnce.Do(func() { j.exit = exitOf(&e); close(j.ended) })
		case guestapi.FrameProofLost:
			msg := string(payload)
			j.endOnce.Do(func() { j.proofLost = msg; close(j.ended) })
		case guestapi.FrameSuperseded:
			j.fail(heldjob.ErrSuperseded)
			return
		case guestapi.FramePage:
			p, refused, err := readPage(fr, payload)
			if err != nil {
				j.fail(err)
				return
			}
			j.pages <- pageOrErr{page: p, refused: refused}
		default:
			j.fail(fmt.Errorf("protocol error: %v frame on a job's connection", t))
			return
		}
	}
}

func (j *Job) fail(err error) {
	j.conn.Close()
	j.endOnce.Do(func() { j.readErr = err; close(j.ended) })
	j.offer(pageOrErr{err: err})
}

// offer hands an error to a request that waits, if one does; a request
// made later finds the channel closed.
func (j *Job) offer(r pageOrErr) {
	select {
	case j.pages <- r:
	default:
	}
	select {
	case j.ctl <- ctlOrErr{err: r.err}:
	default:
	}
}

// refusal is the error of a shepherd's Error frame: ErrInvalidRequest
// for a request it refused, ErrExhausted for one the sandbox's resources
// refused, and for a request of a protocol version the sandbox's guest
// does not speak an error that wraps neither (it says so): nothing the
// tenant asked for is wrong, the sandbox runs another guest binary.
func refusal(payload []byte) error {
	if bytes.HasPrefix(payload, []byte(guestapi.UnsupportedVersionPrefix)) {
		return fmt.Errorf("the sandbox's guest refused the agent's request: %s", payload)
	}
	if why, ok := bytes.CutPrefix(payload, []byte(guestapi.ExhaustedPrefix)); ok {
		return fmt.Errorf("%w: %s", backend.ErrExhausted, why)
	}
	return fmt.Errorf("%w: %s", backend.ErrInvalidRequest, payload)
}

// StartJob starts req as a job the sandbox holds under spec, on conn, a
// connection to the sandbox's init, and returns once its shell runs; ctx
// bounds the start only. It refuses like Start does; conn is closed on
// failure.
func StartJob(ctx context.Context, conn net.Conn, req backend.ExecRequest, spec backend.JobSpec) (*Job, error) {
	js := wireSpec(spec)
	frames, err := encode(req, &js)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", backend.ErrInvalidRequest, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	fail := func(err error) (*Job, error) {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if _, err := conn.Write(frames); err != nil {
		return fail(err)
	}
	fr := guestapi.NewFrameReader(bufio.NewReaderSize(conn, guestapi.OutputChunk+guestapi.HeaderSize))
	t, payload, err := fr.ReadFrame()
	var pid int
	if err != nil {
		return fail(err)
	}
	switch t {
	case guestapi.FrameStarted:
		var st guestapi.Started
		if err := json.Unmarshal(payload, &st); err != nil {
			return fail(fmt.Errorf("protocol error: Started: %w", err))
		}
		pid = st.PID
	case guestapi.FrameError:
		return fail(refusal(payload))
	default:
		return fail(fmt.Errorf("protocol error: %v frame before Started", t))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	return newJob(conn, fr, pid), nil
}

// Control reaches the control socket of a sandbox's init
// (guestapi.ControlSocketName), on which init itself lists the jobs its
// sandbox holds and joins the agent to their holders. Its methods are
// Holder's AttachJob and ListJobs.
type Control func(ctx context.Context, id string) (net.Conn, error)

// Holder is the backend.JobHolder of the backends whose sandboxes run the
// guest's init (oci, vm, lima): each gives it only how to reach the guest.
// A backend puts it in its Capabilities.
type Holder struct {
	// Shepherd reaches an idle shepherd of the sandbox's init, which holds
	// the job it is asked to start (JobConn); it validates the sandbox ID.
	Shepherd func(ctx context.Context, id string) (net.Conn, error)
	// Control reaches init's control socket (AttachJob, ListJobs); nil
	// where the guest's init answers those on Shepherd's connection too
	// (a VM's agent port, Lima's forwarded socket).
	Control Control
}

var _ backend.JobHolder = Holder{}

// JobConn implements backend.JobHolder.
func (h Holder) JobConn(ctx context.Context, id string) (net.Conn, error) {
	return h.Shepherd(ctx, id)
}

// AttachJob implements backend.JobHolder: init joins the connection to the
// job's holder.
func (h Holder) AttachJob(ctx context.Context, id, jobID string) (net.Conn, error) {
	return h.control().AttachJob(ctx, id, jobID)
}

// ListJobs implements backend.JobHolder: init lists its sandbox's jobs.
func (h Holder) ListJobs(ctx context.Context, id string) ([]backend.JobRecord, error) {
	return h.control().ListJobs(ctx, id)
}

func (h Holder) control() Control {
	if h.Control == nil {
		return Control(h.Shepherd)
	}
	return h.Control
}

// AttachJob implements backend.JobHolder over c.
func (c Control) AttachJob(ctx context.Context, id, jobID string) (net.Conn, error) {
	conn, err := c(ctx, id)
	if err != nil {
		return nil, err
	}
	br, err := ask(ctx, conn, guestapi.StartRequest{Version: guestapi.ProtocolVersion, Attach: jobID})
	if errors.Is(err, backend.ErrInvalidRequest) {
		return nil, fmt.Errorf("%w: %v", backend.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// ListJobs implements backend.JobHolder over c.
func (c Control) ListJobs(ctx context.Context, id string) ([]backend.JobRecord, error) {
	conn, err := c(ctx, id)
	if err != nil {
		return nil, err
	}
	return listJobs(ctx, conn)
}

// Checkpoint asks init to close the sockets the node backs, so that the
// sandbox's runtime can checkpoint it (guestapi.StartRequest.Checkpoint);
// guestapi.ResumeSignal opens them again. backend.ErrNoCheckpoint says why
// init could not (a socket of the tenant's that the node backs): the
// sandbox runs on, listening.
func (c Control) Checkpoint(ctx context.Context, id string) error {
	conn, err := c(ctx, id)
	if err != nil {
		return err
	}
	_, err = ask(ctx, conn, guestapi.StartRequest{Version: guestapi.ProtocolVersion, Checkpoint: true})
	if errors.Is(err, backend.ErrInvalidRequest) {
		why := strings.TrimPrefix(err.Error(), backend.ErrInvalidRequest.Error()+": ")
		return fmt.Errorf("%w: %s", backend.ErrNoCheckpoint, why)
	}
	if err != nil {
		return err
	}
	return conn.Close()
}

// HeldJob is the agent's side of conn, a connection to a job's holder
// (backend.JobHolder's AttachJob).
func HeldJob(conn net.Conn) *Job {
	return newJob(conn, guestapi.NewFrameReader(bufio.NewReaderSize(conn, guestapi.OutputChunk+guestapi.HeaderSize)), 0)
}

// listJobs asks init, on conn, for the jobs the sandbox
// holds. conn is closed when it returns.
func listJobs(ctx context.Context, conn net.Conn) ([]backend.JobRecord, error) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	frame, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStart, guestapi.StartRequest{Version: guestapi.ProtocolVersion, Jobs: true})
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(frame); err != nil {
		return nil, orCtx(ctx, err)
	}
	t, payload, err := guestapi.NewFrameReader(bufio.NewReader(conn)).ReadFrame()
	if err != nil {
		return nil, orCtx(ctx, err)
	}
	switch t {
	case guestapi.FrameJobs:
		var recs []guestapi.JobRecord
		if err := json.Unmarshal(payload, &recs); err != nil {
			return nil, fmt.Errorf("protocol error: Jobs: %w", err)
		}
		return Records(recs), nil
	case guestapi.FrameError:
		return nil, fmt.Errorf("listing the sandbox's jobs: %w", refusal(payload))
	}
	return nil, fmt.Errorf("protocol error: %v frame in answer to Jobs", t)
}

func orCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Poll reads a page of the job's output from req.Cursor, of at most
// req.Max bytes (and guestapi.MaxJobPage), waiting up to req.Wait for
// output when there is none yet; ctx should allow that wait. A cursor the
// ring refuses is a *outring.CursorError.
func (j *Job) Poll(ctx context.Context, req heldjob.PollRequest) (heldjob.Page, error) {
	frame, err := guestapi.AppendJSONFrame(nil, guestapi.FramePoll, guestapi.PollRequest{
		Cursor: req.Cursor, Max: min(req.Max, guestapi.MaxJobPage), WaitMillis: int(req.Wait.Milliseconds()),
	})
	if err != nil {
		return heldjob.Page{}, err
	}
	return j.ask(ctx, frame)
}

// Kill asks the holder to kill the job with proof; the page that reports
// its end (Exit.Killed, or ProofLost) is the answer to a later Poll.
// It does not wait for a Poll in flight: the kill ends that poll's wait.
func (j *Job) Kill(ctx context.Context) error {
	return j.write(ctx, guestapi.AppendFrame(nil, guestapi.FrameKill, nil))
}

// write sends frame whole, within ctx.
func (j *Job) write(ctx context.Context, frame []byte) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = j.conn.SetWriteDeadline(time.Now()) })
	defer stop()
	_, err := j.conn.Write(frame)
	return orCtx(ctx, err)
}

// Input queues p (at most guestapi.MaxJobInput bytes) for the job's
// input; end, once they are written, ends it (guestapi.FrameInputEnd).
func (j *Job) Input(ctx context.Context, p []byte, end bool) error {
	var frames []byte
	if len(p) > 0 || !end {
		frames = guestapi.AppendFrame(nil, guestapi.FrameInput, p)
		if _, err := j.control(ctx, frames); err != nil {
			return err
		}
	}
	if !end {
		return nil
	}
	_, err := j.control(ctx, guestapi.AppendFrame(nil, guestapi.FrameInputEnd, nil))
	return err
}

// Resize sets the size of a terminal job's terminal.
func (j *Job) Resize(ctx context.Context, size heldjob.TTYSize) error {
	frame, err := guestapi.AppendJSONFrame(nil, guestapi.FrameResize, guestapi.TTYSize{Rows: size.Rows, Cols: size.Cols, Scrollback: size.Scrollback})
	if err != nil {
		return err
	}
	_, err = j.control(ctx, frame)
	return err
}

// Screen reads a terminal job's screen.
func (j *Job) Screen(ctx context.Context, req heldjob.ScreenRequest) (heldjob.Screen, error) {
	frame, err := guestapi.AppendJSONFrame(nil, guestapi.FrameScreen, guestapi.ScreenRequest{Scrollback: req.Scrollback})
	if err != nil {
		return heldjob.Screen{}, err
	}
	a, err := j.control(ctx, frame)
	if err != nil {
		return heldjob.Screen{}, err
	}
	if a.screen == nil {
		return heldjob.Screen{}, errors.New("protocol error: Ack in answer to Screen")
	}
	// The same fields, converted whole: a field one side gains and the
	// other lacks fails to compile rather than drop silently.
	return heldjob.Screen(*a.screen), nil
}

// control sends a control request and waits for its answer.
func (j *Job) control(ctx context.Context, frame []byte) (ctlOrErr, error) {
	j.ctlMu.Lock()
	defer j.ctlMu.Unlock()
	if err := j.write(ctx, frame); err != nil {
		return ctlOrErr{}, err
	}
	select {
	case r, ok := <-j.ctl:
		switch {
		case !ok:
			return ctlOrErr{}, fmt.Errorf("the job's connection is closed: %w", j.readErr)
		case r.err != nil:
			return ctlOrErr{}, r.err
		case r.ack != nil && r.ack.Error != "":
			return ctlOrErr{}, fmt.Errorf("%w: %s", heldjob.ErrRefused, r.ack.Error)
		}
		return r, nil
	case <-ctx.Done():
		j.conn.Close()
		return ctlOrErr{}, ctx.Err()
	}
}

// Release ends the job's holder (killing a running job with proof first)
// and closes the connection; the returned page says how the job ended.
func (j *Job) Release(ctx context.Context) (heldjob.Page, error) {
	defer j.Close()
	return j.ask(ctx, guestapi.AppendFrame(nil, guestapi.FrameRelease, nil))
}

// Close closes the connection; the job goes on.
func (j *Job) Close() error { return j.conn.Close() }

// ask sends frame and waits for the Page that answers it.
func (j *Job) ask(ctx context.Context, frame []byte) (heldjob.Page, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.write(ctx, frame); err != nil {
		return heldjob.Page{}, err
	}
	select {
	case r, ok := <-j.pages:
		if !ok {
			return heldjob.Page{}, fmt.Errorf("the job's connection is closed: %w", j.readErr)
		}
		if r.err == nil && r.refused != "" {
			return heldjob.Page{}, &outring.CursorError{Reason: r.refused}
		}
		return r.page, r.err
	case <-ctx.Done():
		j.conn.Close()
		return heldjob.Page{}, ctx.Err()
	}
}

// readPage reads the data frames of a Page whose JSON is payload: the
// page as the job engine's, or the holder's refusal of the poll.
func readPage(fr *guestapi.FrameReader, payload []byte) (heldjob.Page, string, error) {
	var wp guestapi.Page
	if err := json.Unmarshal(payload, &wp); err != nil {
		return heldjob.Page{}, "", fmt.Errorf("protocol error: Page: %w", err)
	}
	p := heldjob.Page{
		Next: wp.Next, AtEnd: wp.AtEnd,
		DroppedBytes: wp.DroppedBytes, DroppedChunks: wp.DroppedChunks,
		Exit: exitOf(wp.Exit), ProofLost: wp.ProofLost,
	}
	if g := wp.Gap; g != nil {
		p.Gap = &heldjob.Gap{FromSeq: g.FromSeq, ToSeq: g.ToSeq, Chunks: g.Chunks, Bytes: g.Bytes}
	}
	for _, c := range wp.Chunks {
		t, data, err := fr.ReadFrame()
		if err != nil {
			return heldjob.Page{}, "", err
		}
		want, stream := guestapi.FrameStdout, backend.Stdout
		if c.Stream == guestapi.Stderr {
			want, stream = guestapi.FrameStderr, backend.Stderr
		}
		if t != want || len(data) != c.Len {
			return heldjob.Page{}, "", fmt.Errorf("protocol error: %v frame of %d bytes for a %v chunk of %d", t, len(data), c.Stream, c.Len)
		}
		p.Chunks = append(p.Chunks, heldjob.Chunk{Stream: stream, Seq: c.Seq, Offset: c.Offset, Data: append([]byte(nil), data...)})
	}
	return p, wp.Error, nil
}

// exitOf is the holder's End as the job engine's (the same shape,
// exitstatus.Job); nil for none.
func exitOf(e *guestapi.End) *heldjob.Exit {
	if e == nil {
		return nil
	}
	x := heldjob.Exit(*e)
	return &x
}

// wireSpec is spec as the guest protocol says it, within the bounds a
// holder accepts.
func wireSpec(spec backend.JobSpec) guestapi.JobSpec {
	js := guestapi.JobSpec{
		ID:         spec.ID,
		RingBytes:  min(spec.RingBytes, guestapi.MaxJobRingBytes),
		RingChunks: min(spec.RingChunks, guestapi.MaxJobRingChunks),
		ChunkBytes: min(spec.ChunkBytes, guestapi.MaxJobRingBytes),
		TTLSeconds: int(min(math.Ceil(spec.TTL.Seconds()), math.MaxInt32)),
		Meta:       spec.Meta,
		Stdin:      spec.Input,
	}
	if t := spec.TTY; t != nil {
		js.TTY = &guestapi.TTYSize{Rows: t.Rows, Cols: t.Cols, Scrollback: t.Scrollback}
	}
	return js
}

// Records are the guest protocol's records of held jobs (FrameJobs, or a
// jail's run directory) as the backend contract's.
func Records(recs []guestapi.JobRecord) []backend.JobRecord {
	out := make([]backend.JobRecord, len(recs))
	for i, r := range recs {
		s := r.Spec
		spec := backend.JobSpec{
			ID:        s.ID,
			RingBytes: s.RingBytes, RingChunks: s.RingChunks, ChunkBytes: s.ChunkBytes,
			TTL:   time.Duration(s.TTLSeconds) * time.Second,
			Meta:  s.Meta,
			Input: s.Stdin,
		}
		if t := s.TTY; t != nil {
			spec.TTY = &agentapi.TTYSize{Rows: t.Rows, Cols: t.Cols, Scrollback: t.Scrollback}
		}
		out[i] = backend.JobRecord{Spec: spec, PID: r.PID, Started: r.Started}
	}
	return out
}
