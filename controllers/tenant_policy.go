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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// The Tenant reconciler's part of the ceilings the platform owns
// (TenantPolicy). The ceilings of one sandbox are the installation's
// admission policy's (config/admission/tenant-policy.yaml), which refuses
// a write over them; the reconciler only reports a Tenant that a ceiling
// tightened after its write leaves over it, by asking the same admission
// policy (a dry-run create of a copy of the Tenant), so that each rule has
// one definition. The ceilings of a namespace, which no admission policy
// can see, it checks itself when it creates or grows a Sandbox.

// policyProbePrefix names the dry-run copies of Tenants (never stored).
const policyProbePrefix = "policy-check-"

// policySettle is how long after a write of the policies a Tenant's
// check is made again: the API server's admission policy reads the
// policies through an informer of its own, which may trail the manager's
// for a moment.
const policySettle = 5 * time.Second

// policyCheck is the last check of one Tenant: what it checked (the
// Tenant's generation and the policies' names and generations), what it
// found (the PolicyCompliant condition: the Tenant's status in the cache
// may trail the write of it), and whether it was made once the policies
// had settled (settleAt).
type policyCheck struct {
	uid        types.UID
	generation int64
	policies   string
	found      metav1.Condition
	settleAt   time.Time
	settled    bool
}

// lastWritten is when p was last written, but for its status: the latest
// time of its managedFields' entries of the object itself (its creation
// when there are none). The API server's clock; a skew of the manager's
// shortens or lengthens policySettle by as much.
func lastWritten(p *playgroundv1alpha1.TenantPolicy) time.Time {
	at := p.CreationTimestamp.Time
	for _, f := range p.ManagedFields {
		if f.Subresource == "" && f.Time != nil && f.Time.After(at) {
			at = f.Time.Time
		}
	}
	return at
}

// policyChecks remembers each Tenant's last check, so that a pass that
// changes neither the Tenant's spec nor the policies costs no API call.
// One entry per Tenant whose namespace a policy selects, removed with it.
type policyChecks struct {
	mu sync.Mutex
	m  map[types.NamespacedName]policyCheck
}

func (c *policyChecks) get(key types.NamespacedName) (policyCheck, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pc, ok := c.m[key]
	return pc, ok
}

func (c *policyChecks) set(key types.NamespacedName, pc policyCheck) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]policyCheck{}
	}
	c.m[key] = pc
}

func (c *policyChecks) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// policiesKey identifies what a check of these policies checked against:
// their names and specs (generations; a write of their status changes
// neither).
func policiesKey(ps []playgroundv1alpha1.TenantPolicy) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s@%d ", p.Name, p.Generation)
	}
	return b.String()
}

func policyNames(ps []playgroundv1alpha1.TenantPolicy) string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if len(names) == 1 {
		return "TenantPolicy " + names[0]
	}
	return "TenantPolicies " + strings.Join(names, ", ")
}

