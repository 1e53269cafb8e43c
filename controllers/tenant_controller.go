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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/eventseries"
	"github.com/playground-dev/playground/internal/keyedmutex"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
	"github.com/playground-dev/playground/internal/tenanttoken"
)

// Annotations the Tenant reconciler keeps on a credential Secret, so that
// the Secret alone says which rotation request its token answers: a status
// lost (a restore without status, a failed status write after a rotation)
// never makes it mint again.
const (
	AnnotationRotationRequest = "playground.dev/rotation-request"
	AnnotationIssuedAt        = "playground.dev/issued-at"
)

// Condition and Event reasons of Tenants. Events of a transition use the
// reason of the condition it leads to; TokenRotated, TokenReissued,
// Resumed, SandboxCreated and SandboxUpdated are Events only.
const (
	// ReasonTokenIssued: CredentialsReady=True, the token is in the Secret.
	ReasonTokenIssued = "TokenIssued"
	// ReasonTokenRotated: a new token answers a new rotation request.
	ReasonTokenRotated = "TokenRotated"
	// ReasonTokenReissued: the Secret was gone, held no valid token or was
	// adopted (not minted for this Tenant), so a new token was minted; this
	// rotates the tenant's credential.
	ReasonTokenReissued = "TokenReissued"
	// ReasonSuspended: CredentialsReady=False and Ready=False while
	// spec.suspended; the gateway refuses the token.
	ReasonSuspended = "Suspended"
	// ReasonResumed: spec.suspended was cleared, the same token works again.
	ReasonResumed = "Resumed"
	// ReasonSecretConflict (Stalled): the Secret's name is taken by a Secret
	// this Tenant cannot own.
	ReasonSecretConflict = "SecretConflict"
	// ReasonCredentialsError: reading or writing the Secret failed; retried.
	ReasonCredentialsError = "CredentialsError"
	// ReasonSandboxPending: SandboxReady=Unknown until the Sandbox reports Ready.
	ReasonSandboxPending = "SandboxPending"
	// ReasonSandboxUpdated: the template's changes were copied into the
	// Sandbox. (Its creation records no Event: see reconcileCredentials.)
	ReasonSandboxUpdated = "SandboxUpdated"
	// ReasonSandboxConflict (Stalled): the Sandbox's name is taken by one
	// this Tenant cannot own.
	ReasonSandboxConflict = "SandboxConflict"
	// ReasonBackendImmutable (Stalled): spec.sandbox.backend differs from the
	// existing Sandbox's, which cannot change.
	ReasonBackendImmutable = "BackendImmutable"
	// ReasonIsolationImmutable (Stalled): spec.sandbox.isolation differs
	// from the existing Sandbox's, which cannot change.
	ReasonIsolationImmutable = "IsolationImmutable"
	// ReasonFromSnapshotImmutable (Stalled): spec.sandbox.fromSnapshot
	// differs from the existing Sandbox's, which it started from.
	ReasonFromSnapshotImmutable = "FromSnapshotImmutable"
	// ReasonStorageImmutable (Stalled): spec.sandbox.storage or spec.pile
	// asks for other size or inode limits than the bound Sandbox's, which
	// are fixed.
	ReasonStorageImmutable = "StorageImmutable"
	// ReasonSandboxError: reading or writing the Sandbox failed; retried.
	ReasonSandboxError = "SandboxError"
	// ReasonDeleting: the Tenant is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonPending: a sub-condition of Ready (CredentialsReady,
	// SandboxReady) is not reported yet, as in a Tenant's first pass.
	ReasonPending = "Pending"
)

const (
	// cacheLag is how long to wait when a write finds the cache behind.
	cacheLag = time.Second
)

// TenantReconciler mints tenants' credentials and ensures their Sandbox.
//
// Credentials: a token of 256 random bits, "pgt_" + base64url, in the
// Secret CredentialSecretName(tenant) (type CredentialSecretType, key
// CredentialTokenKey, label TenantLabel, controlled by the Tenant). A token
// in the Secret is kept across restarts; a new one is minted when
// spec.credentials.rotationRequest changes, and also when the Secret is
// deleted, its token corrupted or the Secret adopted (a token this
// controller did not mint is never trusted), which therefore rotates the
// credential (Event TokenReissued). The token never
// appears in status, events or logs: only its fingerprint does, and its
// full SHA-256 in status.credentials.tokenSHA256, which is what the
// gateway authenticates against. That hash is published only for a token
// this controller minted into a Secret the Tenant controls, in the same
// status write as the fingerprint: a Secret planted by someone else is
// never a credential.
type TenantReconciler struct {
	client.Client
	// APIReader reads around the cache, which holds only credential
	// Secrets (CacheOptions): a Secret that takes the credential's name
	// without its label or type is found there. Nil means the manager's.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  recorder.EventRecorder
	// Workers is how many Tenants are reconciled at once; 0 means one.
	Workers int
	// recent keeps the Tenant statuses applied in the last seconds, so
	// that a pass over a cache that lags them does not apply them again.
	recent recentApplies[playgroundv1alpha1.TenantStatus]

	// Binder, when set, binds a Sandbox as the Tenant reconciler creates
	// it (node and the agent's finalizer in the create): two API writes
	// fewer per tenant than binding it after. Without it, or without an
	// eligible node, the Sandbox is created unbound, for the binder.
	Binder *SandboxReconciler

	// keyOwners remembers, by Tenant, whether its generated signing key's
	// Secret was last written owned by it (reclaim policy Delete), so
	// that a change of the policy is carried to the Secret.
	keyOwnersMu sync.Mutex
	keyOwners   map[types.UID]bool

	// policyChecks remembers each Tenant's last check against the
	// TenantPolicies of its namespace; namespaceLocks serialises, per
	// namespace, the checks of its namespace ceilings with the writes of
	// Sandboxes they allow (tenant_policy.go).
	policyChecks   policyChecks
	namespaceLocks keyedmutex.Mutex
}

// The Tenant reconciler patches Tenants (finalizer) and applies their
// status; creates, patches and deletes their Sandboxes; creates, updates
// and deletes credential Secrets. Secrets cannot be narrowed by label in
// RBAC: list and watch stay cluster-wide, but the cache keeps only the
// credential Secrets (CacheOptions). tenants/finalizers lets it set
// blockOwnerDeletion on what it owns.
// The create on tenants is for dry runs only: the manager checks a Tenant
// against the TenantPolicies of its namespace by a dry-run create of a
// copy, which the admission policy checks as it checks any Tenant
// (tenant_policy.go); RBAC cannot grant dry runs alone.
// +kubebuilder:rbac:groups=playground.dev,resources=tenants,verbs=get;list;watch;patch;create
// +kubebuilder:rbac:groups=playground.dev,resources=tenants/status,verbs=patch
// +kubebuilder:rbac:groups=playground.dev,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// The manager's leader election (a Lease it gets, creates and updates), in
// the namespace of --lease-namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=playground-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=playground-system,resources=events,verbs=create;patch

