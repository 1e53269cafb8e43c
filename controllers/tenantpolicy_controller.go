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
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// Reasons of a TenantPolicy's Ready condition.
const (
	// ReasonInvalidSelector (Stalled): the policy's namespaceSelector is
	// not a label selector the manager can evaluate (a key or value that
	// is no label's); the admission policy still compares it as written.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonNotEnforced (Stalled): no ValidatingAdmissionPolicy of
	// paramKind TenantPolicy is bound, with Deny, to this policy: nothing
	// refuses a write over its ceilings.
	ReasonNotEnforced = "NotEnforced"
	// ReasonInvalidSigningKey (Stalled): a key of the policy's
	// spec.sandbox.imageSignatures is not a public key the manager can
	// read; no image is verified by it.
	ReasonInvalidSigningKey = "InvalidSigningKey"
)

// TenantPolicyReconciler reports what the manager observes of each
// TenantPolicy: how many namespaces it selects. The policy's ceilings are
// enforced by the installation's admission policy (config/admission/
// tenant-policy.yaml), not here; the Tenant reconciler reports the Tenants
// over them.
type TenantPolicyReconciler struct {
	client.Client
}

// tenantPolicyConditions are the condition types of a TenantPolicy's
// status, all this reconciler's.
var tenantPolicyConditions = []string{playgroundv1alpha1.ReadyCondition, playgroundv1alpha1.ReconcilingCondition, playgroundv1alpha1.StalledCondition}

// namespaceListMeta lists Namespaces as metadata: their labels are all the
// manager reads of them, and its cache keeps no more.
func namespaceListMeta() *metav1.PartialObjectMetadataList {
	return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
}

// The manager reads TenantPolicies, the namespaces' labels and the
// admission policies that enforce TenantPolicies, and writes the policies'
// status; Tenants' policy checks are dry-run creates of a copy (the Tenant
// reconciler), which RBAC calls create.
// +kubebuilder:rbac:groups=playground.dev,resources=tenantpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=tenantpolicies/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch

// Reconcile reports one TenantPolicy.
func (r *TenantPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p playgroundv1alpha1.TenantPolicy
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	conds := slices.Clone(p.Status.Conditions)
	count := int32(0)
	var err error
	sel, serr := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector)
	if serr != nil {
		err = pgreconcile.Stall(ReasonInvalidSelector,
			"spec.namespaceSelector is no label selector (%v): the admission policy compares it as written, but the manager cannot tell which namespaces it selects, and does not check their namespace ceilings; fix it", serr)
		pgreconcile.Summarize(&conds, p.Generation, metav1.Condition{}, false, err)
	} else if why := unreadableSigningKeys(&p); why != "" {
		err = pgreconcile.Stall(ReasonInvalidSigningKey,
			"%s: no image is verified by it, so a sandbox that needs it is refused (ImageSignatureInvalid); give the key as cosign.pub holds it (-----BEGIN PUBLIC KEY-----, ECDSA, Ed25519 or RSA)", why)
		pgreconcile.Summarize(&conds, p.Generation, metav1.Condition{}, false, err)
	} else if enforcer, err2 := r.enforcer(ctx, &p); err2 != nil {
		return ctrl.Result{}, err2
	} else if enforcer == "" {
		err = pgreconcile.Stall(ReasonNotEnforced,
			"No ValidatingAdmissionPolicy of paramKind TenantPolicy is bound with Deny to this policy, so nothing refuses a write over its ceilings: apply config/admission/tenant-policy.yaml of the installation (the chart installs it)")
		pgreconcile.Summarize(&conds, p.Generation, metav1.Condition{}, false, err)
	} else {
		var nss metav1.PartialObjectMetadataList
		nss.TypeMeta = namespaceListMeta().TypeMeta
		if lerr := r.List(ctx, &nss); lerr != nil {
			return ctrl.Result{}, fmt.Errorf("listing namespaces: %w", lerr)
		}
		var names []string
		for _, ns := range nss.Items {
			if sel.Matches(labels.Set(ns.Labels)) {
				names = append(names, ns.Name)
			}
		}
		slices.Sort(names)
		count = int32(len(names))
		pgreconcile.Summarize(&conds, p.Generation, metav1.Condition{Status: metav1.ConditionTrue, Reason: playgroundv1alpha1.ReasonEnforced,
			Message: enforcedMessage(enforcer, names)}, false, nil)
	}
	if p.Status.ObservedGeneration == p.Generation && p.Status.Namespaces == count &&
		pgreconcile.ConditionsHold(p.Status.Conditions, conds, tenantPolicyConditions...) {
		return ctrl.Result{}, nil
	}
	ac := playgroundv1alpha1ac.TenantPolicy(p.Name).WithStatus(playgroundv1alpha1ac.TenantPolicyStatus().
		WithObservedGeneration(p.Generation).WithNamespaces(count).
		WithConditions(pgreconcile.ApplyConditions(conds, tenantPolicyConditions...)...))
	if aerr := r.Status().Apply(ctx, ac, client.FieldOwner(playgroundv1alpha1.TenantPolicyFieldOwner), client.ForceOwnership); client.IgnoreNotFound(aerr) != nil {
		return ctrl.Result{}, fmt.Errorf("applying the status of tenant policy %s: %w", klog.KObj(&p), aerr)
	}
	return pgreconcile.Result(err)
}

