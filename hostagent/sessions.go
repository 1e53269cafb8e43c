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
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// Sessions is the sessions service: the session handles open on the
// sandboxes, leases that expire unless used or renewed within the TTL. It
// owns the handle table and the counts of handles per tenant and per
// sandbox; every call that names a handle resolves it here (resolve).
type Sessions struct {
	sandboxes sessionSandboxes
	keys      keyWaiter
	calls     awakener
	jobs      jobLister
	clock     jobs.Clock
	// ttl, maxPerTenant and max are Options.HandleTTL,
	// MaxHandlesPerTenant and MaxHandles.
	ttl               time.Duration
	maxPerTenant, max int

	mu         sync.Mutex
	handles    map[string]*handle // by handle ID
	perTenant  map[string]int     // open handles per tenant
	perSandbox map[string]int     // open handles per sandbox
}

// sessionSandboxes is what the sessions service asks of the sandboxes
// service.
type sessionSandboxes interface {
	served(id string) (sandboxView, bool)
	// waitPending waits a while for the tenant's sandbox still to be
	// taken over by an agent that just started, and says why a call
	// cannot go on if it still is not.
	waitPending(ctx context.Context, tenant, sandboxID string) error
}

// jobLister is what the sessions service asks of the job engine: the
// tenant's jobs in a sandbox, for Activity.
type jobLister interface {
	List(tenant, sandboxID string) []jobs.JobInfo
}

func newSessions(sandboxes sessionSandboxes, keys keyWaiter, calls awakener, jl jobLister, opts Options) *Sessions {
	return &Sessions{sandboxes: sandboxes, keys: keys, calls: calls, jobs: jl, clock: opts.Clock,
		ttl: opts.HandleTTL, maxPerTenant: opts.MaxHandlesPerTenant, max: opts.MaxHandles,
		handles: map[string]*handle{}, perTenant: map[string]int{}, perSandbox: map[string]int{}}
}

type handle struct {
	id, tenant, sandboxID string
	opened, expires       time.Time
}

// Handle is an open session on a sandbox: a lease that expires unless used
// or renewed within the TTL.
type Handle struct {
	ID        string
	SandboxID string
	Expires   time.Time
}

// openable says why the tenant cannot open a session on sandboxID (nil:
// it can).
func (ss *Sessions) openable(tenant, sandboxID string) error {
	sbx, ok := ss.sandboxes.served(sandboxID)
	if !ok || sbx.spec.Tenant != tenant {
		// The ID is not quoted: it is the caller's, of any shape.
		return errorf(agentapi.CodeNotFound, "no such sandbox for tenant %s on this node: it is not provisioned here yet, or it is not yours", tenant)
	}
	if sbx.suspended {
		return errorf(agentapi.CodeUnavailable, "tenant %s is suspended: its sandbox is stopped (its files are kept) until an operator clears spec.suspended on the Tenant", tenant)
	}
	return nil
}

// Open opens a session handle on the tenant's sandbox. A sandbox that an
// agent that just started is still taking over is waited for, a while;
// so is one whose signing key is expected and not in yet.
func (ss *Sessions) Open(ctx context.Context, tenant, sandboxID string) (Handle, error) {
	if err := ss.sandboxes.waitPending(ctx, tenant, sandboxID); err != nil {
		return Handle{}, err
	}
	if err := ss.keys.waitFor(ctx, tenant, sandboxID); err != nil {
		return Handle{}, err
	}
	if sbx, ok := ss.sandboxes.served(sandboxID); ok && sbx.spec.Tenant == tenant {
		// Opening a session is a call: a sleeping sandbox wakes for it.
		_, done, err := ss.calls.awaken(ctx, sandboxID)
		if err != nil {
			return Handle{}, err
		}
		defer done()
	}
	if err := ss.openable(tenant, sandboxID); err != nil {
		return Handle{}, err
	}
	ss.mu.Lock()
	ss.expireLocked()
	if n := ss.perTenant[tenant]; n >= ss.maxPerTenant {
		ss.mu.Unlock()
		return Handle{}, errorf(agentapi.CodeExhausted, "tenant %s has %d open session handles (limit %d): close unused ones with close_session, or let them expire after %s unused",
			tenant, n, ss.maxPerTenant, ss.ttl)
	}
	if len(ss.handles) >= ss.max {
		n := len(ss.handles)
		ss.mu.Unlock()
		return Handle{}, errorf(agentapi.CodeExhausted, "this node has %d open session handles (limit %d): retry later", n, ss.max)
	}
	now := ss.clock.Now()
	h := &handle{id: agentapi.NewHandle(), tenant: tenant, sandboxID: sandboxID, opened: now, expires: now.Add(ss.ttl)}
	ss.handles[h.id] = h
	ss.perTenant[tenant]++
	ss.perSandbox[sandboxID]++
	ss.mu.Unlock()
	// A suspension or removal of the sandbox meanwhile dropped its
	// handles before this one was in: it goes too.
	if err := ss.openable(tenant, sandboxID); err != nil {
		ss.mu.Lock()
		if _, ok := ss.handles[h.id]; ok {
			ss.dropLocked(h)
		}
		ss.mu.Unlock()
		return Handle{}, err
	}
	return Handle{ID: h.id, SandboxID: sandboxID, Expires: h.expires}, nil
}

