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

package oci

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guest"
)

// maxSocketPath is the usable length of sun_path; longer socket paths are
// reached through /proc/self/fd of their directory.
const maxSocketPath = 107

// Exec implements backend.Backend. It connects to the sandbox's init, whose
// idle shepherd accepts the connection and runs the command; ctx bounds
// only the start. The command runs until it ends or Kill is called; if the
// agent's connection breaks, the shepherd kills the command's whole tree,
// since nobody is left to collect its result.
func (b *Backend) Exec(ctx context.Context, id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	login := true
	switch req.Shell {
	case backend.ShellLogin, "":
	case backend.ShellClean:
		login = false
	default:
		return nil, fmt.Errorf("oci: unknown shell mode %q", req.Shell)
	}
	if len(req.Command) > backend.MaxCommandBytes {
		return nil, errors.New("oci: " + backend.CommandTooLong(len(req.Command)))
	}
	if len(req.Stdin) > guest.MaxStdin {
		return nil, fmt.Errorf("oci: stdin is %d bytes, more than %d", len(req.Stdin), guest.MaxStdin)
	}
	if sink == nil {
		sink = discardSink{}
	}

	// The whole request goes out in one write.
	buf, err := guest.AppendJSONFrame(make([]byte, 0, 256+len(req.Command)+len(req.Stdin)+guest.HeaderSize*(2+len(req.Stdin)/guest.StdinChunk)),
		guest.FrameStart, guest.StartRequest{Version: guest.ProtocolVersion, Command: req.Command, Login: login, Cwd: req.Cwd})
	if err != nil {
		return nil, err
	}
	for rest := req.Stdin; len(rest) > 0; {
		n := min(len(rest), guest.StdinChunk)
		buf = guest.AppendFrame(buf, guest.FrameStdin, rest[:n])
		rest = rest[n:]
	}
	buf = guest.AppendFrame(buf, guest.FrameStdinEnd, nil)

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.StartTimeout)
		defer cancel()
	}
	start := time.Now()
	life := b.lifeline(id)
	oomBefore, oomKnown := life.oomKills(b.runtimeOf(id), id)
	conn, err := b.dial(ctx, id)
	if err != nil {
		return nil, err
	}
	// Under gVisor, the sentry is the command's kernel: its end is the end
	// of every process of the sandbox (see process.kernel).
	kernel := b.sentryFD(id)
	closeKernel := func() {
		if kernel >= 0 {
			unix.Close(kernel)
		}
	}
	// Until the command runs, ctx bounds every read and write.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	fail := func(err error) (backend.Process, error) {
		stop()
		conn.Close()
		closeKernel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("oci: starting command in sandbox %s: %w", id, ctx.Err())
		}
		if !b.Alive(id) {
			// The connection reached a sandbox whose init was dying (a
			// shepherd still held the listener): it is not running.
			return nil, fmt.Errorf("oci: sandbox %s: %w (its init exited while the command started)", id, backend.ErrNotRunning)
		}
		if after, ok := life.oomKills(b.runtimeOf(id), id); oomKnown && ok && after > oomBefore {
			return nil, fmt.Errorf("the sandbox ran out of memory while the command started (the OOM killer took the process starting it): free memory in the sandbox and retry (%w)", err)
		}
		return nil, fmt.Errorf("oci: starting command in sandbox %s: %w", id, err)
	}
	if _, err := conn.Write(buf); err != nil {
		return fail(err)
	}
	fr := guest.NewFrameReader(bufio.NewReaderSize(conn, guest.OutputChunk+guest.HeaderSize))
	t, payload, err := fr.ReadFrame()
	if err != nil {
		return fail(err)
	}
	switch t {
	case guest.FrameStarted:
	case guest.FrameError:
		stop()
		conn.Close()
		closeKernel()
		return nil, fmt.Errorf("%w: %s", backend.ErrInvalidRequest, payload)
	default:
		return fail(fmt.Errorf("protocol error: %v frame before Started", t))
	}
	if !stop() {
		// ctx ended while the shell was starting: it runs; kill it.
		p := newProcess(conn, fr, sink, start, life, nil, kernel)
		kctx, cancel := context.WithTimeout(context.Background(), guest.ProofTimeout+5*time.Second)
		defer cancel()
		if kerr := p.Kill(kctx); kerr != nil {
			return nil, fmt.Errorf("oci: starting command in sandbox %s: %w (and killing it: %w)", id, ctx.Err(), kerr)
		}
		return nil, fmt.Errorf("oci: starting command in sandbox %s: %w", id, ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	var oomKilled func() bool
	if oomKnown {
		oomKilled = func() bool {
			after, ok := life.oomKills(b.runtimeOf(id), id)
			return ok && after > oomBefore
		}
	}
	return newProcess(conn, fr, sink, start, life, oomKilled, kernel), nil
}

// sentryFD is a pidfd of the gVisor sandbox process (the sentry) of
// sandbox id, or -1 when the sandbox is not gVisor's or its sentry is
// gone. The pidfd is that process's: a reused PID never passes for it.
func (b *Backend) sentryFD(id string) int {
	if b.gvisor == nil {
		return -1
	}
	pid, err := b.initPID(id)
	if err != nil {
		return -1
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return -1
	}
	if !b.isGVisorSandbox(pid, id) { // checked with the pidfd held
		unix.Close(fd)
		return -1
	}
	return fd
}

// dial connects to the sandbox's init.
func (b *Backend) dial(ctx context.Context, id string) (*net.UnixConn, error) {
	path := b.socketPath(id)
	// The run directory belongs to the sandbox's root: never follow a
	// symlink it may have put there to some socket of the host's.
	if fi, err := os.Lstat(path); err != nil {
		return nil, b.dialError(id, err)
	} else if fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("oci: sandbox %s: %s is not a socket", id, path)
	}
	if len(path) > maxSocketPath {
		dir, err := os.Open(filepath.Dir(path))
		if err != nil {
			return nil, b.dialError(id, err)
		}
		defer dir.Close()
		path = fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), guest.SocketName)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, b.dialError(id, err)
	}
	return c.(*net.UnixConn), nil
}

