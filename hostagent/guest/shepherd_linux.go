//go:build linux

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
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

const (
	// requestTimeout bounds how long a shepherd waits for a whole request
	// (Start, Stdin…, StdinEnd) once it has accepted a connection.
	requestTimeout = 30 * time.Second
	// maxDrainAfterExit bounds how much output a shepherd still forwards
	// from a stream after the shell has ended: what the shell and its
	// foreground children wrote is already in the pipe (at most its
	// capacity); anything beyond is background chatter.
	maxDrainAfterExit = 1 << 20
	// maxPendingInput bounds unparsed bytes from the agent once the command
	// runs; the agent sends only Kill frames then.
	maxPendingInput = 4 * guestapi.HeaderSize
)

// RunShepherd is a spare shepherd, started by init with the descriptors
// documented at shepherdListenFD. It becomes a child subreaper and serves
// connections one at a time, each running one command. After a command it
// accepts the next connection only if it has no children left, that is if
// the command left no background process: then it is exactly as clean as
// a freshly started shepherd, and reusing it keeps a process start off the
// path of every command. Otherwise it exits, so that the background
// processes reparent to init and outlive it. RunShepherd returns the
// process exit code: 0 once a connection was accepted (whatever became of
// the command), 1 if it failed before.
func RunShepherd() int {
	for _, fd := range []int{shepherdListenFD, shepherdBusyFD, shepherdDrainFD} {
		// Inherited descriptors are not close-on-exec; the tenant's shell
		// must inherit none of them.
		unix.CloseOnExec(fd)
	}
	// Every orphaned descendant of the command reparents to us, so "no
	// children" proves "no descendants".
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox shepherd: PR_SET_CHILD_SUBREAPER: %v\n", err)
		return 1
	}
	ownOOMScoreAdj = readOOMScoreAdj()
	for served := 0; ; {
		conn, err := accept()
		if errors.Is(err, unix.EAGAIN) {
			// Idle for IdleTimeout. A shepherd that has served commands
			// is surplus from an earlier burst: go, init keeps the spares.
			if served > 0 {
				return 0
			}
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "playground-sandbox shepherd: accept: %v\n", err)
			if served == 0 {
				return 1
			}
			return 0
		}
		reportState(true)
		s := &shepherd{conn: conn}
		s.serve()
		if s.conn >= 0 {
			unix.Close(s.conn)
		}
		served++
		// A shepherd that held a job goes: its ring's memory with it.
		if s.job != nil || served >= maxCommandsPerShepherd || !noChildren() {
			return 0
		}
		reportState(false)
	}
}

// maxCommandsPerShepherd bounds reuse, so that whatever a long-lived
// shepherd might accumulate (heap fragmentation) is shed now and then.
const maxCommandsPerShepherd = 1000

func accept() (int, error) {
	for {
		fd, _, err := unix.Accept4(shepherdListenFD, unix.SOCK_CLOEXEC)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED) {
			continue
		}
		return fd, err
	}
}

// reportState tells init that this shepherd became busy (so init starts a
// spare) or idle again. The message is our PID, negated for idle; a 4-byte
// write to a pipe is atomic.
func reportState(busy bool) {
	v := int32(os.Getpid())
	if !busy {
		v = -v
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(v))
	_, _ = unix.Write(shepherdBusyFD, b[:])
}

// noChildren reaps exited children and reports whether none is left.
func noChildren() bool {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ECHILD):
			return true
		case err != nil || pid == 0:
			return false
		}
	}
}

// shepherd runs one command and owns its process tree.
type shepherd struct {
	conn    int
	pending []byte // bytes from the agent not yet parsed into frames
	lost    bool   // the agent connection failed; report nothing more
	// job is set when the command is a job the sandbox holds: its output
	// goes to the job's ring, its end is recorded there (job_linux.go).
	job *jobHold
}

// outStream is one of the command's output pipes, read end.
type outStream struct {
	fd    int
	frame guestapi.FrameType
	eof   bool
}

