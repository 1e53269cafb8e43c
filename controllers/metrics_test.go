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
	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// gather reads controller-runtime's registry, which the manager's metrics
// server serves, as a scrape would.
func gather(g Gomega) map[string]*dto.MetricFamily {
	fams, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// series returns the family's values by the value of one label.
func series(g Gomega, f *dto.MetricFamily, label string) map[string]float64 {
	g.Expect(f).NotTo(BeNil())
	out := map[string]float64{}
	for _, m := range f.Metric {
		v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
		for _, l := range m.Label {
			if l.GetName() == label {
				out[l.GetValue()] += v
			}
		}
	}
	return out
}

// sandboxesByPhase counts the Sandboxes of the API server by phase, as
// playground_sandboxes should.
func sandboxesByPhase(g Gomega) map[string]float64 {
	var list playgroundv1alpha1.SandboxList
	g.Expect(k8sClient.List(context.Background(), &list)).To(Succeed())
	out := map[string]float64{}
	for _, p := range sandboxPhases {
		out[p] = 0
	}
	for _, s := range list.Items {
		p := string(s.Status.Phase)
		if c := meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ProvisionedCondition); p == "" &&
			c != nil && c.Status == metav1.ConditionFalse && c.Reason == playgroundv1alpha1.ReasonProvisioning {
			p = string(playgroundv1alpha1.SandboxProvisioning) // only the agent has reported
		}
		if p == "" {
			p = PhaseUnknown
		}
		out[p]++
	}
	return out
}

// TestSandboxPhaseMetric: playground_sandboxes counts every Sandbox of the
// cluster under its phase, and follows one through its life: Pending
// while no node fits, Detached once bound and provisioned, gone once
// deleted.
func TestSandboxPhaseMetric(t *testing.T) {
	ns := newNamespace(t)
	zone := "metrics-" + rand.String(5)
	s := newSandbox(t, ns, "counted", map[string]string{"zone": zone})
	matchesCluster := func(phase playgroundv1alpha1.SandboxPhase) func(g Gomega) {
		return func(g Gomega) {
			g.Expect(getSandbox(g, ns, s.Name).Status.Phase).To(Equal(phase))
			want := sandboxesByPhase(g)
			g.Expect(series(g, gather(g)["playground_sandboxes"], "phase")).To(Equal(want))
			g.Expect(want[string(phase)]).To(BeNumerically(">=", 1))
		}
	}
	eventually(t, matchesCluster(playgroundv1alpha1.SandboxPending), "no node fits: Pending")

	registerAgent(t, "metrics-node-"+rand.String(5), map[string]string{"zone": zone}, time.Hour)
	eventually(t, func(g Gomega) { g.Expect(getSandbox(g, ns, s.Name).Spec.NodeName).NotTo(BeEmpty()) })
	markProvisioned(NewWithT(t), s)
	eventually(t, matchesCluster(playgroundv1alpha1.SandboxDetached), "provisioned, no session: Detached")

	if err := k8sClient.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		var list playgroundv1alpha1.SandboxList
		g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
		g.Expect(series(g, gather(g)["playground_sandboxes"], "phase")).To(Equal(sandboxesByPhase(g)))
	}, "deleted: no longer counted")
}

// TestReconcileErrorsMetric: a reconcile that fails shows in
// controller-runtime's controller_runtime_reconcile_errors_total for its
// controller. An admission policy forbids the tenant's Sandbox, so every
// pass of the tenant controller fails.
func TestReconcileErrorsMetric(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	errorsOf := func(g Gomega) map[string]float64 {
		return series(g, gather(g)["controller_runtime_reconcile_errors_total"], "controller")
	}
	g := NewWithT(t)
	before := errorsOf(g)
	g.Expect(before).To(HaveKey("tenant"))
	g.Expect(before).To(HaveKey("sandbox"))

	name := "no-sandboxes-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{playgroundv1alpha1.GroupVersion.Group},
						APIVersions: []string{"*"}, Resources: []string{"sandboxes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "sandboxes are forbidden here"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		g.Expect(k8sClient.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
	// The policy is in force once a (dry-run) Sandbox is refused.
	eventually(t, func(g Gomega) {
		probe := &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
			Spec: playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "probe"}}}
		err := k8sClient.Create(ctx, probe, client.DryRunAll)
		g.Expect(err).To(MatchError(ContainSubstring("sandboxes are forbidden here")))
	}, "the admission policy is in force")

	tenant := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"}}
	g.Expect(k8sClient.Create(ctx, tenant)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tenant) })
	eventually(t, func(g Gomega) {
		c := tenantCondition(getTenant(g, ns, "refused"), playgroundv1alpha1.SandboxReadyCondition)
		g.Expect(c.Reason).To(Equal(ReasonSandboxError))
		g.Expect(c.Message).To(ContainSubstring("sandboxes are forbidden here"))
		g.Expect(errorsOf(g)["tenant"]).To(BeNumerically(">", before["tenant"]))
	}, "the failing passes are counted")
}
