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
	"sync"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/signingkey"
)

// SigningKeyReconciler hands the agent of a Sandbox's node the signing
// key of the Secret the Sandbox names (spec.pile.signingKey), and nothing to
// any other node: agents read no Secrets (see EgressCredentialReconciler).
// The key is delivered as soon as the Sandbox is bound, addressed by the
// Sandbox object, so that its sandbox's first start can have it; again
// when the Sandbox names another key, when the node's agent started anew
// (it keeps keys not yet installed in memory only), and every minute for
// a key the platform team manages (Secrets are not watched). The agent
// writes it into the sandbox's pile and reports its fingerprint in the
// Sandbox's status; the key is in no status, Event or log line.
type SigningKeyReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Agents    AgentClients
	Options   Options

	// delivered is what each Sandbox (by UID) was last given: the key's
	// fingerprint, and the agent process it went to.
	mu        sync.Mutex
	delivered map[types.UID]keyDelivery
	// failing says since when deliveries to a Sandbox's node fail.
	failing failing
}

type keyDelivery struct {
	fingerprint string
	agent       time.Time
}

// The signing key reconciler reads Sandboxes, the agents' Leases and the
// Secrets Sandboxes name (get, around the cache); the agents' Leases as
// the other reconcilers do, in the lease namespace. It says in a
// Sandbox's SigningKeyDelivered condition what keeps its key from it.
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile delivers one Sandbox's signing key, and says in its status
// what keeps the key from it: a Secret that cannot be used is said as
// soon as the Sandbox names it, bound or not.
func (r *SigningKeyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sbx.DeletionTimestamp.IsZero() {
		r.forget(sbx.UID)
		return ctrl.Result{}, nil
	}
	if sbx.Spec.Pile.SigningKey == nil {
		r.forget(sbx.UID)
		return ctrl.Result{}, r.report(ctx, sbx, "", "")
	}
	key, managed, why, err := r.secretKey(ctx, sbx.Namespace, sbx.Spec.Pile.SigningKey.SecretName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		msg := fmt.Sprintf("%s. Until then a sandbox not yet started waits for its key, and a running one keeps the key it holds (looked for again every %s)", why, credentialRefresh)
		return ctrl.Result{RequeueAfter: credentialRefresh}, r.report(ctx, sbx, playgroundv1alpha1.ReasonSigningKeyRefused, msg)
	}
	if sbx.Spec.NodeName == "" || r.Agents == nil {
		// Bound later: its spec changes then. (A manager without a way
		// to reach the agents delivers nothing, and says only what
		// cannot be used.)
		return ctrl.Result{}, r.report(ctx, sbx, "", "")
	}
	lease := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Options.LeaseNamespace, Name: agentlease.Name(sbx.Spec.NodeName)}, lease); err != nil {
		if apierrors.IsNotFound(err) { // no agent yet: its Lease's creation brings the Sandbox back
			return ctrl.Result{}, r.report(ctx, sbx, "", "")
		}
		return ctrl.Result{}, err
	}
	reg, err := agentlease.FromLease(lease)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Lease of node %s's agent: %w", sbx.Spec.NodeName, err)
	}
	if reg.Endpoint == "" {
		return ctrl.Result{}, r.report(ctx, sbx, "", "") // registered later: its Lease changes then
	}
	refresh := ctrl.Result{}
	if !managed {
		refresh.RequeueAfter = credentialRefresh
	}
	fp := signingkey.Fingerprint(key)
	r.mu.Lock()
	last, ok := r.delivered[sbx.UID]
	r.mu.Unlock()
	if ok && last.fingerprint == fp && last.agent.Equal(reg.Started) {
		return refresh, r.report(ctx, sbx, "", "")
	}
	if err := r.deliver(ctx, sbx, reg, key); err != nil {
		log.FromContext(ctx).Info("Cannot deliver the sandbox's signing key; trying again", "node", sbx.Spec.NodeName, "error", err.Error())
		// An agent whose cache lags (not found), or that restarts, takes
		// it at a retry: only a failure that persists is said.
		reason, msg := "", ""
		if r.failing.persists(sbx.UID, time.Now()) && agentapi.CodeOf(err) != agentapi.CodeNotFound {
			reason = playgroundv1alpha1.ReasonSigningKeyUndelivered
			msg = fmt.Sprintf("The agent of node %s does not take the sandbox's signing key (fingerprint %s; tried again): %v", sbx.Spec.NodeName, fp, err)
		}
		if rerr := r.report(ctx, sbx, reason, msg); rerr != nil {
			return ctrl.Result{}, errors.Join(err, rerr)
		}
		return ctrl.Result{}, err
	}
	r.failing.clear(sbx.UID)
	r.mu.Lock()
	if r.delivered == nil {
		r.delivered = map[types.UID]keyDelivery{}
	}
	r.delivered[sbx.UID] = keyDelivery{fingerprint: fp, agent: reg.Started}
	r.mu.Unlock()
	return refresh, r.report(ctx, sbx, "", "")
}