// reconcilePolicy reports in PolicyCompliant whether the Tenant, as it
// is, is within the TenantPolicies that select its namespace; a Tenant
// that none selects has no such condition.
func (r *TenantReconciler) reconcilePolicy(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	key := client.ObjectKeyFromObject(t)
	selected, unsure, err := policiesOf(ctx, r.Client, t.Namespace)
	if err != nil {
		r.setConditionf(t, playgroundv1alpha1.PolicyCompliantCondition, metav1.ConditionUnknown, playgroundv1alpha1.ReasonPolicyCheckFailed,
			"Finding the TenantPolicies of namespace %s: %v", t.Namespace, err)
		return err
	}
	if unsure {
		// A policy whose selector the manager cannot evaluate may
		// select the namespace: ask the API server, which evaluates it.
		var all playgroundv1alpha1.TenantPolicyList
		if err := r.List(ctx, &all); err != nil {
			return fmt.Errorf("listing tenant policies: %w", err)
		}
		selected = all.Items
	}
	if len(selected) == 0 {
		meta.RemoveStatusCondition(&t.Status.Conditions, playgroundv1alpha1.PolicyCompliantCondition)
		r.policyChecks.forget(key)
		return nil
	}
	for _, p := range selected {
		// Without an admission policy that enforces it, a dry run would
		// pass whatever the Tenant asks for.
		if c := meta.FindStatusCondition(p.Status.Conditions, playgroundv1alpha1.ReadyCondition); c != nil && c.Reason == ReasonNotEnforced {
			r.policyChecks.forget(key)
			r.setConditionf(t, playgroundv1alpha1.PolicyCompliantCondition, metav1.ConditionUnknown, playgroundv1alpha1.ReasonPolicyCheckFailed,
				"TenantPolicy %s is enforced by no admission policy (its Ready condition says NotEnforced), so the tenant cannot be checked against it", p.Name)
			return nil
		}
	}

	now := time.Now()
	policies := policiesKey(selected)
	prev, seen := r.policyChecks.get(key)
	seen = seen && prev.uid == t.UID
	same := seen && prev.generation == t.Generation && prev.policies == policies
	if same {
		meta.SetStatusCondition(&t.Status.Conditions, prev.found)
		if prev.settled {
			return nil
		}
		if now.Before(prev.settleAt) {
			return pgreconcile.Recheck(prev.settleAt.Sub(now), "checking tenant %s against %s again once they settle", klog.KObj(t), policyNames(selected))
		}
	}
	// A check made within policySettle of a write of the policies (or of
	// a change of them this manager saw: one deleted) is made again once
	// they settled; a check after a change of the Tenant alone (whose
	// write the admission policy checked) or at the manager's start is
	// final.
	var settleAt time.Time
	for i := range selected {
		if at := lastWritten(&selected[i]).Add(policySettle); at.After(settleAt) {
			settleAt = at
		}
	}
	if seen && prev.policies != policies && settleAt.Before(now.Add(policySettle)) {
		settleAt = now.Add(policySettle)
	}
	settled := !now.Before(settleAt)

	denied, err := r.dryRunCopy(ctx, t)
	switch {
	case err != nil:
		policyChecksTotal.WithLabelValues(policyCheckFailed).Inc()
	case denied == "":
		policyChecksTotal.WithLabelValues(policyCheckWithin).Inc()
	default:
		policyChecksTotal.WithLabelValues(policyCheckExceeded).Inc()
	}
	if err != nil {
		// Not remembered: the next pass checks again.
		r.policyChecks.forget(key)
		r.setConditionf(t, playgroundv1alpha1.PolicyCompliantCondition, metav1.ConditionUnknown, playgroundv1alpha1.ReasonPolicyCheckFailed,
			"Checking the tenant against %s (a dry-run create of a copy): %v", policyNames(selected), err)
		return fmt.Errorf("checking tenant %s against %s: %w", klog.KObj(t), policyNames(selected), err)
	}
	if denied == "" {
		r.setConditionf(t, playgroundv1alpha1.PolicyCompliantCondition, metav1.ConditionTrue, playgroundv1alpha1.ReasonWithinPolicy,
			"Within %s", policyNames(selected))
	} else {
		if !seen || prev.found.Reason != playgroundv1alpha1.ReasonPolicyExceeded {
			ctrl.LoggerFrom(ctx).Info("The tenant is over a ceiling of its namespace's TenantPolicy", "denied", denied)
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonPolicyExceeded, "CheckPolicy", "%s", denied)
		}
		r.setConditionf(t, playgroundv1alpha1.PolicyCompliantCondition, metav1.ConditionFalse, playgroundv1alpha1.ReasonPolicyExceeded,
			"%s. The sandbox runs on as it is, but a change of those fields is refused until they are within the ceiling: lower them, or ask the platform team to raise it", strings.TrimSuffix(denied, "."))
	}
	found := *meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.PolicyCompliantCondition)
	found.LastTransitionTime = metav1.Time{}
	r.policyChecks.set(key, policyCheck{uid: t.UID, generation: t.Generation, policies: policies, found: found, settleAt: settleAt, settled: settled})
	if !settled {
		return pgreconcile.Recheck(settleAt.Sub(now), "checking tenant %s against %s again once they settle", klog.KObj(t), policyNames(selected))
	}
	return nil
}

// dryRunCopy asks the API server whether the Tenant, created as it is now,
// would be admitted: it returns the admission policy's refusal, or "" when
// the TenantPolicies let it through. Only the installation's admission
// policy's refusal counts: its messages begin with "TenantPolicy <name>".
// A quota's refusal (ResourceQuota admission comes after the admission
// policies) means they let it through.
func (r *TenantReconciler) dryRunCopy(ctx context.Context, t *playgroundv1alpha1.Tenant) (string, error) {
	probe := &playgroundv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, GenerateName: policyProbePrefix},
		Spec:       *t.Spec.DeepCopy(),
	}
	err := r.Create(ctx, probe, client.DryRunAll)
	if err == nil {
		return "", nil
	}
	if denied, ok := policyDenial(err); ok {
		return denied, nil
	}
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
		return "", nil
	}
	return "", err
}

