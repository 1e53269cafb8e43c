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

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/internal/testbin"
	"github.com/playground-dev/playground/mcpgateway"
)

// whoAmI is the example worker's whoami answer.
type whoAmI struct {
	Authorization string `json:"authorization"`
	SessionID     string `json:"session_id"`
	Persona       string `json:"persona"`
	Tenant        string `json:"tenant"`
	Pile          string `json:"pile"`
	SigningKey    string `json:"signing_key"`
	KeyLoads      bool   `json:"signing_key_loads"`
	Calls         int64  `json:"calls"`
}

// TestSandboxWorkerThroughGateway: the whole native-worker path with real
// parts. The example worker (cmd/playground-example-worker) comes to the
// tenant's sandbox as a faculty bundle from a host directory; the manager
// makes the WorkerMapping Ready; the agent runs the worker in the sandbox;
// two gateways sharing a session key forward an MCP client with the
// tenant's token to it through the agent's relay. The client sees the
// worker's tools, not the eight; the worker sees its internal bearer and
// session, never the client's; a call past spec.timeout is reported with
// an unknown outcome and reached the worker once; a worker killed in the
// sandbox is started again, reported, and serves a new session.
func TestSandboxWorkerThroughGateway(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	src := t.TempDir()
	n := &node{name: "workers-a", labels: pool("workers"), hostPathPrefixes: []string{src}}
	startNode(t, n)
	ns := newNamespace(t)

	bin, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-example-worker", "-trimpath")
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(bin)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(src, "playground-example-worker"), data, 0o755)).To(Succeed())

	g.Expect(k8sClient.Create(ctx, &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{HostPath: &playgroundv1alpha1.HostPathSource{Path: src}},
			Binaries: []string{"playground-example-worker"},
		}})).To(Succeed())
	applyTenant(t, ns, "native", func(tn *playgroundv1alpha1.Tenant) {
		inPool("workers")(tn)
		tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers
		tn.Spec.Sandbox.Faculties = []playgroundv1alpha1.FacultyBundleReference{{Name: "worker"}}
	})
	wm := &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "native"},
		Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "native"},
			Destination: playgroundv1alpha1.WorkerDestination{Sandbox: &playgroundv1alpha1.SandboxProcessDestination{
				Command: []string{"playground-example-worker", "-listen", "127.0.0.1:8765"}, Port: 8765,
			}},
			Timeout: &metav1.Duration{Duration: 3 * time.Second},
		}}
	g.Expect(k8sClient.Create(ctx, wm)).To(Succeed())
	tn, sbx := waitReady(t, ns, "native")
	g.Expect(isTrue(tn.Status.Conditions, playgroundv1alpha1.WorkerReadyCondition)).To(BeTrue())
	token := tokenOf(g, ns, "native")

	// Two gateway replicas with one session key, as the chart mounts it.
	var key [32]byte
	_, _ = rand.Read(key[:])
	keyFile := filepath.Join(t.TempDir(), "keys")
	g.Expect(os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key[:])+"\n"), 0o600)).To(Succeed())
	cfg, err := rbactest.Grant(ctx, k8sClient, cp.Config, "gateway", rbactest.ServiceAccountUser("gateway"), rbactest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	urls := []string{
		serveGateway(t, mcpgateway.Options{Config: cfg, SessionKeyFile: keyFile}),
		serveGateway(t, mcpgateway.Options{Config: cfg, SessionKeyFile: keyFile}),
	}
	// The client alternates between the replicas within one session.
	var calls int
	alternate := &mcp.StreamableClientTransport{Endpoint: urls[0], MaxRetries: -1,
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			u := *r.URL
			other, _ := url.Parse(urls[calls%2])
			u.Host = other.Host
			r.URL, r.Host = &u, other.Host
			calls++
			r.Header.Set("Authorization", "Bearer "+token)
			return http.DefaultTransport.RoundTrip(r)
		})}}
	var cs *mcp.ClientSession
	g.Eventually(func() (err error) {
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v0"}, nil).Connect(ctx, alternate, nil)
		return err
	}).WithTimeout(settle).WithPolling(200*time.Millisecond).Should(Succeed(), func() string {
		return "the worker does not serve yet: " + diagnoseWorker(ctx, urls[0], token, wm)
	})
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	g.Expect(names).To(ConsistOf("whoami", "sleep", "count"), "the worker's tools, not the eight")

	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		g.Expect(err).NotTo(HaveOccurred())
		if out != nil {
			b, _ := json.Marshal(res.StructuredContent)
			g.Expect(json.Unmarshal(b, out)).To(Succeed())
		}
		return res
	}
	var who whoAmI
	call("whoami", map[string]any{}, &who)
	g.Expect(who.Authorization).To(HavePrefix("Bearer "))
	g.Expect(who.Authorization).NotTo(ContainSubstring(token), "the worker saw the tenant's public token")
	g.Expect(who.SessionID).NotTo(BeEmpty())
	g.Expect(who.SessionID).NotTo(Equal(cs.ID()), "the worker's session is not the client's")
	g.Expect([]string{who.Persona, who.Tenant, who.Pile, who.SigningKey}).To(Equal([]string{"native", ns + "/native", "/pile/self.pile", "/pile/self.key"}))
	g.Expect(who.KeyLoads).To(BeTrue(), "the worker's signing key does not load as triblespace loads one")
	g.Expect(calls).To(BeNumerically(">=", 4), "the requests did not alternate between the gateways")

	// Past spec.timeout: the outcome is unknown, and the request reached
	// the worker once.
	var before, after struct{ Calls int64 }
	call("count", map[string]any{}, &before)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"seconds": 6}})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(And(ContainSubstring("unknown"), ContainSubstring("not retried")))
	call("count", map[string]any{}, &after)
	g.Expect(after.Calls).To(Equal(before.Calls+2), "the worker served the slow call once, then this one")

	// The worker killed inside the sandbox: started again, reported, and
	// a new session works.
	shell(t, sbx, "pkill -KILL -f '[p]layground-example-worker'")
	g.Eventually(func(g Gomega) {
		var cur playgroundv1alpha1.WorkerMapping
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wm), &cur)).To(Succeed())
		g.Expect(cur.Status.Worker).NotTo(BeNil())
		g.Expect(cur.Status.Worker.Restarts).To(BeNumerically(">=", 1))
		g.Expect(cur.Status.Worker.Running).To(BeTrue())
		g.Expect(cur.Status.Worker.Output).To(ContainSubstring("serving MCP"))
	}).WithTimeout(settle).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(ContainElement(And(HaveField("Regarding.Name", wm.Name), HaveField("Reason", "WorkerRestarted"),
			HaveField("Type", corev1.EventTypeWarning))))
	}).WithTimeout(settle).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		fresh, err := mcpConnect(urls[1], token)
		g.Expect(err).NotTo(HaveOccurred())
		defer fresh.Close()
		res, err := fresh.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.IsError).To(BeFalse())
	}).WithTimeout(settle).WithPolling(200 * time.Millisecond).Should(Succeed())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestServiceWorkerThroughGateway: a WorkerMapping with a service