func (s *shepherd) serve() {
	req, stdin, err := s.readRequest()
	if err != nil {
		s.sendError(err.Error())
		return
	}
	if req.Dial != 0 {
		s.relay(req.Dial)
		return
	}
	if req.Attach != "" {
		s.attachJob(req.Attach)
		return
	}
	if req.Jobs {
		s.listJobs()
		return
	}
	if req.Job != nil {
		h, err := openJob(*req.Job)
		if err != nil {
			s.sendError(err.Error())
			return
		}
		s.job = h
	}
	if req.Etc != nil {
		if err := WriteEtc(req.Etc); err != nil {
			s.sendError(err.Error())
			return
		}
		s.send(guestapi.AppendFrame(nil, guestapi.FrameStarted, []byte(`{"pid":0}`)))
		return
	}

	cmd, err := s.start(req, stdin)
	if err == nil && s.job != nil {
		s.job.running = true
		if err = s.job.writeRecord(cmd.pid); err != nil {
			s.kill(cmd)
			err = fmt.Errorf("recording the job: %w", err)
		}
	}
	if err != nil {
		if s.job != nil {
			s.job.remove()
		}
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM) {
			// The tenant's processes hold it: retryable once they let go.
			s.sendError(guestapi.ExhaustedPrefix + err.Error())
			return
		}
		s.sendError(err.Error())
		return
	}
	if started, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStarted, guestapi.Started{PID: cmd.pid}); err == nil {
		s.send(started)
	}
	if s.job != nil {
		// The job outlives this connection: a broken one is only dropped.
		s.afterSend()
		s.holdJob(cmd)
		return
	}
	if s.lost {
		s.kill(cmd)
		return
	}
	s.supervise(cmd)
}

