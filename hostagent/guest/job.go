//go:build linux || freebsd

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

package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/guestapi/outring"
)

// JobsDir is the directory that holds a socket and a record for each job
// the sandbox holds: <id>.sock, on which the job's holder accepts the
// agent, and <id>.json, its JobRecord. Root's, mode 0700, on the sandbox's
// own /run (a tmpfs, in its memory), not in the node's RunDir: the agent
// reaches a holder through init's control socket, the records go with the
// processes they name when the sandbox stops, and under gVisor a socket
// bound in a directory of the node's is a socket of the node's, which no
// checkpoint can save (init closes its own for one, see
// guestapi.StartRequest.Checkpoint).
const JobsDir = "/run/playground-jobs"

// jobsDir is where this process keeps its job's socket and record:
// JobsDir, or the directory a holder is told (RunHold's -run).
var jobsDir = JobsDir

// validJobID says whether id is 1 to 64 letters, digits, '-' or '_': a
// file name in JobsDir, and nothing else. (Not a regexp: the package would
// cost every idle process of every sandbox its tables.)
func validJobID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// checkJobSpec refuses a job the holder would not bound.
func checkJobSpec(j *guestapi.JobSpec) error {
	switch {
	case !validJobID(j.ID):
		return fmt.Errorf("job ID %q: want 1 to 64 letters, digits, '-' or '_'", j.ID)
	case j.RingBytes < 1 || j.RingBytes > guestapi.MaxJobRingBytes:
		return fmt.Errorf("job ring of %d bytes: want 1 to %d", j.RingBytes, guestapi.MaxJobRingBytes)
	case j.RingChunks < 1 || j.RingChunks > guestapi.MaxJobRingChunks:
		return fmt.Errorf("job ring of %d chunks: want 1 to %d", j.RingChunks, guestapi.MaxJobRingChunks)
	case j.ChunkBytes < 1 || j.ChunkBytes > j.RingBytes:
		return fmt.Errorf("job chunks of %d bytes: want 1 to the ring's %d", j.ChunkBytes, j.RingBytes)
	case j.TTLSeconds < 1:
		return fmt.Errorf("job TTL of %d s: want at least 1", j.TTLSeconds)
	case len(j.Meta) > guestapi.MaxJobMeta:
		return fmt.Errorf("job record of %d bytes: want at most %d", len(j.Meta), guestapi.MaxJobMeta)
	}
	if _, err := os.Stat(filepath.Join(jobsDir, j.ID+".json")); err == nil {
		return fmt.Errorf("job %s already exists in this sandbox", j.ID)
	}
	return nil
}

// holderGCPercent is a holder's GOGC: its heap is its ring and little
// else, so a collection costs little and the memory it saves is the
// tenant's.
const holderGCPercent = 20

// jobHold is what a shepherd keeps of the job it holds.
type jobHold struct {
	spec    guestapi.JobSpec
	record  guestapi.JobRecord
	ring    outring.Ring
	listen  int // the job's socket, for the agent's next connection
	running bool
	// tty is a terminal job's terminal, whose screen outlives the job.
	tty *terminal

	exit      *guestapi.End
	proofLost string
	ended     time.Time
	lastPoll  time.Time

	// poll is the agent's pending long poll, answered at pollDeadline at
	// the latest.
	poll         *guestapi.PollRequest
	pollCursor   outring.Cursor
	pollDeadline time.Time
}

// startJob starts req, whose Job is set, as a job the sandbox holds, and
// holds it (holdJob) until it is released or expires.
func (s *shepherd) startJob(req guestapi.StartRequest, stdin []byte) {
	h, err := openJob(*req.Job)
	if err != nil {
		s.sendError(err.Error())
		return
	}
	s.job = h
	// A holder accepts no other connection: the socket it shares with the
	// spares goes, so that it does not keep it open for as long as its job
	// runs (under gVisor, that would keep the sandbox from a checkpoint).
	dropListener()
	cmd, err := s.start(req, stdin)
	if err == nil {
		h.running, h.tty = true, cmd.tty
		if err = h.writeRecord(cmd.pid); err != nil {
			s.kill(cmd)
			err = fmt.Errorf("recording the job: %w", err)
		}
	}
	if err != nil {
		h.remove()
		s.startFailed(err)
		return
	}
	if started, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStarted, guestapi.Started{PID: cmd.pid}); err == nil {
		s.send(started)
	}
	// The job outlives this connection: a broken one is only dropped.
	s.afterSend()
	s.holdJob(cmd)
}

