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
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
)

// Three agents as three nodes: each provisions the Sandboxes bound to it
// and no other, reports them, and serves them through its API to callers
// holding its token only.
func TestThreeNodesServeTheirOwnSandboxes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "three-nodes")
	nodes := []*node{startNode(t, "three-a", "", ""), startNode(t, "three-b", "", ""), startNode(t, "three-c", "", "")}
	for _, n := range nodes {
		createSandbox(t, ns, "on-"+n.name, n.name)
	}
	createSandbox(t, ns, "unbound", "")

	for _, n := range nodes {
		s := waitProvisioned(t, ns, "on-"+n.name)
		g.Expect(s.Status.SandboxID).To(MatchRegexp(`^sbx-[0-9a-f]{20}$`), "a sandbox ID")
		g.Expect(s.Status.Endpoint).To(Equal(n.endpoint), "the endpoint of the node's own agent")
		g.Expect(s.Finalizers).To(ContainElement(playgroundv1alpha1.SandboxFinalizer))
		g.Expect(provisioned(s).Reason).To(Equal(playgroundv1alpha1.ReasonProvisioned))
		// runc sees this node's sandbox, and only it.
		g.Expect(n.containers(t)).To(ConsistOf(containerOf(t, ns, "on-"+n.name)))
		// The agent owns its fields under its field manager, by apply, on
		// the status subresource, and never the manager's conditions.
		g.Expect(agentFields(t, s)).To(And(
			ContainSubstring(`"f:sandboxID"`), ContainSubstring(`"f:endpoint"`), ContainSubstring(`"f:openHandles"`),
			ContainSubstring(`"k:{\"type\":\"Provisioned\"}"`), Not(ContainSubstring(`Ready`)), Not(ContainSubstring(`"f:phase"`))))
	}
	// A provisioning that went as planned records no Event: each would be
	// an API write per tenant, and the conditions say it all.
	var events eventsv1.EventList
	g.Expect(k8s.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	g.Expect(events.Items).To(BeEmpty())

	// No agent touched the unbound sandbox.
	unbound := getSandbox(g, ns, "unbound")
	g.Expect(unbound.Finalizers).To(BeEmpty())
	g.Expect(unbound.Status.Conditions).To(BeEmpty())
	g.Expect(unbound.Status.SandboxID).To(BeEmpty())
	// Bound later, as the binder does, it enters node c's watch and only
	// node c provisions it.
	unbound.Spec.NodeName = "three-c"
	g.Expect(k8s.Update(ctx, unbound)).To(Succeed())
	g.Expect(waitProvisioned(t, ns, "unbound").Status.Endpoint).To(Equal(nodes[2].endpoint))
	g.Expect(nodes[2].containers(t)).To(ConsistOf(containerOf(t, ns, "on-three-c"), containerOf(t, ns, "unbound")))
	g.Expect(nodes[0].containers(t)).To(ConsistOf(containerOf(t, ns, "on-three-a")))
	g.Expect(nodes[1].containers(t)).To(ConsistOf(containerOf(t, ns, "on-three-b")))

	// A session through node a's API: the tenant is namespace/tenantRef.
	a := nodes[0]
	tenant, id := ns+"/on-three-a", idOf(t, ns, "on-three-a")
	h, err := a.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := a.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "echo hi"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal("hi\n"))
	g.Expect(res.ExitCode).To(BeZero())
	// The open handle shows in the status, and goes when closed.
	g.Eventually(func(g Gomega) {
		g.Expect(getSandbox(g, ns, "on-three-a").Status.OpenHandles).To(BeEquivalentTo(1))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(a.client.Close(ctx, tenant, h.ID)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getSandbox(g, ns, "on-three-a").Status.OpenHandles).To(BeZero())
	}).WithTimeout(timeout).Should(Succeed())

	// Node b does not serve node a's sandbox.
	_, err = nodes[1].client.Open(ctx, tenant, id)
	g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeNotFound))

	// Without the token, or with another, the API refuses.
	for _, tok := range []string{"", "not-the-agent-token-at-all"} {
		c, err := agentapi.NewClient(a.endpoint, tok, nil)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.Open(ctx, tenant, id)
		g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeUnauth), "token %q", tok)
	}
	resp, err := http.Post(a.endpoint+"/v1/sandboxes/"+id+"/handles", "application/json", strings.NewReader(`{"tenant":"`+tenant+`"}`))
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
}