// Reconcile reconciles one Tenant.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	tenant := &playgroundv1alpha1.Tenant{}
	if err := r.Get(ctx, req.NamespacedName, tenant); err != nil {
		if apierrors.IsNotFound(err) {
			r.policyChecks.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !tenant.DeletionTimestamp.IsZero()
	if !controllerutil.ContainsFinalizer(tenant, playgroundv1alpha1.TenantFinalizer) {
		if deleting {
			return ctrl.Result{}, nil
		}
		patch := client.MergeFromWithOptions(tenant.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(tenant, playgroundv1alpha1.TenantFinalizer)
		if err := r.Patch(ctx, tenant, patch); err != nil {
			return pgreconcile.Result(conflictIsWait(fmt.Errorf("adding the finalizer to tenant %s: %w", klog.KObj(tenant), err)))
		}
	}

	before := tenant.DeepCopy()
	var err error
	defer func() {
		if perr := r.applyStatus(ctx, before, tenant, err); perr != nil {
			retErr = errors.Join(retErr, perr)
		}
	}()
	if deleting {
		err = r.reconcileDelete(ctx, tenant)
	} else {
		err = r.reconcileNormal(ctx, tenant)
	}
	return pgreconcile.Result(err)
}

// conflictIsWait turns a conflict (a write based on a cached object that
// the API server has since changed) into a bounded wait for the cache.
func conflictIsWait(err error) error {
	if apierrors.IsConflict(err) {
		return pgreconcile.Wait(cacheLag, "%v", err)
	}
	return err
}

// applyStatus writes the status the pass computed, in one server-side
// apply of all of it (the Tenant reconciler owns every field of a Tenant's
// status); the observed generation moves only when the pass settled.
func (r *TenantReconciler) applyStatus(ctx context.Context, before, tenant *playgroundv1alpha1.Tenant, err error) error {
	if !controllerutil.ContainsFinalizer(tenant, playgroundv1alpha1.TenantFinalizer) {
		return nil // released: the Tenant is gone or going
	}
	if pgreconcile.Settled(err) {
		tenant.Status.ObservedGeneration = tenant.Generation
	}
	if equality.Semantic.DeepEqual(before.Status, tenant.Status) {
		return nil
	}
	now := time.Now()
	from, to := untimed(before.Status), untimed(tenant.Status)
	if r.recent.repeats(tenant.UID, from, to, now) {
		return nil
	}
	ac := playgroundv1alpha1ac.Tenant(tenant.Name, tenant.Namespace).WithStatus(tenantStatus(&tenant.Status))
	if err := r.Status().Apply(ctx, ac, client.FieldOwner(playgroundv1alpha1.TenantControllerFieldOwner), client.ForceOwnership); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("applying the status of tenant %s: %w", klog.KObj(tenant), err)
	}
	r.recent.applied(tenant.UID, from, to, now)
	return nil
}

// untimed is s with its conditions' transition times left out
// (pgreconcile.Untimed): a pass over a cache that lags computes the same
// conditions as the pass it lags, with times of its own.
func untimed(s playgroundv1alpha1.TenantStatus) playgroundv1alpha1.TenantStatus {
	s = *s.DeepCopy()
	s.Conditions = pgreconcile.Untimed(s.Conditions)
	return s
}

// tenantConditions are the condition types of a Tenant's status, all the
// Tenant reconciler's.
var tenantConditions = []string{
	playgroundv1alpha1.ReadyCondition, playgroundv1alpha1.ReconcilingCondition, playgroundv1alpha1.StalledCondition,
	playgroundv1alpha1.CredentialsReadyCondition, playgroundv1alpha1.SandboxReadyCondition,
	playgroundv1alpha1.WorkerReadyCondition, playgroundv1alpha1.PolicyCompliantCondition,
	playgroundv1alpha1.SandboxRunningCondition,
}

// tenantStatus is s as an apply configuration. A field left empty is left
// out, so that the apply removes it.
func tenantStatus(s *playgroundv1alpha1.TenantStatus) *playgroundv1alpha1ac.TenantStatusApplyConfiguration {
	ref := func(r *playgroundv1alpha1.LocalObjectReference) *playgroundv1alpha1ac.LocalObjectReferenceApplyConfiguration {
		return playgroundv1alpha1ac.LocalObjectReference().WithName(r.Name)
	}
	out := playgroundv1alpha1ac.TenantStatus().WithConditions(pgreconcile.ApplyConditions(s.Conditions, tenantConditions...)...)
	if s.ObservedGeneration != 0 {
		out.WithObservedGeneration(s.ObservedGeneration)
	}
	if s.SandboxRef != nil {
		out.WithSandboxRef(ref(s.SandboxRef))
	}
	if s.SandboxID != "" {
		out.WithSandboxID(s.SandboxID)
	}
	if s.Isolation != "" {
		out.WithIsolation(s.Isolation)
	}
	if s.Usage != nil {
		out.WithUsage(pgreconcile.ApplyUsage(s.Usage))
	}
	if k := s.SigningKey; k != nil {
		out.WithSigningKey(playgroundv1alpha1ac.TenantSigningKeyStatus().
			WithFingerprint(k.Fingerprint).WithPublicKey(k.PublicKey).WithSecretName(k.SecretName).
			WithGenerated(k.Generated).WithRotationRequest(k.RotationRequest).
			WithSandboxFingerprint(k.SandboxFingerprint).WithPreviousFingerprints(k.PreviousFingerprints...))
	}
	c := s.Credentials
	if equality.Semantic.DeepEqual(c, playgroundv1alpha1.CredentialsStatus{}) {
		return out
	}
	creds := playgroundv1alpha1ac.CredentialsStatus()
	if c.SecretRef != nil {
		creds.WithSecretRef(ref(c.SecretRef))
	}
	if c.Fingerprint != "" {
		creds.WithFingerprint(c.Fingerprint)
	}
	if c.TokenSHA256 != "" {
		creds.WithTokenSHA256(c.TokenSHA256)
	}
	if c.RotationRequest != "" {
		creds.WithRotationRequest(c.RotationRequest)
	}
	if c.IssuedAt != nil {
		creds.WithIssuedAt(*c.IssuedAt)
	}
	return out.WithCredentials(creds)
}

// reconcileNormal runs the phases, each setting its own condition, then
// summarises them into Ready, Reconciling and Stalled.
func (r *TenantReconciler) reconcileNormal(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	var errs []error
	for _, phase := range []func(context.Context, *playgroundv1alpha1.Tenant) error{
		r.reconcileCredentials,
		r.reconcileSigningKey,
		r.reconcileSandbox,
		r.reconcileWorker,
		r.reconcilePolicy,
	} {
		if err := phase(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	ready, progressing := tenantReady(t)
	pgreconcile.Summarize(&t.Status.Conditions, t.Generation, ready, progressing, err)
	return err
}

// tenantReady summarises CredentialsReady, SandboxReady and, for the
// workers catalog, WorkerReady into Ready, and says whether the controller
// is still working towards the spec.
func tenantReady(t *playgroundv1alpha1.Tenant) (metav1.Condition, bool) {
	creds := conditionOrUnknown(t.Status.Conditions, playgroundv1alpha1.CredentialsReadyCondition)
	sbx := conditionOrUnknown(t.Status.Conditions, playgroundv1alpha1.SandboxReadyCondition)
	sandboxProgressing := sbx.Status != metav1.ConditionTrue
	workers := t.Spec.Catalog == playgroundv1alpha1.CatalogWorkers
	worker := conditionOrUnknown(t.Status.Conditions, playgroundv1alpha1.WorkerReadyCondition)
	switch {
	case t.Spec.Suspended:
		// A sandbox its agent has stopped for the suspension is where it
		// is meant to be, not on its way (as the Sandbox itself reports).
		stopped := sbx.Status == metav1.ConditionFalse && sbx.Reason == playgroundv1alpha1.ReasonSuspended
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonSuspended,
			Message: "The tenant is suspended: the gateway refuses its token until spec.suspended is cleared"}, sandboxProgressing && !stopped
	case creds.Status != metav1.ConditionTrue:
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: creds.Reason, Message: creds.Message}, true
	case sbx.Status != metav1.ConditionTrue:
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: sbx.Reason, Message: "Sandbox: " + sbx.Message}, true
	case workers && worker.Status != metav1.ConditionTrue:
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: worker.Reason, Message: "Worker: " + worker.Message}, true
	case workers:
		return metav1.Condition{Status: metav1.ConditionTrue, Reason: playgroundv1alpha1.ReasonReady,
			Message: "The token is issued, the sandbox is ready and the gateway serves the tenant's worker mapping"}, false
	default:
		return metav1.Condition{Status: metav1.ConditionTrue, Reason: playgroundv1alpha1.ReasonReady,
			Message: "The token is issued and the sandbox is ready"}, false
	}
}

