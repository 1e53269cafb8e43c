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
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
)

// ImageCredentialReconciler hands the agent of a Sandbox's node the
// .dockerconfigjson of each pull Secret its spec.image names, in that
// order, and nothing to any other node: agents read no Secrets (see
// EgressCredentialReconciler). They are delivered as soon as the Sandbox
// is bound, addressed by the Sandbox object, so that its first pull can
// have them; again when they change (the Secrets are read again every
// CredentialRefresh: the manager watches no Secret but its own), when
// the node's agent started anew (it keeps them in memory only), and as
// an empty list once the Sandbox names none any more. No credential is
// in a status, an Event or a log line: what is compared is a digest.
type ImageCredentialReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Agents    AgentClients
	Options   Options

	// delivered is what each Sandbox (by UID) was last given: the digest
	// of its configs ("" for none), and the agent process it went to.
	mu        sync.Mutex
	delivered map[types.UID]keyDelivery
	// failing says since when deliveries to a Sandbox's node fail.
	failing failing
}

// The registry credential reconciler reads Sandboxes, the agents' Leases
// and the pull Secrets Sandboxes name (get, around the cache, as the
// image resolver does). It says in a Sandbox's ImageCredentialsDelivered
// condition what keeps its credentials from its node.
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile delivers one Sandbox's registry credentials, and says in its
// status what keeps them from its node: a pull Secret that cannot be
// used is said as soon as the Sandbox names it, bound or not.
func (r *ImageCredentialReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sbx.DeletionTimestamp.IsZero() {
		// The node's agent drops them itself when it sees the deletion.
		r.forget(sbx.UID)
		return ctrl.Result{}, nil
	}
	r.mu.Lock()
	last, had := r.delivered[sbx.UID]
	r.mu.Unlock()
	named := sbx.Spec.Image != nil && len(sbx.Spec.Image.PullSecrets) > 0
	if !named && (!had || last.fingerprint == "") {
		r.forget(sbx.UID)
		return ctrl.Result{}, r.report(ctx, sbx, "", "")
	}
	var configs [][]byte
	refresh := ctrl.Result{}
	if named {
		refresh.RequeueAfter = r.refresh()
		var why string
		var err error
		configs, why, err = r.configs(ctx, sbx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if why != "" {
			msg := fmt.Sprintf("%s. Until then the node keeps the credentials it was given before, if any, and a pull of a private image is refused (looked for again every %s)", why, r.refresh())
			return refresh, r.report(ctx, sbx, playgroundv1alpha1.ReasonImageCredentialsRefused, msg)
		}
	}
	if sbx.Spec.NodeName == "" || r.Agents == nil {
		// Bound later: its spec changes then. (A manager without a way
		// to reach the agents delivers nothing, and says only what
		// cannot be used.)
		return refresh, r.report(ctx, sbx, "", "")
	}
	lease := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Options.LeaseNamespace, Name: agentlease.Name(sbx.Spec.NodeName)}, lease); err != nil {
		if apierrors.IsNotFound(err) { // no agent yet: its Lease's creation brings the Sandbox back
			return refresh, r.report(ctx, sbx, "", "")
		}
		return ctrl.Result{}, err
	}
	reg, err := agentlease.FromLease(lease)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Lease of node %s's agent: %w", sbx.Spec.NodeName, err)
	}
	if reg.Endpoint == "" {
		return refresh, r.report(ctx, sbx, "", "") // registered later: its Lease changes then
	}
	fp := configsDigest(configs)
	if had && last.fingerprint == fp && last.agent.Equal(reg.Started) {
		return refresh, r.report(ctx, sbx, "", "")
	}
	if err := r.deliver(ctx, sbx, reg, configs); err != nil {
		log.FromContext(ctx).Info("Cannot deliver the sandbox's registry credentials; trying again", "node", sbx.Spec.NodeName, "error", err.Error())
		// An agent whose cache lags (not found), or that restarts, takes
		// them at a retry: only a failure that persists is said.
		reason, msg := "", ""
		if r.failing.persists(sbx.UID, time.Now()) && agentapi.CodeOf(err) != agentapi.CodeNotFound {
			reason = playgroundv1alpha1.ReasonImageCredentialsUndelivered
			msg = fmt.Sprintf("The agent of node %s does not take the registry credentials of the sandbox's pull Secrets (tried again): %v", sbx.Spec.NodeName, err)
		}
		if rerr := r.report(ctx, sbx, reason, msg); rerr != nil {
			return ctrl.Result{}, errors.Join(err, rerr)
		}
		return ctrl.Result{}, err
	}
	r.failing.clear(sbx.UID)
	if !named {
		r.forget(sbx.UID) // told to forget them: nothing more to say
		return ctrl.Result{}, r.report(ctx, sbx, "", "")
	}
	r.mu.Lock()
	if r.delivered == nil {
		r.delivered = map[types.UID]keyDelivery{}
	}
	r.delivered[sbx.UID] = keyDelivery{fingerprint: fp, agent: reg.Started}
	r.mu.Unlock()
	return refresh, r.report(ctx, sbx, "", "")
}

