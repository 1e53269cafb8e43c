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

package backendtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/guestapi/outring"
)

// Holder holds jobs in memory as a sandbox's guest does
// (hostagent/guest/job.go), over the guest protocol, for tests of what sits
// above backend.JobHolder (the job manager, the kernel, the agent's API):
// each job's command is the backend.Process that Command starts; its
// output goes to the job's ring (package outring, as in the guest), its
// end is pushed to the connection attached, a Kill frame is the process's
// Kill (nil is the proof; an error, the proof lost), and Release ends the
// hold. Unlike the guest's, a job is kept until it is released (no TTL of
// its own). It proves nothing about processes: the conformance suite runs
// the guest's holder.
type Holder struct {
	// Command starts a job's command, whose sink writes to the job's ring.
	Command func(req backend.ExecRequest, sink backend.Sink) (backend.Process, error)

	mu     sync.Mutex
	jobs   map[string]*heldJob
	nextID int
}

// NewHolder returns a Holder whose jobs run command.
func NewHolder(command func(req backend.ExecRequest, sink backend.Sink) (backend.Process, error)) *Holder {
	return &Holder{Command: command, jobs: map[string]*heldJob{}}
}

type heldJob struct {
	h *Holder

	mu        sync.Mutex
	record    guestapi.JobRecord
	ring      outring.Ring
	proc      backend.Process
	running   bool
	killing   bool
	exit      *guestapi.End
	proofLost string
	conn      *heldConn
	changed   chan struct{} // closed and replaced on every change
	released  bool
	waiting   int // polls parked until there is something to say
}

// Conn is a connection on which the holder takes a job's start
// (backend.JobHolder's JobConn).
func (h *Holder) Conn() net.Conn {
	agent, ours := net.Pipe()
	go h.serveStart(ours)
	return agent
}

// Attach is a connection to job id (backend.JobHolder's AttachJob): it
// supersedes the connection attached before.
func (h *Holder) Attach(id string) (net.Conn, error) {
	h.mu.Lock()
	j := h.jobs[id]
	h.mu.Unlock()
	if j == nil {
		return nil, fmt.Errorf("%w: no job %s in this sandbox", backend.ErrNotFound, id)
	}
	agent, ours := net.Pipe()
	j.attach(newHeldConn(ours))
	return agent, nil
}

// List is the records of the jobs held (backend.JobHolder's ListJobs).
func (h *Holder) List() []backend.JobRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []guestapi.JobRecord{}
	for _, j := range h.jobs {
		out = append(out, j.record)
	}
	return guestexec.Records(out)
}

// Waiting says whether a poll of job id waits, parked, for something to
// say.
func (h *Holder) Waiting(id string) bool {
	h.mu.Lock()
	j := h.jobs[id]
	h.mu.Unlock()
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.waiting > 0
}

// Close ends every job as the sandbox's stop would: their processes are
// killed, their connections closed, and nothing is held any more.
func (h *Holder) Close() {
	h.mu.Lock()
	jobs := h.jobs
	h.jobs = map[string]*heldJob{}
	h.mu.Unlock()
	for _, j := range jobs {
		j.mu.Lock()
		j.released = true
		proc, c := j.proc, j.conn
		j.conn = nil
		j.mu.Unlock()
		if proc != nil { // nil while its command starts
			_ = proc.Kill(context.Background())
		}
		if c != nil {
			c.close()
		}
	}
}