func conditionOrUnknown(conds []metav1.Condition, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: metav1.ConditionUnknown, Reason: ReasonPending, Message: typ + " is not reported yet"}
}

func (r *TenantReconciler) setConditionf(t *playgroundv1alpha1.Tenant, typ string, status metav1.ConditionStatus, reason, format string, args ...any) {
	meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...), ObservedGeneration: t.Generation,
	})
}

// reconcileCredentials keeps a valid token in the tenant's Secret, minting
// one when there is none or a rotation is requested, and reports it.
func (r *TenantReconciler) reconcileCredentials(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	// A tenant that never had a token most likely has no Secret yet: one
	// the cache does not hold is created at once, not looked for through
	// the API server first (a read of etcd on every new tenant's path);
	// only a create that finds a Secret there (one planted under the
	// name, outside the cache) reads it, and it is judged as any.
	err := r.credentials(ctx, t, t.Status.Credentials.Fingerprint == "")
	if errors.Is(err, errNameTaken) {
		err = r.credentials(ctx, t, false)
	}
	return err
}

// errNameTaken: a Secret created without reading the name first exists
// already; it is read, and judged, next.
var errNameTaken = errors.New("the Secret exists already")

// credentials is reconcileCredentials, a Secret not in the cache looked
// for through the API server unless guess says it most likely does not
// exist (errNameTaken when it does).
func (r *TenantReconciler) credentials(ctx context.Context, t *playgroundv1alpha1.Tenant, guess bool) error {
	log := ctrl.LoggerFrom(ctx)
	name := playgroundv1alpha1.CredentialSecretName(t.Name)
	secret, err := r.credentialSecret(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, !guess)
	if err != nil {
		r.setConditionf(t, playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionUnknown, ReasonCredentialsError, "Reading Secret %s: %v", name, err)
		return fmt.Errorf("reading the credential Secret %s/%s: %w", t.Namespace, name, err)
	}
	if secret != nil {
		if why := ownable(secret, t); why != "" || secret.Type != playgroundv1alpha1.CredentialSecretType {
			if why == "" {
				why = fmt.Sprintf("it has type %s, not %s", secret.Type, playgroundv1alpha1.CredentialSecretType)
			}
			// The gateway authenticates against the published hash: a
			// Secret this Tenant cannot own publishes none, and the
			// tenant's previous token (if any) stops working.
			t.Status.Credentials.TokenSHA256 = ""
			err := pgreconcile.Stall(ReasonSecretConflict, "Secret %s exists and cannot hold this tenant's token: %s; delete or rename it", name, why)
			r.setConditionf(t, playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionFalse, ReasonSecretConflict, "%s", err.Error())
			return err
		}
	}

	want := t.Spec.Credentials.RotationRequest
	token := ""
	if secret != nil {
		token = string(secret.Data[playgroundv1alpha1.CredentialTokenKey])
	}
	var mintReason string
	switch {
	case secret == nil && t.Status.Credentials.Fingerprint == "":
		mintReason = ReasonTokenIssued
	case secret == nil, !tenanttoken.Valid(token), !metav1.IsControlledBy(secret, t):
		// A token this Tenant's controller did not mint (a Secret adopted,
		// say one planted before the Tenant existed) is never trusted.
		mintReason = ReasonTokenReissued
	case mintedFor(secret, t) != want:
		mintReason = ReasonTokenRotated
	}

	previous := t.Status.Credentials.Fingerprint
	if mintReason != "" {
		if token, err = tenanttoken.Mint(); err != nil {
			r.setConditionf(t, playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionUnknown, ReasonCredentialsError, "Minting a token: %v", err)
			return err
		}
	}
	create := secret == nil
	if create {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name},
			Type:       playgroundv1alpha1.CredentialSecretType,
		}
	}
	desired := secret.DeepCopy()
	if mintReason != "" {
		if desired.Data == nil {
			desired.Data = map[string][]byte{}
		}
		desired.Data[playgroundv1alpha1.CredentialTokenKey] = []byte(token)
		metav1.SetMetaDataAnnotation(&desired.ObjectMeta, AnnotationRotationRequest, want)
		metav1.SetMetaDataAnnotation(&desired.ObjectMeta, AnnotationIssuedAt, time.Now().UTC().Format(time.RFC3339))
	}
	metav1.SetMetaDataLabel(&desired.ObjectMeta, playgroundv1alpha1.TenantLabel, t.Name)
	if err := r.setController(t, desired); err != nil {
		return err
	}

	var werr error
	switch {
	case create:
		werr = r.Create(ctx, desired)
	case !equality.Semantic.DeepEqual(secret, desired):
		werr = r.Update(ctx, desired) // resourceVersion guards against a stale read
	}
	if guess && apierrors.IsAlreadyExists(werr) {
		return errNameTaken
	}
	if werr != nil {
		r.setConditionf(t, playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionUnknown, ReasonCredentialsError, "Writing Secret %s: %v", name, werr)
		if apierrors.IsAlreadyExists(werr) {
			return pgreconcile.Wait(cacheLag, "Secret %s exists but is not cached yet", name)
		}
		return conflictIsWait(fmt.Errorf("writing the credential Secret %s/%s: %w", t.Namespace, name, werr))
	}
	secret = desired

	// The hash goes into status only now that the Secret holds the token,
	// and in the same write as the fingerprint and the rotation request:
	// a client that waits for the status to describe the token before it
	// reads the Secret presents a token the gateway learns from that write.
	fp := tenanttoken.Fingerprint(token)
	t.Status.Credentials.SecretRef = &playgroundv1alpha1.LocalObjectReference{Name: name}
	t.Status.Credentials.Fingerprint = fp
	t.Status.Credentials.TokenSHA256 = playgroundv1alpha1.TokenSHA256(token)
	t.Status.Credentials.RotationRequest = mintedFor(secret, t)
	t.Status.Credentials.IssuedAt = issuedAt(secret)

	switch mintReason {
	case ReasonTokenIssued:
		// No Event: a new tenant's path to Ready records none (each is an
		// API write; the CredentialsReady condition and its transition
		// time say as much). Changes and repairs do record one.
		log.Info("Minted the tenant's token", "secret", name, "fingerprint", fp)
	case ReasonTokenRotated:
		log.Info("Rotated the tenant's token", "secret", name, "fingerprint", fp, "previous", previous, "rotationRequest", want)
		r.Recorder.Eventf(t, secret, corev1.EventTypeNormal, ReasonTokenRotated, "RotateToken",
			"Minted a new token into Secret %s for rotation request %q (fingerprint %s, was %s); the previous token is refused from now on", name, want, fp, previous)
	case ReasonTokenReissued:
		log.Info("Reissued the tenant's token: its Secret was missing, not the tenant's, or held no valid token", "secret", name, "fingerprint", fp, "previous", previous)
		r.Recorder.Eventf(t, secret, corev1.EventTypeWarning, ReasonTokenReissued, "MintToken",
			"Secret %s was missing, not this tenant's, or held no valid token: minted a new one (fingerprint %s); any previous token is refused", name, fp)
	}

	prev := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.CredentialsReadyCondition)
	wasSuspended := prev != nil && prev.Reason == ReasonSuspended
	if t.Spec.Suspended {
		r.setConditionf(t, playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionFalse, ReasonSuspended,
			"The tenant is suspended: the gateway refuses its token (fingerprint %s) until spec.suspended is cleared", fp)
		if !wasSuspended {
			log.Info("Suspended the tenant")
			r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, ReasonSuspended, "Suspend", "Suspended: the token (fingerprint %s) is refused; the sandbox is kept", fp)
		}
		return nil
	}
	r.setConditionf(t, playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionTrue, ReasonTokenIssued,
		"The token (fingerprint %s) is in Secret %s", fp, name)
	if wasSuspended {
		log.Info("Resumed the tenant")
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, ReasonResumed, "Resume", "Resumed: the token (fingerprint %s) is accepted again", fp)
	}
	return nil
}

