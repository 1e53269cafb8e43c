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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

// The binder's tests register agents by writing their Leases, exactly as
// agents do (hostagent/nodeagent's tests hold the agents' side).

// registerAgent writes node's registration, renewed now, and removes it
// when the test ends. The agent offers the oci backend, with the
// isolations listed (none: container only, as an agent without runsc).
func registerAgent(t *testing.T, node string, labels map[string]string, duration time.Duration, isolations ...string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentlease.DefaultNamespace}}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(node)}}
	renewAgent(t, lease, node, labels, duration, isolations...)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), lease) })
}

func renewAgent(t *testing.T, lease *coordinationv1.Lease, node string, labels map[string]string, duration time.Duration, isolations ...string) {
	t.Helper()
	ctx := context.Background()
	reg := agentlease.Registration{Node: node, Endpoint: "http://" + node + ":9443", Backends: []string{"oci"}, Isolations: isolations, Labels: labels, Duration: duration}
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(lease), lease)
	switch {
	case apierrors.IsNotFound(err):
		if err := reg.Apply(lease, time.Now()); err != nil {
			t.Fatal(err)
		}
		err = k8sClient.Create(ctx, lease)
	case err == nil:
		if err := reg.Apply(lease, time.Now()); err != nil {
			t.Fatal(err)
		}
		err = k8sClient.Update(ctx, lease)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func newSandbox(t *testing.T, ns, name string, selector map[string]string) *playgroundv1alpha1.Sandbox {
	t.Helper()
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef:       playgroundv1alpha1.LocalObjectReference{Name: name},
			SandboxTemplate: playgroundv1alpha1.SandboxTemplate{NodeSelector: selector},
		},
	}
	if err := k8sClient.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func getSandbox(g Gomega, ns, name string) *playgroundv1alpha1.Sandbox {
	var s playgroundv1alpha1.Sandbox
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
	return &s
}