// agentFields is the agent's managed fields entry of s, as JSON.
func agentFields(t *testing.T, s *playgroundv1alpha1.Sandbox) string {
	t.Helper()
	for _, m := range s.ManagedFields {
		if m.Manager == playgroundv1alpha1.AgentFieldOwner && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == "status" {
			return m.FieldsV1.GetRawString()
		}
	}
	t.Fatalf("no status apply by %s in %+v", playgroundv1alpha1.AgentFieldOwner, s.ManagedFields)
	return ""
}

// The agent registers in its Lease, renews it every third of its
// duration, and leaves it to expire when it stops.
func TestLeaseRegistration(t *testing.T) {
	g := NewWithT(t)
	n := startNode(t, "lease-a", "", "")
	key := client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(n.name)}
	var lease coordinationv1.Lease
	g.Eventually(func() error { return k8s.Get(context.Background(), key, &lease) }).WithTimeout(timeout).Should(Succeed())
	g.Expect(lease.Labels).To(HaveKeyWithValue(agentlease.LabelAgent, "true"))
	g.Expect(lease.Annotations).To(And(
		HaveKeyWithValue(agentlease.AnnotationEndpoint, n.endpoint),
		HaveKeyWithValue(agentlease.AnnotationBackends, "oci"),
		// The test's oci backend has no runsc: container only.
		HaveKeyWithValue(agentlease.AnnotationIsolations, "container"),
		// ...and its agent runs sandboxes without network (--network=none).
		HaveKeyWithValue(agentlease.AnnotationNetworks, `{"oci":["none"]}`),
		HaveKeyWithValue(agentlease.AnnotationAdmission, "")))
	var labels map[string]string
	g.Expect(json.Unmarshal([]byte(lease.Annotations[agentlease.AnnotationNodeLabels]), &labels)).To(Succeed())
	g.Expect(labels).To(Equal(map[string]string{"playground.dev/test-node": "lease-a", "kubernetes.io/hostname": "lease-a"}))
	reg, err := agentlease.FromLease(&lease)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reg.Node).To(Equal("lease-a"))
	g.Expect(reg.Duration).To(Equal(leaseDuration))
	g.Expect(reg.Healthy(time.Now())).To(BeTrue())

	first := reg.Renewed
	g.Eventually(func(g Gomega) {
		var l coordinationv1.Lease
		g.Expect(k8s.Get(context.Background(), key, &l)).To(Succeed())
		g.Expect(l.Spec.RenewTime.Time).To(BeTemporally(">", first))
	}).WithTimeout(leaseDuration).WithPolling(100 * time.Millisecond).Should(Succeed())

	n.stop()
	g.Expect(k8s.Get(context.Background(), key, &lease)).To(Succeed(), "the Lease is left to expire")
	stopped := lease.Spec.RenewTime.Time
	time.Sleep(leaseDuration / 2)
	g.Expect(k8s.Get(context.Background(), key, &lease)).To(Succeed())
	g.Expect(lease.Spec.RenewTime.Time).To(Equal(stopped), "no renewal after the agent stopped")
}

// Deleting a Sandbox destroys its container; the pile stays with Retain
// (the default) and goes with Delete; the finalizer lets go.
func TestDeleteFollowsReclaimPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "reclaim")
	n := startNode(t, "reclaim-a", "", "")
	createSandbox(t, ns, "keep", n.name)
	createSandbox(t, ns, "drop", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Pile.ReclaimPolicy = playgroundv1alpha1.ReclaimDelete
	})
	keep, drop := waitProvisioned(t, ns, "keep"), waitProvisioned(t, ns, "drop")
	g.Expect(n.containers(t)).To(ConsistOf(containerOf(t, ns, "keep"), containerOf(t, ns, "drop")))
	keepPile, dropPile := n.backend.PileDir(keep.Status.SandboxID), n.backend.PileDir(drop.Status.SandboxID)
	g.Expect(keepPile).To(BeADirectory())
	g.Expect(dropPile).To(BeADirectory())

	g.Expect(k8s.Delete(ctx, keep)).To(Succeed())
	g.Expect(k8s.Delete(ctx, drop)).To(Succeed())
	waitGone(t, ns, "keep")
	waitGone(t, ns, "drop")
	g.Expect(n.containers(t)).To(BeEmpty())
	g.Expect(n.backend.InspectPile(keep.Status.SandboxID, func(dir string) error {
		_, err := os.Stat(filepath.Join(dir, "self.pile"))
		return err
	})).To(Succeed(), "Retain keeps the pile's image and files")
	_, err := os.Stat(dropPile)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "Delete removes the pile: %v", err)
	waitEvent(t, ns, "drop", corev1.EventTypeNormal, playgroundv1alpha1.ReasonTerminating)
}

