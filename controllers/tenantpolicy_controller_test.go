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
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// labelNamespace sets a label on ns, as a platform team does to have its
// TenantPolicies select it (ns's own name as the value: no other test's
// namespace has it).
func labelNamespace(t *testing.T, ns, key string, set bool) {
	t.Helper()
	eventually(t, func(g Gomega) {
		var n corev1.Namespace
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: ns}, &n)).To(Succeed())
		if set {
			n.Labels[key] = ns
		} else {
			delete(n.Labels, key)
		}
		g.Expect(k8sClient.Update(context.Background(), &n)).To(Succeed())
	})
}

// policyFor is a TenantPolicy that selects only ns (by the label
// labelNamespace sets), with the ceilings mutate gives it.
func policyFor(t *testing.T, ns string, mutate func(*playgroundv1alpha1.TenantPolicySpec)) *playgroundv1alpha1.TenantPolicy {
	t.Helper()
	p := &playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ceilings-" + ns}, Spec: playgroundv1alpha1.TenantPolicySpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"ceilings.test/ns": ns}},
	}}
	mutate(&p.Spec)
	if err := k8sClient.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
	return p
}

func updatePolicy(t *testing.T, name string, mutate func(*playgroundv1alpha1.TenantPolicySpec)) {
	t.Helper()
	eventually(t, func(g Gomega) {
		var p playgroundv1alpha1.TenantPolicy
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &p)).To(Succeed())
		mutate(&p.Spec)
		g.Expect(k8sClient.Update(context.Background(), &p)).To(Succeed())
	})
}

func tenantWithCPU(ns, name, cpu string) *playgroundv1alpha1.Tenant {
	return &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: playgroundv1alpha1.TenantSpec{
		Sandbox: playgroundv1alpha1.SandboxTemplate{Resources: playgroundv1alpha1.SandboxResources{CPU: ptr.To(resource.MustParse(cpu))}},
	}}
}

