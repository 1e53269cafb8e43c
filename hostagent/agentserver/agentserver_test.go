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
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/agentserver"
	"github.com/playground-dev/playground/hostagent/agentserver/agentservertest"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/jobs"
	"github.com/playground-dev/playground/internal/budget"
)

const gatewayToken = "gateway-token-for-tests"

// node is one agent on real runc sandboxes, served over HTTP on loopback.
type node struct {
	agent    *hostagent.Agent
	endpoint string
	client   *agentapi.Client
	stateDir string
}

// startNode starts an agent over stateDir (a new node when empty) with the
// sandboxes of specs, and serves its API until the test ends.
func startNode(t *testing.T, stateDir string, clock jobs.Clock, specs ...backend.Spec) *node {
	t.Helper()
	ocitest.Require(t)
	if stateDir == "" {
		stateDir = ocitest.StateDir(t)
	}
	agent := newAgent(t, hostagent.Options{Backends: []backend.Backend{ocitest.New(t, stateDir)}, Clock: clock}, specs...)
	endpoint := agentservertest.Serve(t, agent, gatewayToken)
	c, err := agentapi.NewClient(endpoint, gatewayToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &node{agent: agent, endpoint: endpoint, client: c, stateDir: stateDir}
}

// newAgent makes an agent with opts and ensures the sandboxes of specs
// on it; the caller serves it (agentservertest), which closes it.
func newAgent(t *testing.T, opts hostagent.Options, specs ...backend.Spec) *hostagent.Agent {
	t.Helper()
	agent, err := hostagent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if err := agent.Ensure(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return agent
}

func spec(id, tenant string) backend.Spec {
	return backend.Spec{ID: id, Tenant: tenant, Persona: tenant + "-persona"}
}

func exec(t *testing.T, n *node, tenant, h, cmd string) agentapi.ExecResult {
	t.Helper()
	res, err := n.client.Exec(context.Background(), tenant, h, agentapi.ExecRequest{Command: cmd})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}

func codeOf(err error) agentapi.Code { return agentapi.CodeOf(err) }

func TestAuthentication(t *testing.T) {
	n := startNode(t, "", nil, spec("auth", "ns/a"))
	for name, header := range map[string]string{"no token": "", "wrong token": "Bearer nope", "not bearer": "Basic " + gatewayToken} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, n.endpoint+"/v1/sandboxes/auth/handles", strings.NewReader(`{"tenant":"ns/a"}`))
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("got %s, WWW-Authenticate %q; want 401 with a Bearer challenge", resp.Status, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	if n.agent.Sessions().OpenHandles("auth") != 0 {
		t.Fatal("a refused call opened a handle")
	}
}

// TestSessionStory is a gateway's session through the API: commands, files,
// a job, and reopening the same workspace.
func TestSessionStory(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, "", nil, spec("story", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "story")
	if err != nil {
		t.Fatal(err)
	}

	exec(t, n, "ns/a", h.ID, "mkdir -p work && cd work && echo hello > note")
	if res := exec(t, n, "ns/a", h.ID, "pwd; cat work/note"); !strings.HasSuffix(string(res.Stdout), "\nhello\n") || strings.Contains(string(res.Stdout), "/work\n") {
		t.Fatalf("want the file from the previous command and no carried-over cd, got %q", res.Stdout)
	}
	if res := exec(t, n, "ns/a", h.ID, `printf '\377\000\376'; exit 3`); !bytes.Equal(res.Stdout, []byte{0xff, 0, 0xfe}) || res.ExitCode != 3 {
		t.Fatalf("want bytes ff 00 fe and exit 3, got %x and %d", res.Stdout, res.ExitCode)
	}

	payload := make([]byte, 3<<20)
	_, _ = rand.Read(payload)
	info, err := n.client.Write(ctx, "ns/a", h.ID, "work/blob.bin", "", payload)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	if info.Size != len(payload) || info.SHA256 != hex.EncodeToString(sum[:]) || !strings.HasSuffix(info.Path, "/work/blob.bin") {
		t.Fatalf("write answered %+v", info)
	}
	got, err := n.client.Read(ctx, "ns/a", h.ID, "blob.bin", "work")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, payload) {
		t.Fatal("read did not return the written bytes")
	}

	job, err := n.client.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "for i in 1 2 3 4 5; do echo line $i; sleep 0.05; done; echo oops >&2"})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	cursor := ""
	for {
		page, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: "ns/a", Cursor: cursor, Wait: 2 * time.Second}, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Chunks {
			b, err := c.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			map[string]*strings.Builder{"stdout": &out, "stderr": &errOut}[c.Stream].Write(b)
		}
		cursor = page.NextCursor
		if page.Done {
			if page.Job.State != agentapi.JobExited || page.Job.Result.ExitCode != 0 {
				t.Fatalf("job ended %s with %+v", page.Job.State, page.Job.Result)
			}
			break
		}
	}
	if out.String() != "line 1\nline 2\nline 3\nline 4\nline 5\n" || errOut.String() != "oops\n" {
		t.Fatalf("job output stdout %q stderr %q", out.String(), errOut.String())
	}

	if err := n.client.Close(ctx, "ns/a", h.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := n.client.Exec(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "true"}); codeOf(err) != agentapi.CodeNotFound {
		t.Fatalf("a closed handle still works: %v", err)
	}
	h2, err := n.client.Open(ctx, "ns/a", "story")
	if err != nil {
		t.Fatal(err)
	}
	if h2.SandboxID != h.SandboxID {
		t.Fatalf("reopened sandbox %s, first %s", h2.SandboxID, h.SandboxID)
	}
	if res := exec(t, n, "ns/a", h2.ID, "cat work/note"); string(res.Stdout) != "hello\n" {
		t.Fatalf("files did not survive the session: %q", res.Stdout)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, "", nil, spec("bad", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "bad")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, n, "ns/a", h.ID, "head -c 3145729 /dev/zero > big; mkdir dir")
	cases := []struct {
		name string
		call func() error
		code agentapi.Code
		msg  string
	}{
		{"a file over 3 MiB is refused, not truncated", func() error { _, err := n.client.Read(ctx, "ns/a", h.ID, "big", ""); return err }, agentapi.CodeTooLarge, "3145729 bytes, over the 3145728-byte read limit"},
		{"a write over 3 MiB is refused", func() error {
			_, err := n.client.Write(ctx, "ns/a", h.ID, "x", "", make([]byte, 3<<20+1))
			return err
		}, agentapi.CodeTooLarge, "over the 3145728-byte write limit"},
		{"a missing file", func() error { _, err := n.client.Read(ctx, "ns/a", h.ID, "nope", ""); return err }, agentapi.CodeNotFound, `no such file "nope"`},
		{"reading a directory", func() error { _, err := n.client.Read(ctx, "ns/a", h.ID, "dir", ""); return err }, agentapi.CodeInvalid, "is not a regular file"},
		{"writing into a missing directory", func() error { _, err := n.client.Write(ctx, "ns/a", h.ID, "no/such/f", "", []byte("x")); return err }, agentapi.CodeNotFound, "create it first"},
		{"a cwd that does not exist", func() error {
			_, err := n.client.Exec(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "true", Cwd: "/no/such/dir"})
			return err
		}, "", "/no/such/dir"},
		{"an unknown shell", func() error {
			_, err := n.client.Exec(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "true", Shell: "bash"})
			return err
		}, agentapi.CodeInvalid, "use login"},
		{"an unknown handle", func() error {
			_, err := n.client.Exec(ctx, "ns/a", "h_nope", agentapi.ExecRequest{Command: "true"})
			return err
		}, agentapi.CodeNotFound, "open a new one with open_session"},
		{"a malformed cursor", func() error {
			j, err := n.client.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "true"})
			if err != nil {
				return err
			}
			_, err = n.client.Poll(ctx, agentapi.PollRequest{Tenant: "ns/a", Cursor: "not-a-cursor"}, j.ID)
			return err
		}, agentapi.CodeInvalid, "cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.code != "" && codeOf(err) != tc.code {
				t.Fatalf("code %q (%v), want %q", codeOf(err), err, tc.code)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("message %q does not say %q", err, tc.msg)
			}
		})
	}
	if res := exec(t, n, "ns/a", h.ID, "wc -c < big"); strings.TrimSpace(string(res.Stdout)) != "3145729" {
		t.Fatalf("a refused call changed the file: %q", res.Stdout)
	}
}