// A node whose free disk space is below its agent's reserve provisions no
// new sandbox: Provisioned=False with reason InsufficientStorage and an
// Event say why, and a sandbox provisioned before keeps running.
func TestStorageReserveRefusal(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "reserve")
	state := ocitest.StateDir(t)
	n := startNode(t, "reserve-a", state, "")
	createSandbox(t, ns, "before", n.name)
	waitProvisioned(t, ns, "before")
	n.stop()

	reserving, err := oci.New(oci.Options{StateDir: state, GuestBinary: ocitest.GuestBinary(t), StorageReserve: 1 << 60})
	g.Expect(err).NotTo(HaveOccurred())
	n = startNode(t, "reserve-a", state, "", func(o *nodeagent.Options) { o.Backends = []backend.Backend{reserving} })
	createSandbox(t, ns, "after", n.name)
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "after"))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonInsufficientStorage))
		g.Expect(c.Message).To(ContainSubstring("below its reserve of"))
	}).WithTimeout(timeout).Should(Succeed())
	e := waitEvent(t, ns, "after", corev1.EventTypeWarning, playgroundv1alpha1.ReasonInsufficientStorage)
	g.Expect(e.Note).To(ContainSubstring("no new sandbox is provisioned here"))
	g.Expect(n.containers(t)).To(ConsistOf(containerOf(t, ns, "before")))
	waitProvisioned(t, ns, "before")

	// Limits are fixed at provisioning: a spec asking for others is told so.
	bigger := resource.MustParse("8Gi")
	updateSandbox(t, ns, "before", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Storage.Size = &bigger })
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "before"))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("keeps the limits it was provisioned with (writable layer 4Gi and 262144 inodes"))
	}).WithTimeout(timeout).Should(Succeed())
}

// waitFailed waits for Provisioned=False on the current generation with
// reason, and a Warning Event with the same reason, both saying msg.
func waitFailed(t *testing.T, ns, name, reason, msg string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		s := getSandbox(g, ns, name)
		c := provisioned(s)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(c.Message).To(ContainSubstring(msg))
		g.Expect(c.ObservedGeneration).To(Equal(s.Generation))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(waitEvent(t, ns, name, corev1.EventTypeWarning, reason).Note).To(ContainSubstring(msg))
}

// A backend refusal shows as Provisioned=False with the reason and an
// Event; fixing the spec lets the retry succeed.
func TestBackendFailureIsReportedAndRetried(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "failure")
	n := startNode(t, "failure-a", "", "")
	// More inodes than 32 MiB hold: the API admits it, the oci backend
	// refuses it (the API refuses what every backend would).
	size := resource.MustParse("32Mi")
	many, enough := int64(100000), int64(8192)
	createSandbox(t, ns, "tiny", n.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Storage.Size, s.Spec.Storage.Inodes = &size, &many })

	waitFailed(t, ns, "tiny", playgroundv1alpha1.ReasonBackendFailed, "inodes exceed what 32Mi hold")
	g.Expect(n.containers(t)).To(BeEmpty())
	// The retries' Warnings are one Event with a series, not one each.
	g.Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		var warnings []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Name == "tiny" && e.Type == corev1.EventTypeWarning && e.Reason == playgroundv1alpha1.ReasonBackendFailed {
				warnings = append(warnings, e)
			}
		}
		g.Expect(warnings).To(HaveLen(1))
		g.Expect(warnings[0].Series).NotTo(BeNil())
		g.Expect(warnings[0].Series.Count).To(BeNumerically(">=", 2))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())

	updateSandbox(t, ns, "tiny", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Storage.Inodes = &enough })
	waitProvisioned(t, ns, "tiny")
	g.Expect(n.containers(t)).To(ConsistOf(containerOf(t, ns, "tiny")))
}

