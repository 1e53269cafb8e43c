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
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/bounds"
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
)

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

// The sandbox user and home a command runs as and in: the guest layout's,
// or what a holder is told (RunHold).
var (
	tenantUID, tenantGID uint32 = guestapi.TenantUID, guestapi.TenantGID
	tenantHome                  = guestapi.TenantHome
)

// shepherd runs one command and owns its process tree.
type shepherd struct {
	conn    int
	pending []byte // bytes from the agent not yet parsed into frames
	lost    bool   // the agent connection failed; report nothing more
	// job is set when the command is a job the sandbox holds: its output
	// goes to the job's ring, its end is recorded there (job.go).
	job *jobHold
	// drainTo is init's socket for the output pipes a finished command's
	// background processes still hold (shepherdDrainFD), or -1.
	drainTo int
}

// outStream is one of the command's output pipes, read end.
type outStream struct {
	fd    int
	frame guestapi.FrameType
	eof   bool
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
	req, _, err := readStart(fr)
	if err != nil {
		return req, nil, err
	}
	if req.Dial != 0 {
		// A dial is its Start frame alone; the agent sends nothing more
		// before Started, but keep whatever arrived for the relay.
		s.keepBuffered(br)
		return req, nil, nil
	}
	if req.Etc != nil {
		return req, nil, nil
	}
	if req.Attach != "" || req.Jobs {
		s.keepBuffered(br)
		return req, nil, nil
	}
	if req.Job != nil {
		if err := checkJobSpec(req.Job); err != nil {
			return req, nil, err
		}
	}
	if len(req.Command) > bounds.MaxCommandBytes {
		return req, nil, errors.New(bounds.CommandTooLong(len(req.Command)))
	}
	var stdin []byte
	if req.File != nil && req.File.Size > 0 && req.File.Size <= guestapi.MaxStdin {
		stdin = make([]byte, 0, req.File.Size)
	}
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
			s.keepBuffered(br)
			return req, stdin, nil
		default:
			return req, nil, fmt.Errorf("protocol error: unexpected %v frame before StdinEnd", t)
		}
	}
}

// keepBuffered keeps what br read past the request (frames the agent
// sent after it) for whoever reads the connection next, which reads the
// socket directly.
func (s *shepherd) keepBuffered(br *bufio.Reader) {
	if n := br.Buffered(); n > 0 {
		rest, _ := br.Peek(n)
		s.pending = append(s.pending, rest...)
	}
}

// readStart reads the Start frame that begins a connection, and returns
// its payload as it came too; a request of another protocol version is
// refused here, before anything else is read (by a shepherd, a holder or
// init itself).
func readStart(fr *guestapi.FrameReader) (guestapi.StartRequest, []byte, error) {
	var req guestapi.StartRequest
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
	return req, p, nil
}

// command is a started shell and the shepherd's ends of its pipes.
type command struct {
	pid int
	// exited becomes readable when the shell has exited: its pidfd on
	// Linux, a kqueue watching it on FreeBSD (process_*.go).
	exited int
	stdinW int // -1 when closed or unused
	stdin  []byte
	// keepStdin keeps stdinW open when stdin is all written: a job that
	// takes input (guestapi.JobSpec.Stdin) until its end (stdinEnd).
	keepStdin, stdinEnd bool
	// tty is a terminal job's terminal; its master is outs[0] (the one
	// stream) and, duplicated, stdinW.
	tty    *terminal
	outs   [2]*outStream
	status unix.WaitStatus
	reaped bool
}