// destination, with real parts but for the pods behind the Service: an
// MCP server (go-sdk) on this machine's address, published as the
// Service's ready endpoint in an EndpointSlice as the endpoint controller
// would. The manager resolves it and copies its bearer where the gateway,
// which may read no team's Secret, reads it; the gateway forwards the
// tenant to it with that bearer, never the tenant's token. The team
// rotates the bearer in its Secret: the next session presents the new
// one. The team names a Secret of another type instead: its value never
// reaches the worker, and the tenant is refused, saying why.
func TestServiceWorkerThroughGateway(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ip := hostAddress(t)
	// The worker listens on this machine's address, which is also the
	// API server's: a control-plane address, which the manager refuses
	// unless the cluster admin grants it.
	startManager(t, func(o *controllers.Options) {
		o.WorkerEndpoints.Allow = []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(ip), 32)}
	})
	startNode(t, &node{name: "svc-workers-a", labels: pool("svc-workers")})
	ns := newNamespace(t)

	// The worker: it answers only its internal bearers, says which it
	// got, and records every Authorization that reached it.
	const inner, rotated, plain = "the-internal-bearer", "the-rotated-bearer", "a-plain-secret-never-presented"
	var mu sync.Mutex
	accepted := map[string]bool{"Bearer " + inner: true}
	var seen []string
	server := mcp.NewServer(&mcp.Implementation{Name: "svc-worker", Version: "v1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "what reached this worker"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoAmI, error) {
			return nil, whoAmI{Authorization: req.Extra.Header.Get("Authorization"), SessionID: req.Extra.Header.Get("Mcp-Session-Id")}, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		ok := accepted[r.Header.Get("Authorization")]
		mu.Unlock()
		if !ok {
			http.Error(w, "not the internal bearer", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	bearerSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker-bearer"}, Type: playgroundv1alpha1.WorkerBearerSecretType,
		Data: map[string][]byte{"token": []byte(inner)}}
	g.Expect(k8sClient.Create(ctx, bearerSecret)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "mcp", Port: 80, TargetPort: intstr.FromInt32(port)}}}})).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "worker-1", Labels: map[string]string{discoveryv1.LabelServiceName: "worker"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("mcp"), Port: ptr.To(port)}},
	})).To(Succeed())
	applyTenant(t, ns, "svc", func(tn *playgroundv1alpha1.Tenant) {
		inPool("svc-workers")(tn)
		tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers
	})
	g.Expect(k8sClient.Create(ctx, &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"},
		Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef:       playgroundv1alpha1.LocalObjectReference{Name: "svc"},
			Destination:     playgroundv1alpha1.WorkerDestination{Service: &playgroundv1alpha1.ServiceDestination{Name: "worker", Port: 80}},
			BearerSecretRef: &playgroundv1alpha1.SecretKeyReference{Name: "worker-bearer", Key: "token"},
		}})).To(Succeed())
	waitReady(t, ns, "svc")
	token := tokenOf(g, ns, "svc")

	endpoint := startGateway(t)
	cs, err := mcpConnect(endpoint, token)
	g.Expect(err).NotTo(HaveOccurred())
	defer cs.Close()
	whoami := func(g Gomega, cs *mcp.ClientSession) whoAmI {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		g.Expect(err).NotTo(HaveOccurred())
		var who whoAmI
		b, _ := json.Marshal(res.StructuredContent)
		g.Expect(json.Unmarshal(b, &who)).To(Succeed())
		return who
	}
	who := whoami(g, cs)
	g.Expect(who.Authorization).To(Equal("Bearer " + inner))
	g.Expect(who.SessionID).NotTo(BeEmpty())
	g.Expect(who.SessionID).NotTo(Equal(cs.ID()))

	// The team rotates the bearer: the worker takes both for the change,
	// and a new session presents the new one.
	mu.Lock()
	accepted["Bearer "+rotated] = true
	mu.Unlock()
	bearerSecret.Data["token"] = []byte(rotated + "\n")
	start := time.Now()
	g.Expect(k8sClient.Update(ctx, bearerSecret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		fresh, err := mcpConnect(endpoint, token)
		g.Expect(err).NotTo(HaveOccurred())
		defer fresh.Close()
		g.Expect(whoami(g, fresh).Authorization).To(Equal("Bearer " + rotated))
	}).WithTimeout(settle).WithPolling(50 * time.Millisecond).Should(Succeed())
	t.Logf("a bearer rotated in the team's Secret was presented by the gateway %s after the update", time.Since(start).Round(time.Millisecond))

	// The team names a Secret of another type: its value is presented to
	// no one, and the tenant is told why.
	g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Data: map[string][]byte{"token": []byte(plain)}})).To(Succeed())
	var wm playgroundv1alpha1.WorkerMapping
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "svc"}, &wm)).To(Succeed())
	wm.Spec.BearerSecretRef.Name = "plain"
	g.Expect(k8sClient.Update(ctx, &wm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"refused","version":"v0"}}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable), string(body))
		g.Expect(string(body)).To(And(ContainSubstring("BearerSecretRefused"), ContainSubstring("not playground.dev/worker-bearer")))
	}).WithTimeout(settle).WithPolling(50 * time.Millisecond).Should(Succeed())
	mu.Lock()
	defer mu.Unlock()
	for _, a := range seen {
		g.Expect(a).NotTo(ContainSubstring(plain), "the other Secret's value reached the worker")
		g.Expect(a).NotTo(ContainSubstring(token), "the tenant's token reached the worker")
	}
}