func (b *Backend) dialError(id string, err error) error {
	if !fileExists(filepath.Join(b.sandboxDir(id), "sandbox.json")) {
		return fmt.Errorf("oci: sandbox %s: %w", id, backend.ErrNotFound)
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("oci: sandbox %s: %w", id, backend.ErrNotRunning)
	}
	return fmt.Errorf("oci: sandbox %s: connecting to its init: %w", id, err)
}

// process is a command running under a shepherd. One goroutine per process
// reads the connection; it ends when the shepherd ends the command (which
// it always does: normal exit, Kill, or lost proof) and closes the
// connection.
type process struct {
	conn  *net.UnixConn
	sink  backend.Sink
	start time.Time
	life  *lifeline
	// oomKilled says whether the sandbox's OOM killer killed a process
	// since the command started; nil when the kernel does not count.
	oomKilled func() bool
	// kernel is a pidfd of the gVisor sentry that runs the command, -1
	// under runc. The sentry is PID 1 of its own PID namespace on the
	// node, holding every stub process that runs the guest's code: the
	// kernel kills and reaps them all before the sentry's exit completes
	// (zap_pid_ns_processes), and only then does the pidfd turn readable.
	// So a sentry that exited is proof that no process of the command is
	// left (the node's OOM killer ends the sentry: gVisor has none).
	kernel int

	done   chan struct{}
	status backend.ExitStatus // valid after done
	err    error              // valid after done

	killOnce sync.Once
	killErr  error
}

func newProcess(conn *net.UnixConn, fr *guest.FrameReader, sink backend.Sink, start time.Time, life *lifeline, oomKilled func() bool, kernel int) *process {
	p := &process{conn: conn, sink: sink, start: start, life: life, oomKilled: oomKilled, kernel: kernel, done: make(chan struct{})}
	go p.read(fr)
	return p
}