// TestTightenedPolicyIsReported: a platform team tightens the CPU ceiling
// of its TenantPolicy below what a Tenant, admitted before, asks for. The
// manager reports the Tenant over it in its PolicyCompliant condition,
// with the admission policy's own words (which policy, which field, which
// ceiling) and a Warning Event, and its sandbox is left running as it is.
// Raising the ceiling again, deleting the policy or unlabelling the
// namespace clears the report; a namespace no policy selects has none,
// and the policy says how many namespaces it selects. The API cost is
// counted: no dry run for a Tenant that no policy selects, two for a
// policy created or changed (at once, and once the API server's view of it
// settled), none for passes that change nothing.
func TestTightenedPolicyIsReported(t *testing.T) {
	ctx := context.Background()
	checks := func() float64 {
		var n float64
		for _, r := range []string{policyCheckWithin, policyCheckExceeded, policyCheckFailed} {
			var m dto.Metric
			if err := policyChecksTotal.WithLabelValues(r).Write(&m); err != nil {
				t.Fatal(err)
			}
			n += m.GetCounter().GetValue()
		}
		return n
	}
	// Quiet first: what earlier tests left to check is checked.
	last := checks()
	eventually(t, func(g Gomega) {
		now := checks()
		stable := now == last
		last = now
		g.Expect(stable).To(BeTrue())
	})
	NewWithT(t).Consistently(checks).WithTimeout(policySettle + time.Second).WithPolling(eventuallyPolling).Should(Equal(last))
	before := checks()
	ns := newNamespace(t)
	const label = "ceilings.test/ns"
	labelNamespace(t, ns, label, true)
	g := NewWithT(t)
	g.Expect(k8sClient.Create(ctx, tenantWithCPU(ns, "busy", "2"))).To(Succeed())
	other := newNamespace(t)
	g.Expect(k8sClient.Create(ctx, tenantWithCPU(other, "elsewhere", "2"))).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(getTenant(g, ns, "busy").Status.SandboxRef).NotTo(BeNil())
	})

	g.Expect(checks()).To(Equal(before), "checks of Tenants that no policy selects")
	p := policyFor(t, ns, func(s *playgroundv1alpha1.TenantPolicySpec) {
		s.Sandbox.Max.CPU = ptr.To(resource.MustParse("1"))
	})
	eventually(t, func(g Gomega) {
		c := tenantCondition(getTenant(g, ns, "busy"), playgroundv1alpha1.PolicyCompliantCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%+v", c)
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonPolicyExceeded))
		g.Expect(c.Message).To(ContainSubstring("TenantPolicy " + p.Name + ": spec.sandbox.resources.cpu is 2, over its ceiling of 1 per sandbox"))
		g.Expect(c.Message).To(ContainSubstring("The sandbox runs on as it is"))
		g.Expect(tenantEvents(g, ns, "busy")).To(HaveKey(playgroundv1alpha1.ReasonPolicyExceeded))
		var got playgroundv1alpha1.TenantPolicy
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Name}, &got)).To(Succeed())
		g.Expect(got.Status.Namespaces).To(Equal(int32(1)))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		ready := meta.FindStatusCondition(got.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(playgroundv1alpha1.ReasonEnforced))
		g.Expect(ready.Message).To(ContainSubstring("Enforced at admission by ValidatingAdmissionPolicy playground-tenant-policy on the Tenants and Sandboxes of 1 namespaces: " + ns))
	})
	// The API cost: a check of the Tenant when the policy appears, one
	// more once it settled, and no other until something changes,
	// whatever else brings the Tenant back.
	eventually(t, func(g Gomega) { g.Expect(checks()).To(Equal(before + 2)) })
	updateTenant(t, ns, "busy", func(tn *playgroundv1alpha1.Tenant) { tn.Labels = map[string]string{"touched": "1"} })
	consistently(t, policySettle+time.Second, func(g Gomega) {
		g.Expect(checks()).To(Equal(before+2), "dry runs for one Tenant and a new policy")
	})
	// The Sandbox is the Tenant's as it was: the report changes nothing.
	var sbx playgroundv1alpha1.Sandbox
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "busy"}, &sbx)).To(Succeed())
	g.Expect(sbx.Spec.Resources.CPU.String()).To(Equal("2"))
	consistently(t, time.Second, func(g Gomega) {
		g.Expect(meta.FindStatusCondition(getTenant(g, other, "elsewhere").Status.Conditions, playgroundv1alpha1.PolicyCompliantCondition)).To(BeNil(),
			"a Tenant of a namespace no policy selects")
	})

	before = checks()
	updatePolicy(t, p.Name, func(s *playgroundv1alpha1.TenantPolicySpec) { s.Sandbox.Max.CPU = ptr.To(resource.MustParse("2")) })
	eventually(t, func(g Gomega) {
		c := tenantCondition(getTenant(g, ns, "busy"), playgroundv1alpha1.PolicyCompliantCondition)
		g.Expect([]any{c.Status, c.Reason, c.Message}).To(Equal([]any{metav1.ConditionTrue, playgroundv1alpha1.ReasonWithinPolicy, "Within TenantPolicy " + p.Name}))
	})
	// A change of the policy: a check at once and one once it settled.
	eventually(t, func(g Gomega) { g.Expect(checks()).To(Equal(before + 2)) })
	consistently(t, policySettle+time.Second, func(g Gomega) { g.Expect(checks()).To(Equal(before + 2)) })

	// Tightened again, then the namespace unselected: the report goes.
	updatePolicy(t, p.Name, func(s *playgroundv1alpha1.TenantPolicySpec) { s.Sandbox.Max.CPU = ptr.To(resource.MustParse("500m")) })
	eventually(t, func(g Gomega) {
		g.Expect(tenantCondition(getTenant(g, ns, "busy"), playgroundv1alpha1.PolicyCompliantCondition).Reason).To(Equal(playgroundv1alpha1.ReasonPolicyExceeded))
	})
	labelNamespace(t, ns, label, false)
	eventually(t, func(g Gomega) {
		g.Expect(meta.FindStatusCondition(getTenant(g, ns, "busy").Status.Conditions, playgroundv1alpha1.PolicyCompliantCondition)).To(BeNil())
		var got playgroundv1alpha1.TenantPolicy
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Name}, &got)).To(Succeed())
		g.Expect(got.Status.Namespaces).To(BeZero())
	})
	labelNamespace(t, ns, label, true)
	eventually(t, func(g Gomega) {
		g.Expect(tenantCondition(getTenant(g, ns, "busy"), playgroundv1alpha1.PolicyCompliantCondition).Reason).To(Equal(playgroundv1alpha1.ReasonPolicyExceeded))
	})
	g.Expect(k8sClient.Delete(ctx, p)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(meta.FindStatusCondition(getTenant(g, ns, "busy").Status.Conditions, playgroundv1alpha1.PolicyCompliantCondition)).To(BeNil())
	})
}