// TestTenantScope: another tenant's sandbox, handle and job are refused with
// the answer an unknown one gets, and nothing of the owner's leaks.
func TestTenantScope(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, "", nil, spec("sa", "ns/a"), spec("sb", "ns/b"))
	ha, err := n.client.Open(ctx, "ns/a", "sa")
	if err != nil {
		t.Fatal(err)
	}
	job, err := n.client.StartJob(ctx, "ns/a", ha.ID, agentapi.ExecRequest{Command: "echo secret-of-a; sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.client.Open(ctx, "ns/b", "sa"); codeOf(err) != agentapi.CodeNotFound {
		t.Fatalf("tenant b opened a's sandbox: %v", err)
	}
	calls := map[string]func(tenant, handle, jobID string) error{
		"exec": func(tn, h, _ string) error {
			_, err := n.client.Exec(ctx, tn, h, agentapi.ExecRequest{Command: "true"})
			return err
		},
		"job": func(tn, h, _ string) error {
			_, err := n.client.StartJob(ctx, tn, h, agentapi.ExecRequest{Command: "true"})
			return err
		},
		"read":  func(tn, h, _ string) error { _, err := n.client.Read(ctx, tn, h, "/etc/hostname", ""); return err },
		"write": func(tn, h, _ string) error { _, err := n.client.Write(ctx, tn, h, "x", "", []byte("x")); return err },
		"renew": func(tn, h, _ string) error { _, err := n.client.Renew(ctx, tn, h); return err },
		"close": func(tn, h, _ string) error { return n.client.Close(ctx, tn, h) },
		"poll": func(tn, _, j string) error {
			_, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: tn}, j)
			return err
		},
		"cancel": func(tn, _, j string) error { _, err := n.client.Cancel(ctx, tn, j); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			foreign := call("ns/b", ha.ID, job.ID)
			unknown := call("ns/b", "h_"+strings.Repeat("x", 26), "job_"+strings.Repeat("x", 26))
			if codeOf(foreign) != agentapi.CodeNotFound || codeOf(unknown) != agentapi.CodeNotFound {
				t.Fatalf("foreign: %v; unknown: %v; want not_found for both", foreign, unknown)
			}
			msg := strings.NewReplacer(ha.ID, "ID", job.ID, "ID").Replace(foreign.Error())
			if want := strings.NewReplacer("h_"+strings.Repeat("x", 26), "ID", "job_"+strings.Repeat("x", 26), "ID").Replace(unknown.Error()); msg != want {
				t.Fatalf("a foreign ID is answered differently from an unknown one:\n%s\n%s", msg, want)
			}
			if strings.Contains(foreign.Error(), "ns/a") || strings.Contains(foreign.Error(), "secret-of-a") {
				t.Fatalf("the refusal leaks tenant a: %s", foreign)
			}
		})
	}
	if info, err := n.client.Cancel(ctx, "ns/a", job.ID); err != nil || info.State != agentapi.JobKilled {
		t.Fatalf("the owner's cancel: %+v, %v", info, err)
	}
}

