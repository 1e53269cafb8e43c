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
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/mcpgateway"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// post sends one raw MCP request and returns the response.
func post(t *testing.T, url, token, sessionID, body string) (*http.Response, string) {
	t.Helper()
	return do(t, http.MethodPost, url, token, sessionID, body)
}

func do(t *testing.T, method, url, token, sessionID, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// statusOf is the status an initialize with token gets.
func statusOf(t *testing.T, url, token string) int {
	t.Helper()
	resp, _ := post(t, url, token, "", initializeBody)
	return resp.StatusCode
}

func wantStatus(url string, t *testing.T, token string, want int) func() error {
	return func() error {
		if got := statusOf(t, url, token); got != want {
			return fmt.Errorf("status %d, want %d", got, want)
		}
		return nil
	}
}

func TestAuthentication(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	carol := newTenant(t, ns, "carol", nil)
	dave := newTenant(t, ns, "dave", nil)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)

	t.Run("no token", func(t *testing.T) {
		resp, body := post(t, g.url, "", "", initializeBody)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s, WWW-Authenticate %q; want 401 with a Bearer challenge", resp.Status, resp.Header.Get("WWW-Authenticate"))
		}
		if !strings.Contains(body, "token") {
			t.Errorf("401 body does not say what to do: %q", body)
		}
		if _, err := connectErr(g.url, "", http.DefaultTransport, nil); err == nil {
			t.Fatal("an MCP client connected without a token")
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		for _, tok := range []string{"wrong", carol.token + "x", strings.ToUpper(carol.token), playgroundv1alpha1.CredentialSecretName("carol")} {
			resp, _ := post(t, g.url, tok, "", initializeBody)
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("token %q: %s, want 401 with a Bearer challenge", tok, resp.Status)
			}
		}
		if got := statusOf(t, g.url, carol.token); got != http.StatusOK {
			t.Fatalf("the right token: %d", got)
		}
	})

	t.Run("body limit", func(t *testing.T) {
		// A 3 MiB base64 write fits (TestGateway writes one); more does not.
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write","arguments":{"handle":"h","path":"p","base64":"` +
			strings.Repeat("A", mcpgateway.MaxRequestBytes) + `"}}}`
		if resp, _ := post(t, g.url, carol.token, "", body); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("a body over %d bytes: %s, want 413", mcpgateway.MaxRequestBytes, resp.Status)
		}
	})

	t.Run("a planted Secret is never a credential", func(t *testing.T) {
		// Whoever may create Secrets in the namespace plants tokens of the
		// manager's form, with the tenant label and the credential type:
		// beside an existing tenant's, and under the name of a tenant that
		// does not exist yet, owned by someone else (the manager refuses
		// such a Secret as SecretConflict and publishes no hash) or by
		// nobody (the manager adopts it and mints a new token first).
		stranger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranger"}}
		if err := k8s.Create(ctx, stranger); err != nil {
			t.Fatal(err)
		}
		strangers := []metav1.OwnerReference{*metav1.NewControllerRef(stranger, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}
		planted := map[string]string{}
		for _, p := range []struct {
			secret, tenant string
			owners         []metav1.OwnerReference
		}{
			{"extra-token", "carol", nil},
			{"carol-token-2", "carol", strangers},
			{playgroundv1alpha1.CredentialSecretName("erin"), "erin", strangers},
			{playgroundv1alpha1.CredentialSecretName("fay"), "fay", nil},
		} {
			planted[p.secret] = newToken()
			if err := k8s.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.secret, OwnerReferences: p.owners,
					Labels: map[string]string{playgroundv1alpha1.TenantLabel: p.tenant}},
				Type: playgroundv1alpha1.CredentialSecretType,
				Data: map[string][]byte{playgroundv1alpha1.CredentialTokenKey: []byte(planted[p.secret])},
			}); err != nil {
				t.Fatal(err)
			}
		}
		// Then the tenants whose names they took are created, without a
		// hash in their status, as the manager leaves them.
		for _, name := range []string{"erin", "fay"} {
			if err := k8s.Create(ctx, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
		// Once the gateway serves a tenant created after all of them, it
		// has seen them.
		marker := newTenant(t, ns, "marker", nil)
		waitFor(t, "the gateway to see the tenants", 10*time.Second, wantStatus(g.url, t, marker.token, http.StatusOK))
		for secret, tok := range planted {
			if resp, _ := post(t, g.url, tok, "", initializeBody); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("the token planted in Secret %s: %s, want 401", secret, resp.Status)
			}
			if cs, err := connectErr(g.url, tok, http.DefaultTransport, nil); err == nil {
				_ = cs.Close()
				t.Errorf("an MCP client connected with the token planted in Secret %s", secret)
			}
		}
		if got := statusOf(t, g.url, carol.token); got != http.StatusOK {
			t.Fatalf("carol's own token beside the planted ones: %d", got)
		}
	})

	t.Run("rotation", func(t *testing.T) {
		old := carol.rotate(t)
		waitFor(t, "the new token to be accepted", 10*time.Second, wantStatus(g.url, t, carol.token, http.StatusOK))
		// From the request after the gateway saw the new token, the old one
		// is refused.
		if got := statusOf(t, g.url, old); got != http.StatusUnauthorized {
			t.Fatalf("the rotated-away token: %d, want 401", got)
		}
		// An open MCP session with the old token is refused on its next call.
		cs := connect(t, g.url, carol.token, nil)
		carol.rotate(t)
		waitFor(t, "the session's calls to be refused", 10*time.Second, func() error {
			if _, err := cs.ListTools(ctx, nil); err == nil {
				return errNotYet
			}
			return nil
		})
	})

	t.Run("suspension", func(t *testing.T) {
		setSuspended(t, ns, "dave", true)
		waitFor(t, "the suspended tenant to be refused", 10*time.Second, wantStatus(g.url, t, dave.token, http.StatusForbidden))
		resp, body := post(t, g.url, dave.token, "", initializeBody)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "suspended") {
			t.Fatalf("%s %q", resp.Status, body)
		}
		setSuspended(t, ns, "dave", false)
		waitFor(t, "the same token to work again", 10*time.Second, wantStatus(g.url, t, dave.token, http.StatusOK))
	})

	t.Run("workers catalog tenant", func(t *testing.T) {
		var tn playgroundv1alpha1.Tenant
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dave"}, &tn); err != nil {
			t.Fatal(err)
		}
		tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers
		if err := k8s.Update(ctx, &tn); err != nil {
			t.Fatal(err)
		}
		// A gateway restricted to the sandbox catalog refuses it; one that
		// serves each tenant its own forwards it, here to no mapping.
		sg := startGateway(t, mcpgateway.Options{Catalog: mcpgateway.CatalogSandbox})
		sg.waitReady(t)
		waitFor(t, "a workers tenant to be refused by a sandbox gateway", 10*time.Second, wantStatus(sg.url, t, dave.token, http.StatusForbidden))
		waitFor(t, "a workers tenant without a mapping to be told so", 10*time.Second, wantStatus(g.url, t, dave.token, http.StatusServiceUnavailable))
		resp, body := post(t, g.url, dave.token, "", initializeBody)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "no WorkerMapping") {
			t.Fatalf("%s %q", resp.Status, body)
		}
	})

	t.Run("deletion", func(t *testing.T) {
		if err := k8s.Delete(ctx, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "carol"}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a deleted tenant's token to be refused", 10*time.Second, wantStatus(g.url, t, carol.token, http.StatusUnauthorized))
	})
}

