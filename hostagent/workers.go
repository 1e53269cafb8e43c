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

	"github.com/playground-dev/playground/hostagent/agentapi"
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

// Workers is the worker service: the native MCP worker each sandbox
// keeps running (its backend's supervisor holds it), and the relay's
// connections to it. It has no state of its own.
type Workers struct {
	sandboxes workerSandboxes
	keys      keyWaiter
	calls     callGate
}

// workerSandboxes is what the worker service asks of the sandboxes
// service.
type workerSandboxes interface {
	served(id string) (sandboxView, bool)
}

// keyWaiter is what the services that start a tenant's process ask of
// the signing-key service: to wait until the sandbox holds its key.
type keyWaiter interface {
	waitFor(ctx context.Context, tenant, id string) error
}

// supervisorOf is the backend of a sandbox this agent serves, as a worker
// supervisor that can reach the worker.
func (w *Workers) supervisorOf(id string) (backend.WorkerSupervisor, backend.Dialer, error) {
	sbx, ok := w.sandboxes.served(id)
	if !ok {
		return nil, nil, errorf(agentapi.CodeNotFound, "no such sandbox on this node")
	}
	caps := sbx.be.Capabilities()
	sup, d := caps.WorkerSupervisor, caps.Dialer
	if sup == nil || d == nil {
		return nil, nil, errorf(agentapi.CodeInvalid, "the %s backend runs no workers in its sandboxes", sbx.be.Name())
	}
	return sup, d, nil
}

// SetWorker makes spec the worker of the sandbox (nil: none). The worker's
// internal bearer is minted here, once: a worker set again with the same
// command keeps its token and is not restarted, also by an agent that
// started again.
func (w *Workers) SetWorker(ctx context.Context, sandboxID string, spec *WorkerSpec) error {
	sup, _, err := w.supervisorOf(sandboxID)
	if err != nil {
		if spec == nil && CodeOf(err) == agentapi.CodeNotFound {
			return nil
		}
		return err
	}
	if spec == nil {
		return sup.SetWorker(ctx, sandboxID, nil)
	}
	if len(spec.Argv) == 0 || spec.Port < 1 || spec.Port > 65535 {
		return errorf(agentapi.CodeInvalid, "a worker needs a command and a TCP port")
	}
	cur, err := sup.Worker(ctx, sandboxID)
	if err != nil {
		return err
	}
	token := ""
	if cur != nil {
		if slices.Equal(cur.Argv, spec.Argv) && slices.Equal(cur.Env, spec.Env) && cur.Port == spec.Port {
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
	if err := w.keys.waitFor(ctx, "", sandboxID); err != nil {
		return err
	}
	return sup.SetWorker(ctx, sandboxID, &backend.Worker{Argv: spec.Argv, Env: spec.Env, Token: token, Port: spec.Port})
}

// WorkerStatus reports the sandbox's worker; agentapi.CodeNotFound when it has none.
func (w *Workers) WorkerStatus(ctx context.Context, sandboxID string) (backend.WorkerStatus, error) {
	sup, _, err := w.supervisorOf(sandboxID)
	if err != nil {
		return backend.WorkerStatus{}, err
	}
	st, err := sup.WorkerStatus(ctx, sandboxID)
	if errors.Is(err, backend.ErrNotFound) {
		return st, errorf(agentapi.CodeNotFound, "the sandbox runs no worker")
	}
	return st, err
}

// WorkerLog returns at most limit bytes of the end of the worker's output.
func (w *Workers) WorkerLog(ctx context.Context, sandboxID string, limit int) ([]byte, error) {
	sup, _, err := w.supervisorOf(sandboxID)
	if err != nil {
		return nil, err
	}
	return sup.WorkerLog(ctx, sandboxID, limit)
}

// DialWorker connects to the worker of the tenant's sandbox, for the relay,
// and returns the bearer the worker expects. Another tenant's sandbox is
// answered as an unknown one.
func (w *Workers) DialWorker(ctx context.Context, tenant, sandboxID string) (net.Conn, string, error) {
	sbx, ok := w.sandboxes.served(sandboxID)
	if !ok || sbx.spec.Tenant != tenant {
		return nil, "", errorf(agentapi.CodeNotFound, "no such sandbox for tenant %s on this node: it is not provisioned here yet, or it is not yours", tenant)
	}
	if sbx.suspended {
		return nil, "", errorf(agentapi.CodeUnavailable, "tenant %s is suspended: its sandbox, and its worker, are stopped until an operator clears spec.suspended on the Tenant", tenant)
	}
	if err := w.calls.chargeable(ctx, sbx.spec, sbx.be); err != nil {
		return nil, "", err
	}
	// A relayed connection is a call: a sleeping sandbox wakes for it. It
	// does not keep the sandbox awake while it stays open: an idle
	// suspension breaks it, as an agent restart does.
	_, done, err := w.calls.awaken(ctx, sandboxID)
	if err != nil {
		return nil, "", err
	}
	done()
	sup, d, err := w.supervisorOf(sandboxID)
	if err != nil {
		return nil, "", err
	}
	wk, err := sup.Worker(ctx, sandboxID)
	if err != nil {
		return nil, "", err
	}
	if wk == nil {
		return nil, "", errorf(agentapi.CodeUnavailable, "tenant %s has no worker in its sandbox yet: its WorkerMapping is not applied on this node (check the mapping's status)", tenant)
	}
	c, err := d.DialSandbox(ctx, sandboxID, wk.Port)
	if errors.Is(err, backend.ErrInvalidRequest) {
		return nil, "", &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err, Message: fmt.Sprintf(
			"the worker of tenant %s does not accept connections on port %d: it is starting, restarting or failing (see kubectl playground logs): retry shortly", tenant, wk.Port)}
	}
	if err != nil {
		return nil, "", err
	}
	return c, wk.Token, nil
}