// TestFailedSandboxIsDeletedPromptly: a Sandbox whose provisioning fails
// again and again (egress on a node that runs none) grows the backoff of
// its retries; its deletion waits for none of it, and the finalizer goes
// although the pass writes the Sandbox's status just before.
func TestFailedSandboxIsDeletedPromptly(t *testing.T) {
	ns := newNamespace(t, "failed-delete")
	n := startNode(t, "failed-delete-a", "", "")
	createSandbox(t, ns, "egress", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
			Egress: []playgroundv1alpha1.EgressRule{{CIDR: "192.0.2.0/24"}}}
	})
	waitFailed(t, ns, "egress", playgroundv1alpha1.ReasonBackendFailed, "asks for egress")
	// Let it fail more times, growing its backoff: the reconciler's
	// errors are counted in this process's metrics.
	before := reconcileErrors(t)
	NewWithT(t).Eventually(func() float64 { return reconcileErrors(t) - before }).
		WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(BeNumerically(">=", 6))

	if err := k8s.Delete(context.Background(), &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "egress"}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	failedBefore := reconcileErrors(t)
	waitGone(t, ns, "egress")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the failed Sandbox was gone %s after its deletion, want within seconds", took)
	}
	// Its deletion pass wrote its status, then removed the finalizer, and
	// did not fail on the object it had read before that write.
	if n := reconcileErrors(t) - failedBefore; n > 0 {
		t.Errorf("the deletion failed %v times before it went through", n)
	}
}

// A sandbox asking for a backend its node does not offer is a spec
// problem, not a backend failure: Provisioned=False with reason
// BackendFailed and a Warning Event say so, nothing is provisioned, and the
// pass ends without a retry.
func TestBackendNotOfferedStalls(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "not-offered")
	n := startNode(t, "not-offered-a", "", "")
	createSandbox(t, ns, "lima", n.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Backend = playgroundv1alpha1.BackendLima })
	waitFailed(t, ns, "lima", playgroundv1alpha1.ReasonBackendFailed, "not lima")
	g.Expect(n.containers(t)).To(BeEmpty())
}

// Restarting the agent changes nothing a tenant sees: the same sandbox ID,
// its files, its background processes, and Provisioned stays True.
func TestRestartKeepsSandboxes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "restart")
	first := startNode(t, "restart-a", "", "")
	createSandbox(t, ns, "ws", first.name)
	before := waitProvisioned(t, ns, "ws")
	tenant, id := ns+"/ws", before.Status.SandboxID

	h, err := first.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := first.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "echo kept > file; setsid sleep 1000 >/dev/null 2>&1 & echo $!"})
	g.Expect(err).NotTo(HaveOccurred())
	pid := strings.TrimSpace(string(res.Stdout))
	_, err = strconv.Atoi(pid)
	g.Expect(err).NotTo(HaveOccurred(), "no pid: %q %q", res.Stdout, res.Stderr)
	// Sessions end with the agent process: close ours first, so that the
	// count the new agent reports below is its own.
	g.Expect(first.client.Close(ctx, tenant, h.ID)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getSandbox(g, ns, "ws").Status.OpenHandles).To(BeZero())
	}).WithTimeout(timeout).Should(Succeed())
	since := provisioned(getSandbox(g, ns, "ws")).LastTransitionTime

	first.stop()
	// Same node, same state directory, same address: a new agent process.
	// It reattaches before it serves, so the first call already finds the
	// sandbox (it waits in the listener's backlog until then).
	second := startNode(t, first.name, first.stateDir, strings.TrimPrefix(first.endpoint, "http://"))
	h2, err := second.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(getSandbox(g, ns, "ws").Status.OpenHandles).To(BeEquivalentTo(1))
	}).WithTimeout(timeout).Should(Succeed(), "the new agent reports its handle")
	after := waitProvisioned(t, ns, "ws")
	g.Expect(after.Status.SandboxID).To(Equal(id))
	g.Expect(provisioned(after).LastTransitionTime).To(Equal(since), "Provisioned stayed True throughout")
	g.Expect(second.containers(t)).To(ConsistOf(containerOf(t, ns, "ws")))

	res, err = second.client.Exec(ctx, tenant, h2.ID, agentapi.ExecRequest{Command: "cat file; kill -0 " + pid + " && echo alive"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal("kept\nalive\n"), "stderr: %s", res.Stderr)
}