// TestNamespacedGateway: a gateway told one namespace needs, and here has,
// nothing but a Role there (and its Role for the Leases): it serves that
// namespace's tenants and knows no other's.
func TestNamespacedGateway(t *testing.T) {
	mine, theirs := newNamespace(t), newNamespace(t)
	nina := newTenant(t, mine, "nina", nil)
	otto := newTenant(t, theirs, "otto", nil)
	g := startGateway(t, mcpgateway.Options{Namespace: mine})
	g.waitReady(t)

	// The gateway's identity cannot read beyond that namespace.
	cl, err := client.New(gatewayConfig(t, mine, ""), client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range []client.ObjectList{&playgroundv1alpha1.TenantList{}, &corev1.SecretList{}} {
		if err := cl.List(context.Background(), list); !apierrors.IsForbidden(err) {
			t.Fatalf("listing %T in every namespace as the namespaced gateway: %v, want forbidden", list, err)
		}
	}
	if err := cl.List(context.Background(), &corev1.SecretList{}, client.InNamespace(mine)); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets in its namespace as the gateway: %v, want forbidden", err)
	}

	if got := statusOf(t, g.url, nina.token); got != http.StatusOK {
		t.Fatalf("a tenant of the gateway's namespace: %d", got)
	}
	cs := connect(t, g.url, nina.token, nil)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := statusOf(t, g.url, otto.token); got != http.StatusUnauthorized {
		t.Fatalf("a tenant of another namespace: %d, want 401", got)
	}
}

func setSuspended(t *testing.T, ns, name string, suspended bool) {
	t.Helper()
	var tn playgroundv1alpha1.Tenant
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.Suspended = suspended
	if err := k8s.Update(context.Background(), &tn); err != nil {
		t.Fatal(err)
	}
}