// report sets the Sandbox's SigningKeyDelivered condition (False with
// reason and msg, or none for reason ""), and records a Warning Event
// when it turns to a refusal or its message changes.
func (r *SigningKeyReconciler) report(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, reason, msg string) error {
	changed, err := setDelivery(ctx, r.Client, sbx, playgroundv1alpha1.SigningKeyFieldOwner,
		playgroundv1alpha1.SigningKeyDeliveredCondition, reason, msg)
	if changed && reason != "" {
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "DeliverSigningKey", "%s", truncate(msg, maxEventNote))
	}
	return err
}

func (r *SigningKeyReconciler) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.delivered, uid)
	r.mu.Unlock()
	r.failing.clear(uid)
}

func (r *SigningKeyReconciler) deliver(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, reg agentlease.Registration, key []byte) error {
	c, err := r.Agents.Client(ctx, sbx.Spec.NodeName, reg.Endpoint)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = c.SetSigningKey(ctx, agentapi.SigningKeyRequest{Namespace: sbx.Namespace, Name: sbx.Name, UID: string(sbx.UID), Key: string(key)})
	return err
}

// secretKey reads the key of a Sandbox's signing key Secret: the key and
// whether the manager generated it, or why it cannot be used (never with
// the key in it).
func (r *SigningKeyReconciler) secretKey(ctx context.Context, ns, name string) (key []byte, managed bool, why string, err error) {
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, fmt.Sprintf("Secret %s does not exist in namespace %s: create it, of type %s, with the key under %s (kubectl create secret generic %s --type=%s --from-file=%s=PATH), or leave the Tenant's spec.pile.signingKey.secretName out to have a key generated",
				name, ns, playgroundv1alpha1.SigningKeySecretType, playgroundv1alpha1.SigningKeySecretKey, name, playgroundv1alpha1.SigningKeySecretType, playgroundv1alpha1.SigningKeySecretKey), nil
		}
		return nil, false, "", fmt.Errorf("reading the signing key Secret %s/%s: %w", ns, name, err)
	}
	if s.Type != playgroundv1alpha1.SigningKeySecretType {
		return nil, false, fmt.Sprintf("Secret %s is of type %q, not %s: the manager installs only a Secret made to be a signing key; create one of that type (kubectl create secret generic NAME --type=%s --from-file=%s=PATH) and name it",
			s.Name, s.Type, playgroundv1alpha1.SigningKeySecretType, playgroundv1alpha1.SigningKeySecretType, playgroundv1alpha1.SigningKeySecretKey), nil
	}
	key, err = signingkey.Normalize(s.Data[playgroundv1alpha1.SigningKeySecretKey])
	if err != nil {
		return nil, false, fmt.Sprintf("Secret %s holds no valid key under %s: %v", s.Name, playgroundv1alpha1.SigningKeySecretKey, err), nil
	}
	_, managed = s.Annotations[AnnotationKeyRotationRequest]
	return key, managed, "", nil
}

// SetupWithManager registers the reconciler: a Sandbox is reconciled when
// its spec or node change, and every Sandbox of a node whose agent
// started anew.
func (r *SigningKeyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	sandboxChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox), e.ObjectNew.(*playgroundv1alpha1.Sandbox)
		return o.Generation != n.Generation || o.Spec.NodeName != n.Spec.NodeName || !n.DeletionTimestamp.IsZero()
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("signingkey").
		For(&playgroundv1alpha1.Sandbox{}, builder.WithPredicates(sandboxChanged)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(sandboxesOfNode(r.Client, r.Options.LeaseNamespace,
			func(s *playgroundv1alpha1.Sandbox) bool { return s.Spec.Pile.SigningKey != nil })),
			builder.WithPredicates(agentStarted)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Workers}).
		Complete(r)
}
