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
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
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
	n := &node{name: "workers-a", labels: pool("workers")}
	startNode(t, n)
	ns := newNamespace(t)

	bin, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-example-worker", "-trimpath")
	g.Expect(err).NotTo(HaveOccurred())
	src := t.TempDir()
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
	}).WithTimeout(settle).WithPolling(200 * time.Millisecond).Should(Succeed(), "the worker does not serve yet")
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
	g.Expect([]string{who.Persona, who.Tenant, who.Pile}).To(Equal([]string{"native", ns + "/native", "/pile/self.pile"}))
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