// TestDeadInitIsRestarted: a sandbox whose init dies (killed, out of
// memory) is started again over its files by the next resync, with a
// Warning event, and serves again; nobody had to touch its spec.
func TestDeadInitIsRestarted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "dead-init")
	n := startNode(t, "dead-init-a", "", "")
	createSandbox(t, ns, "ws", n.name)
	id := waitProvisioned(t, ns, "ws").Status.SandboxID
	tenant := ns + "/ws"
	h, err := n.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "echo kept > file"})
	g.Expect(err).NotTo(HaveOccurred())
	job, err := n.client.StartJob(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "sleep 1000"})
	g.Expect(err).NotTo(HaveOccurred())
	// Let the status report the handle first, so that no pass is under way
	// when init dies.
	g.Eventually(func(g Gomega) {
		g.Expect(getSandbox(g, ns, "ws").Status.OpenHandles).To(BeEquivalentTo(1))
	}).WithTimeout(timeout).Should(Succeed())

	initPID := func() int {
		b, err := os.ReadFile(filepath.Join(n.stateDir, "sandboxes", id, "init.pid"))
		g.Expect(err).NotTo(HaveOccurred())
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		g.Expect(err).NotTo(HaveOccurred())
		return pid
	}
	dead := initPID()
	g.Expect(n.backend.Alive(id)).To(BeTrue())
	g.Expect(syscall.Kill(dead, syscall.SIGKILL)).To(Succeed())

	g.Eventually(func() bool { return initPID() != dead && n.backend.Alive(id) }).
		WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(BeTrue(), "a new init")
	e := waitEvent(t, ns, "ws", corev1.EventTypeWarning, playgroundv1alpha1.ReasonRestarted)
	g.Expect(e.Note).To(ContainSubstring(id))
	res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "cat file"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal("kept\n"), "stderr: %s", res.Stderr)
	g.Expect(provisioned(getSandbox(g, ns, "ws")).Status).To(Equal(metav1.ConditionTrue))
	// The job died with its sandbox: it ended, and the restart proved the
	// sandbox clean, so jobs start there again.
	page, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: tenant}, job.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Job.State).To(Equal(agentapi.JobFailed))
	_, err = n.client.StartJob(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "true"})
	g.Expect(err).NotTo(HaveOccurred(), "a sandbox restarted after its init died admits jobs")
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(getSandbox(g, ns, "ws").Status.Conditions, playgroundv1alpha1.JobsAdmittedCondition)).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed())
}

// An agent no gateway could reach does not start: neither a trusted
// gateway identity nor a shared token.
func TestRunRefusesWithoutGateway(t *testing.T) {
	err := nodeagent.Run(context.Background(), nodeagent.Options{
		Config:        cp.Config,
		StateDir:      t.TempDir(),
		NodeName:      "no-tokens",
		Backends:      []backend.Backend{ocitest.New(t, ocitest.StateDir(t))},
		ListenAddress: "127.0.0.1:0",
	})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("accept no gateway")))
}

// TestGVisorSandbox: an agent with runsc says so in its Lease and runs a
// Sandbox of isolation gvisor on gVisor's kernel; restarted, it serves the
// same sandbox, still on gVisor. An agent without runsc does not run one:
// the Sandbox's Provisioned condition says why.
func TestGVisorSandbox(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "gvisor")
	stateDir := ocitest.StateDir(t)
	withRunsc := func(o *nodeagent.Options) { o.Backends = []backend.Backend{ocitest.NewGVisor(t, stateDir)} }
	first := startNode(t, "gvisor-a", stateDir, "", withRunsc)
	var lease coordinationv1.Lease
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(first.name)}, &lease)
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(lease.Annotations).To(HaveKeyWithValue(agentlease.AnnotationIsolations, "container,gvisor"))

	createSandbox(t, ns, "untrusted", first.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Isolation = playgroundv1alpha1.IsolationGVisor })
	tenant, id := ns+"/untrusted", waitProvisioned(t, ns, "untrusted").Status.SandboxID
	kernel := func(n *node) string {
		t.Helper()
		h, err := n.client.Open(ctx, tenant, id)
		g.Expect(err).NotTo(HaveOccurred())
		defer n.client.Close(ctx, tenant, h.ID)
		res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "echo kept >> file; cat file; uname -r"})
		g.Expect(err).NotTo(HaveOccurred())
		return string(res.Stdout)
	}
	g.Expect(kernel(first)).To(MatchRegexp(`^kept\n.*gvisor\n$`))

	first.stop()
	second := startNode(t, first.name, stateDir, strings.TrimPrefix(first.endpoint, "http://"), withRunsc)
	g.Expect(kernel(second)).To(MatchRegexp(`^kept\nkept\n.*gvisor\n$`), "the restarted agent serves the same gVisor sandbox")

	plain := startNode(t, "gvisor-b", "", "")
	createSandbox(t, ns, "nowhere", plain.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Isolation = playgroundv1alpha1.IsolationGVisor })
	waitFailed(t, ns, "nowhere", playgroundv1alpha1.ReasonBackendFailed, "no runsc")
	g.Expect(plain.containers(t)).To(BeEmpty())
}

// reconcileErrors is the count of failed passes of the agents' Sandbox
// reconcilers in this process (controller-runtime's metric).
func reconcileErrors(t *testing.T) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "nodeagent-sandbox" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
