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

package lima

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Exec implements backend.Backend: the command runs over the guest
// protocol with the backend's Guest, as the kernel runs it
// (guestexec.Exec). ctx bounds only the start.
func (b *Backend) Exec(ctx context.Context, id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
	return guestexec.Exec(ctx, b.Capabilities().Guest, id, req, sink)
}

// guest is the backend's Guest (Capabilities.Guest): init's socket as
// Lima forwards it (ssh -L from the instance's sock/agent.sock to the
// guest's), spoken to exactly as the oci backend speaks to a
// bind-mounted socket.
func (b *Backend) guest() *backend.Guest {
	return &backend.Guest{StartTimeout: b.opts.StartTimeout, Connect: func(ctx context.Context, id string) (net.Conn, backend.GuestHooks, error) {
		if err := validateLimaName(id); err != nil {
			return nil, backend.GuestHooks{}, err
		}
		conn, err := b.dial(ctx, id)
		return conn, backend.GuestHooks{
			Lost:        func(err error) error { return b.connectionLost(id, err) },
			StartFailed: func(err error, _ bool) error { return fmt.Errorf("lima: starting command in sandbox %s: %w", id, err) },
		}, err
	}}
}

// DialSandbox implements backend.Dialer: an idle shepherd connects to
// port on the loopback of init's network namespace and relays bytes.
func (b *Backend) DialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := validateLimaName(id); err != nil {
		return nil, err
	}
	return guestexec.DialPort(ctx, "lima", id, port, b.opts.StartTimeout, func(ctx context.Context) (net.Conn, error) { return b.dial(ctx, id) })
}

// jobConn reaches an idle shepherd (backend.JobHolder's JobConn): the
// guest holds jobs in the Lima VM as in a container, reached over the same
// forwarded socket. Lima forwards init's socket only (lima.yaml's
// portForwards), so its shepherds answer attachments and lists too: a
// tenant that holds every PID of its sandbox can keep its jobs from an
// agent that restarts, which then reports the sandbox and retries.
func (b *Backend) jobConn(ctx context.Context, id string) (net.Conn, error) {
	if err := validateLimaName(id); err != nil {
		return nil, err
	}
	return b.dial(ctx, id)
}

// dial connects to the forwarded socket of sandbox id.
func (b *Backend) dial(ctx context.Context, id string) (net.Conn, error) {
	path := b.hostSocket(id)
	// The instance directory is RunAs's: connect only to a socket.
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, b.dialError(id, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("lima: sandbox %s: %s is not a socket", id, path)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, b.dialError(id, err)
	}
	return c, nil
}

func (b *Backend) dialError(id string, err error) error {
	// lima.yaml is the instance's own file in $LIMA_HOME/<name>.
	if !backend.FileExists(filepath.Join(b.instanceDir(id), "lima.yaml")) {
		return fmt.Errorf("lima: sandbox %s: %w", id, backend.ErrNotFound)
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("lima: sandbox %s: %w (no forwarded socket at %s)", id, backend.ErrNotRunning, b.hostSocket(id))
	}
	return fmt.Errorf("lima: sandbox %s: connecting to its init: %w", id, err)
}

// connectionLost explains a connection that broke without a result. The
// end of the VM is the end of every process in it: when limactl reports
// the instance Stopped (neither its host agent nor its hypervisor runs,
// pkg/store's inspectStatusWithPIDFiles) or gone, no process of the
// command is left. A Stop or Destroy under way is waited for. Otherwise
// (init died in a running VM, the ssh forward broke) the proof is lost.
func (b *Backend) connectionLost(id string, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.StartTimeout+guestapi.ProofTimeout)
	defer cancel()
	// Stop and Destroy hold the sandbox's lock while limactl runs.
	unlock := b.lockCtx(ctx, id)
	if unlock == nil {
		return fmt.Errorf("%w: the sandbox's shepherd went away without a result (%v), and the sandbox is still being stopped", backend.ErrProofLost, cause)
	}
	defer unlock()
	inst, err := b.lctl.list(ctx, InstanceName(id))
	switch {
	case err != nil:
		return fmt.Errorf("%w: the sandbox's shepherd went away without a result (%v), and limactl cannot say whether the VM ended: %v", backend.ErrProofLost, cause, err)
	case inst == nil || inst.Status == statusStopped:
		return nil
	}
	return fmt.Errorf("%w: the sandbox's shepherd went away without a result, and the VM still runs: %v", backend.ErrProofLost, cause)
}

// lockCtx takes the sandbox's lock, or gives up when ctx ends (nil).
func (b *Backend) lockCtx(ctx context.Context, id string) func() {
	got := make(chan func(), 1)
	// Owned here: it ends when the lock is taken, which Stop and Destroy
	// release when their limactl call ends (bounded by their context).
	go func() { got <- b.locks.Lock(id) }()
	select {
	case unlock := <-got:
		return unlock
	case <-ctx.Done():
		go func() { (<-got)() }()
		return nil
	}
}

// retryDelay paces waits for the forwarded socket.
const retryDelay = 100 * time.Millisecond