// enforcedMessage is the Ready message of a policy that the admission
// policy by enforces and that selects names.
func enforcedMessage(by string, names []string) string {
	const shown = 8
	switch {
	case len(names) == 0:
		return fmt.Sprintf("Enforced at admission by ValidatingAdmissionPolicy %s; selects no namespace yet", by)
	case len(names) > shown:
		return fmt.Sprintf("Enforced at admission by ValidatingAdmissionPolicy %s on the Tenants and Sandboxes of %d namespaces: %s and %d more", by, len(names), strings.Join(names[:shown], ", "), len(names)-shown)
	default:
		return fmt.Sprintf("Enforced at admission by ValidatingAdmissionPolicy %s on the Tenants and Sandboxes of %d namespaces: %s", by, len(names), strings.Join(names, ", "))
	}
}

// enforcer names the ValidatingAdmissionPolicy that enforces p, or "".
func (r *TenantPolicyReconciler) enforcer(ctx context.Context, p *playgroundv1alpha1.TenantPolicy) (string, error) {
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := r.List(ctx, &vaps); err != nil {
		return "", fmt.Errorf("listing validating admission policies: %w", err)
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := r.List(ctx, &bindings); err != nil {
		return "", fmt.Errorf("listing validating admission policy bindings: %w", err)
	}
	return enforcerOf(vaps.Items, bindings.Items, p), nil
}

// enforcerOf names the ValidatingAdmissionPolicy of vaps that enforces p:
// its paramKind is TenantPolicy and a binding of bindings denies what it
// refuses with p among its parameters (a paramRef whose selector selects
// p, or that names it). "" when none does.
func enforcerOf(vaps []admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding, p *playgroundv1alpha1.TenantPolicy) string {
	var names []string
	for _, v := range vaps {
		pk := v.Spec.ParamKind
		if pk == nil || pk.Kind != "TenantPolicy" || !strings.HasPrefix(pk.APIVersion, playgroundv1alpha1.GroupVersion.Group+"/") {
			continue
		}
		for _, b := range bindings {
			ref := b.Spec.ParamRef
			if b.Spec.PolicyName != v.Name || ref == nil || !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) {
				continue
			}
			switch {
			case ref.Name != "":
				if ref.Name != p.Name {
					continue
				}
			case ref.Selector != nil:
				sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
				if err != nil || !sel.Matches(labels.Set(p.Labels)) {
					continue
				}
			default:
				continue
			}
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return names[0]
}

// SetupWithManager registers the reconciler: a namespace's labels, added
// or changed, and the admission policies and their bindings bring every
// policy back (there are few).
func (r *TenantPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.TenantPolicy{}).
		WatchesMetadata(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}},
			handler.EnqueueRequestsFromMapFunc(r.allPolicies), builder.WithPredicates(labelsChanged)).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies)).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies)).
		Named("tenantpolicy").
		Complete(r)
}

func (r *TenantPolicyReconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list playgroundv1alpha1.TenantPolicyList
	if err := r.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing tenant policies")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
	}
	return out
}

// labelsChanged passes the events of objects whose labels may select them
// anew: a creation, a deletion, an update that changes labels.
var labelsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !labels.Equals(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
}

// policySelects reports whether p selects a namespace of these labels; ok
// is false when its selector cannot be evaluated (the TenantPolicy says
// so in its status).
func policySelects(p *playgroundv1alpha1.TenantPolicy, nsLabels map[string]string) (selects, ok bool) {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector)
	if err != nil {
		return false, false
	}
	return sel.Matches(labels.Set(nsLabels)), true
}

// policiesOf returns the TenantPolicies that select namespace ns, sorted
// by name, and whether some policy's selector could not be evaluated.
func policiesOf(ctx context.Context, c client.Reader, ns string) (selected []playgroundv1alpha1.TenantPolicy, unsure bool, err error) {
	var list playgroundv1alpha1.TenantPolicyList
	if err := c.List(ctx, &list); err != nil {
		return nil, false, fmt.Errorf("listing tenant policies: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, false, nil
	}
	nsm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, nsm); err != nil {
		return nil, false, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		selects, ok := policySelects(p, nsm.Labels)
		unsure = unsure || !ok
		if selects {
			selected = append(selected, *p)
		}
	}
	slices.SortFunc(selected, func(a, b playgroundv1alpha1.TenantPolicy) int { return strings.Compare(a.Name, b.Name) })
	return selected, unsure, nil
}
