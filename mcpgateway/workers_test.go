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
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/bearermirror"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// worker is a native MCP worker: a go-sdk server over Streamable HTTP with
// stateful sessions, that records what reached it.
type worker struct {
	srv    *httptest.Server
	server *mcp.Server

	mu   sync.Mutex
	seen []seenRequest

	slowCalls   atomic.Int32
	release     chan struct{} // ends the slow tool's calls
	progressAck chan struct{} // the client has the progress notification
}

// seenRequest is what the worker saw of one HTTP request.
type seenRequest struct {
	method, authorization, session, cookie, traceparent string
}

// clientTraceparent is the trace context the test's client sends.
const clientTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func (w *worker) url() string { return w.srv.URL + "/mcp" }

func (w *worker) requests() []seenRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// startWorker starts a worker with three tools: whoami (the Authorization
// and Mcp-Session-Id its call came with), slow (waits until the test ends)
// and progress (a progress notification, then waits for the client to have
// received it before it answers).
func startWorker(t *testing.T) *worker {
	t.Helper()
	w := &worker{release: make(chan struct{})}
	w.server = mcp.NewServer(&mcp.Implementation{Name: "test-worker", Version: "v0"}, nil)
	type whoami struct {
		Authorization string `json:"authorization"`
		Session       string `json:"session"`
	}
	mcp.AddTool(w.server, &mcp.Tool{Name: "whoami", Description: "the credentials the worker saw"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			return nil, whoami{Authorization: req.Extra.Header.Get("Authorization"), Session: req.Extra.Header.Get("Mcp-Session-Id")}, nil
		})
	mcp.AddTool(w.server, &mcp.Tool{Name: "slow", Description: "never answers by itself"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			w.slowCalls.Add(1)
			select {
			case <-ctx.Done():
			case <-w.release:
			}
			return nil, struct{}{}, nil
		})
	acked := make(chan struct{}, 1)
	mcp.AddTool(w.server, &mcp.Tool{Name: "progress", Description: "a progress notification, then the answer"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Message: "half way"}); err != nil {
				return nil, struct{}{}, err
			}
			// The client must have the notification while the call is
			// still running: the gateway flushed it as it came.
			select {
			case <-acked:
			case <-ctx.Done():
				return nil, struct{}{}, ctx.Err()
			}
			return nil, struct{}{}, nil
		})
	w.progressAck = acked
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return w.server }, nil)
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.seen = append(w.seen, seenRequest{method: r.Method, authorization: r.Header.Get("Authorization"),
			session: r.Header.Get("Mcp-Session-Id"), cookie: r.Header.Get("Cookie"), traceparent: r.Header.Get("traceparent")})
		w.mu.Unlock()
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(func() {
		close(w.release)
		w.srv.Close()
	})
	return w
}

// sessions are the worker's open MCP sessions.
func (w *worker) sessions() []string {
	var ids []string
	for ss := range w.server.Sessions() {
		ids = append(ids, ss.ID())
	}
	return ids
}

// newWorkersTenant is a tenant of the workers catalog.
func newWorkersTenant(t *testing.T, ns, name string) *tenant {
	t.Helper()
	tn := newTenant(t, ns, name, nil)
	var obj playgroundv1alpha1.Tenant
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Spec.Catalog = playgroundv1alpha1.CatalogWorkers
	if err := k8s.Update(context.Background(), &obj); err != nil {
		t.Fatal(err)
	}
	return tn
}