// credentialSecret reads the Secret of key, or nil when there is none. The
// cache holds only Secrets with the tenant label and the credential type;
// one that takes the name without them (planted before the Tenant, or its
// label removed) is read from the API server when throughAPI holds, so
// that it is still found, refused or adopted as before.
func (r *TenantReconciler) credentialSecret(ctx context.Context, key client.ObjectKey, throughAPI bool) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) && throughAPI && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, secret)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return secret, nil
}

// mintedFor is the rotation request the Secret's token was minted for.
func mintedFor(secret *corev1.Secret, t *playgroundv1alpha1.Tenant) string {
	if v, ok := secret.Annotations[AnnotationRotationRequest]; ok {
		return v
	}
	return t.Status.Credentials.RotationRequest
}

// issuedAt is when the Secret's token was minted.
func issuedAt(secret *corev1.Secret) *metav1.Time {
	if ts, err := time.Parse(time.RFC3339, secret.Annotations[AnnotationIssuedAt]); err == nil {
		return &metav1.Time{Time: ts}
	}
	ts := secret.CreationTimestamp
	return &ts
}

// ownable returns "" when obj is controlled by t or may be adopted by it:
// no controller, or a Tenant of the same name whose UID went stale (a
// restore from backup). Otherwise it says who controls obj.
func ownable(obj metav1.Object, t *playgroundv1alpha1.Tenant) string {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID == t.UID {
		return ""
	}
	if ref.Kind == "Tenant" && ref.Name == t.Name && strings.HasPrefix(ref.APIVersion, playgroundv1alpha1.GroupVersion.Group+"/") {
		return ""
	}
	return fmt.Sprintf("it is controlled by %s %s", ref.Kind, ref.Name)
}

// setController makes t the controller of obj, replacing a stale reference
// to a former Tenant of the same name.
func (r *TenantReconciler) setController(t *playgroundv1alpha1.Tenant, obj metav1.Object) error {
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.UID != t.UID {
		refs := obj.GetOwnerReferences()
		kept := refs[:0]
		for _, o := range refs {
			if o.UID != ref.UID {
				kept = append(kept, o)
			}
		}
		obj.SetOwnerReferences(kept)
	}
	if err := controllerutil.SetControllerReference(t, obj, r.Scheme); err != nil {
		return fmt.Errorf("setting the owner of %s: %w", obj.GetName(), err)
	}
	return nil
}