// readRequest reads Start, Stdin… and StdinEnd under requestTimeout.
func (s *shepherd) readRequest() (guestapi.StartRequest, []byte, error) {
	var req guestapi.StartRequest
	tv := unix.NsecToTimeval(requestTimeout.Nanoseconds())
	_ = unix.SetsockoptTimeval(s.conn, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	defer func() {
		var zero unix.Timeval
		_ = unix.SetsockoptTimeval(s.conn, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &zero)
	}()

	br := bufio.NewReaderSize(fdReader(s.conn), 64<<10)
	fr := guestapi.NewFrameReader(br)
	t, p, err := fr.ReadFrame()
	if err != nil {
		return req, nil, fmt.Errorf("reading the request: %w", err)
	}
	if t != guestapi.FrameStart {
		return req, nil, fmt.Errorf("protocol error: first frame is %v, not Start", t)
	}
	if err := json.Unmarshal(p, &req); err != nil {
		return req, nil, fmt.Errorf("protocol error: Start: %w", err)
	}
	if req.Version != guestapi.ProtocolVersion {
		return req, nil, errors.New(guestapi.UnsupportedVersion(req.Version, guestapi.ProtocolVersion))
	}
	if req.Dial != 0 {
		// A dial is its Start frame alone; the agent sends nothing more
		// before Started, but keep whatever arrived for the relay.
		if n := br.Buffered(); n > 0 {
			rest, _ := br.Peek(n)
			s.pending = append(s.pending, rest...)
		}
		return req, nil, nil
	}
	if req.Etc != nil {
		return req, nil, nil
	}
	if req.Attach != "" || req.Jobs {
		if n := br.Buffered(); n > 0 {
			rest, _ := br.Peek(n)
			s.pending = append(s.pending, rest...)
		}
		return req, nil, nil
	}
	if req.Job != nil {
		if err := checkJobSpec(req.Job); err != nil {
			return req, nil, err
		}
	}
	if len(req.Command) > guestapi.MaxCommandBytes {
		return req, nil, errors.New(guestapi.CommandTooLong(len(req.Command)))
	}
	var stdin []byte
	for {
		t, p, err := fr.ReadFrame()
		if err != nil {
			return req, nil, fmt.Errorf("reading stdin: %w", err)
		}
		switch t {
		case guestapi.FrameStdin:
			if len(stdin)+len(p) > guestapi.MaxStdin {
				return req, nil, fmt.Errorf("stdin is more than %d bytes", guestapi.MaxStdin)
			}
			stdin = append(stdin, p...)
		case guestapi.FrameStdinEnd:
			// Keep whatever the agent sent after StdinEnd (a Kill) for the
			// supervision loop, which reads the socket directly.
			if n := br.Buffered(); n > 0 {
				rest, _ := br.Peek(n)
				s.pending = append(s.pending, rest...)
			}
			return req, stdin, nil
		default:
			return req, nil, fmt.Errorf("protocol error: unexpected %v frame before StdinEnd", t)
		}
	}
}

// command is a started shell and the shepherd's ends of its pipes.
type command struct {
	pid    int
	pidfd  int
	stdinW int // -1 when closed or unused
	stdin  []byte
	outs   [2]*outStream
	status unix.WaitStatus
	reaped bool
}

func (s *shepherd) start(req guestapi.StartRequest, stdin []byte) (*command, error) {
	dir := req.Cwd
	switch {
	case dir == "":
		dir = guestapi.TenantHome
	case !filepath.IsAbs(dir):
		dir = filepath.Join(guestapi.TenantHome, dir)
	}
	argv := []string{"sh", "-c", req.Command}
	env := guestapi.CleanEnv()
	if req.Login {
		// A login shell reads /etc/profile (the generated login profile)
		// and then ~/.profile.
		argv = []string{"sh", "-l", "-c", req.Command}
		env = guestapi.LoginEnv()
	}

	c := &command{stdinW: -1, pidfd: -1}
	var childFDs []int
	closeChild := func() {
		for _, fd := range childFDs {
			unix.Close(fd)
		}
	}

	// Standard input: /dev/null when empty, else a pipe fed from memory.
	var stdinR int
	if len(stdin) == 0 {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		stdinR = fd
	} else {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return nil, err
		}
		stdinR, c.stdinW, c.stdin = p[0], p[1], stdin
		_ = unix.SetNonblock(c.stdinW, true)
	}
	childFDs = append(childFDs, stdinR)

	var outW [2]int
	for i, ft := range []guestapi.FrameType{guestapi.FrameStdout, guestapi.FrameStderr} {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			closeChild()
			c.closeFDs()
			return nil, err
		}
		// Only our read end is non-blocking: O_NONBLOCK belongs to the open
		// file description, and the two ends of a pipe have their own.
		_ = unix.SetNonblock(p[0], true)
		c.outs[i] = &outStream{fd: p[0], frame: ft}
		outW[i] = p[1]
		childFDs = append(childFDs, p[1])
	}

	// The command starts with an OOM score TenantOOMScoreBoost above the
	// shepherd's: the child inherits the score at fork, so the shepherd
	// raises its own for the fork only, then lowers it back (allowed down
	// to the score it was given).
	guarded := ownOOMScoreAdj < 1000 && setOOMScoreAdj(min(ownOOMScoreAdj+guestapi.TenantOOMScoreBoost, 1000)) == nil
	pid, err := syscall.ForkExec(guestapi.Shell, argv, &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{uintptr(stdinR), uintptr(outW[0]), uintptr(outW[1])},
		Sys: &syscall.SysProcAttr{
			// Tenant credentials: not container root, no capabilities, no
			// supplementary groups.
			Credential: &syscall.Credential{Uid: guestapi.TenantUID, Gid: guestapi.TenantGID, Groups: []uint32{}},
			// A session of its own, so job control in the command does not
			// reach init or other commands.
			Setsid: true,
			PidFD:  &c.pidfd,
		},
	})
	if guarded {
		_ = setOOMScoreAdj(ownOOMScoreAdj)
	}
	closeChild()
	if err != nil {
		c.closeFDs()
		return nil, startError(dir, req.Cwd != "", err)
	}
	c.pid = pid
	if c.pidfd < 0 {
		// Without a pidfd the supervision loop cannot see the shell end.
		_ = unix.Kill(pid, unix.SIGKILL)
		c.wait()
		c.closeFDs()
		return nil, errors.New("the kernel did not return a pidfd for the shell (Linux 5.3 or later is required)")
	}
	return c, nil
}

