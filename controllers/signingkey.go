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
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
	"github.com/playground-dev/playground/internal/signingkey"
)

// Annotations of a generated signing key's Secret, so that the Secret
// alone says which rotation request its key answers and which keys it
// replaced (public fingerprints): a status lost never makes the manager
// generate again, nor forget a rotation.
const (
	AnnotationKeyRotationRequest   = "playground.dev/key-rotation-request"
	AnnotationPreviousFingerprints = "playground.dev/previous-fingerprints"
)

// maxPreviousFingerprints is how many replaced keys status remembers.
const maxPreviousFingerprints = 8

// Reasons of the signing key's Events and of the Tenant's Stalled.
const (
	// ReasonSigningKeyRotated (Event): a new key was generated for a
	// rotation request.
	ReasonSigningKeyRotated = "SigningKeyRotated"
	// ReasonSigningKeyReplaced (Warning Event): the generated key's Secret
	// held no valid key (edited by hand) and a new one was generated.
	ReasonSigningKeyReplaced = "SigningKeyReplaced"
	// ReasonSigningKeyConflict (Stalled): the generated key's Secret name
	// is taken by a Secret of another type or owner.
	ReasonSigningKeyConflict = "SigningKeyConflict"
)

// reconcileSigningKey keeps the tenant's signing key and describes it in
// status.signingKey. A Secret the Tenant names (spec.pile.signingKey.
// secretName) is the platform team's: it is read, never written. Without
// one, the key is generated once into Secret <tenant>-signing-key, which
// follows the sandbox's reclaim policy (controlled by the Tenant, and so
// deleted with it, under Delete; kept under Retain, and taken up again by
// a Tenant of the same name, whose retained pile holds that key); it is
// replaced only for a new spec.pile.signingKey.rotationRequest (or a
// Secret that no longer holds a valid key). The key itself goes nowhere
// but that Secret and, through the manager, the sandbox's pile.
func (r *TenantReconciler) reconcileSigningKey(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	spec := t.Spec.Pile.SigningKey
	prev := t.Status.SigningKey
	if spec.SecretName != "" {
		st := &playgroundv1alpha1.TenantSigningKeyStatus{SecretName: spec.SecretName}
		if prev != nil {
			st.PreviousFingerprints = prev.PreviousFingerprints
		}
		s, err := r.secret(ctx, client.ObjectKey{Namespace: t.Namespace, Name: spec.SecretName})
		if err != nil {
			return fmt.Errorf("reading the signing key Secret %s/%s: %w", t.Namespace, spec.SecretName, err)
		}
		// A Secret that cannot be used leaves the fingerprint empty: the
		// manager's delivery says why, in the Sandbox's SigningKeyDelivered
		// condition, which SandboxReady and Ready repeat.
		if s != nil && s.Type == playgroundv1alpha1.SigningKeySecretType {
			if key, err := signingkey.Normalize(s.Data[playgroundv1alpha1.SigningKeySecretKey]); err == nil {
				st.Fingerprint, st.PublicKey = signingkey.Fingerprint(key), signingkey.PublicKey(key)
			}
		}
		if prev != nil && prev.Fingerprint != "" && st.Fingerprint != "" && prev.Fingerprint != st.Fingerprint {
			st.PreviousFingerprints = remember(st.PreviousFingerprints, prev.Fingerprint)
		}
		t.Status.SigningKey = keepSandboxFingerprint(st, prev)
		return nil
	}

	name := playgroundv1alpha1.SigningKeySecretName(t.Name)
	want := spec.RotationRequest
	if prev == nil {
		// A cache behind this reconciler's own apply (a pass that the
		// Tenant's Secret or Sandbox, just created, brought before the
		// status came back) describes no key: the key the apply
		// described is the one the cache will show.
		if last, ok := r.recent.last(t.UID, time.Now()); ok && last.SigningKey != nil {
			prev = last.SigningKey.DeepCopy()
			t.Status.SigningKey = prev.DeepCopy()
		}
	}
	if prev != nil && prev.Generated && prev.SecretName == name && prev.RotationRequest == want && prev.Fingerprint != "" {
		// Described already: the Secret is read again only when something
		// asks for another key (a cache of Secrets this one is not in
		// would cost a read per pass). An owner to change is the
		// exception (spec.pile.reclaimPolicy changed).
		if r.keyOwnerSettled(t) {
			return nil
		}
	}
	// A tenant whose key was never described most likely has no Secret
	// yet: it is created at once, and read through the API server (it is
	// in no cache) only if the create finds one.
	err := r.generatedKey(ctx, t, name, want, prev, prev == nil)
	if errors.Is(err, errNameTaken) {
		err = r.generatedKey(ctx, t, name, want, prev, false)
	}
	return err
}

