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

package hostagent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/playground-dev/playground/hostagent/backend"
)

// WorkerSpec is a native MCP worker that a sandbox keeps running: what the
// node agent takes from the tenant's WorkerMapping.
type WorkerSpec struct {
	// Argv is run without a shell, as the sandbox user.
	Argv []string
	// Env is its environment; the backend adds the token file's name.
	Env []string
	// Port is the loopback port it serves MCP on.
	Port int
}

// workerBackend is the backend of a sandbox this agent serves, as a worker
// supervisor that can reach the worker.
func (a *Agent) workerBackend(id string) (backend.WorkerSupervisor, backend.Dialer, error) {
	be := a.backendOf(id)
	if be == nil {
		return nil, nil, errorf(CodeNotFound, "no such sandbox on this node")
	}
	caps := be.Capabilities()
	sup, d := caps.WorkerSupervisor, caps.Dialer
	if sup == nil || d == nil {
		return nil, nil, errorf(CodeInvalid, "the %s backend runs no workers in its sandboxes", be.Name())
	}
	return sup, d, nil
}

// SetWorker makes w the worker of the sandbox (nil: none). The worker's
// internal bearer is minted here, once: a worker set again with the same
// command keeps its token and is not restarted, also by an agent that
// started again.
func (a *Agent) SetWorker(ctx context.Context, sandboxID string, w *WorkerSpec) error {
	sup, _, err := a.workerBackend(sandboxID)
	if err != nil {
		if w == nil && CodeOf(err) == CodeNotFound {
			return nil
		}
		return err
	}
	if w == nil {
		return sup.SetWorker(ctx, sandboxID, nil)
	}
	if len(w.Argv) == 0 || w.Port < 1 || w.Port > 65535 {
		return errorf(CodeInvalid, "a worker needs a command and a TCP port")
	}
	cur, err := sup.Worker(ctx, sandboxID)
	if err != nil {
		return err
	}
	token := ""
	if cur != nil {
		if slices.Equal(cur.Argv, w.Argv) && slices.Equal(cur.Env, w.Env) && cur.Port == w.Port {
			return nil
		}
		token = cur.Token
	}
	if token == "" {
		var b [32]byte
		_, _ = rand.Read(b[:])
		token = base64.RawURLEncoding.EncodeToString(b[:])
	}
	// The worker is the tenant's process: it starts with the key in.
	if err := a.keys.waitFor(ctx, "", sandboxID); err != nil {
		return err
	}
	return sup.SetWorker(ctx, sandboxID, &backend.Worker{Argv: w.Argv, Env: w.Env, Token: token, Port: w.Port})
}

// WorkerStatus reports the sandbox's worker; CodeNotFound when it has none.
func (a *Agent) WorkerStatus(ctx context.Context, sandboxID string) (backend.WorkerStatus, error) {
	sup, _, err := a.workerBackend(sandboxID)
	if err != nil {
		return backend.WorkerStatus{}, err
	}
	st, err := sup.WorkerStatus(ctx, sandboxID)
	if errors.Is(err, backend.ErrNotFound) {
		return st, errorf(CodeNotFound, "the sandbox runs no worker")
	}
	return st, err
}

// WorkerLog returns at most limit bytes of the end of the worker's output.
func (a *Agent) WorkerLog(ctx context.Context, sandboxID string, limit int) ([]byte, error) {
	sup, _, err := a.workerBackend(sandboxID)
	if err != nil {
		return nil, err
	}
	return sup.WorkerLog(ctx, sandboxID, limit)
}

// DialWorker connects to the worker of the tenant's sandbox, for the relay,
// and returns the bearer the worker expects. Another tenant's sandbox is
// answered as an unknown one.
func (a *Agent) DialWorker(ctx context.Context, tenant, sandboxID string) (net.Conn, string, error) {
	a.mu.Lock()
	s, ok := a.sandboxes[sandboxID]
	a.mu.Unlock()
	if !ok || s.spec.Tenant != tenant {
		return nil, "", errorf(CodeNotFound, "no such sandbox for tenant %s on this node: it is not provisioned here yet, or it is not yours", tenant)
	}
	if s.suspended {
		return nil, "", errorf(CodeUnavailable, "tenant %s is suspended: its sandbox, and its worker, are stopped until an operator clears spec.suspended on the Tenant", tenant)
	}
	if err := a.chargeable(ctx, s.spec, s.be); err != nil {
		return nil, "", err
	}
	// A relayed connection is a call: a sleeping sandbox wakes for it. It
	// does not keep the sandbox awake while it stays open: an idle
	// suspension breaks it, as an agent restart does.
	_, done, err := a.awaken(ctx, sandboxID)
	if err != nil {
		return nil, "", err
	}
	done()
	sup, d, err := a.workerBackend(sandboxID)
	if err != nil {
		return nil, "", err
	}
	w, err := sup.Worker(ctx, sandboxID)
	if err != nil {
		return nil, "", err
	}
	if w == nil {
		return nil, "", errorf(CodeUnavailable, "tenant %s has no worker in its sandbox yet: its WorkerMapping is not applied on this node (check the mapping's status)", tenant)
	}
	c, err := d.DialSandbox(ctx, sandboxID, w.Port)
	if errors.Is(err, backend.ErrInvalidRequest) {
		return nil, "", &Error{Code: CodeUnavailable, Err: err, Message: fmt.Sprintf(
			"the worker of tenant %s does not accept connections on port %d: it is starting, restarting or failing (see kubectl playground logs): retry shortly", tenant, w.Port)}
	}
	if err != nil {
		return nil, "", err
	}
	return c, w.Token, nil
}
