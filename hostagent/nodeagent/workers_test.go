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

package nodeagent_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/testbin"
)

// TestSandboxWorker: a WorkerMapping with a sandbox destination runs its
// worker in the tenant's sandbox, reachable through the agent's relay with
// the worker's own bearer; a worker that dies is started again and the
// restart is reported; an agent restart leaves it running; deleting the
// mapping stops it. (No manager runs here: the mapping has no conditions,
// which the agent reads as not stalled, as a Ready mapping is not; the
// test records the sandbox's node in its status as the manager does.)
func TestSandboxWorker(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "workers")
	n := startNode(t, "workers-a", "", "")
	createSandbox(t, ns, "wk", n.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Persona = "the-persona" })
	id := waitProvisioned(t, ns, "wk").Status.SandboxID
	tenant := ns + "/wk"

	// The worker binary: the conformance probe's HTTP server, written into
	// the sandbox as a tenant would.
	probe, err := testbin.Build("github.com/playground-dev/playground/hostagent/conformance/probe", "-ldflags=-s -w", "-trimpath")
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(probe)
	g.Expect(err).NotTo(HaveOccurred())
	h, err := n.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = n.client.Write(ctx, tenant, h.ID, ".probe", "", data)
	g.Expect(err).NotTo(HaveOccurred())
	sh := func(cmd string) string {
		t.Helper()
		res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: cmd})
		g.Expect(err).NotTo(HaveOccurred())
		return string(res.Stdout)
	}
	sh("chmod 755 ~/.probe")

	wm := &playgroundv1alpha1.WorkerMapping{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wk-worker"},
		Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "wk"},
			Destination: playgroundv1alpha1.WorkerDestination{Sandbox: &playgroundv1alpha1.SandboxProcessDestination{
				Command: []string{guestapi.TenantHome + "/.probe", "serve", "18095"}, Port: 18095,
			}},
		},
	}
	g.Expect(k8s.Create(ctx, wm)).To(Succeed())
	// What the manager records, which lets this node's agent report the
	// worker (the installation's node restriction).
	g.Expect(k8s.Status().Apply(ctx, playgroundv1alpha1ac.WorkerMapping(wm.Name, ns).
		WithStatus(playgroundv1alpha1ac.WorkerMappingStatus().WithNodeName(n.name)),
		client.FieldOwner(playgroundv1alpha1.WorkerMappingControllerFieldOwner), client.ForceOwnership)).To(Succeed())

	relay := func(c *agentapi.Client) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://worker/mcp", strings.NewReader("{}"))
		resp, err := c.WorkerTransport(tenant, id).RoundTrip(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	worker := func(g Gomega) *playgroundv1alpha1.WorkerProcessStatus {
		var cur playgroundv1alpha1.WorkerMapping
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(wm), &cur)).To(Succeed())
		g.Expect(cur.Status.Worker).NotTo(BeNil(), "the agent has not reported the worker")
		return cur.Status.Worker
	}
	var first string
	g.Eventually(func(g Gomega) {
		g.Expect(worker(g).Running).To(BeTrue())
		code, body := relay(n.client)
		g.Expect(code).To(Equal(http.StatusOK), body)
		first = body
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(first).To(MatchRegexp(`^probe POST /mcp Bearer [A-Za-z0-9_-]{40,}\n$`), "the worker saw its own bearer")
	g.Expect(first).NotTo(ContainSubstring(token))
	env := sh("tr '\\0' '\\n' < /proc/$(pgrep -f '[.]probe serve')/environ | sort")
	for _, want := range []string{"PERSONA=the-persona", "PLAYGROUND_TENANT=" + tenant, "PILE=/pile/self.pile",
		"PLAYGROUND_WORKER_TOKEN_FILE=" + guestapi.WorkerTokenFile} {
		g.Expect(env).To(ContainSubstring(want + "\n"))
	}

	// Killed inside the sandbox: started again, reported, and an Event.
	sh("pkill -KILL -f '[.]probe serve'")
	g.Eventually(func(g Gomega) {
		w := worker(g)
		g.Expect(w.Restarts).To(BeEquivalentTo(1))
		g.Expect(w.LastExit).To(ContainSubstring("SIGKILL"))
		g.Expect(w.Running).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	waitEvent(t, ns, wm.Name, corev1.EventTypeWarning, nodeagent.ReasonWorkerRestarted)

	// The agent restarted: the same worker process, the same bearer.
	pid := sh("pgrep -f '[.]probe serve'")
	var before string
	g.Eventually(func(g Gomega) {
		code, body := relay(n.client)
		g.Expect(code).To(Equal(http.StatusOK), body)
		before = body
	}).WithTimeout(timeout).Should(Succeed())
	n.stop()
	second := startNode(t, n.name, n.stateDir, strings.TrimPrefix(n.endpoint, "http://"))
	g.Eventually(func(g Gomega) {
		code, body := relay(second.client)
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(Equal(before))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	h2, err := second.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := second.client.Exec(ctx, tenant, h2.ID, agentapi.ExecRequest{Command: "pgrep -f '[.]probe serve'"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal(pid), "the worker was restarted with the agent")

	// The mapping deleted: the worker stops.
	g.Expect(k8s.Delete(ctx, wm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		code, body := relay(second.client)
		g.Expect(code).To(Equal(http.StatusServiceUnavailable), body)
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		res, err := second.client.Exec(ctx, tenant, h2.ID, agentapi.ExecRequest{Command: "pgrep -f '[.]probe serve' || echo none"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(res.Stdout)).To(Equal("none\n"))
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}