// desiredSandbox is the Sandbox the Tenant's template asks for.
func desiredSandbox(t *playgroundv1alpha1.Tenant) *playgroundv1alpha1.Sandbox {
	persona := t.Spec.Persona
	if persona == "" {
		persona = t.Name
		if len(persona) > 128 { // a Sandbox's persona is at most 128 characters
			persona = persona[:128]
		}
	}
	var annotations map[string]string
	if v, ok := t.Annotations[playgroundv1alpha1.ResolveImageAnnotation]; ok {
		annotations = map[string]string{playgroundv1alpha1.ResolveImageAnnotation: v}
	}
	return &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   t.Namespace,
			Name:        t.Name,
			Labels:      map[string]string{playgroundv1alpha1.TenantLabel: t.Name},
			Annotations: annotations,
		},
		Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef:       playgroundv1alpha1.LocalObjectReference{Name: t.Name},
			Persona:         persona,
			SandboxTemplate: *t.Spec.Sandbox.DeepCopy(),
			Suspended:       t.Spec.Suspended,
			Pile: playgroundv1alpha1.SandboxPile{
				PileStorage: *t.Spec.Pile.PileStorage.DeepCopy(),
				SigningKey:  signingKeySource(t.Status.SigningKey),
				Shared:      t.Spec.Pile.Shared.DeepCopy(),
			},
		},
	}
}

// signingKeySource is the Sandbox's spec.pile.signingKey for the tenant's key,
// as its status describes it; nil while it describes none.
func signingKeySource(st *playgroundv1alpha1.TenantSigningKeyStatus) *playgroundv1alpha1.SigningKeySource {
	if st == nil || st.SecretName == "" {
		return nil
	}
	return &playgroundv1alpha1.SigningKeySource{SecretName: st.SecretName, Fingerprint: st.Fingerprint}
}

// updateSandbox copies into sbx what may change of the desired spec and
// returns the names of the fields it changed. The backend is never changed:
// backendFixed is true when the template asks for another one. nodeName is
// the binder's and is never touched; the node selector only matters, and
// is only copied, until the sandbox is bound. So do the storage limits,
// which are fixed on the node once bound (the API server refuses a change
// then): storageFixed is true when the template asks for others.
func updateSandbox(sbx *playgroundv1alpha1.Sandbox, want *playgroundv1alpha1.Sandbox) (changed []string, backendFixed, storageFixed bool) {
	have, w := &sbx.Spec, &want.Spec
	set := func(field string, equal bool, apply func()) {
		if !equal {
			apply()
			changed = append(changed, field)
		}
	}
	set("persona", have.Persona == w.Persona, func() { have.Persona = w.Persona })
	set("suspended", have.Suspended == w.Suspended, func() { have.Suspended = w.Suspended })
	set("resources", equality.Semantic.DeepEqual(have.Resources, w.Resources), func() { have.Resources = w.Resources })
	// The writable layer's and the pile's limits are fixed on the node
	// once bound; the pile's reclaim policy follows the Tenant always.
	pileLimits := func(p playgroundv1alpha1.PileStorage) playgroundv1alpha1.PileStorage { p.ReclaimPolicy = ""; return p }
	if have.NodeName == "" {
		set("storage", equality.Semantic.DeepEqual(have.Storage, w.Storage), func() { have.Storage = w.Storage })
		set("pile", equality.Semantic.DeepEqual(have.Pile.PileStorage, w.Pile.PileStorage), func() { have.Pile.PileStorage = w.Pile.PileStorage })
	} else {
		set("pile", have.Pile.ReclaimPolicy == w.Pile.ReclaimPolicy, func() { have.Pile.ReclaimPolicy = w.Pile.ReclaimPolicy })
		storageFixed = !equality.Semantic.DeepEqual(have.Storage, w.Storage) ||
			!equality.Semantic.DeepEqual(pileLimits(have.Pile.PileStorage), pileLimits(w.Pile.PileStorage))
	}
	set("faculties", equality.Semantic.DeepEqual(have.Faculties, w.Faculties), func() { have.Faculties = w.Faculties })
	set("pile.shared", equality.Semantic.DeepEqual(have.Pile.Shared, w.Pile.Shared), func() { have.Pile.Shared = w.Pile.Shared })
	set("loginProfile", equality.Semantic.DeepEqual(have.LoginProfile, w.LoginProfile), func() { have.LoginProfile = w.LoginProfile })
	set("network", equality.Semantic.DeepEqual(have.Network, w.Network), func() { have.Network = w.Network })
	set("idleSuspend", equality.Semantic.DeepEqual(have.IdleSuspend, w.IdleSuspend), func() { have.IdleSuspend = w.IdleSuspend })
	set("usageLimits", equality.Semantic.DeepEqual(have.UsageLimits, w.UsageLimits), func() { have.UsageLimits = w.UsageLimits })
	set("image", equality.Semantic.DeepEqual(have.Image, w.Image), func() { have.Image = w.Image })
	// A re-resolve asked of the Tenant is asked of its Sandbox; one asked
	// of the Sandbox itself is left as it is.
	if v, ok := want.Annotations[playgroundv1alpha1.ResolveImageAnnotation]; ok && sbx.Annotations[playgroundv1alpha1.ResolveImageAnnotation] != v {
		set("image resolve request", false, func() { metav1.SetMetaDataAnnotation(&sbx.ObjectMeta, playgroundv1alpha1.ResolveImageAnnotation, v) })
	}
	if w.Pile.SigningKey != nil { // none: the tenant's key could not be read this pass
		set("pile.signingKey", equality.Semantic.DeepEqual(have.Pile.SigningKey, w.Pile.SigningKey), func() { have.Pile.SigningKey = w.Pile.SigningKey })
	}
	if have.NodeName == "" {
		set("nodeSelector", equality.Semantic.DeepEqual(have.NodeSelector, w.NodeSelector), func() { have.NodeSelector = w.NodeSelector })
	}
	if sbx.Labels[playgroundv1alpha1.TenantLabel] != want.Name {
		set("labels", false, func() { metav1.SetMetaDataLabel(&sbx.ObjectMeta, playgroundv1alpha1.TenantLabel, want.Name) })
	}
	backendFixed = w.Backend != "" && have.Backend != w.Backend
	return changed, backendFixed, storageFixed
}

