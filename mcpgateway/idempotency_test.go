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

package mcpgateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// TestJobExecIdempotencyKey is a client whose job_exec answer is lost on
// its way back (the agent started the job; the connection broke before
// its answer left): it sends the same job_exec with the same
// idempotency_key and gets the job that runs, and no second one runs. The
// key is its tenant's: bob's same key starts bob's own job and never
// reaches alice's; the key with another command is refused.
func TestJobExecIdempotencyKey(t *testing.T) {
	var lose atomic.Int32 // job starts whose answer to lose
	n := startNodeWith(t, nodeOptions{leaseNS: agentlease.DefaultNamespace, protocol: agentapi.Current.String(), wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/jobs") && lose.Add(-1) >= 0 {
				h.ServeHTTP(httptest.NewRecorder(), r) // served, its answer dropped
				panic(http.ErrAbortHandler)            // and the connection cut
			}
			h.ServeHTTP(w, r)
		})
	}})
	ns := newNamespace(t)
	alice := newTenant(t, ns, "alice", n)
	bob := newTenant(t, ns, "bob", n)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)

	a := connect(t, g.url, alice.token, nil)
	var ao tools.OpenSessionOutput
	callOK(t, a, "open_session", nil, &ao)
	const key = "0b7e2a6c-idem-key"
	args := map[string]any{"handle": ao.Handle, "command": "sleep 60", "idempotency_key": key}
	running := func(tenant *tenant) int {
		return len(n.agent.Jobs().List(tenant.String(), tenant.sandboxID))
	}

	lose.Store(1)
	callErr(t, a, "job_exec", args)
	if got := running(alice); got != 1 {
		t.Fatalf("alice has %d jobs after the lost answer, want the 1 it started", got)
	}
	var first, again tools.JobExecOutput
	callOK(t, a, "job_exec", args, &first)
	callOK(t, a, "job_exec", args, &again)
	if first.JobID == "" || again.JobID != first.JobID || first.State != "running" {
		t.Fatalf("retries with the key got jobs %q and %q (%s), want one running job", first.JobID, again.JobID, first.State)
	}
	if got := running(alice); got != 1 {
		t.Fatalf("alice has %d jobs after the retries, want 1", got)
	}

	// The key with another command: refused, saying which job has it.
	other := map[string]any{"handle": ao.Handle, "command": "sleep 61", "idempotency_key": key}
	callErr(t, a, "job_exec", other, "invalid_argument", "idempotency_key", first.JobID)
	// A key that is no key: refused before it travels.
	bad := map[string]any{"handle": ao.Handle, "command": "sleep 60", "idempotency_key": "key with spaces"}
	callErr(t, a, "job_exec", bad, "idempotency_key")

	// Bob's same key is his own: his job, not alice's.
	b := connect(t, g.url, bob.token, nil)
	var bo tools.OpenSessionOutput
	callOK(t, b, "open_session", nil, &bo)
	var bj tools.JobExecOutput
	callOK(t, b, "job_exec", map[string]any{"handle": bo.Handle, "command": "sleep 60", "idempotency_key": key}, &bj)
	if bj.JobID == first.JobID || running(bob) != 1 {
		t.Fatalf("bob's job_exec with alice's key got job %s (alice's %s), bob has %d jobs", bj.JobID, first.JobID, running(bob))
	}
	msg := callErr(t, b, "job_cancel", map[string]any{"job_id": first.JobID}, "not_found")
	if strings.Contains(msg, "alice") {
		t.Errorf("bob's cancel of alice's job leaks: %s", msg)
	}
	callOK(t, a, "job_cancel", map[string]any{"job_id": first.JobID}, nil)
	callOK(t, b, "job_cancel", map[string]any{"job_id": bj.JobID}, nil)
}