// startError explains a failed fork/exec. The child chdirs (as the tenant)
// after dropping privileges and before exec; since the shell exists, an
// ENOENT, ENOTDIR or EACCES there is the working directory's fault.
func startError(dir string, cwdGiven bool, err error) error {
	if _, statErr := os.Stat(guestapi.Shell); statErr != nil {
		return fmt.Errorf("cannot run %s: %v", guestapi.Shell, statErr)
	}
	switch {
	case errors.Is(err, unix.EAGAIN):
		return fmt.Errorf("the sandbox's process limit is reached (fork: %w): end some of its background processes, or ask the operator for a higher spec.resources.pids", err)
	case errors.Is(err, unix.ENOMEM):
		return fmt.Errorf("the sandbox is out of memory (fork: %w): end some of its processes, or ask the operator for a higher spec.resources.memory", err)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EACCES):
		if cwdGiven {
			return fmt.Errorf("working directory %q does not exist or cannot be entered (%v): give an existing directory as cwd, or create it first with exec (mkdir -p)", dir, err)
		}
		return fmt.Errorf("home directory %q does not exist or cannot be entered (%v)", dir, err)
	}
	return fmt.Errorf("starting %s: %v", guestapi.Shell, err)
}

func (c *command) closeFDs() {
	if c.stdinW >= 0 {
		unix.Close(c.stdinW)
		c.stdinW = -1
	}
	for _, o := range c.outs {
		if o != nil && o.fd >= 0 {
			unix.Close(o.fd)
			o.fd = -1
		}
	}
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
		c.pidfd = -1
	}
}

// supervise forwards output and stdin until the shell exits (the command
// is done; its background processes stay) or the agent asks for a kill or
// goes away (the whole tree dies).
func (s *shepherd) supervise(c *command) {
	if s.parseAgent() {
		s.kill(c)
		return
	}
	buf := make([]byte, guestapi.HeaderSize+guestapi.OutputChunk)
	var pfds []unix.PollFd
	for {
		pfds = pfds[:0]
		pfds = append(pfds,
			unix.PollFd{Fd: int32(s.conn), Events: unix.POLLIN},
			unix.PollFd{Fd: int32(c.pidfd), Events: unix.POLLIN})
		outIdx := [2]int{-1, -1}
		for i, o := range c.outs {
			if !o.eof {
				outIdx[i] = len(pfds)
				pfds = append(pfds, unix.PollFd{Fd: int32(o.fd), Events: unix.POLLIN})
			}
		}
		stdinIdx := -1
		if c.stdinW >= 0 {
			stdinIdx = len(pfds)
			pfds = append(pfds, unix.PollFd{Fd: int32(c.stdinW), Events: unix.POLLOUT})
		}
		if _, err := unix.Poll(pfds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			s.lost = true
			s.kill(c)
			return
		}

		// A Kill request (or the agent going away) wins over everything.
		if pfds[0].Revents != 0 && s.readAgent() {
			s.kill(c)
			return
		}
		for i, o := range c.outs {
			if outIdx[i] >= 0 && pfds[outIdx[i]].Revents != 0 {
				s.forward(o, buf)
			}
		}
		if s.lost {
			s.kill(c)
			return
		}
		if stdinIdx >= 0 && pfds[stdinIdx].Revents != 0 {
			c.feedStdin()
		}
		if pfds[1].Revents != 0 {
			s.finish(c, buf)
			return
		}
	}
}

// readAgent reads what the agent sent; it returns true when the command
// must be killed: a Kill frame, end of stream, or a protocol error.
func (s *shepherd) readAgent() bool {
	var b [64]byte
	n, err := unix.Read(s.conn, b[:])
	switch {
	case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
	case err != nil || n == 0:
		s.lost = true
		return true
	default:
		s.pending = append(s.pending, b[:n]...)
	}
	return s.parseAgent()
}