// policyDenial is the message of a refusal by the installation's
// admission policy of TenantPolicies.
func policyDenial(err error) (string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsForbidden(err) {
		return "", false
	}
	_, msg, ok := strings.Cut(status.Status().Message, "denied request: ")
	if !ok || !strings.HasPrefix(msg, "TenantPolicy ") {
		return "", false
	}
	return msg, true
}

// sandboxUse is what one Sandbox's spec asks of its node.
type sandboxUse struct {
	cpu, memory, storage resource.Quantity
}

func useOf(s *playgroundv1alpha1.SandboxSpec) sandboxUse {
	var u sandboxUse
	add := func(to *resource.Quantity, q *resource.Quantity) {
		if q != nil {
			to.Add(*q)
		}
	}
	add(&u.cpu, s.Resources.CPU)
	add(&u.memory, s.Resources.Memory)
	add(&u.storage, s.Storage.Size)
	add(&u.storage, s.Pile.Size)
	return u
}

// hasNamespaceCeilings says whether p bounds what a namespace holds.
func hasNamespaceCeilings(p *playgroundv1alpha1.TenantPolicy) bool {
	n := p.Spec.Namespace
	return n.MaxSandboxes != nil || n.MaxCPU != nil || n.MaxMemory != nil || n.MaxStorage != nil
}

// grows says whether want asks for more of some resource than have (nil:
// a Sandbox to create).
func grows(want, have *playgroundv1alpha1.SandboxSpec) bool {
	if have == nil {
		return true
	}
	w, h := useOf(want), useOf(have)
	return w.cpu.Cmp(h.cpu) > 0 || w.memory.Cmp(h.memory) > 0 || w.storage.Cmp(h.storage) > 0
}

// withinNamespaceCeilings checks that the Sandbox want, created (have
// nil) or grown from have, keeps its namespace within the namespace
// ceilings of every TenantPolicy that selects it. It returns a Stalled
// error naming the policy and the ceiling when it would not. Otherwise it
// returns a func to call once the Sandbox is written: the namespace's
// checks and writes are serialised from the list of its Sandboxes (read
// from the API server, not the cache, which may not hold the write of
// the check before) to the write, so that two Tenants created at once
// cannot both take the last of a ceiling.
func (r *TenantReconciler) withinNamespaceCeilings(ctx context.Context, want *playgroundv1alpha1.Sandbox, have *playgroundv1alpha1.SandboxSpec) (func(), error) {
	noop := func() {}
	if !grows(&want.Spec, have) {
		return noop, nil
	}
	selected, _, err := policiesOf(ctx, r.Client, want.Namespace)
	if err != nil {
		return noop, err
	}
	var bounding []playgroundv1alpha1.TenantPolicy
	for i := range selected {
		if hasNamespaceCeilings(&selected[i]) {
			bounding = append(bounding, selected[i])
		}
	}
	if len(bounding) == 0 {
		return noop, nil
	}
	unlock := r.namespaceLocks.Lock(want.Namespace)
	var list playgroundv1alpha1.SandboxList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(want.Namespace)); err != nil {
		unlock()
		return noop, fmt.Errorf("listing the Sandboxes of namespace %s: %w", want.Namespace, err)
	}
	var others sandboxUse
	count := int32(0)
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name == want.Name {
			continue
		}
		count++
		u := useOf(&s.Spec)
		others.cpu.Add(u.cpu)
		others.memory.Add(u.memory)
		others.storage.Add(u.storage)
	}
	this := useOf(&want.Spec)
	for i := range bounding {
		if why := namespaceCeilingPassed(&bounding[i], want.Namespace, count, others, this, have == nil); why != "" {
			unlock()
			return noop, pgreconcile.Stall(playgroundv1alpha1.ReasonNamespaceCeilingExceeded, "%s", why)
		}
	}
	return unlock, nil
}

