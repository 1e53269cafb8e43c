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

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/imagesignature"
)

// The image resolver checks, before it records a digest, the signatures
// the TenantPolicies of the Sandbox's namespace require of it
// (spec.sandbox.imageSignatures): each such policy needs a valid cosign
// signature of the digest by one of its keys.
// +kubebuilder:rbac:groups=playground.dev,resources=tenantpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// imageRefusal is why a digest is not recorded: a condition's reason and
// message.
type imageRefusal struct{ reason, message string }

// signaturePolicy is one TenantPolicy's requirement: its keys, and
// whether it refuses or only reports.
type signaturePolicy struct {
	name     string
	keys     []string // key names, as results name them: POLICY/KEY
	required bool
	broken   []string // keys that cannot be read, and why
}

// signatures checks digest, the image ref resolved to, against the
// signing keys of the TenantPolicies of sbx's namespace, reading the
// registry with kc: the keys that verified it, or why it is refused (a
// registry that fails is a refusal too, of its own reason, tried again).
// An error is the API server's.
func (r *ImageReconciler) signatures(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, ref name.Reference, digest string, kc authn.Keychain) ([]string, *imageRefusal, error) {
	// Read live, not from the cache: a policy written just before the
	// Sandbox is not missed.
	selected, _, err := policiesOf(ctx, r.APIReader, sbx.Namespace)
	if err != nil {
		return nil, nil, err
	}
	var policies []signaturePolicy
	var keys []imagesignature.Key
	for _, p := range selected {
		want := p.Spec.Sandbox.ImageSignatures
		if want == nil {
			continue
		}
		sp := signaturePolicy{name: p.Name, required: want.Required == nil || *want.Required}
		for _, k := range want.Keys {
			keyName := p.Name + "/" + k.Name
			key, err := imagesignature.ParseKey(keyName, []byte(k.PublicKey))
			if err != nil {
				sp.broken = append(sp.broken, err.Error())
				continue
			}
			sp.keys = append(sp.keys, keyName)
			keys = append(keys, key)
		}
		policies = append(policies, sp)
	}
	if len(policies) == 0 {
		return nil, nil, nil
	}
	repo := ref.Context()
	refusal := func(reason, what string, sp signaturePolicy) *imageRefusal {
		return &imageRefusal{reason: reason, message: fmt.Sprintf("TenantPolicy %s requires %s (%s) to be signed by one of its keys (%s): %s",
			sp.name, sbx.Spec.Image.Reference, digest, keysTried(sp), what)}
	}
	hash, err := v1.NewHash(digest)
	if err != nil {
		return nil, &imageRefusal{reason: playgroundv1alpha1.ReasonImageSignatureInvalid, message: fmt.Sprintf("Digest %s cannot be read: %v", digest, err)}, nil
	}
	var res imagesignature.Result
	if len(keys) > 0 {
		vctx, cancel := context.WithTimeout(ctx, r.Options.Images.Timeout)
		defer cancel()
		res, err = imagesignature.Verify(vctx, repo, hash, keys, imagesignature.Options{
			Transport: r.transport, Keychain: kc, UserAgent: "playground-manager", Limits: r.Options.Images.Signatures})
		if err != nil {
			reason, msg := imageFailure(ref, sbx.Spec.Image, err)
			return nil, &imageRefusal{reason: reason, message: "Reading the signatures of " + digest + " in " + repo.Name() + ": " + msg}, nil
		}
	}
	log := ctrl.LoggerFrom(ctx)
	for _, sp := range policies {
		if slices.ContainsFunc(sp.keys, func(k string) bool { return slices.Contains(res.SignedBy, k) }) {
			continue
		}
		var reason, what string
		switch {
		case len(sp.keys) == 0:
			reason, what = playgroundv1alpha1.ReasonImageSignatureInvalid,
				"none of its keys can be read: correct them in the TenantPolicy"
		case res.Unsigned():
			reason, what = playgroundv1alpha1.ReasonImageUnsigned, fmt.Sprintf(
				"the registry holds no signature of it (no tag %s in %s). Sign it (cosign sign --key KEY %s@%s) and it is looked for again with backoff, or at once for a new %s annotation",
				imagesignature.Tag(repo, hash).TagStr(), repo.Name(), repo.Name(), digest, playgroundv1alpha1.ResolveImageAnnotation)
		default:
			reason, what = playgroundv1alpha1.ReasonImageSignatureInvalid, fmt.Sprintf(
				"no signature of tag %s (%d found) is a valid one by them: %s. Sign the digest with one of the keys (cosign sign --key KEY %s@%s)",
				imagesignature.Tag(repo, hash).TagStr(), res.Found, strings.Join(res.Problems, "; "), repo.Name(), digest)
		}
		if !sp.required {
			// Reported only: the image runs, unsigned as far as this
			// policy is concerned (status.image.signedBy names none of
			// its keys).
			log.Info("The sandbox's image is not signed by a key of a TenantPolicy that does not require it", "sandbox", klog.KObj(sbx), "policy", sp.name, "reason", reason)
			r.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "ResolveImage", "%s",
				truncate(refusal(reason, what, sp).message+" (not required: the image runs)", maxEventNote))
			continue
		}
		return nil, refusal(reason, what, sp), nil
	}
	return res.SignedBy, nil, nil
}

// unreadableSigningKeys says which of p's signing keys cannot be read,
// and why, or "".
func unreadableSigningKeys(p *playgroundv1alpha1.TenantPolicy) string {
	if p.Spec.Sandbox.ImageSignatures == nil {
		return ""
	}
	var why []string
	for i, k := range p.Spec.Sandbox.ImageSignatures.Keys {
		if _, err := imagesignature.ParseKey(k.Name, []byte(k.PublicKey)); err != nil {
			why = append(why, fmt.Sprintf("spec.sandbox.imageSignatures.keys[%d]: %v", i, err))
		}
	}
	return strings.Join(why, "; ")
}

// keysTried names a policy's keys, and those that cannot be read.
func keysTried(sp signaturePolicy) string {
	s := strings.Join(sp.keys, ", ")
	if len(sp.broken) > 0 {
		if s != "" {
			s += "; "
		}
		s += "unreadable: " + strings.Join(sp.broken, "; ")
	}
	return s
}