func conditionOf(s *playgroundv1alpha1.Sandbox, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// markProvisioned writes the agent's part of the status, as the node's
// agent does, under its own field manager.
func markProvisioned(g Gomega, s *playgroundv1alpha1.Sandbox) {
	// The manager writes the same status concurrently: retry on conflict,
	// as the agent's server-side apply never has to.
	g.Eventually(func() error {
		cur := getSandbox(g, s.Namespace, s.Name)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.ProvisionedCondition, Status: metav1.ConditionTrue,
			Reason: playgroundv1alpha1.ReasonProvisioned, Message: "Running", ObservedGeneration: cur.Generation})
		cur.Status.SandboxID = "sbx-00000000000000000001" // as an agent chooses it
		return k8sClient.Status().Update(context.Background(), cur, client.FieldOwner(playgroundv1alpha1.AgentFieldOwner))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
}

// TestBindingSpreadsLoad: sandboxes go to healthy nodes, evenly; a node
// selector puts one where it asks.
func TestBindingSpreadsLoad(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	suffix := rand.String(5)
	nodes := []string{"spread-a-" + suffix, "spread-b-" + suffix, "spread-c-" + suffix}
	for i, n := range nodes {
		registerAgent(t, n, map[string]string{"zone": fmt.Sprintf("z%d-%s", i, suffix)}, time.Hour)
	}
	for i := range 9 {
		newSandbox(t, ns, fmt.Sprintf("s%d", i), nil)
	}
	pinned := newSandbox(t, ns, "pinned", map[string]string{"zone": "z2-" + suffix})

	g.Eventually(func(g Gomega) {
		var list playgroundv1alpha1.SandboxList
		g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		for _, s := range list.Items {
			g.Expect(s.Spec.NodeName).NotTo(BeEmpty(), "sandbox %s is not bound", s.Name)
			g.Expect(conditionOf(&s, playgroundv1alpha1.BoundCondition).Status).To(Equal(metav1.ConditionTrue))
		}
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	g.Expect(getSandbox(g, ns, pinned.Name).Spec.NodeName).To(Equal(nodes[2]), "the node selector was not honoured")
	loads := map[string]int{}
	for _, n := range nodes {
		var list playgroundv1alpha1.SandboxList
		g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		for _, s := range list.Items {
			if s.Spec.NodeName == n {
				loads[n]++
			}
		}
	}
	minLoad, maxLoad := 100, 0
	for _, n := range nodes {
		minLoad, maxLoad = min(minLoad, loads[n]), max(maxLoad, loads[n])
	}
	g.Expect(maxLoad-minLoad).To(BeNumerically("<=", 1), "uneven spread: %v", loads)
}

// TestNoEligibleNodeWaits: a sandbox no node can take says so and waits;
// it is bound as soon as a fitting agent registers.
func TestNoEligibleNodeWaits(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	zone := "nowhere-" + rand.String(5)
	s := newSandbox(t, ns, "waiting", map[string]string{"zone": zone})

	g.Eventually(func(g Gomega) {
		got := getSandbox(g, ns, s.Name)
		bound := conditionOf(got, playgroundv1alpha1.BoundCondition)
		g.Expect(bound.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(bound.Reason).To(Equal(playgroundv1alpha1.ReasonNoEligibleNode))
		g.Expect(bound.Message).To(ContainSubstring("zone=" + zone))
		g.Expect(conditionOf(got, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(got.Status.Phase).To(Equal(playgroundv1alpha1.SandboxPending))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	node := "late-" + rand.String(5)
	registerAgent(t, node, map[string]string{"zone": zone}, time.Hour)
	g.Eventually(func() string { return getSandbox(g, ns, s.Name).Spec.NodeName }, 10*time.Second, 100*time.Millisecond).Should(Equal(node))
}

// TestGVisorWaitsForAnAgentThatOffersIt: a sandbox of gvisor isolation is
// not bound to an agent without runsc, however idle, and says why; it is
// bound to the first agent whose Lease offers gvisor.
func TestGVisorWaitsForAnAgentThatOffersIt(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	zone := "gvisor-" + rand.String(5)
	registerAgent(t, "runc-only-"+rand.String(5), map[string]string{"zone": zone}, time.Hour)
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "untrusted"},
		Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "untrusted"},
			SandboxTemplate: playgroundv1alpha1.SandboxTemplate{
				Isolation:    playgroundv1alpha1.IsolationGVisor,
				NodeSelector: map[string]string{"zone": zone},
			},
		},
	}
	g.Expect(k8sClient.Create(context.Background(), s)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getSandbox(g, ns, s.Name)
		bound := conditionOf(got, playgroundv1alpha1.BoundCondition)
		g.Expect(bound.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(bound.Reason).To(Equal(playgroundv1alpha1.ReasonNoEligibleNode))
		g.Expect(bound.Message).To(ContainSubstring("gvisor isolation"))
		g.Expect(got.Status.Phase).To(Equal(playgroundv1alpha1.SandboxPending))
		g.Expect(got.Spec.NodeName).To(BeEmpty())
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	node := "runsc-" + rand.String(5)
	registerAgent(t, node, map[string]string{"zone": zone}, time.Hour, "container", "gvisor")
	g.Eventually(func() string { return getSandbox(g, ns, s.Name).Spec.NodeName }, 10*time.Second, 100*time.Millisecond).Should(Equal(node))
}

// TestEgressWaitsForAnAgentThatOffersIt: a sandbox of network egress is
// not bound to an agent that runs sandboxes without network, and says
// which node lacks what; it is bound to the first agent that offers it.
func TestEgressWaitsForAnAgentThatOffersIt(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	suffix := rand.String(5)
	zone := "egress-" + suffix
	closed := "closed-" + suffix
	register := func(node string, networks map[string][]string) {
		registerAgentAs(t, agentlease.Registration{Node: node, Endpoint: "http://" + node + ":9443", Backends: []string{"oci"},
			Networks: networks, Labels: map[string]string{"zone": zone}, Duration: time.Hour})
	}
	register(closed, map[string][]string{"oci": {"none"}})
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "outbound"},
		Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "outbound"},
			SandboxTemplate: playgroundv1alpha1.SandboxTemplate{
				NodeSelector: map[string]string{"zone": zone},
				Network: playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
					Egress: []playgroundv1alpha1.EgressRule{{CIDR: "203.0.113.0/24"}}},
			},
		},
	}
	g.Expect(k8sClient.Create(context.Background(), s)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getSandbox(g, ns, s.Name)
		bound := conditionOf(got, playgroundv1alpha1.BoundCondition)
		g.Expect(bound.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(bound.Reason).To(Equal(playgroundv1alpha1.ReasonNoEligibleNode))
		g.Expect(bound.Message).To(And(
			ContainSubstring("No healthy agent offers the oci backend with network egress on a node matching zone="+zone),
			ContainSubstring("node "+closed+" lacks network egress (its agent runs sandboxes without it: see --network=egress)")))
		ready := conditionOf(got, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready.Reason).To(Equal(playgroundv1alpha1.ReasonNoEligibleNode))
		g.Expect(ready.Message).To(Equal(bound.Message))
		g.Expect(got.Status.Phase).To(Equal(playgroundv1alpha1.SandboxPending))
		g.Expect(got.Spec.NodeName).To(BeEmpty())
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	open := "open-" + suffix
	register(open, map[string][]string{"oci": {"egress", "none"}})
	g.Eventually(func() string { return getSandbox(g, ns, s.Name).Spec.NodeName }, 10*time.Second, 100*time.Millisecond).Should(Equal(open))
}

// registerAgentAs writes reg, renewed now, as an agent's Lease, and
// removes it when the test ends.
func registerAgentAs(t *testing.T, reg agentlease.Registration) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentlease.DefaultNamespace}}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(reg.Node)}}
	if err := reg.Apply(lease, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), lease) })
}

