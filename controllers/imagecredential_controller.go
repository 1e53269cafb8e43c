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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
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

	delivery nodeDelivery
}

// imageCredentialDelivery is the registry credentials' delivery, said in
// the Sandbox's ImageCredentialsDelivered condition.
var imageCredentialDelivery = deliveryKind{
	condition:   playgroundv1alpha1.ImageCredentialsDeliveredCondition,
	fieldOwner:  playgroundv1alpha1.ImageCredentialsFieldOwner,
	undelivered: playgroundv1alpha1.ReasonImageCredentialsUndelivered,
	action:      "DeliverImageCredentials",
}

func (r *ImageCredentialReconciler) deps() deliveryDeps {
	return deliveryDeps{deliveryKind: imageCredentialDelivery, client: r.Client, recorder: r.Recorder, agents: r.Agents, leaseNamespace: r.Options.LeaseNamespace}
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
	sbx, err := r.delivery.fetch(ctx, r.Client, req)
	if sbx == nil || err != nil {
		return ctrl.Result{}, err
	}
	last, had := r.delivery.last(sbx.UID)
	named := sbx.Spec.Image != nil && len(sbx.Spec.Image.PullSecrets) > 0
	if !named && (!had || last.fingerprint == "") {
		r.delivery.forget(sbx.UID)
		return ctrl.Result{}, r.delivery.report(ctx, r.deps(), sbx, "", "")
	}
	// Named no more, the node is handed an empty list: it drops them.
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
			return refresh, r.delivery.report(ctx, r.deps(), sbx, playgroundv1alpha1.ReasonImageCredentialsRefused, msg)
		}
	}
	return r.delivery.toNode(ctx, r.deps(), sbx, handOver{
		fingerprint: configsDigest(configs),
		what:        "the registry credentials of the sandbox's pull Secrets",
		send: func(ctx context.Context, c *agentapi.Client) error {
			return c.SetImageCredentials(ctx, agentapi.ImageCredentialsRequest{Namespace: sbx.Namespace, Name: sbx.Name, UID: string(sbx.UID), Configs: configs})
		},
	}, refresh)
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

// SetupWithManager registers the reconciler (setupDelivery) for the
// Sandboxes that name pull Secrets.
func (r *ImageCredentialReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return setupDelivery(mgr, "imagecredential", r, r.Client, r.Options,
		func(s *playgroundv1alpha1.Sandbox) bool {
			return s.Spec.Image != nil && len(s.Spec.Image.PullSecrets) > 0
		})
}