// holdJob supervises c as a job the sandbox holds, until the agent
// releases it or it ends and stays unpolled for its TTL. Output goes to
// the job's ring (in the sandbox's memory, charged to its cgroup); the
// agent reads it with Poll frames, on the connection that started the job
// or on a later one that attached. The command outlives every connection:
// only Kill and Release end it, with proof.
func (s *shepherd) holdJob(c *command) {
	h := s.job
	defer h.remove()
	// This process holds one ring, which grows by doubling to its bound:
	// the default GC would let the garbage of its growth double the
	// process's heap again, all of it charged to the tenant.
	debug.SetGCPercent(holderGCPercent)
	buf := make([]byte, guestapi.HeaderSize+guestapi.OutputChunk)
	var pfds []unix.PollFd
	for {
		now := time.Now()
		if h.poll != nil && (h.answerable() || !now.Before(h.pollDeadline)) {
			s.answerPoll()
		}
		if !h.running {
			// The job's background processes are our children (we are
			// their subreaper): reap those that ended.
			noChildren()
			if s.conn < 0 && h.expired(now) {
				return
			}
		}
		pfds = append(pfds[:0], unix.PollFd{Fd: int32(h.listen), Events: unix.POLLIN})
		connIdx, polled := -1, s.conn
		if s.conn >= 0 {
			connIdx = len(pfds)
			pfds = append(pfds, unix.PollFd{Fd: int32(s.conn), Events: unix.POLLIN})
		}
		pidIdx, outIdx, stdinIdx := -1, [2]int{-1, -1}, -1
		if h.running {
			pidIdx = len(pfds)
			pfds = append(pfds, unix.PollFd{Fd: int32(c.exited), Events: unix.POLLIN})
			for i, o := range c.outs {
				if !o.eof {
					outIdx[i] = len(pfds)
					pfds = append(pfds, unix.PollFd{Fd: int32(o.fd), Events: unix.POLLIN})
				}
			}
			if c.wantsStdin() {
				stdinIdx = len(pfds)
				pfds = append(pfds, unix.PollFd{Fd: int32(c.stdinW), Events: unix.POLLOUT})
			}
		}
		if _, err := unix.Poll(pfds, h.timeout(now)); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			// Nothing to wait on can fail: give up holding, with proof.
			if h.running {
				s.kill(c)
			}
			return
		}
		if pfds[0].Revents != 0 {
			s.acceptAgent()
		}
		// What woke us on the connection is the one polled: an agent
		// accepted just now took its place (and it is closed), and the
		// new one has said nothing yet (reading it would block).
		if connIdx >= 0 && pfds[connIdx].Revents != 0 && s.conn >= 0 && s.conn == polled {
			if release := s.readJobFrames(c); release {
				if h.running {
					s.kill(c)
				}
				s.sendPage(h.ring.End(), 1)
				return
			}
		}
		if !h.running {
			continue
		}
		for i, o := range c.outs {
			if outIdx[i] >= 0 && pfds[outIdx[i]].Revents != 0 {
				s.forward(o, buf)
			}
		}
		if stdinIdx >= 0 && pfds[stdinIdx].Revents != 0 {
			c.feedStdin()
		}
		if pfds[pidIdx].Revents != 0 {
			s.finish(c, buf)
		}
	}
}

// acceptAgent takes the agent's new connection: the newest wins, so an
// agent that restarted takes over from its predecessor's.
func (s *shepherd) acceptAgent() {
	fd, _, err := unix.Accept4(s.job.listen, unix.SOCK_CLOEXEC)
	if err != nil {
		return
	}
	if s.conn >= 0 {
		s.send(guestapi.AppendFrame(nil, guestapi.FrameSuperseded, nil))
	}
	s.dropAgent()
	s.conn = fd
	if !s.job.running {
		s.pushEnd()
	}
}

// pushEnd tells the agent, unasked, how the job ended: the agent learns it
// without polling, to count the job as no longer active.
func (s *shepherd) pushEnd() {
	h := s.job
	var f []byte
	if h.exit != nil {
		f, _ = guestapi.AppendJSONFrame(nil, guestapi.FrameExit, *h.exit)
	} else {
		f = guestapi.AppendFrame(nil, guestapi.FrameProofLost, []byte(h.proofLost))
	}
	s.send(f)
	s.afterSend()
}

