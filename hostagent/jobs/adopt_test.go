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

package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// runningHeld is a holder whose job runs until it is killed or released.
// (The real holder is the sandbox's; conformance's jobs-across-restarts
// group runs it, this test only what the manager counts.)
type runningHeld struct {
	once  sync.Once
	ended chan struct{}
	err   error // the connection closed before the job ended
}

func newRunningHeld() *runningHeld { return &runningHeld{ended: make(chan struct{})} }

func (h *runningHeld) Poll(context.Context, heldjob.PollRequest) (heldjob.Page, error) {
	return heldjob.Page{}, nil
}
func (h *runningHeld) Kill(context.Context) error { h.end(); return nil }
func (h *runningHeld) Release(context.Context) (heldjob.Page, error) {
	h.end()
	return heldjob.Page{}, nil
}
func (h *runningHeld) Ended() <-chan struct{} { return h.ended }
func (h *runningHeld) End() (*heldjob.Exit, string, error) {
	if h.err != nil {
		return nil, "", h.err
	}
	return &heldjob.Exit{Status: backend.ExitStatus{ExitCode: 0, Killed: true}}, "", nil
}

// Close closes the connection, as a guestexec.Job's does: Ended fires with
// the connection's error, and the job goes on in its sandbox.
func (h *runningHeld) Close() error {
	h.once.Do(func() { h.err = net.ErrClosed; close(h.ended) })
	return nil
}
func (h *runningHeld) Input(context.Context, []byte, bool) error { return nil }
func (h *runningHeld) Resize(context.Context, TTYSize) error     { return nil }
func (h *runningHeld) Screen(context.Context, heldjob.ScreenRequest) (Screen, error) {
	return Screen{}, nil
}

func (h *runningHeld) end() { h.once.Do(func() { close(h.ended) }) }

// heldRecord is what a sandbox lists of a job a former agent started for
// tenant.
func heldRecord(t *testing.T, tenant string) backend.JobRecord {
	t.Helper()
	meta, err := json.Marshal(heldMeta{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return backend.JobRecord{Spec: backend.JobSpec{ID: agentapi.NewJobID(), Meta: meta}, PID: 42}
}

// TestAdoptionWithinTheRetainedBounds: an agent that restarts with smaller
// bounds, or sandboxes that list more jobs than the node may keep, are
// held to the retained bounds per tenant and per agent: the jobs past them
// are not adopted (the caller releases them, killed with proof), and those
// adopted stay within the bounds.
func TestAdoptionWithinTheRetainedBounds(t *testing.T) {
	h := newHarness(t, Limits{ActivePerTenant: 8, ActivePerAgent: 32, RetainedPerTenant: 3, RetainedPerAgent: 4})
	ctx := context.Background()
	attach := func(context.Context, string) (Held, error) { return newRunningHeld(), nil }
	adopt := func(tenant string) error {
		_, err := h.m.Adopt(ctx, tenant, "sbx-"+tenant, heldRecord(t, tenant), attach)
		return err
	}
	bound := func(err error) Bound {
		var le *LimitError
		if errors.As(err, &le) {
			return le.Bound
		}
		return ""
	}
	for i := range 3 {
		if err := adopt("a"); err != nil {
			t.Fatalf("adopting a's job %d: %v", i, err)
		}
	}
	if err := adopt("a"); bound(err) != BoundRetainedPerTenant {
		t.Fatalf("a's fourth job: %v, want the per-tenant bound", err)
	}
	if err := adopt("b"); err != nil {
		t.Fatalf("b's first job: %v", err)
	}
	// The node holds 4, its bound; a holds 3 running jobs, which are never
	// taken: c's job is not adopted.
	if err := adopt("c"); bound(err) != BoundRetainedPerAgent {
		t.Fatalf("c's job on a full node: %v, want the per-agent bound", err)
	}
	if n := len(h.m.jobs); n != 4 {
		t.Fatalf("the manager holds %d jobs, past its bound of 4", n)
	}
}
