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
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// maxSocketPath is the usable length of sun_path; longer socket paths are
// reached through /proc/self/fd of their directory.
const maxSocketPath = 107

// connectGuest is the backend's Guest.Connect (Capabilities.Guest): a
// connection to the sandbox's init, whose idle shepherd accepts it and
// runs the command, and the command's hooks, which know the sandbox's OOM
// kills from before it. The command runs until it ends or Kill is called;
// if the agent's connection breaks, the shepherd kills the command's whole
// tree, since nobody is left to collect its result.
func (b *Backend) connectGuest(ctx context.Context, id string) (net.Conn, backend.GuestHooks, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, backend.GuestHooks{}, err
	}
	life := b.lifeline(id)
	oomBefore, oomKnown := life.oomKills(b.runtimeOf(id), id)
	conn, err := b.dial(ctx, id)
	if err != nil {
		return nil, backend.GuestHooks{}, err
	}
	oomGrew := func() bool {
		after, ok := life.oomKills(b.runtimeOf(id), id)
		return oomKnown && ok && after > oomBefore
	}
	// Under gVisor, the sentry is the command's kernel: its end is the end
	// of every process of the sandbox (see connectionLost).
	kernel := b.sentryFD(id)
	hooks := backend.GuestHooks{
		Lost: func(err error) error { return connectionLost(life, kernel, err) },
		Release: func() {
			if kernel >= 0 {
				unix.Close(kernel)
			}
		},
		StartFailed: func(err error, timedOut bool) error {
			switch {
			case timedOut:
				return fmt.Errorf("oci: starting command in sandbox %s: %w", id, err)
			case !b.Alive(id):
				// The connection reached a sandbox whose init was dying
				// (a shepherd still held the listener): it is not running.
				return fmt.Errorf("oci: sandbox %s: %w (its init exited while the command started)", id, backend.ErrNotRunning)
			case oomGrew():
				return fmt.Errorf("the sandbox ran out of memory while the command started (the OOM killer took the process starting it): free memory in the sandbox and retry (%w)", err)
			}
			return fmt.Errorf("oci: starting command in sandbox %s: %w", id, err)
		},
	}
	if oomKnown {
		hooks.OOMKilled = oomGrew
	}
	return conn, hooks, nil
}

// Exec implements backend.Backend: the command runs over the guest
// protocol with the backend's Guest, as the kernel runs it
// (guestexec.Exec). ctx bounds only the start.
func (b *Backend) Exec(ctx context.Context, id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
	return guestexec.Exec(ctx, b.Capabilities().Guest, id, req, sink)
}

// jobConn is a connection to the sandbox's init, whose idle shepherd
// holds the job it is asked to start (backend.JobHolder's JobConn).
func (b *Backend) jobConn(ctx context.Context, id string) (net.Conn, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	return b.dial(ctx, id)
}

// controlConn is a connection to init's control socket, on which init
// itself lists and attaches jobs.
func (b *Backend) controlConn(ctx context.Context, id string) (net.Conn, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	return b.dialSocket(ctx, id, guestapi.ControlSocketName)
}

// OOMKills implements backend.OOMCounter: the oom_kill count of the
// sandbox's memory cgroup, which lives as long as its container.
func (b *Backend) OOMKills(id string) (uint64, bool) {
	if backend.ValidateID(id) != nil {
		return 0, false
	}
	return b.lifeline(id).oomKills(b.runtimeOf(id), id)
}

// ForksRefused implements backend.ForkCounter.
func (b *Backend) ForksRefused(id string) (uint64, bool) {
	if backend.ValidateID(id) != nil {
		return 0, false
	}
	return b.lifeline(id).pidsRefused(b.runtimeOf(id), id)
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

// dial connects to the sandbox's init, whose shepherds answer.
func (b *Backend) dial(ctx context.Context, id string) (*net.UnixConn, error) {
	return b.dialSocket(ctx, id, guestapi.SocketName)
}

// dialSocket connects to a socket of the sandbox's init in its run
// directory.
func (b *Backend) dialSocket(ctx context.Context, id, name string) (*net.UnixConn, error) {
	path := filepath.Join(b.sandboxDir(id), "run", name)
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
		path = fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), name)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, b.dialError(id, err)
	}
	return c.(*net.UnixConn), nil
}

func (b *Backend) dialError(id string, err error) error {
	if !backend.FileExists(filepath.Join(b.sandboxDir(id), "sandbox.json")) {
		return fmt.Errorf("oci: sandbox %s: %w", id, backend.ErrNotFound)
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("oci: sandbox %s: %w", id, backend.ErrNotRunning)
	}
	return fmt.Errorf("oci: sandbox %s: connecting to its init: %w", id, err)
}

// connectionLost explains a connection that broke without a result. If
// Destroy is tearing the container down, the command died with it, and the
// teardown's success is the proof. Under gVisor, kernel is a pidfd of the
// sentry that ran the command (-1 under runc): the sentry is PID 1 of its
// own PID namespace on the node, holding every stub process that runs the
// guest's code, and the kernel kills and reaps them all before the
// sentry's exit completes (zap_pid_ns_processes); only then does the pidfd
// turn readable. So a sentry that exited is proof that no process of the
// command is left (the node's OOM killer ends the sentry: gVisor has
// none). Otherwise the proof is lost.
func connectionLost(life *lifeline, kernel int, err error) error {
	if life.tearingDown.Load() {
		<-life.ended // Destroy holds no lock we need; runc delete is bounded by its ctx
		if life.err == nil {
			return nil
		}
		return fmt.Errorf("%w: the sandbox's container could not be removed: %v", backend.ErrProofLost, life.err)
	}
	if kernel >= 0 && kernelExited(kernel, guestapi.ProofTimeout) {
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

// File implements backend.FileServer: an idle shepherd of the sandbox's
// init serves the call with the tenant's credentials (guestexec.File).
func (b *Backend) File(ctx context.Context, id string, call backend.FileCall) (backend.FileResult, error) {
	if err := backend.ValidateID(id); err != nil {
		return backend.FileResult{}, err
	}
	conn, err := b.dial(ctx, id)
	if err != nil {
		return backend.FileResult{}, err
	}
	return guestexec.File(ctx, conn, call)
}