// hostAddress is an IPv4 address of this machine that is not loopback,
// which an EndpointSlice accepts.
func hostAddress(t *testing.T) string {
	t.Helper()
	ip, err := hostIPv4()
	if err != nil {
		t.Fatal(err)
	}
	if ip == "" {
		t.Skip(noHostAddress)
	}
	return ip
}

const noHostAddress = "this machine has no IPv4 address but loopback, which an EndpointSlice refuses"

// hostIPv4 is hostAddress, or "" when there is none.
func hostIPv4() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", nil
}

// diagnoseWorker says why a workers tenant is not served: the gateway's
// answer to an initialize, which names the reason, and the mapping's
// status.
func diagnoseWorker(ctx context.Context, endpoint, token string, wm *playgroundv1alpha1.WorkerMapping) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"diagnose","version":"v0"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	var answer string
	if resp, err := http.DefaultClient.Do(req); err != nil {
		answer = err.Error()
	} else {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		answer = resp.Status + " " + string(b)
	}
	var cur playgroundv1alpha1.WorkerMapping
	_ = k8sClient.Get(ctx, client.ObjectKeyFromObject(wm), &cur)
	status, _ := json.Marshal(cur.Status)
	return "the gateway answers " + answer + "; the mapping's status: " + string(status)
}