// sandboxReady mirrors a Sandbox's Ready condition as SandboxReady, except
// its progress on the way: while the Sandbox is being provisioned the
// condition is one fixed SandboxPending, so that each step the binder and
// the agent report is not a write of the Tenant's status too. What is not
// progress (a failure, an unavailable node, a wait for faculties, Ready)
// is mirrored as it is. (reconcileSandbox also turns it False for a
// sandbox that serves without what its manager could not deliver: an
// egress credential, a new signing key.)
func sandboxReady(sbx *playgroundv1alpha1.Sandbox) metav1.Condition {
	c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition)
	if c == nil || (c.Status != metav1.ConditionTrue && c.Reason == playgroundv1alpha1.ReasonProvisioning) {
		return metav1.Condition{Type: playgroundv1alpha1.SandboxReadyCondition, Status: metav1.ConditionUnknown, Reason: ReasonSandboxPending,
			Message: fmt.Sprintf("Waiting for Sandbox %s to report Ready (kubectl describe sandbox %s shows its progress)", sbx.Name, sbx.Name)}
	}
	return metav1.Condition{Type: playgroundv1alpha1.SandboxReadyCondition, Status: c.Status, Reason: c.Reason, Message: c.Message}
}

// sandboxRunning mirrors a Sandbox's Running condition as SandboxRunning;
// nil while the Sandbox has none.
func sandboxRunning(sbx *playgroundv1alpha1.Sandbox) *metav1.Condition {
	c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.RunningCondition)
	if c == nil {
		return nil
	}
	return &metav1.Condition{Type: playgroundv1alpha1.SandboxRunningCondition, Status: c.Status, Reason: c.Reason, Message: c.Message}
}