// serveStart reads a job's start on c, as a shepherd does.
func (h *Holder) serveStart(c net.Conn) {
	fr := guestapi.NewFrameReader(bufio.NewReader(c))
	refuse := func(msg string) {
		_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(msg)))
		c.Close()
	}
	t, payload, err := fr.ReadFrame()
	var req guestapi.StartRequest
	switch {
	case err != nil:
		c.Close()
		return
	case t != guestapi.FrameStart || json.Unmarshal(payload, &req) != nil:
		refuse("protocol error: first frame is not Start")
		return
	case req.Version != guestapi.ProtocolVersion:
		refuse(guestapi.UnsupportedVersion(req.Version, guestapi.ProtocolVersion))
		return
	case req.Job == nil:
		refuse("this holder takes jobs only")
		return
	}
	var stdin []byte
	for {
		t, p, err := fr.ReadFrame()
		if err != nil {
			c.Close()
			return
		}
		if t == guestapi.FrameStdinEnd {
			break
		}
		stdin = append(stdin, p...)
	}
	shell := backend.ShellClean
	if req.Login {
		shell = backend.ShellLogin
	}
	h.mu.Lock()
	if _, ok := h.jobs[req.Job.ID]; ok {
		h.mu.Unlock()
		refuse(fmt.Sprintf("job %s already exists in this sandbox", req.Job.ID))
		return
	}
	h.nextID++
	j := &heldJob{h: h, running: true, changed: make(chan struct{}),
		ring:   outring.New(req.Job.RingBytes, req.Job.RingChunks, req.Job.ChunkBytes),
		record: guestapi.JobRecord{Spec: *req.Job, PID: 1000 + h.nextID, Started: time.Now().UTC()}}
	h.jobs[req.Job.ID] = j
	h.mu.Unlock()
	proc, err := h.Command(backend.ExecRequest{Command: req.Command, Cwd: req.Cwd, Shell: shell, Stdin: stdin}, ringSink{j})
	if err != nil {
		h.mu.Lock()
		delete(h.jobs, req.Job.ID)
		h.mu.Unlock()
		if errors.Is(err, backend.ErrExhausted) {
			refuse(guestapi.ExhaustedPrefix + err.Error())
			return
		}
		refuse(err.Error())
		return
	}
	j.mu.Lock()
	j.proc = proc
	j.mu.Unlock()
	conn := newHeldConn(c)
	started, _ := guestapi.AppendJSONFrame(nil, guestapi.FrameStarted, guestapi.Started{PID: j.record.PID})
	conn.send(started)
	j.attach(conn)
	go j.wait()
}

// ringSink writes a job's output to its ring.
type ringSink struct{ j *heldJob }

func (s ringSink) Write(stream backend.Stream, p []byte) {
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	ws := guestapi.Stdout
	if stream == backend.Stderr {
		ws = guestapi.Stderr
	}
	s.j.ring.Write(ws, p)
	s.j.changedLocked()
}

func (j *heldJob) changedLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// wait ends the job when its command does, unless a kill ends it.
func (j *heldJob) wait() {
	st, err := j.proc.Wait(context.Background())
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.killing || !j.running {
		return
	}
	if err != nil {
		j.endLocked(nil, err.Error())
		return
	}
	j.endLocked(exitOf(st, false), "")
}

func exitOf(st backend.ExitStatus, killed bool) *guestapi.End {
	e := &guestapi.End{Status: guestapi.Exit{ExitCode: st.ExitCode, Killed: killed}}
	if st.Signal != "" {
		e.ExitCode, e.Signal = -1, st.Signal
	}
	return e
}

// endLocked records the job's end and tells the connection attached.
func (j *heldJob) endLocked(e *guestapi.End, proofLost string) {
	j.running, j.exit, j.proofLost = false, e, proofLost
	if e != nil {
		e.Duration = time.Since(j.record.Started)
		e.Output = j.ring.End().Pos
		e.DroppedBytes, e.DroppedChunks = j.ring.Dropped()
	}
	j.changedLocked()
	if j.conn != nil {
		j.conn.send(j.endFrameLocked())
	}
}

func (j *heldJob) endFrameLocked() []byte {
	if j.exit != nil {
		f, _ := guestapi.AppendJSONFrame(nil, guestapi.FrameExit, *j.exit)
		return f
	}
	return guestapi.AppendFrame(nil, guestapi.FrameProofLost, []byte(j.proofLost))
}

