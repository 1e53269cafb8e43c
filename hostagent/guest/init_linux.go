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
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// File descriptors a shepherd inherits from init.
const (
	// shepherdListenFD is init's listening socket; idle shepherds block in
	// accept(2) on it, so the kernel hands each connection to exactly one.
	shepherdListenFD = 3
	// shepherdBusyFD is the write end of a pipe on which a shepherd reports
	// that it accepted a connection (so init starts a spare) or went back to
	// accepting.
	shepherdBusyFD = 4
	// shepherdDrainFD is a datagram socket on which a finished shepherd
	// hands init the output pipes that background processes still hold.
	shepherdDrainFD = 5
	// shepherdReleaseFD is the read end of a pipe whose write end init
	// closes to ask every shepherd at once to let go of the listening
	// socket, before a checkpoint (checkpoint_linux.go).
	shepherdReleaseFD = 6
)

// Bounds of init.
const (
	// maxDrains bounds the output pipes init drains for background
	// processes; beyond it a pipe is closed and its writers get EPIPE.
	maxDrains = 1024
	// minSpawnBackoff and maxSpawnBackoff pace respawns of shepherds that
	// die before accepting (for example while the pids limit is reached).
	minSpawnBackoff = 50 * time.Millisecond
	maxSpawnBackoff = 5 * time.Second
	// IdleTimeout is how long a reused shepherd waits for a connection
	// before it exits.
	IdleTimeout = time.Minute
)

// InitOptions configure RunInit.
type InitOptions struct {
	// Spares is how many idle shepherds init keeps blocked in accept(2).
	// A command whose shepherd is already running starts without paying
	// for a process start of this binary; at least one is always kept
	// (once a Lazy init woke).
	Spares int
	// Lazy keeps no spare until the sandbox is first used: until a
	// connection waits on the agent socket (which the first shepherd
	// then accepts) or ResumeSignal says that the sandbox is a tenant's.
	// Then init keeps Spares for the rest of its life. A sandbox waiting
	// in the warm pool is started so: it runs init alone, one Go process
	// of memory instead of two, and its first command pays for one
	// shepherd's start unless its claim sent ResumeSignal ahead of it.
	Lazy bool
	// Log receives init's and the shepherds' diagnostics; it is the
	// container's stderr, kept by the agent in the sandbox directory.
	Log *os.File
	// VMPort, in a vm sandbox, names the virtio-serial port on which the
	// agent reaches init (see RunVMInit); empty in a container.
	VMPort string
}

// RunInit is the container's PID 1. It listens on RunDir/SocketName, keeps
// opts.Spares idle shepherds, reaps every orphan that reparents to it
// (background processes of finished commands), and drains output pipes that
// such processes still hold. It returns only on SIGTERM/SIGINT or a setup
// error; the container ends with it.
func RunInit(opts InitOptions) error {
	if os.Getpid() != 1 {
		return errors.New("playground-sandbox init must be PID 1 of the sandbox")
	}
	if opts.Spares < 1 {
		opts.Spares = 1
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	in := &initProc{
		opts:   opts,
		log:    log.New(opts.Log, "playground-sandbox init: ", log.LstdFlags|log.LUTC),
		idle:   make(map[int]bool),
		busy:   make(map[int]bool),
		ending: make(map[int]bool),
	}
	return in.run()
}

type initProc struct {
	opts InitOptions
	log  *log.Logger
	self string // our executable

	listener *os.File // blocking listening socket, never accepted on by init
	// releaseR and releaseW are the pipe that asks the shepherds to let go
	// of listener: init closes releaseW (shepherdReleaseFD).
	releaseR, releaseW *os.File
	busyR              *os.File
	busyW              *os.File
	drainR             int
	drainW             *os.File
	devNull            *os.File

	idle map[int]bool // spare shepherds blocked in accept
	busy map[int]bool // shepherds serving a command
	// ending are the shepherds a checkpoint killed, until reaped: one
	// that exits has left /proc's list of its files before it has let go
	// of them, so only its reaping says they are closed (release).
	ending map[int]bool
	// busyPIDs carries the shepherds' reports (readBusy, noteBusy).
	busyPIDs chan int32

	backoff   time.Duration
	nextSpawn time.Time

	drains atomic.Int32

	// sup keeps the tenant's worker running (WorkerSpecFile), if any.
	sup *supervisor

	// control is the control socket's listener, and checkpoints the
	// Checkpoint requests it takes, which the main loop answers.
	control     *net.UnixListener
	checkpoints chan checkpointRequest
	// released: a Checkpoint closed the sockets; ResumeSignal opens them
	// again. No spare starts meanwhile.
	released bool

	// pending, in a lazy init (InitOptions.Lazy) that keeps no spare yet,
	// is closed once a connection waits on the agent socket; nil once
	// init keeps its spares. stopWatch ends the goroutine that closes it.
	pending   <-chan struct{}
	stopWatch func()
}

func (in *initProc) run() error {
	var err error
	// Start shepherds by our real path rather than /proc/self/exe, so that
	// they show up in ps as playground-sandbox, not "exe".
	if in.self, err = os.Executable(); err != nil {
		return err
	}
	if in.devNull, err = os.Open(os.DevNull); err != nil {
		return err
	}
	// Signals are ours before the socket says we are ready: the agent
	// sends WorkerSignal to a ready init, whose default action would kill it.
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, guestapi.WorkerSignal, guestapi.ResumeSignal)
	if err := prepareRunDir(); err != nil {
		return err
	}
	in.checkpoints = make(chan checkpointRequest)
	if err := in.listen(); err != nil {
		return err
	}
	if in.opts.VMPort != "" {
		// Lives as long as init, which is the VM's lifetime.
		go in.servePort(in.opts.VMPort)
	}
	if in.busyR, in.busyW, err = os.Pipe(); err != nil {
		return err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("drain socketpair: %w", err)
	}
	in.drainR = pair[0]
	in.drainW = os.NewFile(uintptr(pair[1]), "drain")

	// Both goroutines live as long as init, which is the container's
	// lifetime: their owner is the process itself.
	in.busyPIDs = make(chan int32, 64)
	go in.readBusy(in.busyPIDs)
	go in.receiveDrains()
	in.sup = newSupervisor(in.log)
	in.sup.reload()
	if in.opts.Lazy {
		in.watchPending()
	}

	var retry, worker <-chan time.Time
	for {
		retry = in.fill()
		worker = nil
		if next := in.sup.tick(); !next.IsZero() {
			worker = time.After(time.Until(next))
		}
		select {
		case <-worker:
		case msg := <-in.busyPIDs:
			in.noteBusy(msg)
		case <-in.pending:
			in.wake()
		case req := <-in.checkpoints:
			req.done <- in.release()
		case s := <-sigs:
			if s == guestapi.WorkerSignal {
				in.sup.reload()
				continue
			}
			if s == guestapi.ResumeSignal {
				if err := in.relisten(); err != nil {
					return err
				}
				in.wake()
				continue
			}
			if s != unix.SIGCHLD {
				in.log.Printf("received %v, stopping the sandbox", s)
				return nil
			}
			in.reap()
		case <-retry:
		}
	}
}