func (p *process) read(fr *guest.FrameReader) {
	defer close(p.done)
	defer p.conn.Close()
	if p.kernel >= 0 {
		defer unix.Close(p.kernel)
	}
	defer func() {
		if p.oomKilled != nil && (p.status.Signal != "" || p.status.Code > 128 || p.err != nil) {
			p.status.OOMKilled = p.oomKilled()
		}
	}()
	for {
		t, payload, err := fr.ReadFrame()
		if err != nil {
			p.status = backend.ExitStatus{Code: -1, Duration: time.Since(p.start)}
			p.err = p.connectionLost(err)
			if p.err == nil {
				p.status.Killed, p.status.Signal = true, "SIGKILL"
			}
			return
		}
		switch t {
		case guest.FrameStdout:
			p.sink.Write(backend.Stdout, payload)
		case guest.FrameStderr:
			p.sink.Write(backend.Stderr, payload)
		case guest.FrameExit:
			var e guest.Exit
			if err := json.Unmarshal(payload, &e); err != nil {
				p.err = fmt.Errorf("%w: bad Exit frame: %v", backend.ErrProofLost, err)
				p.status = backend.ExitStatus{Code: -1, Duration: time.Since(p.start)}
				return
			}
			p.status = exitStatus(e, time.Since(p.start))
			return
		case guest.FrameProofLost:
			p.err = fmt.Errorf("%w: %s", backend.ErrProofLost, payload)
			p.status = backend.ExitStatus{Code: -1, Killed: true, Duration: time.Since(p.start)}
			return
		default:
			p.err = fmt.Errorf("%w: protocol error: unexpected %v frame", backend.ErrProofLost, t)
			p.status = backend.ExitStatus{Code: -1, Duration: time.Since(p.start)}
			return
		}
	}
}

// connectionLost explains a connection that broke without a result. If
// Destroy is tearing the container down, the command died with it, and the
// teardown's success is the proof; otherwise the proof is lost.
func (p *process) connectionLost(err error) error {
	if p.life.tearingDown.Load() {
		<-p.life.ended // Destroy holds no lock we need; runc delete is bounded by its ctx
		if p.life.err == nil {
			return nil
		}
		return fmt.Errorf("%w: the sandbox's container could not be removed: %v", backend.ErrProofLost, p.life.err)
	}
	if p.kernel >= 0 && kernelExited(p.kernel, guest.ProofTimeout) {
		return nil
	}
	return fmt.Errorf("%w: the sandbox's shepherd went away without a result: %v", backend.ErrProofLost, err)
}

// kernelExited waits, at most timeout, for the process of pidfd to exit.
func kernelExited(pidfd int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		switch {
		case n > 0:
			return true
		case err == unix.EINTR && time.Now().Before(deadline):
			continue
		default:
			return false
		}
	}
}

func exitStatus(e guest.Exit, d time.Duration) backend.ExitStatus {
	s := backend.ExitStatus{Code: e.Code, Killed: e.Killed, Duration: d}
	if e.Signal != 0 {
		s.Code = -1
		s.Signal = unix.SignalName(unix.Signal(e.Signal))
		if s.Signal == "" {
			s.Signal = fmt.Sprintf("signal %d", e.Signal)
		}
	}
	return s
}

// Wait implements backend.Process.
func (p *process) Wait(ctx context.Context) (backend.ExitStatus, error) {
	select {
	case <-p.done:
		return p.status, p.err
	case <-ctx.Done():
		return backend.ExitStatus{}, ctx.Err()
	}
}

// Kill implements backend.Process. It returns nil once the shepherd has
// proven that no descendant of the command is left, or if the command had
// already ended by itself (its background processes then belong to the
// sandbox, like those of any finished command).
func (p *process) Kill(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.killOnce.Do(func() {
		stop := context.AfterFunc(ctx, func() { _ = p.conn.SetWriteDeadline(time.Now()) })
		_, p.killErr = p.conn.Write(guest.AppendFrame(nil, guest.FrameKill, nil))
		stop()
	})
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		if p.killErr != nil {
			return fmt.Errorf("%w: sending kill: %w", backend.ErrProofLost, p.killErr)
		}
		return fmt.Errorf("%w: no proof of cleanup yet: %w", backend.ErrProofLost, ctx.Err())
	}
}

type discardSink struct{}

func (discardSink) Write(backend.Stream, []byte) {}