func (s *shepherd) start(req guestapi.StartRequest, stdin []byte) (*command, error) {
	dir := req.Cwd
	switch {
	case dir == "":
		dir = tenantHome
	case !filepath.IsAbs(dir):
		dir = filepath.Join(tenantHome, dir)
	}
	argv := []string{"sh", "-c", req.Command}
	env := guestapi.CleanEnv()
	if req.Login {
		// A login shell reads /etc/profile (the generated login profile)
		// and then ~/.profile.
		argv = []string{"sh", "-l", "-c", req.Command}
		env = guestapi.LoginEnv()
	}

	if req.Job != nil && req.Job.TTY != nil {
		return startTerminal(*req.Job.TTY, argv, env, dir, req.Cwd != "", stdin)
	}
	c := &command{stdinW: -1, exited: -1, keepStdin: req.Job != nil && req.Job.Stdin}
	var childFDs []int
	closeChild := func() {
		for _, fd := range childFDs {
			unix.Close(fd)
		}
	}

	// Standard input: /dev/null when empty, else a pipe fed from memory
	// (and from Input frames, for a job that takes input).
	var stdinR int
	if len(stdin) == 0 && !c.keepStdin {
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

	pid, exited, err := forkShell(argv, env, dir, []uintptr{uintptr(stdinR), uintptr(outW[0]), uintptr(outW[1])}, false)
	closeChild()
	if err != nil {
		c.closeFDs()
		return nil, startError(dir, req.Cwd != "", err)
	}
	c.pid, c.exited = pid, exited
	return c, nil
}

// startFailed tells the agent why a command did not start.
func (s *shepherd) startFailed(err error) {
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM) {
		// The tenant's processes hold it: retryable once they let go.
		s.sendError(guestapi.ExhaustedPrefix + err.Error())
		return
	}
	s.sendError(err.Error())
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

// startTerminal starts argv on a new pseudo-terminal of size: the
// command's standard input, output and error, and its controlling
// terminal. stdin is typed first.
func startTerminal(size guestapi.TTYSize, argv, env []string, dir string, cwdGiven bool, stdin []byte) (*command, error) {
	if err := size.Check(); err != nil {
		return nil, err
	}
	t, end, err := openTerminal(size)
	if err != nil {
		return nil, err
	}
	c := &command{stdinW: -1, exited: -1, keepStdin: true, tty: t, stdin: stdin}
	c.outs[0] = &outStream{fd: t.master, frame: guestapi.FrameStdout}
	c.outs[1] = &outStream{fd: -1, frame: guestapi.FrameStderr, eof: true}
	if c.stdinW, err = dupCloexec(t.master); err != nil {
		end.f.Close()
		c.closeFDs()
		return nil, err
	}
	env = append(env, "TERM="+TerminalType)
	fd := end.fd()
	pid, exited, err := forkShell(argv, env, dir, []uintptr{fd, fd, fd}, true)
	end.f.Close()
	if err != nil {
		c.closeFDs()
		return nil, startError(dir, cwdGiven, err)
	}
	c.pid, c.exited = pid, exited
	return c, nil
}

func (c *command) closeFDs() {
	if c.tty != nil {
		c.tty.close()
	}
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
	if c.exited >= 0 {
		unix.Close(c.exited)
		c.exited = -1
	}
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
		if s.job.tty != nil {
			s.job.tty.output(buf[guestapi.HeaderSize : guestapi.HeaderSize+n])
		}
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
	gone := err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)
	if gone || (len(c.stdin) == 0 && (!c.keepStdin || c.stdinEnd)) {
		// Delivered and ended, or the reader is gone (EPIPE): close it
		// either way.
		c.closeStdin()
	}
}

// wantsStdin says whether input waits to be written to the command.
func (c *command) wantsStdin() bool { return c.stdinW >= 0 && len(c.stdin) > 0 }

// closeStdin closes the command's input, dropping what is queued.
func (c *command) closeStdin() {
	if c.stdinW >= 0 {
		unix.Close(c.stdinW)
	}
	c.stdinW, c.stdin = -1, nil
}

// input queues p for the command's input (Input frames), within
// guestapi.MaxJobInputPending.
func (c *command) input(p []byte) error {
	switch {
	case c.stdinW < 0 || c.stdinEnd:
		return errors.New("the job's input is closed: it ended, its input was ended, or the job does not take input (start it with stdin open or a tty)")
	case len(c.stdin)+len(p) > guestapi.MaxJobInputPending:
		return fmt.Errorf("the job has not read %d bytes of its input yet, and %d more would pass the %d-byte bound: wait until it reads, or cancel it", len(c.stdin), len(p), guestapi.MaxJobInputPending)
	}
	c.stdin = append(c.stdin, p...)
	return nil
}

// endInput ends the command's input once what is queued is written: its
// pipe is closed then; a terminal gets its end-of-file character, which
// a program reading a line at a time takes as the end.
func (c *command) endInput() error {
	if c.stdinW < 0 || c.stdinEnd {
		return nil
	}
	if c.tty != nil {
		return c.input([]byte{eofChar})
	}
	c.stdinEnd = true
	if len(c.stdin) == 0 {
		c.closeStdin()
	}
	return nil
}

// eofChar is a terminal's end-of-file character (VEOF), Ctrl-D, as a
// new terminal has it.
const eofChar = 0x04

// finish handles the shell's normal end: report its status after the
// output it produced, then leave its background processes running. They
// reparent to init when we exit; output pipes they still hold go to init
// (drainTo), which drains them, so they do not die of SIGPIPE. A holder
// with no init to hand them to (the jail's) closes them.
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
	if len(keep) > 0 && s.drainTo >= 0 {
		_ = unix.Sendmsg(s.drainTo, []byte{0}, unix.UnixRights(keep...), nil, 0)
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
// until wait4 reports ECHILD. Because the shepherd is a child subreaper
// (a reaper, on FreeBSD: becomeSubreaper), every orphan in the tree (setsid, double fork, SIGTERM ignored) has been
// reparented to it, so having no children proves there are no descendants.
// Output still buffered in the pipes is forwarded afterwards.
func (s *shepherd) kill(c *command) {
	deadline := time.Now().Add(guestapi.ProofTimeout)
	pause := 100 * time.Microsecond
	for {
		if err := killDescendants(); err != nil {
			s.proofLost(c, err.Error())
			return
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
			s.proofLost(c, fmt.Sprintf("descendants still alive after %v: %s", guestapi.ProofTimeout, liveDescendants()))
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
	e := guestapi.End{Status: guestapi.Exit{ExitCode: -1, Killed: killed}}
	switch {
	case !c.reaped:
	case c.status.Exited():
		e.ExitCode = c.status.ExitStatus()
	case c.status.Signaled():
		e.Signal = guestapi.SignalName(int(c.status.Signal()))
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

// dialBounded connects to addr within requestTimeout.
func dialBounded(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