// prepareRunDir makes RunDir root's only, once, as init starts.
func prepareRunDir() error {
	if err := os.Chmod(guestapi.RunDir, 0o700); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	return nil
}

// listen creates the control socket and then the agent socket, which it
// binds to a temporary name and renames into place once listening, so the
// agent can take the socket's existence as readiness (of both: the agent
// lists the sandbox's jobs as soon as init is ready), and serves the
// control socket until release closes it. The agent socket stays in
// blocking mode: the shepherds block in accept(2) on it, and O_NONBLOCK
// would be shared with them.
func (in *initProc) listen() error {
	control, err := listenControl()
	if err != nil {
		return err
	}
	path := filepath.Join(guestapi.RunDir, guestapi.SocketName)
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		control.Close()
		return fmt.Errorf("socket: %w", err)
	}
	fail := func(err error) error {
		unix.Close(fd)
		control.Close()
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: tmp}); err != nil {
		return fail(fmt.Errorf("bind %s: %w", tmp, err))
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	// accept(2) honours SO_RCVTIMEO: idle shepherds wake up now and then,
	// and those left over from a burst of concurrent commands exit.
	tv := unix.NsecToTimeval(IdleTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail(fmt.Errorf("listener timeout: %w", err))
	}
	if err := unix.Listen(fd, 128); err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("release pipe: %w", err))
	}
	in.listener = os.NewFile(uintptr(fd), "listener")
	in.releaseR, in.releaseW = r, w
	in.control = control
	// Lives until release closes the listener.
	go in.serveControl(control)
	return nil
}

// fill starts spares until opts.Spares are idle, once init keeps spares
// (wake). After failures it waits (exponential backoff) and returns a
// timer for the next attempt.
func (in *initProc) fill() <-chan time.Time {
	for !in.released && in.pending == nil && len(in.idle) < in.opts.Spares {
		if wait := time.Until(in.nextSpawn); wait > 0 {
			return time.After(wait)
		}
		pid, err := in.spawn()
		if err != nil {
			in.log.Printf("starting a shepherd: %v", err)
			in.fail()
			continue
		}
		in.idle[pid] = true
	}
	return nil
}