// generatedKey keeps the generated key in Secret name, read first unless
// guess says it most likely does not exist (errNameTaken when it does).
func (r *TenantReconciler) generatedKey(ctx context.Context, t *playgroundv1alpha1.Tenant, name, want string, prev *playgroundv1alpha1.TenantSigningKeyStatus, guess bool) error {
	var s *corev1.Secret
	if !guess {
		var err error
		if s, err = r.secret(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}); err != nil {
			return fmt.Errorf("reading the signing key Secret %s/%s: %w", t.Namespace, name, err)
		}
	}
	if s != nil && (s.Type != playgroundv1alpha1.SigningKeySecretType || ownable(s, t) != "") {
		why := ownable(s, t)
		if why == "" {
			why = fmt.Sprintf("it has type %s, not %s", s.Type, playgroundv1alpha1.SigningKeySecretType)
		}
		return pgreconcile.Stall(ReasonSigningKeyConflict, "Secret %s exists and cannot hold this tenant's generated signing key: %s; delete or rename it, or name a key of your own in spec.pile.signingKey.secretName", name, why)
	}
	create := s == nil
	if create {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name}, Type: playgroundv1alpha1.SigningKeySecretType}
	}
	desired := s.DeepCopy()
	key, invalid := desired.Data[playgroundv1alpha1.SigningKeySecretKey], false
	if _, err := signingkey.Normalize(key); err != nil && !create {
		invalid = true
	}
	old := ""
	if !create && !invalid {
		old = signingkey.Fingerprint(key)
	}
	rotate := !create && !invalid && desired.Annotations[AnnotationKeyRotationRequest] != want
	if create || invalid || rotate {
		var err error
		if key, err = signingkey.Generate(); err != nil {
			return err
		}
		if desired.Data == nil {
			desired.Data = map[string][]byte{}
		}
		desired.Data[playgroundv1alpha1.SigningKeySecretKey] = key
		metav1.SetMetaDataAnnotation(&desired.ObjectMeta, AnnotationKeyRotationRequest, want)
		if old != "" {
			prevs := remember(splitFingerprints(desired.Annotations[AnnotationPreviousFingerprints]), old)
			metav1.SetMetaDataAnnotation(&desired.ObjectMeta, AnnotationPreviousFingerprints, strings.Join(prevs, ","))
		}
	}
	metav1.SetMetaDataLabel(&desired.ObjectMeta, playgroundv1alpha1.TenantLabel, t.Name)
	if err := r.setKeyOwner(t, desired); err != nil {
		return err
	}
	var err error
	switch {
	case create:
		err = r.Create(ctx, desired)
	case !equality.Semantic.DeepEqual(s, desired):
		err = r.Update(ctx, desired) // resourceVersion guards against a stale read
	}
	if guess && apierrors.IsAlreadyExists(err) {
		return errNameTaken
	}
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return pgreconcile.Wait(cacheLag, "Secret %s was created meanwhile", name)
		}
		return conflictIsWait(fmt.Errorf("writing the signing key Secret %s/%s: %w", t.Namespace, name, err))
	}
	fp := signingkey.Fingerprint(key)
	log := ctrl.LoggerFrom(ctx)
	switch {
	case rotate:
		log.Info("Rotated the tenant's signing key", "secret", name, "fingerprint", fp, "previous", old, "rotationRequest", want)
		r.Recorder.Eventf(t, desired, corev1.EventTypeNormal, ReasonSigningKeyRotated, "RotateSigningKey",
			"Generated a new signing key into Secret %s for rotation request %q (fingerprint %s, was %s); the sandbox gets it next", name, want, fp, old)
	case invalid:
		log.Info("Replaced the tenant's signing key: its Secret held no valid key", "secret", name, "fingerprint", fp)
		r.Recorder.Eventf(t, desired, corev1.EventTypeWarning, ReasonSigningKeyReplaced, "GenerateSigningKey",
			"Secret %s held no valid signing key: generated a new one (fingerprint %s)", name, fp)
	case create:
		// No Event: a new tenant's path to Ready records none.
		log.Info("Generated the tenant's signing key", "secret", name, "fingerprint", fp)
	}
	t.Status.SigningKey = keepSandboxFingerprint(&playgroundv1alpha1.TenantSigningKeyStatus{
		SigningKeyStatus:     playgroundv1alpha1.SigningKeyStatus{Fingerprint: fp, PublicKey: signingkey.PublicKey(key)},
		SecretName:           name,
		Generated:            true,
		RotationRequest:      desired.Annotations[AnnotationKeyRotationRequest],
		PreviousFingerprints: splitFingerprints(desired.Annotations[AnnotationPreviousFingerprints]),
	}, prev)
	return nil
}