// TestCancellationProof is the cancellation fixture through the API: a job's
// detached, TERM-ignoring descendant dies on cancel and on an exec timeout,
// while a sentinel started by an earlier command lives.
func TestCancellationProof(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, "", nil, spec("proof", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "proof")
	if err != nil {
		t.Fatal(err)
	}
	sentinel := strings.TrimSpace(string(exec(t, n, "ns/a", h.ID, "setsid sleep 1000 >/dev/null 2>&1 & echo $!").Stdout))
	alive := func(pid string) bool {
		return exec(t, n, "ns/a", h.ID, "kill -0 "+pid+" 2>/dev/null && echo yes").Stdout != nil
	}
	const escapee = `setsid sh -c 'trap "" TERM; sleep 1000' >/dev/null 2>&1 & echo $! > /tmp/escapee; (sh -c 'sleep 1000' &) ; echo started; sleep 1000`
	for i := range 10 {
		job, err := n.client.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: escapee})
		if err != nil {
			t.Fatal(err)
		}
		page, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: "ns/a", Wait: 5 * time.Second}, job.ID)
		if err != nil || len(page.Chunks) == 0 {
			t.Fatalf("round %d: no output before the cancel: %+v %v", i, page, err)
		}
		pid := strings.TrimSpace(string(exec(t, n, "ns/a", h.ID, "cat /tmp/escapee").Stdout))
		info, err := n.client.Cancel(ctx, "ns/a", job.ID)
		if err != nil || info.State != agentapi.JobKilled {
			t.Fatalf("round %d: cancel answered %+v, %v", i, info, err)
		}
		if alive(pid) {
			t.Fatalf("round %d: the job's detached descendant %s survived the cancel", i, pid)
		}
		acknowledge(t, n, "ns/a", job.ID)
	}
	res, err := n.client.Exec(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: escapee, Timeout: 300 * time.Millisecond})
	if err != nil || !res.TimedOut || string(res.Stdout) != "started\n" {
		t.Fatalf("timed-out exec: %+v, %v", res, err)
	}
	if pid := strings.TrimSpace(string(exec(t, n, "ns/a", h.ID, "cat /tmp/escapee").Stdout)); alive(pid) {
		t.Fatalf("the timed-out command's descendant %s survived", pid)
	}
	if !alive(sentinel) {
		t.Fatal("the sentinel from an earlier command was killed")
	}
}

