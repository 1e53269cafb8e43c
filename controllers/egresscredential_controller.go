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
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/agentlease"
)

// AgentClients reach the agents' API. The manager's one call there is the
// delivery of brokered egress credentials, to the agent of the node a
// Sandbox is bound to, over TLS that proves that node's agent.
type AgentClients interface {
	Client(ctx context.Context, node, endpoint string) (*agentapi.Client, error)
}

// credentialRefresh is how often a Sandbox's credentials are read from
// their Secrets and handed to its node again: a rotated Secret reaches the
// node within it (Secrets are not watched: the manager caches none but
// its own credential Secrets).
const credentialRefresh = time.Minute

// EgressCredentialReconciler hands the agent of a Sandbox's node the
// values of the Secrets its brokered egress rules name, and nothing to
// any other node: RBAC cannot limit the agents' reads of Secrets to their
// own node's sandboxes, so agents read none, and the manager, which may,
// delivers each node its own. The agent keeps them in memory only: when
// its registration says it started anew, it is given them again.
type EgressCredentialReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Agents    AgentClients
	Options   Options

	// delivered are the Sandboxes given credentials (by UID), so that one
	// whose brokered rules went is given none, once.
	mu        sync.Mutex
	delivered map[types.UID]bool
	// failing says since when deliveries to a Sandbox's node fail.
	failing failing
}

// The credential reconciler reads Sandboxes, the agents' Leases and the
// Secrets brokered rules name (get, around the cache), mints tokens of the
// manager's own ServiceAccount bound to a node's agent, and says in a
// Sandbox's EgressCredentialsDelivered condition what keeps a credential
// from its node.
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",namespace=playground-system,resources=serviceaccounts/token,verbs=create,resourceNames=playground-manager
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile delivers one Sandbox's credentials, and says in its status
// what keeps one from its node: a rule's Secret that cannot be used is
// said as soon as the Sandbox names it, provisioned or not, and looked
// for again every credentialRefresh.
func (r *EgressCredentialReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rules := brokeredRules(sbx)
	r.mu.Lock()
	had := r.delivered[sbx.UID]
	r.mu.Unlock()
	if !sbx.DeletionTimestamp.IsZero() || (len(rules) == 0 && !had) {
		r.forget(sbx.UID)
		if sbx.DeletionTimestamp.IsZero() {
			_, err := r.report(ctx, sbx, "", "")
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	}
	creds := make([]agentapi.EgressCredential, 0, len(rules))
	var refused []string
	for _, rule := range rules {
		value, why, err := r.secretValue(ctx, sbx.Namespace, rule.Credential)
		if err != nil {
			return ctrl.Result{}, err
		}
		if why != "" {
			refused = append(refused, fmt.Sprintf("requests to %s get no credential (answered 503): %s", rule.Host, why))
			continue
		}
		creds = append(creds, agentapi.EgressCredential{Host: rule.Host, Header: cmp.Or(rule.Credential.Header, "Authorization"), Value: value})
	}
	refusedMsg := ""
	if len(refused) > 0 {
		refusedMsg = upperFirst(strings.Join(refused, "; ")) + fmt.Sprintf(" (looked for again every %s)", credentialRefresh)
	}
	if sbx.Spec.NodeName == "" || sbx.Status.Endpoint == "" || sbx.Status.SandboxID == "" || r.Agents == nil {
		// Not provisioned yet (its status changes when it is): what is
		// refused is said already. (A manager without a way to reach
		// the agents delivers nothing, and says only that.)
		if refusedMsg == "" {
			_, err := r.report(ctx, sbx, "", "")
			return ctrl.Result{}, err
		}
		_, err := r.report(ctx, sbx, playgroundv1alpha1.ReasonEgressCredentialRefused, refusedMsg)
		return ctrl.Result{RequeueAfter: credentialRefresh}, err
	}
	tenant := sbx.Namespace + "/" + sbx.Spec.TenantRef.Name
	if err := r.deliver(ctx, sbx, tenant, creds); err != nil {
		log.FromContext(ctx).Info("Cannot deliver the sandbox's egress credentials; trying again", "node", sbx.Spec.NodeName, "error", err.Error())
		reason, msg := "", ""
		if r.failing.persists(sbx.UID, time.Now()) {
			reason = playgroundv1alpha1.ReasonEgressCredentialUndelivered
			msg = fmt.Sprintf("The agent of node %s does not take the sandbox's egress credentials, and requests that need one are answered 503 (tried again): %v", sbx.Spec.NodeName, err)
		}
		if refusedMsg != "" { // what to fix first
			if msg != "" {
				msg = "; and " + lowerFirst(msg)
			}
			reason, msg = playgroundv1alpha1.ReasonEgressCredentialRefused, refusedMsg+msg
		}
		if _, rerr := r.report(ctx, sbx, reason, msg); rerr != nil {
			return ctrl.Result{}, errors.Join(err, rerr)
		}
		return ctrl.Result{}, err
	}
	r.failing.clear(sbx.UID)
	reason := ""
	if refusedMsg != "" {
		reason = playgroundv1alpha1.ReasonEgressCredentialRefused
	}
	if _, err := r.report(ctx, sbx, reason, refusedMsg); err != nil {
		return ctrl.Result{}, err
	}
	if len(rules) == 0 {
		r.forget(sbx.UID)
		return ctrl.Result{}, nil
	}
	r.mu.Lock()
	if r.delivered == nil {
		r.delivered = map[types.UID]bool{}
	}
	r.delivered[sbx.UID] = true
	r.mu.Unlock()
	return ctrl.Result{RequeueAfter: credentialRefresh}, nil
}

// report sets the Sandbox's EgressCredentialsDelivered condition (False
// with reason and msg, or none for reason ""), and records a Warning
// Event when it turns to a refusal or its message changes.
func (r *EgressCredentialReconciler) report(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, reason, msg string) (bool, error) {
	changed, err := setDelivery(ctx, r.Client, sbx, playgroundv1alpha1.EgressCredentialFieldOwner,
		playgroundv1alpha1.EgressCredentialsDeliveredCondition, reason, msg)
	if changed && reason != "" {
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "Deliver", "%s", truncate(msg, maxEventNote))
	}
	return changed, err
}

