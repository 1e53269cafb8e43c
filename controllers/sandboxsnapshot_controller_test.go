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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// TestSnapshotBindingAndExpiry: a snapshot of a sandbox not provisioned
// yet waits, saying so; once the sandbox is, the manager records its node
// and ID (what its agent needs to take it). The phase follows the agent's
// Ready. A snapshot past its expireAfter is deleted; one within it is kept.
func TestSnapshotBindingAndExpiry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sbx := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src"},
		Spec:       playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "src"}, NodeName: "node-snap"},
	}
	g.Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
	snapshot := func(name string, expire time.Duration) *playgroundv1alpha1.SandboxSnapshot {
		s := &playgroundv1alpha1.SandboxSnapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: playgroundv1alpha1.SandboxSnapshotSpec{
				SandboxRef:  playgroundv1alpha1.LocalObjectReference{Name: "src"},
				ExpireAfter: &metav1.Duration{Duration: expire},
			},
		}
		g.Expect(k8sClient.Create(ctx, s)).To(Succeed())
		return s
	}
	old, young := snapshot("old", time.Minute), snapshot("young", time.Hour)
	get := func(g Gomega, s *playgroundv1alpha1.SandboxSnapshot) *playgroundv1alpha1.SandboxSnapshot {
		var cur playgroundv1alpha1.SandboxSnapshot
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &cur)).To(Succeed())
		return &cur
	}
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(get(g, old).Status.Conditions, playgroundv1alpha1.BoundCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonSandboxNotProvisioned))
		g.Expect(get(g, old).Status.Phase).To(Equal(playgroundv1alpha1.SnapshotPending))
	}, eventuallyTimeout, eventuallyPolling).Should(Succeed())

	// The agent provisions the sandbox.
	g.Expect(k8sClient.Status().Apply(ctx, playgroundv1alpha1ac.Sandbox("src", ns).WithStatus(playgroundv1alpha1ac.SandboxStatus().WithSandboxID("sbx-snap")),
		client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)).To(Succeed())
	for _, s := range []*playgroundv1alpha1.SandboxSnapshot{old, young} {
		g.Eventually(func(g Gomega) {
			cur := get(g, s)
			g.Expect(cur.Status.NodeName).To(Equal("node-snap"))
			g.Expect(cur.Status.SandboxID).To(Equal("sbx-snap"))
			g.Expect(cur.Status.Backend).To(Equal(playgroundv1alpha1.BackendOCI))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, playgroundv1alpha1.BoundCondition)).To(BeTrue())
		}, eventuallyTimeout, eventuallyPolling).Should(Succeed())
	}

	// The agent took both: one two minutes ago, one now.
	take := func(s *playgroundv1alpha1.SandboxSnapshot, at time.Time) {
		g.Expect(k8sClient.Status().Apply(ctx, playgroundv1alpha1ac.SandboxSnapshot(s.Name, ns).WithStatus(playgroundv1alpha1ac.SandboxSnapshotStatus().
			WithSnapshotID(string(get(g, s).UID)).WithSizeBytes(4096).WithTakenAt(metav1.NewTime(at)).
			WithConditions(metav1ac.Condition().WithType(playgroundv1alpha1.ReadyCondition).WithStatus(metav1.ConditionTrue).
				WithReason(playgroundv1alpha1.ReasonTaken).WithMessage("taken").WithLastTransitionTime(metav1.Now()))),
			client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)).To(Succeed())
	}
	take(young, time.Now())
	g.Eventually(func() playgroundv1alpha1.SnapshotPhase { return get(g, young).Status.Phase }, eventuallyTimeout, eventuallyPolling).Should(Equal(playgroundv1alpha1.SnapshotReady))
	take(old, time.Now().Add(-2*time.Minute))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), &playgroundv1alpha1.SandboxSnapshot{}))
	}, eventuallyTimeout, eventuallyPolling).Should(BeTrue(), "a snapshot past its expireAfter is deleted")
	g.Consistently(func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(young), &playgroundv1alpha1.SandboxSnapshot{})
	},
		2*time.Second, eventuallyPolling).Should(Succeed(), "a snapshot within its expireAfter is kept")
}