// refresh is how often a Sandbox's pull Secrets are read again.
func (r *ImageCredentialReconciler) refresh() time.Duration {
	if r.Options.Images.CredentialRefresh > 0 {
		return r.Options.Images.CredentialRefresh
	}
	return DefaultImageCredentialRefresh
}

// configsDigest identifies configs without holding them: "" for none.
func configsDigest(configs [][]byte) string {
	if len(configs) == 0 {
		return ""
	}
	h := sha256.New()
	for _, c := range configs {
		_ = binary.Write(h, binary.BigEndian, uint64(len(c)))
		h.Write(c)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// report sets the Sandbox's ImageCredentialsDelivered condition (False
// with reason and msg, or none for reason ""), and records a Warning
// Event when it turns to a refusal or its message changes.
func (r *ImageCredentialReconciler) report(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, reason, msg string) error {
	changed, err := setDelivery(ctx, r.Client, sbx, playgroundv1alpha1.ImageCredentialsFieldOwner,
		playgroundv1alpha1.ImageCredentialsDeliveredCondition, reason, msg)
	if changed && reason != "" {
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "DeliverImageCredentials", "%s", truncate(msg, maxEventNote))
	}
	return err
}

func (r *ImageCredentialReconciler) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.delivered, uid)
	r.mu.Unlock()
	r.failing.clear(uid)
}

func (r *ImageCredentialReconciler) deliver(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, reg agentlease.Registration, configs [][]byte) error {
	c, err := r.Agents.Client(ctx, sbx.Spec.NodeName, reg.Endpoint)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.SetImageCredentials(ctx, agentapi.ImageCredentialsRequest{Namespace: sbx.Namespace, Name: sbx.Name, UID: string(sbx.UID), Configs: configs})
}

// configs reads the .dockerconfigjson of each pull Secret sbx names, or
// says why one cannot be handed to its node (never with its content).
func (r *ImageCredentialReconciler) configs(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) ([][]byte, string, error) {
	out := make([][]byte, 0, len(sbx.Spec.Image.PullSecrets))
	for _, ref := range sbx.Spec.Image.PullSecrets {
		s := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: sbx.Namespace, Name: ref.Name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("Secret %s does not exist in namespace %s: create it with the registry's credentials (kubectl create secret docker-registry %s --docker-server=REGISTRY --docker-username=USER --docker-password=...), or remove it from spec.image.pullSecrets",
					ref.Name, sbx.Namespace, ref.Name), nil
			}
			return nil, "", fmt.Errorf("reading the pull Secret %s/%s: %w", sbx.Namespace, ref.Name, err)
		}
		cfg := s.Data[corev1.DockerConfigJsonKey]
		switch {
		case s.Type != corev1.SecretTypeDockerConfigJson || len(cfg) == 0:
			return nil, fmt.Sprintf("Secret %s is of type %q without %s: a pull Secret is of type %s (kubectl create secret docker-registry makes one)",
				s.Name, s.Type, corev1.DockerConfigJsonKey, corev1.SecretTypeDockerConfigJson), nil
		case len(cfg) > agentapi.MaxImageCredentialConfigBytes:
			return nil, fmt.Sprintf("Secret %s holds a %s of %d bytes, more than the %d bytes a node's agent takes for one pull Secret: keep in it only the registries this image needs",
				s.Name, corev1.DockerConfigJsonKey, len(cfg), agentapi.MaxImageCredentialConfigBytes), nil
		}
		out = append(out, cfg)
	}
	return out, "", nil
}

// SetupWithManager registers the reconciler: a Sandbox is reconciled when
// its spec or node change, and every Sandbox of a node whose agent
// started anew that names pull Secrets.
func (r *ImageCredentialReconciler) SetupWithManager(mgr ctrl.Manager) error {
	sandboxChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox), e.ObjectNew.(*playgroundv1alpha1.Sandbox)
		return o.Generation != n.Generation || o.Spec.NodeName != n.Spec.NodeName || !n.DeletionTimestamp.IsZero()
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagecredential").
		For(&playgroundv1alpha1.Sandbox{}, builder.WithPredicates(sandboxChanged)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(sandboxesOfNode(r.Client, r.Options.LeaseNamespace,
			func(s *playgroundv1alpha1.Sandbox) bool {
				return s.Spec.Image != nil && len(s.Spec.Image.PullSecrets) > 0
			})),
			builder.WithPredicates(agentStarted)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Workers}).
		Complete(r)
}