// acknowledge polls a terminal job to its end and once more, so that the
// agent can recycle it.
func acknowledge(t *testing.T, n *node, tenant, jobID string) {
	t.Helper()
	cursor := ""
	for done := false; !done; {
		page, err := n.client.Poll(context.Background(), agentapi.PollRequest{Tenant: tenant, Cursor: cursor}, jobID)
		if err != nil {
			t.Fatal(err)
		}
		cursor, done = page.NextCursor, page.Done
	}
	if _, err := n.client.Poll(context.Background(), agentapi.PollRequest{Tenant: tenant, Cursor: cursor}, jobID); err != nil {
		t.Fatal(err)
	}
}

// TestJobBounds: the 9th active job of a tenant is refused with the bound
// named, and refusing kills nothing.
func TestJobBounds(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, "", nil, spec("bounds", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "bounds")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 8 {
		j, err := n.client.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "sleep 100"})
		if err != nil {
			t.Fatalf("job %d: %v", i+1, err)
		}
		ids = append(ids, j.ID)
	}
	_, err = n.client.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "sleep 100"})
	if codeOf(err) != agentapi.CodeExhausted || !strings.Contains(err.Error(), "8 active jobs (limit 8)") {
		t.Fatalf("the 9th job: %v", err)
	}
	if got := n.agent.Jobs().Stats().Active; got != 8 {
		t.Fatalf("%d jobs active after the refusal, want 8", got)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if info, err := n.client.Cancel(ctx, "ns/a", id); err != nil || info.State != agentapi.JobKilled {
				t.Errorf("cancel %s: %+v %v", id, info, err)
			}
		}()
	}
	wg.Wait()
}

// TestAgentRestart: a new agent over the same state directory serves the
// same sandbox, with its files and its running processes.
func TestAgentRestart(t *testing.T) {
	ctx := context.Background()
	dir := ocitest.StateDir(t)
	first := startNode(t, dir, nil, spec("keep", "ns/a"))
	h, err := first.client.Open(ctx, "ns/a", "keep")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, first, "ns/a", h.ID, "echo kept > file")
	pid := strings.TrimSpace(string(exec(t, first, "ns/a", h.ID, "setsid sleep 1000 >/dev/null 2>&1 & echo $!").Stdout))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("no sentinel pid: %q", pid)
	}

	second := startNode(t, dir, nil, spec("keep", "ns/a"))
	h2, err := second.client.Open(ctx, "ns/a", "keep")
	if err != nil {
		t.Fatal(err)
	}
	if res := exec(t, second, "ns/a", h2.ID, "cat file; kill -0 "+pid+" && echo alive"); string(res.Stdout) != "kept\nalive\n" {
		t.Fatalf("after the restart: %q %q", res.Stdout, res.Stderr)
	}
}

// fakeClock moves only when told; its timers never fire, which the handle
// lease test does not need.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) AfterFunc(time.Duration, func()) jobs.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return true }

// TestHandleLease: a handle used within its TTL lives on; one left unused
// past it is gone, and its sandbox counts no open handle.
func TestHandleLease(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	n := startNode(t, "", clock, spec("lease", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "lease")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(hostagent.DefaultHandleTTL - time.Minute)
	exec(t, n, "ns/a", h.ID, "true") // renews
	clock.Advance(hostagent.DefaultHandleTTL - time.Minute)
	exec(t, n, "ns/a", h.ID, "true")
	if got := n.agent.Sessions().OpenHandles("lease"); got != 1 {
		t.Fatalf("%d open handles, want 1", got)
	}
	clock.Advance(hostagent.DefaultHandleTTL + time.Second)
	if _, err := n.client.Exec(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "true"}); codeOf(err) != agentapi.CodeNotFound {
		t.Fatalf("an expired handle still works: %v", err)
	}
	if got := n.agent.Sessions().OpenHandles("lease"); got != 0 {
		t.Fatalf("%d open handles after expiry, want 0", got)
	}
}

