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
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/mcpgateway"
)

// TestAgentTLS: with the real manager as the Playground signer, an agent
// acting as the agent ServiceAccount with a token bound to its node gets
// its serving certificate, serves TLS only, and a gateway that trusts only
// the CA the manager publishes serves a tenant through it.
func TestAgentTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)

	n := startTLSNode(t, "tls-1", pool("tls"))

	gwCfg, err := rbactest.Grant(ctx, k8sClient, cp.Config, "gateway", rbactest.ServiceAccountUser("gateway"), rbactest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	url := startTLSGateway(t, gwCfg)

	ns := newNamespace(t)
	applyTenant(t, ns, "alice", inPool("tls"))
	waitReady(t, ns, "alice")
	token := tokenOf(g, ns, "alice")
	g.Eventually(func(g Gomega) {
		cs, err := mcpConnect(url, token)
		g.Expect(err).NotTo(HaveOccurred())
		defer cs.Close()
		g.Expect(echo(g, cs, "over-tls")).To(Equal("over-tls\n"))
	}, settle, 200*time.Millisecond).Should(Succeed(), "the tenant is served through the TLS agent")

	// The agent speaks TLS only.
	plain := "http://" + n.endpoint[len("https://"):] + "/healthz"
	resp, err := http.Get(plain)
	if err == nil {
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP to the agent")
	}
}

// startTLSNode runs the agent of node name as a cluster runs it: as the
// agent's ServiceAccount with its generated RBAC and a token bound to its
// pod on that node, serving TLS with a certificate from the manager's
// signer, which must run. It returns once the agent has its certificate.
func startTLSNode(t *testing.T, name string, labels map[string]string) *node {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	// The node, as its kubelet would have registered it.
	nodeObj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(k8sClient.Create(ctx, nodeObj)).To(Succeed())
	nodeObj.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	g.Expect(k8sClient.Status().Update(ctx, nodeObj)).To(Succeed())

	agentCfg, err := rbactest.Grant(ctx, k8sClient, cp.Config, "agent", rbactest.ServiceAccountUser("agent"), rbactest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	// Its pod, as the scheduler would have placed it (no kubelet runs it).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: "agent-on-" + name},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "agent", Image: "playground"}}}}
	g.Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	agentCfg = rbactest.OnPod(agentCfg, name, pod.Name, string(pod.UID))
	n := &node{name: name, labels: labels, config: agentCfg, tls: true}
	startNode(t, n)
	g.Expect(n.endpoint).To(HavePrefix("https://"))
	return n
}

// startTLSGateway runs a gateway as cfg that verifies agents against the
// CA bundle the manager publishes, and returns its MCP endpoint.
func startTLSGateway(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ca := mcpgateway.WatchAgentCA(ctx, kubernetes.NewForConfigOrDie(cfg), agentlease.DefaultNamespace, logr.Discard())
	return serveGateway(t, mcpgateway.Options{Config: cfg, AgentCA: ca})
}