// dropAgent closes the agent's connection, if any; a pending poll is
// forgotten (nobody waits for its answer).
func (s *shepherd) dropAgent() {
	if s.conn >= 0 {
		unix.Close(s.conn)
	}
	s.conn, s.lost, s.pending, s.job.poll = -1, false, nil, nil
}

// readJobFrames reads and handles the agent's frames; it returns true on
// Release.
func (s *shepherd) readJobFrames(c *command) bool {
	var b [4096]byte
	n, err := unix.Read(s.conn, b[:])
	switch {
	case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
		return false
	case err != nil || n == 0:
		s.dropAgent()
		return false
	}
	s.pending = append(s.pending, b[:n]...)
	for len(s.pending) > 0 && s.conn >= 0 {
		t, payload, used, err := guestapi.ParseFrame(s.pending)
		if err != nil || (used == 0 && len(s.pending) > maxJobFrame) {
			s.dropAgent()
			return false
		}
		if used == 0 {
			return false
		}
		s.pending = s.pending[used:]
		switch t {
		case guestapi.FramePoll:
			var req guestapi.PollRequest
			if err := json.Unmarshal(payload, &req); err != nil || s.job.poll != nil {
				// Malformed, or a second poll before the first's answer.
				s.dropAgent()
				return false
			}
			s.startPoll(&req)
		case guestapi.FrameKill:
			if s.job.running {
				s.kill(c)
			}
		case guestapi.FrameRelease:
			return true
		case guestapi.FrameInput, guestapi.FrameInputEnd, guestapi.FrameResize:
			s.ack(s.control(c, t, payload))
		case guestapi.FrameScreen:
			var req guestapi.ScreenRequest
			if err := json.Unmarshal(payload, &req); err != nil {
				s.dropAgent()
				return false
			}
			s.sendScreen(req)
		default:
			s.dropAgent()
			return false
		}
	}
	return false
}

// maxJobFrame bounds a frame the agent sends on a job's connection: an
// Input frame is the largest.
const maxJobFrame = bounds.MaxInputBytes + guestapi.HeaderSize

// control handles an Input, InputEnd or Resize frame: nil when done,
// else the refusal the Ack carries.
func (s *shepherd) control(c *command, t guestapi.FrameType, payload []byte) error {
	if !s.job.running {
		return errors.New("the job has ended: it takes no more input")
	}
	switch t {
	case guestapi.FrameInput:
		if len(payload) > bounds.MaxInputBytes {
			return fmt.Errorf("input of %d bytes: at most %d at a time", len(payload), bounds.MaxInputBytes)
		}
		return c.input(payload)
	case guestapi.FrameInputEnd:
		return c.endInput()
	}
	var size guestapi.TTYSize
	if err := json.Unmarshal(payload, &size); err != nil {
		return fmt.Errorf("protocol error: Resize: %w", err)
	}
	if c.tty == nil {
		return errNotTerminal
	}
	if err := size.Check(); err != nil {
		return err
	}
	return c.tty.resize(size)
}

// ack answers a control frame.
func (s *shepherd) ack(err error) {
	a := guestapi.Ack{}
	if err != nil {
		a.Error = err.Error()
	}
	s.sendFrames(guestapi.AppendJSONFrame(nil, guestapi.FrameAck, a))
}

// sendScreen answers a Screen frame with the terminal's screen, or an
// Ack that refuses it.
func (s *shepherd) sendScreen(req guestapi.ScreenRequest) {
	if s.job.tty == nil {
		s.ack(errNotTerminal)
		return
	}
	scr := s.job.tty.screen(min(max(req.Scrollback, 0), bounds.MaxScrollback))
	f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameScreenState, scr)
	if err != nil {
		// Never silence, which the agent could only wait out.
		s.ack(fmt.Errorf("the screen does not fit an answer: %w", err))
		return
	}
	s.sendFrames(f, nil)
}

// startPoll checks a poll's cursor and keeps it pending; holdJob answers
// it as soon as there is something to say or its wait is over.
func (s *shepherd) startPoll(req *guestapi.PollRequest) {
	h := s.job
	h.lastPoll = time.Now()
	cur, err := outring.ParseCursor(req.Cursor)
	if err == nil {
		_, _, err = h.ring.Resolve(cur)
	}
	if err != nil {
		s.sendFrames(guestapi.AppendJSONFrame(nil, guestapi.FramePage, guestapi.Page{Error: outring.Reason(err)}))
		return
	}
	req.Max = min(max(req.Max, 1), guestapi.MaxJobPage)
	h.poll, h.pollCursor = req, cur
	h.pollDeadline = time.Now().Add(time.Duration(max(req.WaitMillis, 0)) * time.Millisecond)
}

