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
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/duplex"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// maxPendingInput bounds unparsed bytes from the agent once the command
// runs; the agent sends only Kill frames then.
const maxPendingInput = 4 * guestapi.HeaderSize

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
	for _, fd := range []int{shepherdListenFD, shepherdBusyFD, shepherdDrainFD, shepherdReleaseFD} {
		// Inherited descriptors are not close-on-exec; the tenant's shell
		// must inherit none of them.
		unix.CloseOnExec(fd)
	}
	// No goroutine of its own watches for init's release (a Go runtime
	// blocked on a signal holds a thread, and the supervision's threads
	// count against the sandbox's process limit): the command's loop polls
	// shepherdReleaseFD with its other descriptors.
	inheritedListener = true
	// Every orphaned descendant of the command reparents to us, so "no
	// children" proves "no descendants".
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox shepherd: %v\n", err)
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
		if errors.Is(err, unix.ENOTSOCK) && served > 0 {
			return 0 // let go of the socket for a checkpoint (dropListener)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "playground-sandbox shepherd: accept: %v\n", err)
			if served == 0 {
				return 1
			}
			return 0
		}
		reportState(true)
		s := &shepherd{conn: conn, drainTo: shepherdDrainFD}
		s.serve()
		if s.conn >= 0 {
			unix.Close(s.conn)
		}
		served++
		// A shepherd that held a job goes: its ring's memory with it. So
		// does one that let go of the listening socket.
		if s.job != nil || listenerDropped || served >= maxCommandsPerShepherd || !noChildren() {
			return 0
		}
		reportState(false)
	}
}

// inheritedListener is true in a shepherd, which inherits init's listening
// socket at shepherdListenFD; a holder started on its own (RunHold) has
// none. listenerDropped: dropListener replaced it.
var inheritedListener, listenerDropped bool

// dropListener puts /dev/null in place of init's listening socket, in one
// step (dup3), so that the descriptor's number is never free for another
// file to take: an accept on it fails (ENOTSOCK) and the shepherd exits
// after its command, as one that holds a job does anyway. A no-op in a
// process that did not inherit the socket.
func dropListener() {
	if !inheritedListener || listenerDropped {
		return
	}
	listenerDropped = true
	null, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox shepherd: letting go of the listening socket: %v\n", err)
		return
	}
	defer unix.Close(null)
	if err := unix.Dup3(null, shepherdListenFD, unix.O_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox shepherd: letting go of the listening socket: %v\n", err)
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

func (s *shepherd) serve() {
	req, stdin, err := s.readRequest()
	if err != nil {
		s.sendError(err.Error())
		return
	}
	if req.Checkpoint {
		s.sendError("a checkpoint is asked of init, on its control socket")
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
	if req.Etc != nil {
		if err := WriteEtc(req.Etc); err != nil {
			s.sendError(err.Error())
			return
		}
		s.send(guestapi.AppendFrame(nil, guestapi.FrameStarted, []byte(`{"pid":0}`)))
		return
	}

	if req.File != nil {
		s.serveFile(req, stdin)
		return
	}
	if req.Job != nil {
		s.startJob(req, stdin)
		return
	}
	cmd, err := s.start(req, stdin)
	if err != nil {
		s.startFailed(err)
		return
	}
	if started, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStarted, guestapi.Started{PID: cmd.pid}); err == nil {
		s.send(started)
	}
	if s.lost {
		s.kill(cmd)
		return
	}
	s.supervise(cmd)
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
			unix.PollFd{Fd: int32(c.exited), Events: unix.POLLIN})
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
		releaseIdx := -1
		if !listenerDropped {
			releaseIdx = len(pfds)
			pfds = append(pfds, unix.PollFd{Fd: shepherdReleaseFD, Events: unix.POLLIN})
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
		if releaseIdx >= 0 && pfds[releaseIdx].Revents != 0 {
			// Init closed the release pipe for a checkpoint.
			dropListener()
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
	// A relay lasts as long as its connection, out of reach of the
	// release pipe: it lets go of the listening socket now, and the
	// shepherd exits after it.
	dropListener()
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
	duplex.Relay(upstream, agent)
}

// attachJob relays the agent's connection to the holder of job id.
func (s *shepherd) attachJob(id string) {
	if !validJobID(id) {
		s.sendError(fmt.Sprintf("job ID %q is malformed", id))
		return
	}
	up, err := dialBounded("unix", filepath.Join(jobsDir, id+".sock"))
	if err != nil {
		s.sendError(fmt.Sprintf("no job %s in this sandbox: it ended and was released, or the sandbox restarted", id))
		return
	}
	s.relayTo(up)
}

// listJobs answers a Jobs request.
func (s *shepherd) listJobs() {
	recs, err := ListJobs()
	if err != nil {
		s.sendError(err.Error())
		return
	}
	if f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameJobs, recs); err == nil {
		s.send(f)
	}
}