func TestFailClosed(t *testing.T) {
	ns := newNamespace(t)
	frank := newTenant(t, ns, "frank", nil)

	t.Run("not synced", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens: the informers never sync
		cfg := rest.CopyConfig(gatewayConfig(t, "", ""))
		cfg.Host = "https://" + addr
		g := startGateway(t, mcpgateway.Options{Config: cfg})
		time.Sleep(300 * time.Millisecond)
		resp, body := post(t, g.url, frank.token, "", initializeBody)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("before the first sync: %s %q, want 503 with Retry-After", resp.Status, body)
		}
		ready, _ := do(t, http.MethodGet, strings.TrimSuffix(g.url, "/mcp")+"/readyz", "", "", "")
		if ready.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz before the first sync: %s", ready.Status)
		}
	})

	t.Run("watch broken", func(t *testing.T) {
		api, err := url.Parse(cp.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, api.Host)
		cfg := rest.CopyConfig(gatewayConfig(t, "", ""))
		cfg.Host = "https://" + p.addr
		g := startGateway(t, mcpgateway.Options{Config: cfg, StaleAfter: 500 * time.Millisecond})
		g.waitReady(t)
		if got := statusOf(t, g.url, frank.token); got != http.StatusOK {
			t.Fatalf("through the proxy: %d", got)
		}
		p.stop()
		waitFor(t, "a broken watch to refuse requests", 15*time.Second, wantStatus(g.url, t, frank.token, http.StatusServiceUnavailable))
		p.start(t)
		waitFor(t, "the restored watch to serve again", 45*time.Second, wantStatus(g.url, t, frank.token, http.StatusOK))
	})
}

// proxy forwards TCP to the API server and can be cut and restored, as a
// network partition would.
type proxy struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{target: target, addr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	p.start(t)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func TestStatefulSessions(t *testing.T) {
	ns := newNamespace(t)
	gina := newTenant(t, ns, "gina", nil)
	hank := newTenant(t, ns, "hank", nil)
	g := startGateway(t, mcpgateway.Options{Stateful: true, SessionIdleTimeout: 700 * time.Millisecond})
	g.waitReady(t)

	open := func() string {
		resp, body := post(t, g.url, gina.token, "", initializeBody)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %s %q, session %q", resp.Status, body, sid)
		}
		if resp, _ := post(t, g.url, gina.token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("initialized: %s", resp.Status)
		}
		return sid
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	sid := open()
	if resp, body := post(t, g.url, gina.token, sid, list); resp.StatusCode != http.StatusOK || !strings.Contains(body, "open_session") {
		t.Fatalf("tools/list in the session: %s %q", resp.Status, body)
	}
	// Another tenant cannot use the session.
	if resp, _ := post(t, g.url, hank.token, sid, list); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another tenant in the session: %s, want 403", resp.Status)
	}
	// DELETE ends it; then it is unknown: 404.
	if resp, _ := do(t, http.MethodDelete, g.url, gina.token, sid, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	if resp, _ := post(t, g.url, gina.token, sid, list); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted session: %s, want 404", resp.Status)
	}
	if resp, _ := post(t, g.url, gina.token, "no-such-session", list); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown session: %s, want 404", resp.Status)
	}
	// An idle session expires.
	sid = open()
	time.Sleep(1500 * time.Millisecond)
	if resp, _ := post(t, g.url, gina.token, sid, list); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an idle session: %s, want 404", resp.Status)
	}
	// The SDK's client works against a stateful gateway too.
	cs := connect(t, g.url, gina.token, nil)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

// TestFailedAuthThrottled: a source that keeps presenting junk tokens gets
// 429 past its bound, held back, on answers that close the connection; a current
// token from the same source (a proxy's address is many clients') is
// served all along.
func TestFailedAuthThrottled(t *testing.T) {
	n := startNode(t)
	tn := newTenant(t, newNamespace(t), "throttled", n)
	g := startGateway(t, mcpgateway.Options{FailedAuthPerSecond: 0.001, FailedAuthBurst: 5, FailedAuthDelay: 100 * time.Millisecond})
	g.waitReady(t)
	codes := map[int]int{}
	for i := range 20 {
		start := time.Now()
		resp, _ := post(t, g.url, fmt.Sprintf("pgt_junk%d", i), "", initializeBody)
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && time.Since(start) < 100*time.Millisecond {
			t.Errorf("a throttled answer came after %s, before its delay", time.Since(start))
		}
		if resp.StatusCode == http.StatusTooManyRequests && (!resp.Close || resp.Header.Get("Retry-After") == "") {
			t.Errorf("a throttled answer that keeps its connection (%v) or gives no Retry-After", !resp.Close)
		}
		if resp, body := post(t, g.url, tn.token, "", initializeBody); resp.StatusCode != http.StatusOK {
			t.Fatalf("the tenant's own token, between junk %d and the next: %s %s", i, resp.Status, body)
		}
	}
	if codes[http.StatusUnauthorized] != 5 || codes[http.StatusTooManyRequests] != 15 {
		t.Fatalf("answers to 20 junk tokens: %v, want 5 × 401 then 15 × 429", codes)
	}
}