// Activity is what a tenant has open in its sandbox: its session handles
// and the jobs it can still poll or cancel.
type Activity struct {
	Handles []HandleInfo
	Jobs    []jobs.JobInfo
}

// HandleInfo is an open handle as a listing shows it: LastUsed is when a
// call last used or renewed it.
type HandleInfo struct {
	Handle
	Opened, LastUsed time.Time
}

// Activity lists the tenant's open handles and jobs in its sandbox, oldest
// first: the operator's view of what holds the tenant's bounds (handles
// and retained jobs). A sandbox that is not the tenant's is not found, as
// for Open.
func (ss *Sessions) Activity(ctx context.Context, tenant, sandboxID string) (Activity, error) {
	if err := ss.sandboxes.waitPending(ctx, tenant, sandboxID); err != nil {
		return Activity{}, err
	}
	if sbx, ok := ss.sandboxes.served(sandboxID); !ok || sbx.spec.Tenant != tenant {
		return Activity{}, errorf(agentapi.CodeNotFound, "no such sandbox for tenant %s on this node: it is not provisioned here yet, or it is not yours", tenant)
	}
	var act Activity
	ss.mu.Lock()
	ss.expireLocked()
	for _, h := range ss.handles {
		if h.tenant == tenant && h.sandboxID == sandboxID {
			act.Handles = append(act.Handles, HandleInfo{
				Handle:   Handle{ID: h.id, SandboxID: h.sandboxID, Expires: h.expires},
				Opened:   h.opened,
				LastUsed: h.expires.Add(-ss.ttl),
			})
		}
	}
	ss.mu.Unlock()
	slices.SortFunc(act.Handles, func(x, y HandleInfo) int {
		if c := x.Opened.Compare(y.Opened); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	act.Jobs = ss.jobs.List(tenant, sandboxID)
	return act, nil
}

// Renew extends a handle's lease.
func (ss *Sessions) Renew(tenant, handleID string) (Handle, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	h, err := ss.useLocked(tenant, handleID)
	if err != nil {
		return Handle{}, err
	}
	return Handle{ID: h.id, SandboxID: h.sandboxID, Expires: h.expires}, nil
}

// CloseHandle releases a handle. When the last handle of a sandbox goes, the
// sandbox is detached; its files and processes stay.
func (ss *Sessions) CloseHandle(ctx context.Context, tenant, handleID string) error {
	ss.mu.Lock()
	h, err := ss.useLocked(tenant, handleID)
	if err != nil {
		ss.mu.Unlock()
		return err
	}
	last := ss.dropLocked(h)
	ss.mu.Unlock()
	if sbx, ok := ss.sandboxes.served(h.sandboxID); last && ok {
		if err := sbx.be.Detach(ctx, h.sandboxID); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("detaching sandbox %s: %w", h.sandboxID, err)
		}
	}
	return nil
}

// OpenHandles is the number of session handles open on a sandbox.
func (ss *Sessions) OpenHandles(id string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expireLocked()
	return ss.perSandbox[id]
}

// useLocked resolves a handle of the tenant and renews its lease. It is
// where every call naming a handle enters: one not of the shape the agent
// issues is not found, like any unknown one. The caller holds ss.mu.
func (ss *Sessions) useLocked(tenant, handleID string) (*handle, error) {
	if !agentapi.ValidHandle(handleID) {
		return nil, HandleNotFound()
	}
	ss.expireLocked()
	h, ok := ss.handles[handleID]
	if !ok || h.tenant != tenant {
		return nil, HandleNotFound()
	}
	h.expires = ss.clock.Now().Add(ss.ttl)
	return h, nil
}

// dropLocked removes a handle and reports whether it was its sandbox's
// last. The caller holds ss.mu.
func (ss *Sessions) dropLocked(h *handle) bool {
	delete(ss.handles, h.id)
	decr(ss.perTenant, h.tenant)
	decr(ss.perSandbox, h.sandboxID)
	return ss.perSandbox[h.sandboxID] == 0
}

// dropSandbox drops every handle of a sandbox, suspended or removed.
func (ss *Sessions) dropSandbox(sandboxID string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, h := range ss.handles {
		if h.sandboxID == sandboxID {
			ss.dropLocked(h)
		}
	}
}

// expireLocked drops handles past their lease. The handle map is bounded,
// so a scan per call is cheap next to the command it precedes. The caller
// holds ss.mu.
func (ss *Sessions) expireLocked() {
	now := ss.clock.Now()
	for _, h := range ss.handles {
		if now.After(h.expires) {
			ss.dropLocked(h)
		}
	}
}

// resolve returns the sandbox behind a tenant's handle and its backend,
// renewing the lease.
func (ss *Sessions) resolve(tenant, handleID string) (backend.Spec, backend.Backend, error) {
	ss.mu.Lock()
	h, err := ss.useLocked(tenant, handleID)
	ss.mu.Unlock()
	if err != nil {
		return backend.Spec{}, nil, err
	}
	sbx, ok := ss.sandboxes.served(h.sandboxID)
	if !ok || sbx.suspended {
		return backend.Spec{}, nil, HandleNotFound()
	}
	return sbx.spec, sbx.be, nil
}

func decr(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}
