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

package adversarial

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/internal/scheme"
)

// agentUser is the agents' ServiceAccount, as config/rbac binds it.
var agentUser = rbactest.ServiceAccountUser("agent")

// asAgentOf is a client acting as the agent ServiceAccount with its
// generated RBAC, its token bound to node (none: bound to no node).
func asAgentOf(t *testing.T, node string) client.Client {
	t.Helper()
	cfg, err := rbactest.Grant(context.Background(), k8s, cp.Config, "agent", agentUser, rbactest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if node != "" {
		cfg = rbactest.OnNode(cfg, node)
	}
	return newClient(t, cfg)
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refused says whether err is the node restriction's refusal (not RBAC's,
// not a conflict): a 403 carrying the policy's name.
func refused(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "playground-agent-node-restriction")
}

func lease(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15)}}
}

// TestAgentActsOnlyAsItsNode: root on node A holds the token of A's agent.
// With it, it tries to point node B's tenants at itself (B's Lease, the
// status of B's Sandboxes), to take over the manager's leader-election
// Lease, to rewrite what the manager decides, and to write with a token
// bound to no node. The installation's admission policy refuses each; what
// A's agent does for its own node still works.
func TestAgentActsOnlyAsItsNode(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	a, unbound := asAgentOf(t, "node-a"), asAgentOf(t, "")
	ns := "noderestriction"
	g.Expect(cp.CreateNamespaces(ctx, ns)).To(Succeed())

	// What exists: B's registration, the manager's Lease, a Sandbox on each
	// node, a mapping of a tenant on B, a bundle that B built.
	g.Expect(k8s.Create(ctx, lease(agentlease.Name("node-b"), "node-b"))).To(Succeed())
	g.Expect(k8s.Create(ctx, lease(controllers.LeaderElectionID, "manager-0"))).To(Succeed())
	for _, s := range []struct{ name, node string }{{"on-a", "node-a"}, {"on-b", "node-b"}} {
		sbx := &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name},
			Spec: playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: s.name}, NodeName: s.node}}
		g.Expect(k8s.Create(ctx, sbx)).To(Succeed())
	}

	// The policy is in force a moment after the API server starts: wait
	// for its refusal of the first attack, B's Lease.
	g.Eventually(func() error {
		var l coordinationv1.Lease
		if err := a.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name("node-b")}, &l); err != nil {
			return err
		}
		l.Annotations = map[string]string{agentlease.AnnotationEndpoint: "https://a.example:9443"}
		return a.Update(ctx, &l)
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Satisfy(refused), "A rewrites B's Lease")

	t.Run("leases", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(a.Create(ctx, lease(agentlease.Name("node-c"), "node-c"))).To(Satisfy(refused), "A registers as node C")
		g.Expect(a.Create(ctx, lease(agentlease.Name("node-a"), "node-b"))).To(Satisfy(refused), "A's Lease, held by B")
		var mgr coordinationv1.Lease
		g.Expect(a.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: controllers.LeaderElectionID}, &mgr)).To(Succeed())
		mgr.Spec.HolderIdentity = ptr.To("node-a")
		g.Expect(a.Update(ctx, &mgr)).To(Satisfy(refused), "A takes the manager's leader-election Lease")

		own := lease(agentlease.Name("node-a"), "node-a")
		g.Expect(a.Create(ctx, own)).To(Succeed(), "A registers itself")
		own.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		g.Expect(a.Update(ctx, own)).To(Succeed(), "A renews its Lease")
		g.Expect(unbound.Update(ctx, own)).To(Satisfy(refused), "a token bound to no node")
	})

	t.Run("real token", func(t *testing.T) {
		// The same with a real token bound to a pod on node A (no
		// impersonation): the API server records the node itself.
		g := NewWithT(t)
		cs := kubernetes.NewForConfigOrDie(cp.Config)
		g.Expect(k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})).To(Or(Succeed(), Satisfy(apierrors.IsAlreadyExists)))
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: "playground-agent"}}
		g.Expect(k8s.Create(ctx, sa)).To(Or(Succeed(), Satisfy(apierrors.IsAlreadyExists)))
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: "agent-on-a"},
			Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: sa.Name, Containers: []corev1.Container{{Name: "agent", Image: "playground"}}}}
		g.Expect(k8s.Create(ctx, pod)).To(Succeed())
		tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		cfg := rest.AnonymousClientConfig(cp.Config)
		cfg.BearerToken = tr.Status.Token
		realClient := newClient(t, cfg)

		var l coordinationv1.Lease
		g.Expect(realClient.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name("node-b")}, &l)).To(Succeed())
		l.Spec.HolderIdentity = ptr.To("node-a")
		g.Expect(realClient.Update(ctx, &l)).To(Satisfy(refused), "B's Lease, with A's pod's token")
		g.Expect(realClient.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name("node-a")}, &l)).To(Succeed())
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		g.Expect(realClient.Update(ctx, &l)).To(Succeed(), "A's own Lease, with A's pod's token")
	})

	t.Run("sandboxes", func(t *testing.T) {
		g := NewWithT(t)
		steer := func(c client.Client, name string) error {
			return c.Status().Apply(ctx, playgroundv1alpha1ac.Sandbox(name, ns).WithStatus(playgroundv1alpha1ac.SandboxStatus().
				WithEndpoint("https://a.example:9443").WithSandboxID("sbx-00000000000000000000")),
				client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)
		}
		g.Expect(steer(a, "on-b")).To(Satisfy(refused), "A points B's Sandbox at itself")
		g.Expect(steer(a, "on-a")).To(Succeed(), "A reports its own Sandbox")
		g.Expect(steer(unbound, "on-a")).To(Satisfy(refused), "a token bound to no node")

		finalize := func(name string, mutate func(*playgroundv1alpha1.Sandbox)) error {
			var sbx playgroundv1alpha1.Sandbox
			if err := a.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sbx); err != nil {
				return err
			}
			patch := client.MergeFrom(sbx.DeepCopy())
			mutate(&sbx)
			return a.Patch(ctx, &sbx, patch)
		}
		addFinalizer := func(s *playgroundv1alpha1.Sandbox) {
			s.Finalizers = append(s.Finalizers, playgroundv1alpha1.SandboxFinalizer)
		}
		g.Expect(finalize("on-b", addFinalizer)).To(Satisfy(refused), "A holds B's Sandbox")
		g.Expect(finalize("on-a", addFinalizer)).To(Succeed(), "A's finalizer on its own Sandbox")
		g.Expect(finalize("on-a", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Suspended = true })).To(Satisfy(refused), "A changes a Sandbox's spec")
		g.Expect(finalize("on-a", func(s *playgroundv1alpha1.Sandbox) { s.Labels = map[string]string{"x": "y"} })).To(Satisfy(refused), "A labels a Sandbox")
		g.Expect(finalize("on-a", func(s *playgroundv1alpha1.Sandbox) {
			s.Finalizers = append(s.Finalizers, "example.com/other")
		})).To(Satisfy(refused), "A adds another finalizer")
		g.Expect(finalize("on-a", func(s *playgroundv1alpha1.Sandbox) { s.Finalizers = nil })).To(Succeed(), "A removes its finalizer")
	})

	t.Run("worker mappings", func(t *testing.T) {
		g := NewWithT(t)
		for _, m := range []struct{ name, node string }{{"wm-a", "node-a"}, {"wm-b", "node-b"}} {
			wm := &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.name},
				Spec: playgroundv1alpha1.WorkerMappingSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: m.name},
					Destination: playgroundv1alpha1.WorkerDestination{Sandbox: &playgroundv1alpha1.SandboxProcessDestination{Command: []string{"w"}, Port: 8765}}}}
			g.Expect(k8s.Create(ctx, wm)).To(Succeed())
			g.Expect(k8s.Status().Apply(ctx, playgroundv1alpha1ac.WorkerMapping(m.name, ns).WithStatus(playgroundv1alpha1ac.WorkerMappingStatus().
				WithNodeName(m.node).WithEndpoint("sandbox://sbx-1:8765/mcp")),
				client.FieldOwner(playgroundv1alpha1.WorkerMappingControllerFieldOwner), client.ForceOwnership)).To(Succeed())
		}
		report := func(c client.Client, name string, status *playgroundv1alpha1ac.WorkerMappingStatusApplyConfiguration) error {
			return c.Status().Apply(ctx, playgroundv1alpha1ac.WorkerMapping(name, ns).WithStatus(status),
				client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)
		}
		worker := func() *playgroundv1alpha1ac.WorkerMappingStatusApplyConfiguration {
			return playgroundv1alpha1ac.WorkerMappingStatus().WithWorker(playgroundv1alpha1ac.WorkerProcessStatus().WithRunning(true))
		}
		g.Expect(report(a, "wm-b", worker())).To(Satisfy(refused), "A reports B's worker")
		g.Expect(report(a, "wm-a", worker())).To(Succeed(), "A reports its own worker")
		g.Expect(report(a, "wm-a", worker().WithReadyEndpoints("http://10.1.2.3:80/mcp"))).To(Satisfy(refused), "A publishes endpoints")
		g.Expect(report(a, "wm-a", worker().WithNodeName("node-a").WithEndpoint("sandbox://sbx-2:1/mcp"))).To(Satisfy(refused), "A rewrites the endpoint")
	})

	t.Run("snapshots", func(t *testing.T) {
		g := NewWithT(t)
		for _, m := range []struct{ name, node string }{{"snap-a", "node-a"}, {"snap-b", "node-b"}} {
			snap := &playgroundv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.name},
				Spec: playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "on-" + m.node[len("node-"):]}}}
			g.Expect(k8s.Create(ctx, snap)).To(Succeed())
			// What the manager writes: where the snapshot is kept.
			g.Expect(k8s.Status().Apply(ctx, playgroundv1alpha1ac.SandboxSnapshot(m.name, ns).WithStatus(playgroundv1alpha1ac.SandboxSnapshotStatus().
				WithNodeName(m.node).WithSandboxID("sbx-"+m.node).WithBackend(playgroundv1alpha1.BackendOCI)),
				client.FieldOwner(playgroundv1alpha1.SnapshotControllerFieldOwner), client.ForceOwnership)).To(Succeed())
		}
		report := func(c client.Client, name string, status *playgroundv1alpha1ac.SandboxSnapshotStatusApplyConfiguration) error {
			return c.Status().Apply(ctx, playgroundv1alpha1ac.SandboxSnapshot(name, ns).WithStatus(status),
				client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)
		}
		taken := func() *playgroundv1alpha1ac.SandboxSnapshotStatusApplyConfiguration {
			return playgroundv1alpha1ac.SandboxSnapshotStatus().WithSnapshotID("uid").WithSizeBytes(1)
		}
		g.Expect(report(a, "snap-b", taken())).To(Satisfy(refused), "A reports B's snapshot")
		g.Expect(report(a, "snap-a", taken())).To(Succeed(), "A reports its own snapshot")
		g.Expect(report(a, "snap-a", taken().WithNodeName("node-b"))).To(Satisfy(refused), "A moves its snapshot to B, where B's forks would find it")
		g.Expect(report(a, "snap-a", taken().WithSandboxID("sbx-node-b"))).To(Satisfy(refused), "A says its snapshot is of B's sandbox")
		hold := func(name string, mutate func(*playgroundv1alpha1.SandboxSnapshot)) error {
			var snap playgroundv1alpha1.SandboxSnapshot
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &snap)).To(Succeed())
			patch := client.MergeFrom(snap.DeepCopy())
			mutate(&snap)
			return a.Patch(ctx, &snap, patch)
		}
		finalizer := func(s *playgroundv1alpha1.SandboxSnapshot) {
			s.Finalizers = append(s.Finalizers, playgroundv1alpha1.SnapshotFinalizer)
		}
		g.Expect(hold("snap-b", finalizer)).To(Satisfy(refused), "A holds B's snapshot")
		g.Expect(hold("snap-a", func(s *playgroundv1alpha1.SandboxSnapshot) {
			s.Spec.ExpireAfter = &metav1.Duration{Duration: time.Hour}
		})).To(Satisfy(refused), "A changes a snapshot's spec")
		g.Expect(hold("snap-a", finalizer)).To(Succeed(), "A holds its own snapshot until it frees its disk")
	})

	t.Run("faculty bundles", func(t *testing.T) {
		g := NewWithT(t)
		fb := &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"},
			Spec: playgroundv1alpha1.FacultyBundleSpec{Source: playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: "tools"}},
				Binaries: []string{"tool"}}}
		g.Expect(k8s.Create(ctx, fb)).To(Succeed())
		entry := func(node, fp string) *playgroundv1alpha1ac.BundleNodeStatusApplyConfiguration {
			return playgroundv1alpha1ac.BundleNodeStatus().WithNodeName(node).WithFingerprint(fp).WithReady(true)
		}
		apply := func(c client.Client, owner string, status *playgroundv1alpha1ac.FacultyBundleStatusApplyConfiguration) error {
			return c.Status().Apply(ctx, playgroundv1alpha1ac.FacultyBundle(fb.Name, ns).WithStatus(status), client.FieldOwner(owner), client.ForceOwnership)
		}
		g.Expect(apply(k8s, playgroundv1alpha1.AgentNodeFieldOwner("node-b"), playgroundv1alpha1ac.FacultyBundleStatus().WithNodes(entry("node-b", "fp-b")))).To(Succeed())
		g.Expect(apply(a, playgroundv1alpha1.AgentNodeFieldOwner("node-a"), playgroundv1alpha1ac.FacultyBundleStatus().WithNodes(entry("node-a", "fp-a")))).To(Succeed(), "A reports its build")
		g.Expect(apply(a, playgroundv1alpha1.AgentNodeFieldOwner("node-b"), playgroundv1alpha1ac.FacultyBundleStatus().WithNodes(entry("node-b", "evil")))).To(Satisfy(refused), "A rewrites B's build")
		g.Expect(apply(a, playgroundv1alpha1.AgentNodeFieldOwner("node-a"), playgroundv1alpha1ac.FacultyBundleStatus().WithNodes(entry("node-a", "fp-a")).WithReadyNodes(9))).To(Satisfy(refused), "A rewrites the summary")
	})
}