// kill kills the command with its proof, once.
func (j *heldJob) killLocked() {
	if !j.running || j.killing {
		return
	}
	j.killing = true
	proc := j.proc
	go func() {
		err := proc.Kill(context.Background())
		var st backend.ExitStatus
		if err == nil {
			st, err = proc.Wait(context.Background())
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		if !j.running {
			return
		}
		if err != nil {
			j.endLocked(nil, err.Error())
			return
		}
		j.endLocked(exitOf(st, true), "")
	}()
}

// attach makes c the job's connection, superseding the one before, and
// serves its frames.
func (j *heldJob) attach(c *heldConn) {
	j.mu.Lock()
	old := j.conn
	j.conn = c
	if !j.running {
		c.send(j.endFrameLocked())
	}
	j.mu.Unlock()
	if old != nil {
		old.send(guestapi.AppendFrame(nil, guestapi.FrameSuperseded, nil))
		old.flush()
	}
	go j.serve(c)
}

// serve handles the frames of c: Poll, Kill, Release.
func (j *heldJob) serve(c *heldConn) {
	fr := guestapi.NewFrameReader(bufio.NewReader(c.c))
	for {
		t, payload, err := fr.ReadFrame()
		if err != nil {
			j.drop(c)
			return
		}
		switch t {
		case guestapi.FramePoll:
			var req guestapi.PollRequest
			if json.Unmarshal(payload, &req) != nil {
				j.drop(c)
				return
			}
			go j.answer(c, req)
		case guestapi.FrameKill:
			j.mu.Lock()
			j.killLocked()
			j.mu.Unlock()
		case guestapi.FrameRelease:
			j.release(c)
			return
		default:
			j.drop(c)
			return
		}
	}
}

// drop closes c, which is no longer the job's connection.
func (j *heldJob) drop(c *heldConn) {
	j.mu.Lock()
	if j.conn == c {
		j.conn = nil
	}
	j.mu.Unlock()
	c.close()
}

// answer sends the page req asks for, once there is something to say or
// its wait is over.
func (j *heldJob) answer(c *heldConn, req guestapi.PollRequest) {
	cur, err := outring.ParseCursor(req.Cursor)
	if err != nil {
		f, _ := guestapi.AppendJSONFrame(nil, guestapi.FramePage, guestapi.Page{Error: outring.Reason(err)})
		c.send(f)
		return
	}
	deadline := time.Now().Add(time.Duration(max(req.WaitMillis, 0)) * time.Millisecond)
	budget := min(max(req.Max, 1), guestapi.MaxJobPage)
	for {
		j.mu.Lock()
		res, gap, rerr := j.ring.Resolve(cur)
		if !j.running || rerr != nil || gap != nil || !j.ring.AtEnd(res) || !time.Now().Before(deadline) {
			f, _ := j.ring.AppendPage(nil, cur, budget, j.exit, j.proofLost)
			j.mu.Unlock()
			c.send(f)
			return
		}
		changed := j.changed
		j.waiting++
		j.mu.Unlock()
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
		case <-c.done:
		}
		j.mu.Lock()
		j.waiting--
		j.mu.Unlock()
		select {
		case <-c.done:
			return
		default:
		}
	}
}

// release ends the hold, killing a running job with proof first, and
// answers with the page at the end.
func (j *heldJob) release(c *heldConn) {
	j.mu.Lock()
	j.killLocked()
	for j.running {
		changed := j.changed
		j.mu.Unlock()
		<-changed
		j.mu.Lock()
	}
	f, _ := j.ring.AppendPage(nil, j.ring.End(), 1, j.exit, j.proofLost)
	j.released = true
	j.mu.Unlock()
	j.h.mu.Lock()
	if j.h.jobs[j.record.Spec.ID] == j {
		delete(j.h.jobs, j.record.Spec.ID)
	}
	j.h.mu.Unlock()
	c.send(f)
	c.flush()
}

// heldConn is a connection to the agent whose frames go out in order,
// from a goroutine of its own, so that no lock waits for the agent.
type heldConn struct {
	c    net.Conn
	done chan struct{} // closed with the connection

	mu      sync.Mutex
	cond    *sync.Cond
	q       [][]byte
	closing bool // close once q is written
	closed  bool
}

func newHeldConn(c net.Conn) *heldConn {
	hc := &heldConn{c: c, done: make(chan struct{})}
	hc.cond = sync.NewCond(&hc.mu)
	go hc.write()
	return hc
}

func (hc *heldConn) send(frame []byte) {
	hc.mu.Lock()
	hc.q = append(hc.q, frame)
	hc.mu.Unlock()
	hc.cond.Broadcast()
}

func (hc *heldConn) write() {
	for {
		hc.mu.Lock()
		for len(hc.q) == 0 && !hc.closing && !hc.closed {
			hc.cond.Wait()
		}
		q, closing, closed := hc.q, hc.closing, hc.closed
		hc.q = nil
		hc.mu.Unlock()
		if closed || (closing && len(q) == 0) {
			hc.close()
			return
		}
		for _, f := range q {
			if _, err := hc.c.Write(f); err != nil {
				hc.close()
				return
			}
		}
	}
}

// flush closes the connection once what was sent is written.
func (hc *heldConn) flush() {
	hc.mu.Lock()
	hc.closing = true
	hc.mu.Unlock()
	hc.cond.Broadcast()
}

func (hc *heldConn) close() {
	hc.mu.Lock()
	already := hc.closed
	hc.closed = true
	hc.mu.Unlock()
	hc.cond.Broadcast()
	if !already {
		close(hc.done)
		hc.c.Close()
	}
}