// TestGigabyteJob: a job writing 1 GiB that nobody reads keeps the agent's
// memory bounded by its ring, and the poll says how much was dropped.
func TestGigabyteJob(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB through a sandbox")
	}
	ctx := context.Background()
	n := startNode(t, "", nil, spec("gig", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "gig")
	if err != nil {
		t.Fatal(err)
	}
	job, err := n.client.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "head -c 1073741824 /dev/zero"})
	if err != nil {
		t.Fatal(err)
	}
	var peak uint64
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		info, err := n.agent.Jobs().Poll(ctx, "ns/a", job.ID, "", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if info.Job.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not end within two minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	page, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: "ns/a", MaxBytes: 1 << 20}, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	const total, ring = 1 << 30, 4 << 20
	if page.DroppedBytes < total-ring || page.Gap == nil || page.Gap.Bytes != page.DroppedBytes {
		t.Fatalf("dropped %d bytes, gap %+v; want at least %d dropped and reported as the gap", page.DroppedBytes, page.Gap, total-ring)
	}
	if peak > 64<<20 {
		t.Fatalf("agent heap peaked at %d MiB while the job wrote 1 GiB; the ring bounds it to 4 MiB", peak>>20)
	}
	t.Logf("1 GiB job: %d bytes dropped, heap peak %d MiB", page.DroppedBytes, peak>>20)
}

// TestExecBudget: past the agent's budget an exec waits the bounded time,
// then is refused as resource_exhausted (429) before it runs; another
// tenant is served meanwhile, and the binary and JSON answers carry the
// same output.
func TestExecBudget(t *testing.T) {
	ocitest.Require(t)
	agent := newAgent(t, hostagent.Options{Backends: []backend.Backend{ocitest.New(t, ocitest.StateDir(t))}}, spec("budget-a", "ns/a"), spec("budget-b", "ns/b"))
	lim, err := budget.New(budget.Limits{CallsPerTenant: 1, Calls: 2, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, _ := agentservertest.ServeAPI(t, agent, gatewayToken, func(s *agentserver.Server) { s.SetBudget(lim) })
	c, err := agentapi.NewClient(endpoint, gatewayToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ha, err := c.Open(ctx, "ns/a", "budget-a")
	if err != nil {
		t.Fatal(err)
	}
	hb, err := c.Open(ctx, "ns/b", "budget-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "ns/a", ha.ID, agentapi.ExecRequest{Command: "rm -f /tmp/go /tmp/ran"}); err != nil {
		t.Fatal(err)
	}
	holding := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "ns/a", ha.ID, agentapi.ExecRequest{Command: "until [ -e /tmp/go ]; do sleep 0.05; done"})
		holding <- err
	}()
	for lim.Stats().Calls != 1 { // the first exec holds the tenant's slot
		time.Sleep(5 * time.Millisecond)
	}
	_, err = c.Exec(ctx, "ns/a", ha.ID, agentapi.ExecRequest{Command: "touch /tmp/ran"})
	if codeOf(err) != agentapi.CodeExhausted || !strings.Contains(err.Error(), "retry in") {
		t.Fatalf("past the budget: %v, want resource_exhausted with a retry time", err)
	}
	// Another tenant is served, with byte-exact output either way.
	want := append(bytes.Repeat([]byte{1}, 100000), "\xffend"...)
	res := exec(t, &node{client: c}, "ns/b", hb.ID, `head -c 100000 /dev/zero | tr '\0' '\1'; printf '\377end'`)
	if !bytes.Equal(res.Stdout, want) || res.ExitCode != 0 {
		t.Fatalf("binary answer: %d bytes, exit %d", len(res.Stdout), res.ExitCode)
	}
	// Let the first call end through a job, which the budget does not hold.
	if _, err := c.StartJob(ctx, "ns/a", ha.ID, agentapi.ExecRequest{Command: "touch /tmp/go"}); err != nil {
		t.Fatal(err)
	}
	if err := <-holding; err != nil {
		t.Fatal(err)
	}
	if r := exec(t, &node{client: c}, "ns/a", ha.ID, "[ -e /tmp/ran ] && echo ran || echo never"); string(r.Stdout) != "never\n" {
		t.Fatalf("the refused exec ran: %q", r.Stdout)
	}
	if s := lim.Stats(); s.Refused[budget.ScopeTenant] != 1 || s.Calls != 0 {
		t.Fatalf("budget stats %+v", s)
	}
}