// answerPoll sends the page the pending poll asked for.
func (s *shepherd) answerPoll() {
	h := s.job
	req := h.poll
	h.poll = nil
	s.sendPage(h.pollCursor, req.Max)
}

// sendPage sends a Page of at most budget bytes from cur (a cursor the ring
// accepted when the poll came), followed by its chunks' bytes.
func (s *shepherd) sendPage(cur outring.Cursor, budget int) {
	h := s.job
	h.lastPoll = time.Now()
	s.sendFrames(h.ring.AppendPage(nil, cur, budget, h.exit, h.proofLost))
}

// sendFrames sends f unless making it failed.
func (s *shepherd) sendFrames(f []byte, err error) {
	if err != nil {
		return
	}
	s.send(f)
	s.afterSend()
}

// afterSend drops a connection a send found broken.
func (s *shepherd) afterSend() {
	if s.lost {
		s.dropAgent()
	}
}

// answerable: the pending poll has something to return at once.
func (h *jobHold) answerable() bool {
	if !h.running {
		return true
	}
	c, gap, err := h.ring.Resolve(h.pollCursor)
	return err != nil || gap != nil || !h.ring.AtEnd(c)
}

// expired: the job ended and was not polled for its TTL.
func (h *jobHold) expired(now time.Time) bool {
	last := h.ended
	if h.lastPoll.After(last) {
		last = h.lastPoll
	}
	return now.Sub(last) >= time.Duration(h.spec.TTLSeconds)*time.Second
}

// timeout is how long holdJob's poll(2) may wait, in milliseconds: until
// the pending poll's deadline, or the TTL's end once the job has ended.
func (h *jobHold) timeout(now time.Time) int {
	var until time.Time
	if h.poll != nil {
		until = h.pollDeadline
	}
	if !h.running {
		last := h.ended
		if h.lastPoll.After(last) {
			last = h.lastPoll
		}
		ttl := last.Add(time.Duration(h.spec.TTLSeconds) * time.Second)
		if until.IsZero() || ttl.Before(until) {
			until = ttl
		}
	}
	if until.IsZero() {
		return -1
	}
	return int(max(until.Sub(now).Milliseconds()+1, 0))
}

// endJob records the job's end, as sendExit and proofLost report it, and
// tells the agent.
func (s *shepherd) endJob(e *guestapi.End, proofLost string) {
	h := s.job
	h.exit, h.proofLost, h.running, h.ended = e, proofLost, false, time.Now()
	if e != nil {
		e.Duration = h.ended.Sub(h.record.Started)
		e.Output = h.ring.End().Pos
		e.DroppedBytes, e.DroppedChunks = h.ring.Dropped()
	}
	s.pushEnd()
}

// openJob makes the job's socket and record, before its command starts.
func openJob(spec guestapi.JobSpec) (*jobHold, error) {
	if err := os.MkdirAll(jobsDir, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(jobsDir, spec.ID+".sock")
	_ = os.Remove(sock)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("the job's socket: %w", err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		_ = os.Remove(sock)
		return nil, fmt.Errorf("the job's socket: %w", err)
	}
	return &jobHold{
		spec:   spec,
		listen: fd,
		ring:   outring.New(spec.RingBytes, spec.RingChunks, spec.ChunkBytes),
	}, nil
}

// writeRecord writes the job's record, once its shell runs.
func (h *jobHold) writeRecord(pid int) error {
	h.record = guestapi.JobRecord{Spec: h.spec, PID: pid, Started: time.Now().UTC()}
	b, err := json.Marshal(h.record)
	if err != nil {
		return err
	}
	path := filepath.Join(jobsDir, h.spec.ID+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// remove ends the hold: no socket, no record.
func (h *jobHold) remove() {
	if h.listen >= 0 {
		unix.Close(h.listen)
		h.listen = -1
	}
	_ = os.Remove(filepath.Join(jobsDir, h.spec.ID+".json"))
	_ = os.Remove(filepath.Join(jobsDir, h.spec.ID+".sock"))
}

// ListJobs reads the records of the jobs the sandbox holds, by ID.
func ListJobs() ([]guestapi.JobRecord, error) {
	return guestapi.ReadJobRecords(os.DirFS(jobsDir))
}
