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

package agentserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/agentserver"
	"github.com/playground-dev/playground/hostagent/agentserver/agentservertest"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/internal/testbin"
)

// TestWorkerRelay: the relay reaches the worker of the caller's tenant's
// sandbox with the worker's own bearer, and refuses, marked as its own,
// whatever is not the tenant's or not running.
func TestWorkerRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := startNode(t, "", nil, spec("wk", "ns/a"), spec("other", "ns/b"))

	// The worker: the conformance probe's HTTP server, written into the
	// sandbox as a tenant would.
	probe, err := testbin.Build("github.com/playground-dev/playground/hostagent/conformance/probe", "-ldflags=-s -w", "-trimpath")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.client.Open(ctx, "ns/a", "wk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.client.Write(ctx, "ns/a", h.ID, ".probe", "", data); err != nil {
		t.Fatal(err)
	}
	exec(t, n, "ns/a", h.ID, "chmod 755 ~/.probe")

	get := func(c *agentapi.Client, tenant, id, path string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker"+path, http.NoBody)
		req.Header.Set("Authorization", "Bearer the-public-token")
		resp, err := c.WorkerTransport(tenant, id).RoundTrip(req)
		if err != nil {
			t.Fatalf("relaying to %s of %s: %v", id, tenant, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	// Before the mapping is applied: the agent's own 503.
	if resp, body := get(n.client, "ns/a", "wk", "/mcp"); resp.StatusCode != http.StatusServiceUnavailable ||
		resp.Header.Get(agentapi.AgentErrorHeader) != string(agentapi.CodeUnavailable) || !strings.Contains(body, "no worker") {
		t.Fatalf("no worker yet: %s %q (agent error %q)", resp.Status, body, resp.Header.Get(agentapi.AgentErrorHeader))
	}

	// The probe serving on 18090 as the sandbox's worker.
	setWorker := func() {
		t.Helper()
		if err := n.agent.Workers().SetWorker(ctx, "wk", &hostagent.WorkerSpec{
			Argv: []string{guestapi.TenantHome + "/.probe", "serve", "18090"}, Env: []string{"PATH=" + guestapi.DefaultPath}, Port: 18090,
		}); err != nil {
			t.Fatal(err)
		}
	}
	setWorker()
	var resp *http.Response
	var body string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, body = get(n.client, "ns/a", "wk", "/mcp/a%2Fb?q=1")
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break // the worker listens (or never will: checked below)
		}
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get(agentapi.AgentErrorHeader) != "" {
		t.Fatalf("the worker's answer: %s %q", resp.Status, body)
	}
	f := strings.Fields(body)
	if len(f) != 5 || f[0] != "probe" || f[1] != "GET" || f[2] != "/mcp/a%2Fb?q=1" || f[3] != "Bearer" {
		t.Fatalf("the worker saw %q: want its path as sent and a bearer", body)
	}
	if tok := f[4]; tok == gatewayToken || tok == "the-public-token" || len(tok) < 40 {
		t.Errorf("the worker saw the bearer %q: want its own internal token, not the caller's", tok)
	}

	// A body the worker does not read, still being sent when the worker
	// has answered: the relay's transport reads on after its handler
	// returned, which crashed the agent's process (see
	// TestBodyReadAfterTheHandler in internal/httpserve). The agent
	// serves on.
	for range 5 {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write(make([]byte, 64<<10))
			time.Sleep(100 * time.Millisecond)
			_ = pw.CloseWithError(errors.New("the client gave up"))
		}()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://worker/mcp", pr)
		req.Header.Set("Authorization", "Bearer the-public-token")
		if resp, err := n.client.WorkerTransport("ns/a", "wk").RoundTrip(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(200 * time.Millisecond) // the late read ends meanwhile
	}
	if _, again := get(n.client, "ns/a", "wk", "/mcp/a%2Fb?q=1"); again != body {
		t.Errorf("after bodies the worker did not read, the worker answered %q, before %q", again, body)
	}

	// Setting the same worker again keeps it, token and all.
	setWorker()
	if _, again := get(n.client, "ns/a", "wk", "/mcp/a%2Fb?q=1"); again != body {
		t.Errorf("the worker after the same spec again answered %q, before %q", again, body)
	}

	// A worker that dresses its answer as the agent's refusal: the header
	// is removed, and the caller sees the worker's answer for what it is.
	if resp, body := get(n.client, "ns/a", "wk", "/forge-agent-error"); resp.StatusCode != http.StatusForbidden ||
		resp.Header.Get(agentapi.AgentErrorHeader) != "" || !strings.HasPrefix(body, "probe GET /forge-agent-error") {
		t.Errorf("a worker's forged refusal: %s %q (agent error %q): want the worker's 403, unmarked", resp.Status, body, resp.Header.Get(agentapi.AgentErrorHeader))
	}

	for _, tc := range []struct {
		name, tenant, id string
		status           int
		code             agentapi.Code
	}{
		{"another tenant's sandbox", "ns/b", "wk", http.StatusNotFound, agentapi.CodeNotFound},
		{"a sandbox without a worker", "ns/b", "other", http.StatusServiceUnavailable, agentapi.CodeUnavailable},
		{"no tenant", "", "wk", http.StatusBadRequest, agentapi.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(n.client, tc.tenant, tc.id, "/mcp")
			if resp.StatusCode != tc.status || resp.Header.Get(agentapi.AgentErrorHeader) != string(tc.code) || strings.Contains(body, "probe") {
				t.Fatalf("%s %q (agent error %q): want %d %s, not the worker", resp.Status, body, resp.Header.Get(agentapi.AgentErrorHeader), tc.status, tc.code)
			}
		})
	}
	t.Run("within the tenant's budget", func(t *testing.T) {
		// The same agent, served with room for one call of the tenant: a
		// relayed request is one of its calls, and waits or is refused
		// while another holds the room.
		lim, err := budget.New(budget.Limits{CallsPerTenant: 1, Calls: 2, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		endpoint, _ := agentservertest.ServeAPI(t, n.agent, gatewayToken, func(s *agentserver.Server) { s.SetBudget(lim) })
		c, err := agentapi.NewClient(endpoint, gatewayToken, nil)
		if err != nil {
			t.Fatal(err)
		}
		exec(t, n, "ns/a", h.ID, "rm -f /tmp/relay-go")
		holding := make(chan error, 1)
		go func() {
			_, err := c.Exec(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "until [ -e /tmp/relay-go ]; do sleep 0.05; done"})
			holding <- err
		}()
		for lim.Stats().Calls != 1 {
			time.Sleep(5 * time.Millisecond)
		}
		resp, body := get(c, "ns/a", "wk", "/mcp")
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable ||
			resp.Header.Get(agentapi.AgentErrorHeader) != string(agentapi.CodeExhausted) || strings.Contains(body, "probe") {
			t.Errorf("relaying past the budget: %s %q (agent error %q): want the agent's resource_exhausted", resp.Status, body, resp.Header.Get(agentapi.AgentErrorHeader))
		}
		exec(t, n, "ns/a", h.ID, "touch /tmp/relay-go")
		if err := <-holding; err != nil {
			t.Fatal(err)
		}
		if resp, body := get(c, "ns/a", "wk", "/mcp"); resp.StatusCode != http.StatusOK {
			t.Errorf("relaying within the budget: %s %q", resp.Status, body)
		}
	})
	t.Run("an unknown caller", func(t *testing.T) {
		c, _ := agentapi.NewClient(n.endpoint, "not-a-token", nil)
		if resp, _ := get(c, "ns/a", "wk", "/mcp"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s, want 401", resp.Status)
		}
	})
}