// reconcileSandbox ensures the tenant's Sandbox and mirrors its readiness.
func (r *TenantReconciler) reconcileSandbox(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	log := ctrl.LoggerFrom(ctx)
	want := desiredSandbox(t)
	sbx := &playgroundv1alpha1.Sandbox{}
	err := r.Get(ctx, client.ObjectKeyFromObject(want), sbx)
	if apierrors.IsNotFound(err) {
		if err := r.setController(t, want); err != nil {
			return err
		}
		written, err := r.withinNamespaceCeilings(ctx, want, nil)
		if err != nil {
			t.Status.SandboxRef = nil
			if !pgreconcile.Settled(err) {
				r.setConditionf(t, playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionUnknown, ReasonSandboxError, "Checking the ceilings of namespace %s: %v", t.Namespace, err)
				return fmt.Errorf("checking the namespace ceilings of sandbox %s: %w", klog.KObj(want), err)
			}
			if !waitsForNamespaceRoom(t) {
				log.Info("No sandbox for the tenant: its namespace's ceiling", "reason", err.Error())
				r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonNamespaceCeilingExceeded, "CreateSandbox", "%s", err.Error())
			}
			r.setConditionf(t, playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionFalse, playgroundv1alpha1.ReasonNamespaceCeilingExceeded, "%s", err.Error())
			return err
		}
		bound := func(bool) {}
		if r.Binder != nil {
			bound = r.Binder.bindAtCreate(ctx, want)
		}
		err = r.Create(ctx, want)
		written()
		bound(err == nil)
		switch {
		case apierrors.IsAlreadyExists(err):
			// An earlier pass created it and the cache lags: read it
			// around the cache rather than report a transient error (in
			// a burst, that report and its repair were two status
			// writes more for one tenant in twenty).
			if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), sbx); err != nil {
				r.setConditionf(t, playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionUnknown, ReasonSandboxError, "Reading Sandbox %s: %v", want.Name, err)
				return fmt.Errorf("reading sandbox %s: %w", klog.KObj(want), err)
			}
		case err != nil:
			r.setConditionf(t, playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionUnknown, ReasonSandboxError, "Creating Sandbox %s: %v", want.Name, err)
			return fmt.Errorf("creating sandbox %s: %w", klog.KObj(want), err)
		default:
			// No Event on a new tenant's path to Ready (see reconcileCredentials).
			log.Info("Created the tenant's sandbox", "sandbox", klog.KObj(want), "backend", want.Spec.Backend)
			sbx = want
		}
	} else if err != nil {
		r.setConditionf(t, playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionUnknown, ReasonSandboxError, "Reading Sandbox %s: %v", want.Name, err)
		return fmt.Errorf("reading sandbox %s: %w", klog.KObj(want), err)
	}

	why := ownable(sbx, t)
	if why == "" && sbx.Spec.TenantRef.Name != t.Name {
		why = fmt.Sprintf("it serves tenant %s", sbx.Spec.TenantRef.Name)
	}
	if why != "" {
		err := pgreconcile.Stall(ReasonSandboxConflict, "Sandbox %s exists and cannot be this tenant's: %s; delete or rename it", sbx.Name, why)
		r.setConditionf(t, playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionFalse, ReasonSandboxConflict, "%s", err.Error())
		return err
	}
	t.Status.SandboxRef = &playgroundv1alpha1.LocalObjectReference{Name: sbx.Name}
	ready := sandboxReady(sbx)
	serving := ready.Status == metav1.ConditionTrue
	if serving {
		// The agent's choice, published once the sandbox serves: not at
		// each step on the way, each a write of the Tenant's status.
		t.Status.SandboxID = sbx.Status.SandboxID
	}
	// What the sandbox spent, as its agent wrote it (at most once a
	// minute, and when a limit is reached or resets).
	t.Status.Usage = sbx.Status.Usage.DeepCopy()
	// Whether its processes run, as its agent wrote it (paced, at most
	// once per --state-write-interval), and the isolation it runs with
	// (the manager's, once). Both wait, as SandboxReady does, while the
	// sandbox is on its way: its agent reports Running with Provisioned,
	// which is not to cost a write of the Tenant's status of its own.
	if ready.Reason != ReasonSandboxPending {
		t.Status.Isolation = sbx.Status.Isolation
		if running := sandboxRunning(sbx); running != nil {
			running.ObservedGeneration = t.Generation
			meta.SetStatusCondition(&t.Status.Conditions, *running)
		} else {
			meta.RemoveStatusCondition(&t.Status.Conditions, playgroundv1alpha1.SandboxRunningCondition)
		}
	}
	// Which key the sandbox's pile holds: the tenant's, or the one before
	// while the new one is on its way. Published once the sandbox serves,
	// as its ID is: the agent reports the key in the write that says it
	// is provisioned, which is not to cost a write of the Tenant's status.
	if st := t.Status.SigningKey; st != nil && serving {
		st.SandboxFingerprint = ""
		if sbx.Status.SigningKey != nil {
			st.SandboxFingerprint = sbx.Status.SigningKey.Fingerprint
		}
	}
	if c := refusal(sbx); c != nil && serving {
		// It serves, but not all the tenant asked for: a credential or a
		// new key cannot reach it. Said here, so that the Tenant is not
		// Ready while a spec of its does not work.
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
	}
	ready.ObservedGeneration = t.Generation
	meta.SetStatusCondition(&t.Status.Conditions, ready)
	if !sbx.DeletionTimestamp.IsZero() {
		return nil // deleted from under us: re-created once gone (its deletion is watched)
	}

	updated := sbx.DeepCopy()
	if err := r.setController(t, updated); err != nil {
		return err
	}
	// A sandbox grows only within its namespace's ceilings; refused, it
	// keeps the resources and storage it has, and the rest is copied.
	written, roomErr := r.withinNamespaceCeilings(ctx, want, &sbx.Spec)
	defer written()
	if roomErr != nil {
		if !pgreconcile.Settled(roomErr) {
			return fmt.Errorf("checking the namespace ceilings of sandbox %s: %w", klog.KObj(sbx), roomErr)
		}
		keepUse(want, sbx)
	}
	changed, backendFixed, storageFixed := updateSandbox(updated, want)
	if len(changed) > 0 || !equality.Semantic.DeepEqual(sbx.OwnerReferences, updated.OwnerReferences) {
		// A merge patch carries only what changed: it cannot undo the binder's nodeName.
		if err := r.Patch(ctx, updated, client.MergeFrom(sbx)); err != nil {
			return fmt.Errorf("updating sandbox %s: %w", klog.KObj(sbx), err)
		}
		if len(changed) > 0 {
			log.Info("Updated the tenant's sandbox", "sandbox", klog.KObj(sbx), "fields", changed)
			r.Recorder.Eventf(t, updated, corev1.EventTypeNormal, ReasonSandboxUpdated, "UpdateSandbox",
				"Copied %s of the template into Sandbox %s", strings.Join(changed, ", "), sbx.Name)
		}
	}
	if backendFixed {
		if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.StalledCondition); c == nil || c.Reason != ReasonBackendImmutable {
			r.Recorder.Eventf(t, sbx, corev1.EventTypeWarning, ReasonBackendImmutable, "UpdateSandbox",
				"Sandbox %s runs backend %s and cannot change to %s", sbx.Name, sbx.Spec.Backend, want.Spec.Backend)
		}
		return pgreconcile.Stall(ReasonBackendImmutable,
			"spec.sandbox.backend is %s but Sandbox %s runs %s, and a sandbox's backend cannot change: set it back, or delete Sandbox %s to have it re-created with %s (its pile follows spec.pile.reclaimPolicy)",
			want.Spec.Backend, sbx.Name, sbx.Spec.Backend, sbx.Name, want.Spec.Backend)
	}
	if have, w := playgroundv1alpha1.IsolationOf(sbx), playgroundv1alpha1.IsolationOf(want); have != w {
		if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.StalledCondition); c == nil || c.Reason != ReasonIsolationImmutable {
			r.Recorder.Eventf(t, sbx, corev1.EventTypeWarning, ReasonIsolationImmutable, "UpdateSandbox",
				"Sandbox %s runs with %s isolation and cannot change to %s", sbx.Name, have, w)
		}
		return pgreconcile.Stall(ReasonIsolationImmutable,
			"spec.sandbox.isolation is %s but Sandbox %s runs with %s, and a sandbox's isolation cannot change: set it back, or delete Sandbox %s to have it re-created with %s (its files go; its pile follows spec.pile.reclaimPolicy)",
			w, sbx.Name, have, sbx.Name, w)
	}
	if have, w := sbx.Spec.FromSnapshot, want.Spec.FromSnapshot; have != w {
		if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.StalledCondition); c == nil || c.Reason != ReasonFromSnapshotImmutable {
			r.Recorder.Eventf(t, sbx, corev1.EventTypeWarning, ReasonFromSnapshotImmutable, "UpdateSandbox",
				"Sandbox %s started from snapshot %q and cannot start again from %q", sbx.Name, have, w)
		}
		return pgreconcile.Stall(ReasonFromSnapshotImmutable,
			"spec.sandbox.fromSnapshot is %q but Sandbox %s started from %q, and a sandbox starts once: set it back, or delete Sandbox %s to have it re-created from %q (its files go; its pile follows spec.pile.reclaimPolicy)",
			w, sbx.Name, have, sbx.Name, w)
	}
	if storageFixed {
		if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.StalledCondition); c == nil || c.Reason != ReasonStorageImmutable {
			r.Recorder.Eventf(t, sbx, corev1.EventTypeWarning, ReasonStorageImmutable, "UpdateSandbox",
				"Sandbox %s keeps the storage limits it was provisioned with", sbx.Name)
		}
		return pgreconcile.Stall(ReasonStorageImmutable,
			"spec.sandbox.storage or spec.pile asks for other size or inode limits than Sandbox %s was provisioned with on node %s, and they are fixed there: set them back, or delete Sandbox %s to have it re-created with the new limits (its files go; its pile follows spec.pile.reclaimPolicy, and a retained one keeps its old limits)",
			sbx.Name, sbx.Spec.NodeName, sbx.Name)
	}
	if roomErr != nil {
		if !waitsForNamespaceRoom(t) {
			r.Recorder.Eventf(t, sbx, corev1.EventTypeWarning, playgroundv1alpha1.ReasonNamespaceCeilingExceeded, "UpdateSandbox", "%s", roomErr.Error())
		}
		return roomErr
	}
	return nil
}

// reconcileWorker reports, for a tenant whose catalog is workers, whether
// its WorkerMapping is Ready (WorkerReady mirrors the mapping's Ready);
// other tenants have no WorkerReady.
func (r *TenantReconciler) reconcileWorker(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	if t.Spec.Catalog != playgroundv1alpha1.CatalogWorkers {
		meta.RemoveStatusCondition(&t.Status.Conditions, playgroundv1alpha1.WorkerReadyCondition)
		return nil
	}
	var list playgroundv1alpha1.WorkerMappingList
	if err := r.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingFields{workerMappingIndex: tenantKey(t.Name)}); err != nil {
		r.setConditionf(t, playgroundv1alpha1.WorkerReadyCondition, metav1.ConditionUnknown, ReasonWorkerError, "Listing the worker mappings: %v", err)
		return fmt.Errorf("listing the worker mappings of tenant %s: %w", klog.KObj(t), err)
	}
	ready := workerReady(t, list.Items)
	ready.ObservedGeneration = t.Generation
	meta.SetStatusCondition(&t.Status.Conditions, ready)
	return nil
}