// TestNoEligibleNodeSaysWhatEachNodeLacks holds the words of the message.
func TestNoEligibleNodeSaysWhatEachNodeLacks(t *testing.T) {
	now := time.Now()
	agent := func(node string, backends []string, labels map[string]string, renewed time.Time) agentlease.Registration {
		return agentlease.Registration{Node: node, Backends: backends, Labels: labels, Duration: time.Minute, Renewed: renewed,
			Networks: map[string][]string{"oci": {"none"}}}
	}
	agents := map[string]agentlease.Registration{
		"a": agent("a", []string{"oci"}, map[string]string{"zone": "x"}, now),
		"b": agent("b", []string{"vm"}, map[string]string{"zone": "y"}, now),
		"c": agent("c", []string{"oci"}, map[string]string{"zone": "y"}, now.Add(-time.Hour)),
	}
	sbx := &playgroundv1alpha1.Sandbox{Spec: playgroundv1alpha1.SandboxSpec{SandboxTemplate: playgroundv1alpha1.SandboxTemplate{
		Isolation:    playgroundv1alpha1.IsolationGVisor,
		NodeSelector: map[string]string{"zone": "y"},
		Network:      playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress},
	}}}
	r := &SandboxReconciler{}
	node, _, why := r.choose(context.Background(), sbx, agents, now)
	if node != "" {
		t.Fatalf("bound to %s", node)
	}
	const want = "No healthy agent offers the oci backend with gvisor isolation with network egress on a node matching zone=y (3 agents registered, 2 healthy): " +
		"node a lacks gvisor isolation (its agent has no runsc: see --runsc) and network egress (its agent runs sandboxes without it: see --network=egress) and the labels zone=y; " +
		"node b lacks the oci backend (it offers vm); " +
		"node c: its agent is not renewing its registration; the sandbox waits for one"
	if why != want {
		t.Fatalf("the message is\n  %s\nwant\n  %s", why, want)
	}
	if _, _, why := r.choose(context.Background(), sbx, nil, now); !strings.Contains(why, "no agent is registered (0 agents registered, 0 healthy") {
		t.Fatalf("without agents: %s", why)
	}
}

// TestAgentHealth: when an agent's registration expires its sandboxes turn
// not Ready with the reason, stay bound, and new sandboxes go elsewhere;
// when it renews they recover.
func TestAgentHealth(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	zone := "health-" + rand.String(5)
	flaky := "flaky-" + rand.String(5)
	const short = 3 * time.Second
	registerAgent(t, flaky, map[string]string{"zone": zone}, short)
	s := newSandbox(t, ns, "on-flaky", map[string]string{"zone": zone})
	g.Eventually(func() string { return getSandbox(g, ns, s.Name).Spec.NodeName }, 10*time.Second, 100*time.Millisecond).Should(Equal(flaky))
	markProvisioned(g, s)
	g.Eventually(func() metav1.ConditionStatus {
		return conditionOf(getSandbox(g, ns, s.Name), playgroundv1alpha1.ReadyCondition).Status
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(metav1.ConditionTrue))
	g.Expect(getSandbox(g, ns, s.Name).Status.Phase).To(Equal(playgroundv1alpha1.SandboxDetached), "provisioned with no session open")

	// The agent stops renewing.
	g.Eventually(func(g Gomega) {
		ready := conditionOf(getSandbox(g, ns, s.Name), playgroundv1alpha1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(playgroundv1alpha1.ReasonAgentUnavailable))
		g.Expect(ready.Message).To(ContainSubstring(flaky))
	}, short+10*time.Second, 200*time.Millisecond).Should(Succeed())

	other := "healthy-" + rand.String(5)
	registerAgent(t, other, map[string]string{"zone": zone}, time.Hour)
	s2 := newSandbox(t, ns, "new-one", map[string]string{"zone": zone})
	g.Eventually(func() string { return getSandbox(g, ns, s2.Name).Spec.NodeName }, 10*time.Second, 100*time.Millisecond).Should(Equal(other))
	g.Expect(getSandbox(g, ns, s.Name).Spec.NodeName).To(Equal(flaky), "a sandbox never moves: its storage is on its node")

	// It comes back.
	renewAgent(t, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(flaky)}}, flaky, map[string]string{"zone": zone}, time.Hour)
	g.Eventually(func() metav1.ConditionStatus {
		return conditionOf(getSandbox(g, ns, s.Name), playgroundv1alpha1.ReadyCondition).Status
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(metav1.ConditionTrue))
}