// parseAgent handles the complete frames in s.pending, like readAgent.
func (s *shepherd) parseAgent() bool {
	// One frame decides: a Kill, or anything else, which is an error.
	if len(s.pending) > 0 {
		t, _, used, err := guestapi.ParseFrame(s.pending)
		if err != nil {
			s.lost = true
			return true
		}
		if used == 0 {
			if len(s.pending) > maxPendingInput {
				s.lost = true
				return true
			}
			return false
		}
		s.pending = s.pending[used:]
		if t == guestapi.FrameKill {
			return true
		}
		// Nothing else is valid while the command runs.
		s.lost = true
		return true
	}
	return false
}

// forward reads one chunk of o and sends it; it returns the bytes read.
func (s *shepherd) forward(o *outStream, buf []byte) int {
	n, err := unix.Read(o.fd, buf[guestapi.HeaderSize:])
	if n > 0 && s.job != nil {
		stream := guestapi.Stdout
		if o.frame == guestapi.FrameStderr {
			stream = guestapi.Stderr
		}
		s.job.ring.Write(stream, buf[guestapi.HeaderSize:guestapi.HeaderSize+n])
		return n
	}
	if n > 0 {
		buf[0] = byte(o.frame)
		binary.BigEndian.PutUint32(buf[1:guestapi.HeaderSize], uint32(n))
		s.send(buf[:guestapi.HeaderSize+n])
		return n
	}
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return 0
	}
	o.eof = true // EOF or error: every writer is gone
	return 0
}

// drain forwards what is left in o without blocking, up to a bound.
func (s *shepherd) drain(o *outStream, buf []byte) {
	for total := 0; !o.eof && total < maxDrainAfterExit; {
		n := s.forward(o, buf)
		if n == 0 {
			return
		}
		total += n
	}
}

func (c *command) feedStdin() {
	n, err := unix.Write(c.stdinW, c.stdin)
	if n > 0 {
		c.stdin = c.stdin[n:]
	}
	if (err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)) || len(c.stdin) == 0 {
		// Delivered, or the reader is gone (EPIPE): close it either way.
		unix.Close(c.stdinW)
		c.stdinW = -1
		c.stdin = nil
	}
}

// finish handles the shell's normal end: report its status after the
// output it produced, then leave its background processes running. They
// reparent to init when we exit; output pipes they still hold go to init,
// which drains them, so they do not die of SIGPIPE.
func (s *shepherd) finish(c *command, buf []byte) {
	c.wait()
	if c.stdinW >= 0 {
		unix.Close(c.stdinW)
		c.stdinW = -1
	}
	for _, o := range c.outs {
		s.drain(o, buf)
	}
	s.sendExit(c, false)

	var keep []int
	for _, o := range c.outs {
		if !o.eof {
			keep = append(keep, o.fd)
		}
	}
	if len(keep) > 0 {
		_ = unix.Sendmsg(shepherdDrainFD, []byte{0}, unix.UnixRights(keep...), nil, 0)
	}
	c.closeFDs()
}

// wait reaps the shell itself.
func (c *command) wait() {
	if c.reaped {
		return
	}
	for {
		_, err := unix.Wait4(c.pid, &c.status, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		c.reaped = err == nil
		return
	}
}

// kill ends the command with proof: it SIGKILLs every descendant and reaps
// until wait4 reports ECHILD. Because the shepherd is a child subreaper,
// every orphan in the tree (setsid, double fork, SIGTERM ignored) has been
// reparented to it, so having no children proves there are no descendants.
// Output still buffered in the pipes is forwarded afterwards.
func (s *shepherd) kill(c *command) {
	deadline := time.Now().Add(guestapi.ProofTimeout)
	self := os.Getpid()
	pause := 100 * time.Microsecond
	for {
		for _, p := range descendants(self) {
			killProc(p)
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.ECHILD) {
				buf := make([]byte, guestapi.HeaderSize+guestapi.OutputChunk)
				for _, o := range c.outs {
					s.drain(o, buf)
				}
				s.sendExit(c, true)
				c.closeFDs()
				return
			}
			if err != nil {
				s.proofLost(c, fmt.Sprintf("wait4: %v", err))
				return
			}
			if pid == 0 {
				break
			}
			if pid == c.pid {
				c.status, c.reaped = ws, true
			}
		}
		if time.Now().After(deadline) {
			s.proofLost(c, fmt.Sprintf("descendants still alive after %v: %s", guestapi.ProofTimeout, describeProcs(descendants(self))))
			return
		}
		time.Sleep(pause)
		if pause < 10*time.Millisecond {
			pause *= 2
		}
	}
}

