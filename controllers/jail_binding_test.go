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
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

// TestJailWaitsForAnAgentThatOffersIt: in a cluster of Linux agents (oci
// only), a Sandbox of backend jail is never bound, stays Pending and says
// that no agent offers the backend; it is bound to the first agent whose
// Lease offers jail (a FreeBSD node's agent, docs/freebsd.md).
func TestJailWaitsForAnAgentThatOffersIt(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	zone := "jail-" + rand.String(5)
	registerAgent(t, "linux-a-"+rand.String(5), map[string]string{"zone": zone}, time.Hour)
	registerAgent(t, "linux-b-"+rand.String(5), map[string]string{"zone": zone}, time.Hour)
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jailed"},
		Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "jailed"},
			SandboxTemplate: playgroundv1alpha1.SandboxTemplate{
				Backend:      playgroundv1alpha1.BackendJail,
				NodeSelector: map[string]string{"zone": zone},
			},
		},
	}
	g.Expect(k8sClient.Create(context.Background(), s)).To(Succeed())

	check := func(g Gomega) {
		got := getSandbox(g, ns, s.Name)
		bound := conditionOf(got, playgroundv1alpha1.BoundCondition)
		g.Expect(bound.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(bound.Reason).To(Equal(playgroundv1alpha1.ReasonNoEligibleNode))
		g.Expect(bound.Message).To(ContainSubstring("No healthy agent offers the jail backend"))
		g.Expect(bound.Message).To(ContainSubstring("2 healthy"))
		g.Expect(conditionOf(got, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(got.Status.Phase).To(Equal(playgroundv1alpha1.SandboxPending))
		g.Expect(got.Spec.NodeName).To(BeEmpty())
	}
	g.Eventually(check, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	// It stays so: the binder does not give up and bind it anyway.
	g.Consistently(check, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	node := "freebsd-" + rand.String(5)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(node)}}
	reg := agentlease.Registration{Node: node, Endpoint: "https://" + node + ":9443", Backends: []string{"jail"},
		Labels: map[string]string{"zone": zone}, Duration: time.Hour}
	g.Expect(reg.Apply(lease, time.Now())).To(Succeed())
	g.Expect(k8sClient.Create(context.Background(), lease)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), lease) })
	g.Eventually(func() string { return getSandbox(g, ns, s.Name).Spec.NodeName }, 10*time.Second, 100*time.Millisecond).Should(Equal(node))
}