// TestNamespaceCeilings: the ceilings of what a namespace's sandboxes
// hold together, which no admission policy can see, are the manager's:
// past the count of sandboxes, a Tenant gets no Sandbox, says why (which
// policy, which ceiling, what to do) and gets one as soon as another
// goes; past the CPU of the namespace, a Tenant's Sandbox keeps what it
// has. Tenants created at once do not take the same room twice.
func TestNamespaceCeilings(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	labelNamespace(t, ns, "ceilings.test/ns", true)
	g := NewWithT(t)
	p := policyFor(t, ns, func(s *playgroundv1alpha1.TenantPolicySpec) {
		s.Namespace = playgroundv1alpha1.NamespaceCeilings{MaxSandboxes: ptr.To[int32](2), MaxCPU: ptr.To(resource.MustParse("3"))}
	})
	eventually(t, func(g Gomega) {
		var got playgroundv1alpha1.TenantPolicy
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Name}, &got)).To(Succeed())
		g.Expect(got.Status.Namespaces).To(Equal(int32(1)))
	})

	// Five Tenants at once: two Sandboxes.
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Expect(k8sClient.Create(ctx, tenantWithCPU(ns, fmt.Sprintf("t%d", i), "1"))).To(Succeed())
		}()
	}
	wg.Wait()
	var held []string
	eventually(t, func(g Gomega) {
		held = nil
		for i := range 5 {
			tn := getTenant(g, ns, fmt.Sprintf("t%d", i))
			if tn.Status.SandboxRef != nil {
				held = append(held, tn.Name)
				continue
			}
			stalled := tenantCondition(tn, playgroundv1alpha1.StalledCondition)
			g.Expect(stalled.Reason).To(Equal(playgroundv1alpha1.ReasonNamespaceCeilingExceeded), "tenant %s: %+v", tn.Name, tn.Status.Conditions)
			g.Expect(stalled.Message).To(ContainSubstring("TenantPolicy " + p.Name + " allows namespace " + ns + " at most 2 sandboxes, and it holds 2"))
			sr := tenantCondition(tn, playgroundv1alpha1.SandboxReadyCondition)
			g.Expect([]any{sr.Status, sr.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonNamespaceCeilingExceeded}))
		}
		g.Expect(held).To(HaveLen(2))
	})
	var list playgroundv1alpha1.SandboxList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2), "the Sandboxes of the namespace")

	// One goes: a waiting Tenant takes its place, and only one does.
	g.Expect(k8sClient.Delete(ctx, tenantWithCPU(ns, held[0], "1"))).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: held[0]}, &playgroundv1alpha1.Tenant{})).To(Satisfy(apierrors.IsNotFound))
		var list playgroundv1alpha1.SandboxList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		names := []string{}
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		g.Expect(names).To(HaveLen(2))
		g.Expect(names).NotTo(ContainElement(held[0]))
	})

	// CPU: the two hold 1 each of 3; one asks for 2.5, which would make
	// 3.5: its Sandbox keeps 1, and it says why. 2 fits.
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	grower := list.Items[0].Name
	updateTenant(t, ns, grower, func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Sandbox.Resources.CPU = ptr.To(resource.MustParse("2500m"))
	})
	eventually(t, func(g Gomega) {
		stalled := tenantCondition(getTenant(g, ns, grower), playgroundv1alpha1.StalledCondition)
		g.Expect(stalled.Reason).To(Equal(playgroundv1alpha1.ReasonNamespaceCeilingExceeded))
		g.Expect(stalled.Message).To(ContainSubstring("at most 3 of CPU together; its 1 other sandboxes ask for 1 and this one for 2500m"))
		g.Expect(stalled.Message).To(ContainSubstring("ask for 2 or less in spec.sandbox.resources.cpu"))
	})
	var sbx playgroundv1alpha1.Sandbox
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: grower}, &sbx)).To(Succeed())
	g.Expect(sbx.Spec.Resources.CPU.String()).To(Equal("1"), "the Sandbox keeps its CPU")
	updateTenant(t, ns, grower, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Resources.CPU = ptr.To(resource.MustParse("2")) })
	eventually(t, func(g Gomega) {
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: grower}, &sbx)).To(Succeed())
		g.Expect(sbx.Spec.Resources.CPU.String()).To(Equal("2"))
		g.Expect(tenantCondition(getTenant(g, ns, grower), playgroundv1alpha1.StalledCondition).Status).NotTo(Equal(metav1.ConditionTrue))
	})

	// The ceiling raised: the Tenants still waiting get their Sandboxes.
	updatePolicy(t, p.Name, func(s *playgroundv1alpha1.TenantPolicySpec) {
		s.Namespace.MaxSandboxes, s.Namespace.MaxCPU = ptr.To[int32](10), ptr.To(resource.MustParse("10"))
	})
	eventually(t, func(g Gomega) {
		var list playgroundv1alpha1.SandboxList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(4))
	})
}