// workerReady is the WorkerReady condition of a tenant with these mappings.
func workerReady(t *playgroundv1alpha1.Tenant, mappings []playgroundv1alpha1.WorkerMapping) metav1.Condition {
	c := metav1.Condition{Type: playgroundv1alpha1.WorkerReadyCondition, Status: metav1.ConditionFalse}
	switch len(mappings) {
	case 0:
		c.Reason = ReasonNoMapping
		c.Message = fmt.Sprintf("No WorkerMapping routes this tenant, whose catalog is workers: create one in namespace %s with spec.tenantRef.name: %s", t.Namespace, t.Name)
		return c
	case 1:
	default:
		names := make([]string, 0, len(mappings))
		for _, m := range mappings {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		c.Reason = ReasonConflict
		c.Message = fmt.Sprintf("WorkerMappings %s all route this tenant: none is served until only one is left", strings.Join(names, ", "))
		return c
	}
	m := &mappings[0]
	r := meta.FindStatusCondition(m.Status.Conditions, playgroundv1alpha1.ReadyCondition)
	if r == nil || r.ObservedGeneration != m.Generation {
		c.Status, c.Reason = metav1.ConditionUnknown, ReasonWorkerPending
		c.Message = fmt.Sprintf("Waiting for WorkerMapping %s to report Ready for its current spec", m.Name)
		return c
	}
	c.Status, c.Reason = r.Status, r.Reason
	c.Message = fmt.Sprintf("WorkerMapping %s: %s", m.Name, r.Message)
	return c
}

// reconcileDelete revokes the token at once, then deletes the Sandbox and
// waits until it is gone (its node's agent destroys the backend resources
// and handles the pile per the reclaim policy first), then releases the
// Tenant.
func (r *TenantReconciler) reconcileDelete(ctx context.Context, t *playgroundv1alpha1.Tenant) error {
	log := ctrl.LoggerFrom(ctx)
	if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.ReadyCondition); c == nil || c.Reason != ReasonDeleting {
		log.Info("Deleting the tenant")
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, ReasonDeleting, "Delete", "Revoking the token and deleting Sandbox %s", t.Name)
	}
	gone, err := r.deleteDependents(ctx, t)
	if err == nil && gone {
		patch := client.MergeFromWithOptions(t.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(t, playgroundv1alpha1.TenantFinalizer)
		if err := client.IgnoreNotFound(r.Patch(ctx, t, patch)); err != nil {
			return conflictIsWait(fmt.Errorf("removing the finalizer of tenant %s: %w", klog.KObj(t), err))
		}
		log.Info("Released the tenant: its sandbox and token are gone")
		return nil
	}
	// Still here: the Sandbox's deletion is watched and brings the Tenant back.
	pgreconcile.Summarize(&t.Status.Conditions, t.Generation, metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonDeleting,
		Message: fmt.Sprintf("Waiting for Sandbox %s to be deleted: its node's agent destroys it first", t.Name)}, true, err)
	return err
}

// deleteDependents revokes the token (deletes the Secret, without waiting),
// deletes the generated signing key the tenant controls (under reclaim
// policy Delete) and the Sandbox, reporting whether the Sandbox is gone.
func (r *TenantReconciler) deleteDependents(ctx context.Context, t *playgroundv1alpha1.Tenant) (bool, error) {
	if _, err := r.deleteOwned(ctx, t, &corev1.Secret{}, playgroundv1alpha1.CredentialSecretName(t.Name)); err != nil {
		return false, err
	}
	t.Status.Credentials.TokenSHA256 = ""
	r.setConditionf(t, playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionFalse, ReasonDeleting, "The tenant is being deleted: its token is revoked")
	if err := r.deleteGeneratedKey(ctx, t); err != nil {
		return false, err
	}
	sbx := &playgroundv1alpha1.Sandbox{}
	gone, err := r.deleteOwned(ctx, t, sbx, t.Name)
	if err != nil || gone {
		return gone, err
	}
	ready := sandboxReady(sbx)
	ready.ObservedGeneration = t.Generation
	meta.SetStatusCondition(&t.Status.Conditions, ready)
	return false, nil
}

// deleteOwned deletes the object of that name if t controls it, and reports
// whether it is gone (or was never t's).
func (r *TenantReconciler) deleteOwned(ctx context.Context, t *playgroundv1alpha1.Tenant, obj client.Object, name string) (bool, error) {
	if err := r.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading %s/%s: %w", t.Namespace, name, err)
	}
	if !metav1.IsControlledBy(obj, t) {
		return true, nil
	}
	if obj.GetDeletionTimestamp().IsZero() {
		uid := obj.GetUID()
		if err := r.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("deleting %s/%s: %w", t.Namespace, name, err)
		}
	}
	return false, nil
}

// SetupWithManager registers the reconciler. It owns Sandboxes and Secrets,
// so that their changes (a Sandbox turning Ready, a Secret deleted) bring
// their Tenant back, and watches WorkerMappings, whose Ready its
// WorkerReady mirrors (workerMappingIndex must be registered).
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if r.Recorder == nil {
		r.Recorder = eventseries.Recorder(mgr.GetEventRecorder("tenant-controller"))
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.Client = client.WithFieldOwner(r.Client, playgroundv1alpha1.TenantControllerFieldOwner)
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.Tenant{}).
		// Owns, but a Sandbox's change (Ready) is taken before new Tenants'
		// first passes: see childChangedPriority.
		Watches(&playgroundv1alpha1.Sandbox{}, onChildChange(handler.EnqueueRequestForOwner(
			mgr.GetScheme(), mgr.GetRESTMapper(), &playgroundv1alpha1.Tenant{}, handler.OnlyControllerOwner()))).
		Owns(&corev1.Secret{}).
		Watches(&playgroundv1alpha1.WorkerMapping{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			wm := o.(*playgroundv1alpha1.WorkerMapping)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: wm.Namespace, Name: wm.Spec.TenantRef.Name}}}
		})).
		// The ceilings the platform owns: a policy's change, a namespace's
		// labels (which policies select it), a Sandbox that frees room in
		// its namespace.
		Watches(&playgroundv1alpha1.TenantPolicy{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfPolicyChange)).
		WatchesMetadata(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}},
			handler.EnqueueRequestsFromMapFunc(r.tenantsOfNamespace), builder.WithPredicates(labelsChanged)).
		Watches(&playgroundv1alpha1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.tenantsWaitingForRoom), builder.WithPredicates(sandboxSpecOrGone)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Named("tenant").
		Complete(r)
}
