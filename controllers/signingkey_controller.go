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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
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

	delivery nodeDelivery
}

// signingKeyDelivery is the signing key's delivery, said in the
// Sandbox's SigningKeyDelivered condition.
var signingKeyDelivery = deliveryKind{
	condition:   playgroundv1alpha1.SigningKeyDeliveredCondition,
	fieldOwner:  playgroundv1alpha1.SigningKeyFieldOwner,
	undelivered: playgroundv1alpha1.ReasonSigningKeyUndelivered,
	action:      "DeliverSigningKey",
}

func (r *SigningKeyReconciler) deps() deliveryDeps {
	return deliveryDeps{deliveryKind: signingKeyDelivery, client: r.Client, recorder: r.Recorder, agents: r.Agents, leaseNamespace: r.Options.LeaseNamespace}
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
	sbx, err := r.delivery.fetch(ctx, r.Client, req)
	if sbx == nil || err != nil {
		return ctrl.Result{}, err
	}
	if sbx.Spec.Pile.SigningKey == nil {
		r.delivery.forget(sbx.UID)
		return ctrl.Result{}, r.delivery.report(ctx, r.deps(), sbx, "", "")
	}
	key, managed, why, err := r.secretKey(ctx, sbx.Namespace, sbx.Spec.Pile.SigningKey.SecretName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		msg := fmt.Sprintf("%s. Until then a sandbox not yet started waits for its key, and a running one keeps the key it holds (looked for again every %s)", why, credentialRefresh)
		return ctrl.Result{RequeueAfter: credentialRefresh}, r.delivery.report(ctx, r.deps(), sbx, playgroundv1alpha1.ReasonSigningKeyRefused, msg)
	}
	// A key the platform team manages is read again every refresh.
	refresh := ctrl.Result{}
	if !managed {
		refresh.RequeueAfter = credentialRefresh
	}
	fp := signingkey.Fingerprint(key)
	return r.delivery.toNode(ctx, r.deps(), sbx, handOver{
		fingerprint: fp,
		what:        fmt.Sprintf("the sandbox's signing key (fingerprint %s)", fp),
		send: func(ctx context.Context, c *agentapi.Client) error {
			_, err := c.SetSigningKey(ctx, agentapi.SigningKeyRequest{Namespace: sbx.Namespace, Name: sbx.Name, UID: string(sbx.UID), Key: string(key)})
			return err
		},
	}, refresh)
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

// SetupWithManager registers the reconciler (setupDelivery).
func (r *SigningKeyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return setupDelivery(mgr, "signingkey", r, r.Client, r.Options,
		func(s *playgroundv1alpha1.Sandbox) bool { return s.Spec.Pile.SigningKey != nil })
}