// boundSandbox creates the Sandbox name in ns with a healthy node of its
// own to go to, and waits until the binder bound it there.
func boundSandbox(t *testing.T, ns, name string) (*playgroundv1alpha1.Sandbox, string) {
	t.Helper()
	zone := name + "-" + rand.String(5)
	node := name + "-node-" + rand.String(5)
	registerAgent(t, node, map[string]string{"zone": zone}, time.Hour)
	s := newSandbox(t, ns, name, map[string]string{"zone": zone})
	g := NewWithT(t)
	g.Eventually(func() string { return getSandbox(g, ns, s.Name).Spec.NodeName }, 10*time.Second, 100*time.Millisecond).Should(Equal(node))
	return s, node
}

// TestSettledStatusIsNotRewritten: a sandbox whose status already says what
// the binder would write costs the API server nothing when it comes back
// (every event of it, and every lease period, brings it back).
func TestSettledStatusIsNotRewritten(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	s, _ := boundSandbox(t, ns, "settled")
	markProvisioned(g, s)
	g.Eventually(func() playgroundv1alpha1.SandboxPhase { return getSandbox(g, ns, s.Name).Status.Phase },
		10*time.Second, 100*time.Millisecond).Should(Equal(playgroundv1alpha1.SandboxDetached))

	// The same reconciler as the manager's, over a client that counts the
	// status writes.
	direct, err := client.NewWithWatch(restConfig, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int32
	counting := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			writes.Add(1)
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	r := &SandboxReconciler{Client: counting, Options: Options{}}
	r.Options.defaults()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("reconciling a settled sandbox wrote its status %d times", n)
	}

	// A real change is still written: the agent's report turns to a failure.
	g.Eventually(func() error {
		cur := getSandbox(g, ns, s.Name)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.ProvisionedCondition, Status: metav1.ConditionFalse,
			Reason: playgroundv1alpha1.ReasonBackendFailed, Message: "disk full", ObservedGeneration: cur.Generation})
		return k8sClient.Status().Update(context.Background(), cur, client.FieldOwner(playgroundv1alpha1.AgentFieldOwner))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
	g.Eventually(func() string {
		return conditionOf(getSandbox(g, ns, s.Name), playgroundv1alpha1.ReadyCondition).Reason
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(playgroundv1alpha1.ReasonBackendFailed))
}

// statusFields is the status apply entry of manager in s's managed fields,
// as JSON ("" when there is none).
func statusFields(s *playgroundv1alpha1.Sandbox, manager string) string {
	for _, m := range s.ManagedFields {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == "status" {
			return m.FieldsV1.GetRawString()
		}
	}
	return ""
}

// TestStatusOwners: the binder and the node's agent each apply their own
// part of a Sandbox's status under their own field manager, and neither's
// write removes the other's fields; a condition the binder drops
// (Reconciling, once Ready) goes, the agent's stay.
func TestStatusOwners(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	s, node := boundSandbox(t, ns, "owned")
	id := "sbx-0123456789abcdef0123"

	// The agent's report, as the agent applies it.
	report := func(ok bool, reason string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		cur := getSandbox(g, ns, s.Name)
		ac := playgroundv1alpha1ac.Sandbox(s.Name, ns).WithStatus(playgroundv1alpha1ac.SandboxStatus().
			WithSandboxID(id).WithEndpoint("https://" + node + ":8443").WithOpenHandles(1).
			WithConditions(metav1ac.Condition().WithType(playgroundv1alpha1.ProvisionedCondition).WithStatus(status).
				WithReason(reason).WithMessage(reason).WithObservedGeneration(cur.Generation).WithLastTransitionTime(metav1.Now())))
		g.Expect(k8sClient.Status().Apply(context.Background(), ac, client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)).To(Succeed())
	}
	report(true, playgroundv1alpha1.ReasonProvisioned)
	g.Eventually(func(g Gomega) {
		cur := getSandbox(g, ns, s.Name)
		g.Expect(cur.Status.Phase).To(Equal(playgroundv1alpha1.SandboxReady))
		g.Expect(conditionOf(cur, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(meta.FindStatusCondition(cur.Status.Conditions, playgroundv1alpha1.ReconcilingCondition)).To(BeNil())
		g.Expect(conditionOf(cur, playgroundv1alpha1.ProvisionedCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cur.Status.SandboxID).To(Equal(id))
		// The default isolation, as the Isolation column shows it.
		g.Expect(cur.Status.Isolation).To(Equal(playgroundv1alpha1.IsolationContainer))
		g.Expect(statusFields(cur, playgroundv1alpha1.SandboxControllerFieldOwner)).To(And(
			ContainSubstring(`"f:phase"`), ContainSubstring(`"f:observedGeneration"`), ContainSubstring(`"f:isolation"`),
			ContainSubstring(`"k:{\"type\":\"Bound\"}"`), ContainSubstring(`"k:{\"type\":\"NodeHealthy\"}"`), ContainSubstring(`"k:{\"type\":\"Ready\"}"`),
			Not(ContainSubstring(`Provisioned`)), Not(ContainSubstring(`"f:sandboxID"`)), Not(ContainSubstring(`"f:openHandles"`))))
		g.Expect(statusFields(cur, playgroundv1alpha1.AgentFieldOwner)).To(And(
			ContainSubstring(`"k:{\"type\":\"Provisioned\"}"`), ContainSubstring(`"f:sandboxID"`),
			Not(ContainSubstring(`Ready`)), Not(ContainSubstring(`"f:phase"`))))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	// A failure: the binder says it is working on it...
	report(false, playgroundv1alpha1.ReasonBackendFailed)
	g.Eventually(func(g Gomega) {
		cur := getSandbox(g, ns, s.Name)
		g.Expect(cur.Status.Phase).To(Equal(playgroundv1alpha1.SandboxFailed))
		g.Expect(conditionOf(cur, playgroundv1alpha1.ReconcilingCondition).Reason).To(Equal(playgroundv1alpha1.ReasonBackendFailed))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	// ...and, provisioned again, removes its Reconciling and nothing of the agent's.
	report(true, playgroundv1alpha1.ReasonProvisioned)
	g.Eventually(func(g Gomega) {
		cur := getSandbox(g, ns, s.Name)
		g.Expect(cur.Status.Phase).To(Equal(playgroundv1alpha1.SandboxReady))
		g.Expect(meta.FindStatusCondition(cur.Status.Conditions, playgroundv1alpha1.ReconcilingCondition)).To(BeNil())
		g.Expect(conditionOf(cur, playgroundv1alpha1.ProvisionedCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cur.Status.OpenHandles).To(Equal(int32(1)))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// TestTenantSandboxIsCreatedBound: a Tenant's Sandbox is created already
// bound to an eligible node, with its agent's finalizer: no write of its
// own for either (a binding patch would have moved its generation). Its
// status is left to its agent's first report (none comes here): the
// manager writes its part when the grace for it ends. A second one, whose
// agent says it is starting it (a slow start), gets nothing of the
// manager's past that grace, until the agent's outcome.
func TestTenantSandboxIsCreatedBound(t *testing.T) {
	ns := newNamespace(t)
	suffix := rand.String(5)
	node := "at-create-" + suffix
	registerAgent(t, node, map[string]string{"pool": "at-create-" + suffix}, time.Hour)
	for _, name := range []string{"bound-early", "bound-slow"} {
		newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{Sandbox: playgroundv1alpha1.SandboxTemplate{
			NodeSelector: map[string]string{"pool": "at-create-" + suffix},
		}})
	}
	eventually(t, func(g Gomega) {
		s := getSandbox(g, ns, "bound-early")
		g.Expect(s.Spec.NodeName).To(Equal(node))
		g.Expect(s.Finalizers).To(ContainElement(playgroundv1alpha1.SandboxFinalizer))
		g.Expect(s.Generation).To(Equal(int64(1)), "the node came with the create, not a patch after it")
	})
	eventually(t, func(g Gomega) {
		g.Expect(getSandbox(g, ns, "bound-slow").Spec.NodeName).To(Equal(node))
	})
	agentSays := func(g Gomega, name string, status metav1.ConditionStatus, reason string) {
		ac := playgroundv1alpha1ac.Sandbox(name, ns).WithStatus(playgroundv1alpha1ac.SandboxStatus().
			WithConditions(metav1ac.Condition().WithType(playgroundv1alpha1.ProvisionedCondition).WithStatus(status).
				WithReason(reason).WithMessage(reason).WithObservedGeneration(1).WithLastTransitionTime(metav1.Now())))
		g.Expect(k8sClient.Status().Apply(context.Background(), ac, client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)).To(Succeed())
	}
	agentSays(NewWithT(t), "bound-slow", metav1.ConditionFalse, playgroundv1alpha1.ReasonProvisioning)
	s := getSandbox(NewWithT(t), ns, "bound-early")
	if age := time.Since(s.CreationTimestamp.Time); age < firstReportGrace-2*time.Second {
		if len(s.Status.Conditions) > 0 || s.Status.Phase != "" {
			t.Errorf("the manager wrote the status of a Sandbox created bound %v after its creation, before its agent reported: %+v", age, s.Status)
		}
	}
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		s := getSandbox(g, ns, "bound-early")
		g.Expect(conditionOf(s, playgroundv1alpha1.BoundCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(conditionOf(s, playgroundv1alpha1.ReadyCondition).Reason).To(Equal(playgroundv1alpha1.ReasonProvisioning))
		g.Expect(s.Status.Phase).To(Equal(playgroundv1alpha1.SandboxPending))
	}, firstReportGrace+20*time.Second, 200*time.Millisecond).Should(Succeed(), "no status once the agent's grace ended")

	// The grace has ended for both: the slow one still holds the agent's
	// notice alone...
	// bound-slow may have been created a moment after bound-early (their
	// tenants' passes run apart), and creation times count in whole
	// seconds: wait out its own grace, a second more for the rounding.
	slow := getSandbox(g, ns, "bound-slow")
	time.Sleep(time.Until(slow.CreationTimestamp.Add(firstReportGrace + time.Second)))
	g.Consistently(func(g Gomega) {
		s := getSandbox(g, ns, "bound-slow")
		g.Expect(s.Status.Phase).To(BeEmpty(), "the manager wrote its part over the agent's progress")
		g.Expect(meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeNil())
		g.Expect(series(g, gather(g)["playground_sandboxes"], "phase")[string(playgroundv1alpha1.SandboxProvisioning)]).
			To(BeNumerically(">=", 1), "a start only its agent reports is counted as Provisioning")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	// ...until the agent's outcome, which the manager follows with Ready.
	agentSays(g, "bound-slow", metav1.ConditionTrue, playgroundv1alpha1.ReasonProvisioned)
	g.Eventually(func(g Gomega) {
		s := getSandbox(g, ns, "bound-slow")
		g.Expect(conditionOf(s, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(conditionOf(s, playgroundv1alpha1.BoundCondition).Status).To(Equal(metav1.ConditionTrue))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// TestTenantBurstSpreads: the Sandboxes of Tenants applied at once, each
// created already bound, spread evenly over the eligible nodes: a create in
// flight counts on its node while the next binding is chosen.
func TestTenantBurstSpreads(t *testing.T) {
	ns := newNamespace(t)
	suffix := rand.String(5)
	pool := map[string]string{"pool": "burst-" + suffix}
	nodes := []string{"burst-a-" + suffix, "burst-b-" + suffix}
	for _, n := range nodes {
		registerAgent(t, n, pool, time.Hour)
	}
	const tenants = 12
	var wg sync.WaitGroup
	errs := make([]error, tenants)
	for i := range tenants {
		wg.Go(func() {
			errs[i] = k8sClient.Create(context.Background(), &playgroundv1alpha1.Tenant{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("t%d", i)},
				Spec:       playgroundv1alpha1.TenantSpec{Sandbox: playgroundv1alpha1.SandboxTemplate{NodeSelector: pool}},
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		var list playgroundv1alpha1.SandboxList
		g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(tenants))
		loads := map[string]int{}
		for _, s := range list.Items {
			g.Expect(s.Generation).To(Equal(int64(1)), "sandbox %s was bound by a patch, not at its creation", s.Name)
			loads[s.Spec.NodeName]++
		}
		g.Expect(loads).To(Equal(map[string]int{nodes[0]: tenants / 2, nodes[1]: tenants / 2}), "uneven spread")
	})
}