// TestEnforcerOf: a TenantPolicy is enforced only by a ValidatingAdmission
// Policy of paramKind TenantPolicy with a binding that denies and whose
// paramRef takes the policy.
func TestEnforcerOf(t *testing.T) {
	vap := func(name, apiVersion, kind string) admissionregistrationv1.ValidatingAdmissionPolicy {
		v := admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if kind != "" {
			v.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: apiVersion, Kind: kind}
		}
		return v
	}
	binding := func(policy string, ref *admissionregistrationv1.ParamRef, actions ...admissionregistrationv1.ValidationAction) admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		return admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ParamRef: ref, ValidationActions: actions}}
	}
	all := &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}}
	deny := admissionregistrationv1.Deny
	ours := vap("playground-tenant-policy", "playground.dev/v1alpha1", "TenantPolicy")
	p := &playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "strict", Labels: map[string]string{"tier": "gold"}}}
	for _, tc := range []struct {
		name     string
		vaps     []admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
		want     string
	}{
		{"the installation's", []admissionregistrationv1.ValidatingAdmissionPolicy{ours}, []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding(ours.Name, all, deny)}, ours.Name},
		{"no admission policy", nil, nil, ""},
		{"unbound", []admissionregistrationv1.ValidatingAdmissionPolicy{ours}, nil, ""},
		{"bound to warn only", []admissionregistrationv1.ValidatingAdmissionPolicy{ours}, []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding(ours.Name, all, admissionregistrationv1.Warn)}, ""},
		{"bound without parameters", []admissionregistrationv1.ValidatingAdmissionPolicy{ours}, []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding(ours.Name, nil, deny)}, ""},
		{"bound to other policies", []admissionregistrationv1.ValidatingAdmissionPolicy{ours}, []admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			binding(ours.Name, &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}}}, deny),
			binding(ours.Name, &admissionregistrationv1.ParamRef{Name: "lax"}, deny)}, ""},
		{"bound to it by name", []admissionregistrationv1.ValidatingAdmissionPolicy{ours}, []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding(ours.Name, &admissionregistrationv1.ParamRef{Name: "strict"}, deny)}, ours.Name},
		{"of another paramKind", []admissionregistrationv1.ValidatingAdmissionPolicy{vap("x", "example.com/v1", "TenantPolicy"), vap("y", "", "")},
			[]admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("x", all, deny), binding("y", all, deny)}, ""},
	} {
		if got := enforcerOf(tc.vaps, tc.bindings, p); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUnenforcedPolicyIsSaid: without the installation's admission policy
// bound, a TenantPolicy refuses nothing; it says so (Ready False,
// NotEnforced), and the Tenants it selects say they cannot be checked
// rather than that they are within it. With the binding back, both are
// as before.
func TestUnenforcedPolicyIsSaid(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	labelNamespace(t, ns, "ceilings.test/ns", true)
	g := NewWithT(t)
	g.Expect(k8sClient.Create(ctx, tenantWithCPU(ns, "busy", "2"))).To(Succeed())
	p := policyFor(t, ns, func(s *playgroundv1alpha1.TenantPolicySpec) { s.Sandbox.Max.CPU = ptr.To(resource.MustParse("4")) })
	eventually(t, func(g Gomega) {
		g.Expect(tenantCondition(getTenant(g, ns, "busy"), playgroundv1alpha1.PolicyCompliantCondition).Reason).To(Equal(playgroundv1alpha1.ReasonWithinPolicy))
	})

	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "playground-tenant-policy"}, &binding)).To(Succeed())
	g.Expect(k8sClient.Delete(ctx, &binding)).To(Succeed())
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		again := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: binding.Name}, Spec: binding.Spec}
		if err := k8sClient.Create(ctx, again); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("restoring the binding: %v", err)
		}
	}
	t.Cleanup(restore)

	eventually(t, func(g Gomega) {
		var got playgroundv1alpha1.TenantPolicy
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Name}, &got)).To(Succeed())
		ready := meta.FindStatusCondition(got.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect([]any{ready.Status, ready.Reason}).To(Equal([]any{metav1.ConditionFalse, ReasonNotEnforced}))
		g.Expect(ready.Message).To(ContainSubstring("apply config/admission/tenant-policy.yaml"))
		c := tenantCondition(getTenant(g, ns, "busy"), playgroundv1alpha1.PolicyCompliantCondition)
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionUnknown, playgroundv1alpha1.ReasonPolicyCheckFailed}))
		g.Expect(c.Message).To(ContainSubstring("TenantPolicy " + p.Name + " is enforced by no admission policy"))
	})

	restore()
	eventually(t, func(g Gomega) {
		var got playgroundv1alpha1.TenantPolicy
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Name}, &got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeTrue())
		g.Expect(tenantCondition(getTenant(g, ns, "busy"), playgroundv1alpha1.PolicyCompliantCondition).Reason).To(Equal(playgroundv1alpha1.ReasonWithinPolicy))
		// In force again at the API server.
		err := k8sClient.Create(ctx, tenantWithCPU(ns, "greedy", "8"), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})
}