func (s *shepherd) proofLost(c *command, msg string) {
	if s.job != nil {
		s.endJob(nil, msg)
		c.closeFDs()
		return
	}
	s.send(guestapi.AppendFrame(nil, guestapi.FrameProofLost, []byte(msg)))
	c.closeFDs()
}

func (s *shepherd) sendExit(c *command, killed bool) {
	e := guestapi.Exit{Code: -1, Killed: killed}
	switch {
	case !c.reaped:
	case c.status.Exited():
		e.Code = c.status.ExitStatus()
	case c.status.Signaled():
		e.Signal = int(c.status.Signal())
	}
	if s.job != nil {
		s.endJob(&e, "")
		return
	}
	if f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameExit, e); err == nil {
		s.send(f)
	}
}

func (s *shepherd) sendError(msg string) {
	s.send(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(msg)))
}

// send writes a whole frame to the agent (blocking). A failed write means
// the agent is gone; the caller then kills the command.
func (s *shepherd) send(frame []byte) {
	for len(frame) > 0 && !s.lost && s.conn >= 0 {
		n, err := unix.Write(s.conn, frame)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			s.lost = true
			return
		}
		frame = frame[n:]
	}
}

// fdReader reads a raw blocking descriptor.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return 0, errors.New("timed out")
			}
			return 0, err
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// ownOOMScoreAdj is the shepherd's OOM score adjustment as inherited from
// init, read once at start.
var ownOOMScoreAdj int

func readOOMScoreAdj() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return v
}

// setOOMScoreAdj sets the shepherd's own OOM score adjustment. Raising it
// needs no privilege, and neither does lowering it back down to the score
// it started with (the kernel's oom_score_adj_min, inherited at fork).
func setOOMScoreAdj(v int) error {
	return os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0)
}

// relay connects to port on the sandbox's loopback and copies bytes both
// ways between it and the agent's connection until both directions are
// closed: the agent's path to a worker in a sandbox without network. The
// shepherd connects as container root, but only to the loopback, which is
// the sandbox's own.
func (s *shepherd) relay(port int) {
	if port < 1 || port > 65535 {
		s.sendError(fmt.Sprintf("port %d is not a TCP port", port))
		return
	}
	upstream, err := dialBounded("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		s.sendError(fmt.Sprintf("nothing accepts connections on port %d in the sandbox (%v): the worker is not running or not listening yet", port, err))
		return
	}
	s.relayTo(upstream)
}

// relayTo answers Started and relays raw bytes between the agent and
// upstream, both ways, until both directions are closed.
func (s *shepherd) relayTo(upstream net.Conn) {
	defer upstream.Close()
	// The agent's connection, on the runtime's poller: a duplicate, so
	// that the caller's close of s.conn stays the only one of that number.
	fd, err := unix.Dup(s.conn)
	if err != nil {
		s.sendError(fmt.Sprintf("relaying: %v", err))
		return
	}
	f := os.NewFile(uintptr(fd), "agent")
	agent, err := net.FileConn(f)
	f.Close()
	if err != nil {
		s.sendError(fmt.Sprintf("relaying: %v", err))
		return
	}
	defer agent.Close()
	s.send(guestapi.AppendFrame(nil, guestapi.FrameStarted, []byte(`{"pid":0}`)))
	if s.lost {
		return
	}
	if len(s.pending) > 0 { // bytes the agent sent behind its request
		if _, err := upstream.Write(s.pending); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, agent)
	go pipe(agent, upstream)
	<-done
	<-done
}

// dialBounded connects to addr within requestTimeout.
func dialBounded(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