// watchPending makes a lazy init's pending channel, closed by a goroutine
// of init's once a connection waits on the agent socket. The socket is in
// blocking mode (the shepherds block in accept(2) on it) and init never
// accepts on it: the goroutine waits on an epoll instance that watches it,
// through the runtime's poller, holding no thread (threads count against
// the sandbox's process limit). If the watch cannot be set up, init keeps
// its spares at once.
func (in *initProc) watchPending() {
	f, rc, err := watchListener(int(in.listener.Fd()))
	if err != nil {
		in.log.Printf("watching the agent socket: %v; keeping spares from now on", err)
		return
	}
	pending := make(chan struct{})
	in.pending, in.stopWatch = pending, func() { f.Close() }
	// Lives until a connection waits, or wake closes f (or the runtime
	// cannot poll it: then init keeps its spares).
	go func() {
		defer close(pending)
		var evs [1]unix.EpollEvent
		_ = rc.Read(func(fd uintptr) bool {
			n, err := unix.EpollWait(int(fd), evs[:], 0)
			return n > 0 || (err != nil && !errors.Is(err, unix.EINTR))
		})
	}()
}

// watchListener is an epoll instance that is readable once a connection
// waits on the listening socket lfd, as a file of the runtime's poller.
func watchListener(lfd int) (*os.File, syscall.RawConn, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &ev); err != nil {
		unix.Close(ep)
		return nil, nil, err
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		unix.Close(ep)
		return nil, nil, err
	}
	f := os.NewFile(uintptr(ep), "agent-socket-watch")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, rc, nil
}

// wake makes a lazy init keep its spares from now on: the sandbox is in
// use. A no-op once it does.
func (in *initProc) wake() {
	if in.pending == nil {
		return
	}
	in.pending = nil
	in.stopWatch()
	in.stopWatch = nil
}

func (in *initProc) fail() {
	switch {
	case in.backoff == 0:
		in.backoff = minSpawnBackoff
	case in.backoff < maxSpawnBackoff:
		in.backoff *= 2
	}
	in.nextSpawn = time.Now().Add(in.backoff)
}

func (in *initProc) spawn() (int, error) {
	p, err := os.StartProcess(in.self, []string{"playground-sandbox", "shepherd"}, &os.ProcAttr{
		Dir:   "/",
		Env:   guestapi.OwnEnv(),
		Files: []*os.File{in.devNull, in.opts.Log, in.opts.Log, in.listener, in.busyW, in.drainW, in.releaseR},
	})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	// init reaps with wait4(-1) because it must reap orphans too; the
	// os.Process handle is not needed.
	_ = p.Release()
	return pid, nil
}

// reap collects every exited child: shepherds and reparented orphans. A
// shepherd exits 0 once it has served a connection; any other end of an
// idle one is a failure that slows down respawning.
func (in *initProc) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if in.sup != nil && in.sup.exited(pid, ws) {
			continue
		}
		wasIdle := in.idle[pid]
		delete(in.ending, pid)
		delete(in.idle, pid)
		delete(in.busy, pid)
		if wasIdle && !(ws.Exited() && ws.ExitStatus() == 0) {
			in.log.Printf("idle shepherd %d ended: %s", pid, describeWait(ws))
			in.fail()
		}
	}
}

// noteBusy takes a shepherd's report that it became busy (its PID) or idle
// again (the PID negated). One that goes idle while the sockets are
// released for a checkpoint would block in accept(2) on the listening
// socket, holding it: it is ended.
func (in *initProc) noteBusy(msg int32) {
	switch pid := int(msg); {
	case pid > 0 && in.idle[pid]:
		delete(in.idle, pid)
		in.busy[pid] = true
		in.backoff = 0
	case pid < 0 && in.busy[-pid] && in.released:
		delete(in.busy, -pid)
		in.ending[-pid] = true
		_ = unix.Kill(-pid, unix.SIGKILL)
	case pid < 0 && in.busy[-pid]:
		delete(in.busy, -pid)
		in.idle[-pid] = true
	}
}

// readBusy forwards the state changes that shepherds report: their PID
// when they accept a connection, its negation when they are idle again.
func (in *initProc) readBusy(out chan<- int32) {
	var b [4]byte
	for {
		if _, err := io.ReadFull(in.busyR, b[:]); err != nil {
			in.log.Printf("busy pipe: %v", err)
			return
		}
		out <- int32(binary.NativeEndian.Uint32(b[:]))
	}
}

// receiveDrains takes output pipes from finished shepherds and discards
// what background processes write to them until the last writer closes,
// so a background process that logs to the command's stdout keeps running
// instead of dying of SIGPIPE.
func (in *initProc) receiveDrains() {
	oob := make([]byte, unix.CmsgSpace(2*4))
	var one [1]byte
	for {
		_, oobn, _, _, err := unix.Recvmsg(in.drainR, one[:], oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			in.log.Printf("drain socket: %v", err)
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				if in.drains.Add(1) > maxDrains {
					in.drains.Add(-1)
					unix.Close(fd)
					continue
				}
				go in.discard(fd)
			}
		}
	}
}

// discard reads fd until EOF. The fd is non-blocking, so os.NewFile puts
// it on the runtime poller and an idle pipe costs no thread.
func (in *initProc) discard(fd int) {
	defer in.drains.Add(-1)
	f := os.NewFile(uintptr(fd), "background-output")
	defer f.Close()
	_, _ = io.Copy(io.Discard, f)
}

func describeWait(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}