func (r *EgressCredentialReconciler) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.delivered, uid)
	r.mu.Unlock()
	r.failing.clear(uid)
}

func (r *EgressCredentialReconciler) deliver(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, tenant string, creds []agentapi.EgressCredential) error {
	c, err := r.Agents.Client(ctx, sbx.Spec.NodeName, sbx.Status.Endpoint)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.SetEgressCredentials(ctx, tenant, sbx.Status.SandboxID, creds)
}

// secretValue reads a brokered rule's Secret: its value, or why it cannot
// be used (never with the value in it).
func (r *EgressCredentialReconciler) secretValue(ctx context.Context, ns string, cred *playgroundv1alpha1.EgressCredential) (value, why string, err error) {
	key := cmp.Or(cred.SecretRef.Key, playgroundv1alpha1.CredentialTokenKey)
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: cred.SecretRef.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Sprintf("Secret %s does not exist in namespace %s: create it, of type %s, with the header's value under key %s (kubectl create secret generic %s --type=%s --from-literal=%s=...)",
				cred.SecretRef.Name, ns, playgroundv1alpha1.EgressCredentialSecretType, key, cred.SecretRef.Name, playgroundv1alpha1.EgressCredentialSecretType, key), nil
		}
		return "", "", fmt.Errorf("reading the egress credential Secret %s/%s: %w", ns, cred.SecretRef.Name, err)
	}
	if s.Type != playgroundv1alpha1.EgressCredentialSecretType {
		return "", fmt.Sprintf("Secret %s is of type %q, not %s: the manager hands a node only a Secret made to be an egress credential; create one of that type (kubectl create secret generic NAME --type=%s --from-literal=%s=...) and name it",
			s.Name, s.Type, playgroundv1alpha1.EgressCredentialSecretType, playgroundv1alpha1.EgressCredentialSecretType, key), nil
	}
	// A value written from a file ends with its newline: not the header's.
	v := strings.TrimRight(string(s.Data[key]), "\r\n")
	switch {
	case v == "":
		return "", fmt.Sprintf("Secret %s has no key %s, or it is empty: put the header's value under that key, or name the key it is under in the rule's credential.secretRef.key", s.Name, key), nil
	case len(v) > 8<<10 || !httpguts.ValidHeaderFieldValue(v):
		return "", fmt.Sprintf("the value under key %s of Secret %s is not a header value of at most 8 KiB (it holds a line break or a control character): write the header's value alone, on one line", key, s.Name), nil
	}
	return v, "", nil
}

// brokeredRules are a Sandbox's egress rules with a credential.
func brokeredRules(sbx *playgroundv1alpha1.Sandbox) []playgroundv1alpha1.EgressRule {
	var out []playgroundv1alpha1.EgressRule
	for _, r := range sbx.Spec.Network.Egress {
		if r.Credential != nil && r.Host != "" {
			out = append(out, r)
		}
	}
	return out
}

// SetupWithManager registers the reconciler: a Sandbox is reconciled when
// its spec, node, endpoint or ID change, and every Sandbox of a node
// whose agent started anew.
func (r *EgressCredentialReconciler) SetupWithManager(mgr ctrl.Manager) error {
	sandboxChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox), e.ObjectNew.(*playgroundv1alpha1.Sandbox)
		return o.Generation != n.Generation || o.Status.Endpoint != n.Status.Endpoint || o.Status.SandboxID != n.Status.SandboxID ||
			o.Spec.NodeName != n.Spec.NodeName || !n.DeletionTimestamp.IsZero()
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("egresscredential").
		For(&playgroundv1alpha1.Sandbox{}, builder.WithPredicates(sandboxChanged)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(sandboxesOfNode(r.Client, r.Options.LeaseNamespace,
			func(s *playgroundv1alpha1.Sandbox) bool { return len(brokeredRules(s)) > 0 })),
			builder.WithPredicates(agentStarted)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Workers}).
		Complete(r)
}

// agentStarted passes the Leases of agents that registered or started
// anew: what an agent keeps in memory only, the manager gives it again.
var agentStarted = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[agentlease.AnnotationStarted] != e.ObjectNew.GetAnnotations()[agentlease.AnnotationStarted]
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// sandboxesOfNode maps an agent's Lease (in leaseNamespace) to the
// Sandboxes bound to its node that want says are concerned.
func sandboxesOfNode(c client.Reader, leaseNamespace string, want func(*playgroundv1alpha1.Sandbox) bool) handler.MapFunc {
	return func(ctx context.Context, lease client.Object) []reconcile.Request {
		l, ok := lease.(*coordinationv1.Lease)
		if !ok || l.Namespace != leaseNamespace {
			return nil
		}
		reg, err := agentlease.FromLease(l)
		if err != nil {
			return nil
		}
		var list playgroundv1alpha1.SandboxList
		if err := c.List(ctx, &list); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			s := &list.Items[i]
			if s.Spec.NodeName == reg.Node && want(s) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
			}
		}
		return reqs
	}
}