// secret reads a Secret around the cache (which holds only credential
// Secrets), nil when there is none.
func (r *TenantReconciler) secret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return s, nil
}

// deleteGeneratedKey deletes the generated signing key's Secret that the
// tenant controls (under reclaim policy Delete) when the tenant is
// deleted: the key signs in the tenant's name, so it goes at once, as the
// token does, not whenever a garbage collector comes by (and never where
// none runs). Under Retain it stays, with the pile that holds it, for a
// Tenant created again under the same name.
func (r *TenantReconciler) deleteGeneratedKey(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	s, err := r.secret(ctx, client.ObjectKey{Namespace: t.Namespace, Name: playgroundv1alpha1.SigningKeySecretName(t.Name)})
	if err != nil {
		return fmt.Errorf("reading the signing key's Secret of tenant %s: %w", t.Name, err)
	}
	if s == nil || !metav1.IsControlledBy(s, t) || !s.DeletionTimestamp.IsZero() {
		return nil
	}
	uid := s.UID
	if err := r.Delete(ctx, s, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the signing key's Secret %s: %w", s.Name, err)
	}
	return nil
}

// keyOwned says whether a generated key's Secret is the Tenant's to
// delete with it: under reclaim policy Delete.
func keyOwned(t *playgroundv1alpha1.Tenant) bool {
	return t.Spec.Pile.ReclaimPolicy == playgroundv1alpha1.ReclaimDelete
}

// keyOwnerSettled says whether the generated key's Secret was last
// written under the reclaim policy the Tenant has now (status remembers
// it through the owner the Secret was given: see setKeyOwner).
func (r *TenantReconciler) keyOwnerSettled(t *playgroundv1alpha1.Tenant) bool {
	r.keyOwnersMu.Lock()
	defer r.keyOwnersMu.Unlock()
	owned, ok := r.keyOwners[t.UID]
	return ok && owned == keyOwned(t)
}

// setKeyOwner makes the Tenant the controller of its generated key's
// Secret under reclaim policy Delete, and no owner of it under Retain.
func (r *TenantReconciler) setKeyOwner(t *playgroundv1alpha1.Tenant, s *corev1.Secret) error {
	owned := keyOwned(t)
	if owned {
		if err := r.setController(t, s); err != nil {
			return err
		}
	} else {
		s.OwnerReferences = slices.DeleteFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.Kind == "Tenant" && o.Name == t.Name
		})
		if len(s.OwnerReferences) == 0 {
			s.OwnerReferences = nil
		}
	}
	r.keyOwnersMu.Lock()
	if r.keyOwners == nil {
		r.keyOwners = map[types.UID]bool{}
	}
	r.keyOwners[t.UID] = owned
	r.keyOwnersMu.Unlock()
	return nil
}

// keepSandboxFingerprint carries over what the last pass saw the sandbox
// hold (reconcileSandbox sets it).
func keepSandboxFingerprint(st, prev *playgroundv1alpha1.TenantSigningKeyStatus) *playgroundv1alpha1.TenantSigningKeyStatus {
	if prev != nil {
		st.SandboxFingerprint = prev.SandboxFingerprint
	}
	return st
}

// remember puts fp first in prevs, once, keeping at most
// maxPreviousFingerprints.
func remember(prevs []string, fp string) []string {
	out := append([]string{fp}, slices.DeleteFunc(slices.Clone(prevs), func(p string) bool { return p == fp })...)
	if len(out) > maxPreviousFingerprints {
		out = out[:maxPreviousFingerprints]
	}
	return out
}

func splitFingerprints(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