// namespaceCeilingPassed says which of p's namespace ceilings the sandbox
// of use this would pass, beside count others of use others (creating:
// it would be one more), or "".
func namespaceCeilingPassed(p *playgroundv1alpha1.TenantPolicy, ns string, count int32, others, this sandboxUse, creating bool) string {
	n := p.Spec.Namespace
	if creating && n.MaxSandboxes != nil && count >= *n.MaxSandboxes {
		return fmt.Sprintf("TenantPolicy %s allows namespace %s at most %d sandboxes, and it holds %d: no Sandbox is created for this tenant until another goes (delete a Tenant), or the platform team raises the ceiling",
			p.Name, ns, *n.MaxSandboxes, count)
	}
	for _, c := range []struct {
		what          string
		max           *resource.Quantity
		others, asked resource.Quantity
		field         string
	}{
		{"CPU", n.MaxCPU, others.cpu, this.cpu, "spec.sandbox.resources.cpu"},
		{"memory", n.MaxMemory, others.memory, this.memory, "spec.sandbox.resources.memory"},
		{"storage", n.MaxStorage, others.storage, this.storage, "spec.sandbox.storage.size and spec.pile.size"},
	} {
		if c.max == nil {
			continue
		}
		total := c.others.DeepCopy()
		total.Add(c.asked)
		if total.Cmp(*c.max) <= 0 {
			continue
		}
		left := c.max.DeepCopy()
		left.Sub(c.others)
		room := "none is left: lower another tenant's first"
		if left.Sign() > 0 {
			room = "ask for " + left.String() + " or less in " + c.field
		}
		what := "no Sandbox is created for this tenant"
		if !creating {
			what = "its Sandbox keeps the resources and storage it has"
		}
		return fmt.Sprintf("TenantPolicy %s allows the sandboxes of namespace %s at most %s of %s together; its %d other sandboxes ask for %s and this one for %s, so %s: %s, or have the platform team raise the ceiling",
			p.Name, ns, c.max.String(), c.what, count, c.others.String(), c.asked.String(), what, room)
	}
	return ""
}

// keepUse makes want ask for what have has of resources and storage (the
// pile's reclaim policy apart): a change the namespace's ceilings refused.
func keepUse(want *playgroundv1alpha1.Sandbox, have *playgroundv1alpha1.Sandbox) {
	reclaim := want.Spec.Pile.ReclaimPolicy
	want.Spec.Resources = *have.Spec.Resources.DeepCopy()
	want.Spec.Storage = *have.Spec.Storage.DeepCopy()
	want.Spec.Pile.PileStorage = *have.Spec.Pile.PileStorage.DeepCopy()
	want.Spec.Pile.ReclaimPolicy = reclaim
}

// tenantsOfPolicyChange brings back, when a TenantPolicy changes, the
// Tenants of the namespaces it selects, and those that report a check of
// a policy (which may no longer select them).
func (r *TenantReconciler) tenantsOfPolicyChange(ctx context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*playgroundv1alpha1.TenantPolicy)
	if !ok {
		return nil
	}
	var nss = namespaceListMeta()
	if err := r.List(ctx, nss); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing namespaces for a change of a TenantPolicy", "policy", p.Name)
		return nil
	}
	selected := map[string]bool{}
	for _, ns := range nss.Items {
		if s, ok := policySelects(p, ns.Labels); s || !ok {
			selected[ns.Name] = true
		}
	}
	var tenants playgroundv1alpha1.TenantList
	if err := r.List(ctx, &tenants); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing tenants for a change of a TenantPolicy", "policy", p.Name)
		return nil
	}
	var out []reconcile.Request
	for _, t := range tenants.Items {
		if selected[t.Namespace] || reportsPolicy(&t) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return out
}

// reportsPolicy says whether a Tenant's status reports a TenantPolicy.
func reportsPolicy(t *playgroundv1alpha1.Tenant) bool {
	if meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.PolicyCompliantCondition) != nil {
		return true
	}
	return waitsForNamespaceRoom(t)
}

// waitsForNamespaceRoom says whether a Tenant's sandbox was refused, or
// refused to grow, by a ceiling of its namespace.
func waitsForNamespaceRoom(t *playgroundv1alpha1.Tenant) bool {
	c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.StalledCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == playgroundv1alpha1.ReasonNamespaceCeilingExceeded
}

// tenantsOfNamespace brings back the Tenants of a namespace whose labels
// changed: the policies that select it may have changed.
func (r *TenantReconciler) tenantsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var tenants playgroundv1alpha1.TenantList
	if err := r.List(ctx, &tenants, client.InNamespace(o.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing tenants for a change of a namespace's labels", "namespace", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(tenants.Items))
	for _, t := range tenants.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
	}
	return out
}

// tenantsWaitingForRoom brings back, when a Sandbox of a namespace goes or
// its spec changes, the Tenants of the namespace that a namespace ceiling
// held back.
func (r *TenantReconciler) tenantsWaitingForRoom(ctx context.Context, o client.Object) []reconcile.Request {
	var tenants playgroundv1alpha1.TenantList
	if err := r.List(ctx, &tenants, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing tenants for a change of a Sandbox", "sandbox", klog.KObj(o))
		return nil
	}
	var out []reconcile.Request
	for _, t := range tenants.Items {
		if waitsForNamespaceRoom(&t) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return out
}

// sandboxSpecOrGone passes a Sandbox's deletion and the changes of its
// spec: what frees or takes room in its namespace. (Status writes, the
// most frequent, do not.)
var sandboxSpecOrGone = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
	},
}