// newBearerSecret is the Secret holding a worker's internal bearer.
func newBearerSecret(t *testing.T, ns, name, token string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: playgroundv1alpha1.WorkerBearerSecretType,
		Data: map[string][]byte{"token": []byte(token + "\n")}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// copyBearer writes the copy of a mapping's bearer where the gateway reads
// it, as the manager's WorkerBearer reconciler does (from a Secret of type
// playground.dev/worker-bearer only); "" removes it.
func copyBearer(t *testing.T, ns, mapping, bearer string) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: bearermirror.SecretName(bearermirror.ShardOf(ns, mapping))}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s corev1.Secret
		err := k8s.Get(ctx, key, &s)
		if apierrors.IsNotFound(err) {
			if bearer == "" {
				return nil
			}
			return k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: bearermirror.SecretType,
				Data: map[string][]byte{bearermirror.Key(ns, mapping): []byte(bearer)}})
		}
		if err != nil {
			return err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		if bearer == "" {
			delete(s.Data, bearermirror.Key(ns, mapping))
		} else {
			s.Data[bearermirror.Key(ns, mapping)] = []byte(bearer)
		}
		return k8s.Update(ctx, &s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newMapping creates a WorkerMapping of the tenant to dest.
func newMapping(t *testing.T, ns, name, tenantName string, dest playgroundv1alpha1.WorkerDestination, bearer string, timeout time.Duration) *playgroundv1alpha1.WorkerMapping {
	t.Helper()
	m := &playgroundv1alpha1.WorkerMapping{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef:   playgroundv1alpha1.LocalObjectReference{Name: tenantName},
			Destination: dest,
			Timeout:     &metav1.Duration{Duration: timeout},
		},
	}
	if bearer != "" {
		m.Spec.BearerSecretRef = &playgroundv1alpha1.SecretKeyReference{Name: bearer, Key: "token"}
	}
	if err := k8s.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func serviceDest(name string) playgroundv1alpha1.WorkerDestination {
	return playgroundv1alpha1.WorkerDestination{Service: &playgroundv1alpha1.ServiceDestination{Name: name, Port: 80, Path: "/mcp"}}
}

// reconcileMapping writes the status the WorkerMapping reconciler of the
// manager publishes, under its field owner: Ready (or not, with a reason)
// for the current generation, the endpoint and the ready endpoints.
func reconcileMapping(t *testing.T, m *playgroundv1alpha1.WorkerMapping, ready bool, reason, message string, endpoints ...string) {
	t.Helper()
	var cur playgroundv1alpha1.WorkerMapping
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(m), &cur); err != nil {
		t.Fatal(err)
	}
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	st := playgroundv1alpha1ac.WorkerMappingStatus().WithObservedGeneration(cur.Generation).
		WithConditions(metav1ac.Condition().WithType(playgroundv1alpha1.ReadyCondition).WithStatus(status).
			WithReason(reason).WithMessage(message).WithObservedGeneration(cur.Generation).WithLastTransitionTime(metav1.Now())).
		WithReadyEndpoints(endpoints...)
	if cur.Spec.Destination.Service != nil {
		st.WithEndpoint(fmt.Sprintf("http://%s.%s.svc:%d/mcp", cur.Spec.Destination.Service.Name, cur.Namespace, cur.Spec.Destination.Service.Port))
	}
	ac := playgroundv1alpha1ac.WorkerMapping(m.Name, m.Namespace).WithStatus(st)
	if err := k8s.Status().Apply(context.Background(), ac, client.FieldOwner(playgroundv1alpha1.WorkerMappingControllerFieldOwner), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

// sessionKeyFile writes a key file as a mounted Secret would hold it.
func sessionKeyFile(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// alternate sends each request to the next of several gateways, with a
// cookie that must not reach the worker, and records the public session
// IDs it sees.
type alternate struct {
	token string
	urls  []string
	n     atomic.Int32

	mu       sync.Mutex
	sessions []string
	served   map[string]int
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	target := a.urls[int(a.n.Add(1))%len(a.urls)]
	r = r.Clone(r.Context())
	u, _ := r.URL.Parse(target)
	r.URL, r.Host = u, u.Host
	r.Header.Set("Authorization", "Bearer "+a.token)
	r.Header.Set("Cookie", "tracking=public-cookie")
	r.Header.Set("traceparent", clientTraceparent)
	a.mu.Lock()
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		a.sessions = append(a.sessions, id)
	}
	a.served[target]++
	a.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// waitServes waits until the gateway serves the token's tenant.
func waitServes(t *testing.T, g *gateway, token string) {
	t.Helper()
	waitFor(t, "the gateway to serve the tenant's worker", 10*time.Second, func() error { return g.gw.Serves(token) })
}

// TestWorkerForwarding: a tenant of the workers catalog talks MCP to its
// own worker through two gateway replicas in turn, within one session: it
// sees the worker's tools, not the sandbox's; the worker sees the internal
// bearer and its own session, never the tenant's token, cookies or public
// session; progress streams through as it comes; DELETE ends the session
// on both sides; another tenant cannot use the session.
func TestWorkerForwarding(t *testing.T) {
	ns := newNamespace(t)
	w := startWorker(t)
	tn := newWorkersTenant(t, ns, "wanda")
	const internal = "internal-bearer-of-wanda-worker"
	newBearerSecret(t, ns, "wanda-worker-bearer", internal)
	m := newMapping(t, ns, "wanda-worker", tn.name, serviceDest("wanda-worker"), "wanda-worker-bearer", time.Minute)
	copyBearer(t, ns, m.Name, internal)
	reconcileMapping(t, m, true, "Ready", "forwarding", w.url())

	keys := sessionKeyFile(t)
	g1 := startGateway(t, mcpgateway.Options{SessionKeyFile: keys})
	g2 := startGateway(t, mcpgateway.Options{SessionKeyFile: keys})
	waitServes(t, g1, tn.token)
	waitServes(t, g2, tn.token)

	alt := &alternate{token: tn.token, urls: []string{g1.url, g2.url}, served: map[string]int{}}
	acked := false
	c := mcp.NewClient(&mcp.Implementation{Name: "worker-test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.Message == "half way" && !acked {
				acked = true
				w.progressAck <- struct{}{}
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g1.url, HTTPClient: &http.Client{Transport: alt}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"progress", "slow", "whoami"}) {
		t.Fatalf("tools %v, want the worker's", names)
	}
	for _, n := range tools.Names {
		if slices.Contains(names, n) {
			t.Errorf("the sandbox tool %s is listed to a workers tenant", n)
		}
	}

	var who struct{ Authorization, Session string }
	callOK(t, cs, "whoami", map[string]any{}, &who)
	if who.Authorization != "Bearer "+internal {
		t.Errorf("the worker saw Authorization %q, want the internal bearer", who.Authorization)
	}
	public := cs.ID()
	if public == "" || who.Session == "" || public == who.Session || strings.Contains(public, who.Session) {
		t.Errorf("public session %q, worker's session %q: want two different IDs", public, who.Session)
	}

	// Progress reaches the client while the call runs: the tool answers
	// only once the client has it.
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{}}
	params.SetProgressToken("p-1")
	if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("progress: %v %v", err, res)
	}

	// Another tenant of the workers catalog, with a mapping of its own,
	// cannot use this session.
	other := newWorkersTenant(t, ns, "otto")
	om := newMapping(t, ns, "otto-worker", other.name, serviceDest("otto-worker"), "", time.Minute)
	reconcileMapping(t, om, true, "Ready", "forwarding", startWorker(t).url())
	waitServes(t, g1, other.token)
	resp, body := post(t, g1.url, other.token, public, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "unknown session") {
		t.Errorf("another tenant with this session: %s %s", resp.Status, body)
	}
	if got := resp.Header.Get("Mcp-Session-Id"); got != "" {
		t.Errorf("the refusal carries session %q", got)
	}

	// Both replicas served the session, and the worker saw one session,
	// its own, and only the internal bearer, never a cookie; the client's
	// trace context reached it (the gateways trace nothing of their own
	// here, so it is the client's as sent).
	alt.mu.Lock()
	served := maps.Clone(alt.served)
	for _, id := range alt.sessions {
		if id != public {
			t.Errorf("the client was given session %q besides %q", id, public)
		}
	}
	alt.mu.Unlock()
	if served[g1.url] == 0 || served[g2.url] == 0 {
		t.Errorf("requests per gateway %v: want both", served)
	}
	for _, r := range w.requests() {
		if r.authorization != "Bearer "+internal || r.cookie != "" || (r.session != "" && r.session != who.Session) || strings.Contains(r.authorization, tn.token) ||
			r.traceparent != clientTraceparent {
			t.Errorf("the worker saw %+v", r)
		}
	}

	// DELETE ends both.
	if err := cs.Close(); err != nil {
		t.Fatalf("closing the session: %v", err)
	}
	waitFor(t, "the worker's session to end", 10*time.Second, func() error {
		if s := w.sessions(); len(s) > 0 {
			return fmt.Errorf("the worker still has sessions %v", s)
		}
		return nil
	})
	resp, body = post(t, g2.url, tn.token, public, `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a deleted session: %s %s", resp.Status, body)
	}
}

// TestWorkerTimeout: a call longer than the mapping's timeout gets an
// error saying its outcome is unknown and it was not retried, and the
// worker received it exactly once.
func TestWorkerTimeout(t *testing.T) {
	ns := newNamespace(t)
	w := startWorker(t)
	tn := newWorkersTenant(t, ns, "tim")
	m := newMapping(t, ns, "tim-worker", tn.name, serviceDest("tim-worker"), "", time.Second)
	reconcileMapping(t, m, true, "Ready", "forwarding", w.url())
	g := startGateway(t, mcpgateway.Options{})
	waitServes(t, g, tn.token)
	cs := connect(t, g.url, tn.token, nil)

	before := len(w.requests())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "outcome is unknown") || !strings.Contains(err.Error(), "not retried") {
		t.Fatalf("a call past the timeout: %v", err)
	}
	if n := w.slowCalls.Load(); n != 1 {
		t.Errorf("the worker ran the slow tool %d times, want 1", n)
	}
	posts := 0
	for _, r := range w.requests()[before:] {
		if r.method == http.MethodPost {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("the worker received %d POSTs for the call, want 1", posts)
	}
	// The session goes on.
	callOK(t, cs, "whoami", map[string]any{}, nil)
}

// TestWorkerUnavailable: whatever keeps a tenant from its worker is a
// clear 503 that says what to check, at once, never a hang; a request that
// cannot have reached a dead endpoint goes to a live one.
func TestWorkerUnavailable(t *testing.T) {
	ns := newNamespace(t)
	w := startWorker(t)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()

	unavailable := func(t *testing.T, token string, want ...string) {
		t.Helper()
		waitFor(t, "a 503", 10*time.Second, func() error {
			resp, body := post(t, g.url, token, "", initializeBody)
			if resp.StatusCode != http.StatusServiceUnavailable {
				return fmt.Errorf("%s %s", resp.Status, body)
			}
			for _, s := range append(want, `"jsonrpc":"2.0"`, `"code":-32001`) {
				if !strings.Contains(body, s) {
					return fmt.Errorf("%s: %s does not say %q", resp.Status, body, s)
				}
			}
			return nil
		})
	}

	t.Run("mapping not Ready", func(t *testing.T) {
		tn := newWorkersTenant(t, ns, "nora")
		m := newMapping(t, ns, "nora-worker", tn.name, serviceDest("nora-worker"), "", time.Minute)
		unavailable(t, tn.token, "has not been reconciled")
		reconcileMapping(t, m, false, "NoReadyEndpoints", "the Service nora-worker has no ready endpoint")
		unavailable(t, tn.token, "is not Ready", "no ready endpoint", "kubectl describe workermapping")
	})

	t.Run("two mappings", func(t *testing.T) {
		tn := newWorkersTenant(t, ns, "dora")
		for _, name := range []string{"dora-a", "dora-b"} {
			reconcileMapping(t, newMapping(t, ns, name, tn.name, serviceDest(name), "", time.Minute), true, "Ready", "forwarding", w.url())
		}
		unavailable(t, tn.token, "2 WorkerMappings", "dora-a, dora-b")
	})

	t.Run("worker down", func(t *testing.T) {
		tn := newWorkersTenant(t, ns, "dan")
		m := newMapping(t, ns, "dan-worker", tn.name, serviceDest("dan-worker"), "", time.Minute)
		reconcileMapping(t, m, true, "Ready", "forwarding", dead)
		unavailable(t, tn.token, "does not accept connections", "did not reach it")
	})

	// Whatever the mapping's status says (whoever wrote it), the gateway
	// presents no bearer but the manager's copy, and without one it
	// forwards nothing.
	t.Run("bearer Secret missing", func(t *testing.T) {
		tn := newWorkersTenant(t, ns, "bea")
		m := newMapping(t, ns, "bea-worker", tn.name, serviceDest("bea-worker"), "no-such-secret", time.Minute)
		reconcileMapping(t, m, true, "Ready", "forwarding", w.url())
		unavailable(t, tn.token, "cannot present your worker's internal bearer", ns+"/no-such-secret", "exists", "bearerSecretRef", "kubectl describe workermapping")
	})

	t.Run("bearer Secret of another kind", func(t *testing.T) {
		// A tenant's credential Secret, named as a worker's bearer.
		victim := newWorkersTenant(t, ns, "vic")
		tn := newWorkersTenant(t, ns, "tom")
		m := newMapping(t, ns, "tom-worker", tn.name, serviceDest("tom-worker"), playgroundv1alpha1.CredentialSecretName(victim.name), time.Minute)
		reconcileMapping(t, m, true, "Ready", "forwarding", w.url())
		before := len(w.requests())
		unavailable(t, tn.token, "is of type "+playgroundv1alpha1.WorkerBearerSecretType, playgroundv1alpha1.CredentialSecretName(victim.name))
		if got := w.requests()[before:]; len(got) != 0 {
			t.Errorf("the worker received %d requests, the first with %q", len(got), got[0].authorization)
		}
	})

	t.Run("sandbox worker not running", func(t *testing.T) {
		tn := newWorkersTenant(t, ns, "sid")
		m := newMapping(t, ns, "sid-worker", tn.name, playgroundv1alpha1.WorkerDestination{Sandbox: &playgroundv1alpha1.SandboxProcessDestination{
			Command: []string{"my-worker"}, Port: 8765, Path: "/mcp"}}, "", time.Minute)
		reconcileMapping(t, m, true, "Ready", "forwarding")
		// What the agent of the sandbox's node reports, under its owner.
		ac := playgroundv1alpha1ac.WorkerMapping(m.Name, m.Namespace).WithStatus(playgroundv1alpha1ac.WorkerMappingStatus().
			WithWorker(playgroundv1alpha1ac.WorkerProcessStatus().WithRunning(false).WithRestarts(3).WithError(`exec: "my-worker": executable file not found in $PATH`)))
		if err := k8s.Status().Apply(context.Background(), ac, client.FieldOwner(playgroundv1alpha1.AgentNodeFieldOwner("n1")), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		unavailable(t, tn.token, "is not running in your sandbox", "executable file not found", "kubectl playground logs")
	})

	t.Run("a dead endpoint beside a live one", func(t *testing.T) {
		tn := newWorkersTenant(t, ns, "flo")
		m := newMapping(t, ns, "flo-worker", tn.name, serviceDest("flo-worker"), "", time.Minute)
		reconcileMapping(t, m, true, "Ready", "forwarding", dead, w.url())
		waitServes(t, g, tn.token)
		for i := range 4 { // each endpoint comes first at least once
			if resp, body := post(t, g.url, tn.token, "", initializeBody); resp.StatusCode != http.StatusOK {
				t.Fatalf("initialize %d: %s %s", i, resp.Status, body)
			}
		}
	})
}

// TestWorkerEndpointPolicy: whatever a mapping's status says (whoever
// wrote it), the gateway dials no address its policy refuses: loopback by
// default, or a range the cluster admin denies. No byte, and no bearer,
// reaches a listener there.
func TestWorkerEndpointPolicy(t *testing.T) {
	ns := newNamespace(t)
	var accepted atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	newBearerSecret(t, ns, "bearer", "the-internal-bearer")
	listener := "http://" + ln.Addr().String() + "/mcp"

	for _, tc := range []struct {
		name   string
		policy destpolicy.Policy
		want   string
	}{
		// (Not the zero Policy, which startGateway takes for the tests' grant of loopback.)
		{"loopback, by default", destpolicy.Policy{Deny: []netip.Prefix{}}, "127.0.0.1 is loopback"},
		{"a range the admin denies", destpolicy.Policy{Allow: mustPrefixes(t, "127.0.0.0/8"), Deny: mustPrefixes(t, "127.0.0.1/32")}, "in a range the cluster admin denies"},
		{"outside the ranges the admin allows", destpolicy.Policy{Allow: mustPrefixes(t, "10.244.0.0/16")}, "outside the ranges the cluster admin allows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, mcpgateway.Options{WorkerEndpoints: tc.policy})
			g.waitReady(t)
			tn := newWorkersTenant(t, ns, "pol-"+strings.ReplaceAll(strings.ToLower(strings.Fields(tc.name)[0]), ",", ""))
			m := newMapping(t, ns, tn.name+"-worker", tn.name, serviceDest(tn.name+"-worker"), "bearer", time.Minute)
			copyBearer(t, ns, m.Name, "the-internal-bearer")
			reconcileMapping(t, m, true, "Ready", "forwarding", listener)
			waitFor(t, "a 503 that names the policy", 10*time.Second, func() error {
				resp, body := post(t, g.url, tn.token, "", initializeBody)
				if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, tc.want) {
					return fmt.Errorf("%s %s", resp.Status, body)
				}
				return nil
			})
			if n := accepted.Load(); n != 0 {
				t.Fatalf("the listener accepted %d connections", n)
			}
		})
	}
}

func mustPrefixes(t *testing.T, cidrs ...string) []netip.Prefix {
	t.Helper()
	p, err := destpolicy.Parse("test", cidrs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
