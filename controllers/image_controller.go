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
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/imagesignature"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
	"github.com/playground-dev/playground/internal/registrytransport"
)

// Defaults of ImageOptions.
const (
	// DefaultImageTimeout bounds one call to a registry.
	DefaultImageTimeout = 30 * time.Second
	// DefaultImageRetryBase and DefaultImageRetryCap bound the backoff of
	// a resolution that failed: doubled at each failure in between.
	DefaultImageRetryBase = 5 * time.Second
	DefaultImageRetryCap  = 5 * time.Minute
	// DefaultImageCredentialRefresh is how often a Sandbox's pull
	// Secrets are read again, to hand a changed one to its node.
	DefaultImageCredentialRefresh = credentialRefresh
)

// ImageOptions configure how the manager reaches image registries.
type ImageOptions struct {
	// Transport is the base of every registry request; nil: Go's
	// default transport, trusting RootCAs.
	Transport http.RoundTripper
	// RootCAs are the CAs a registry's certificate is checked against;
	// nil: the system's.
	RootCAs *x509.CertPool
	// PlainHTTP are the registries reached over cleartext HTTP, each
	// host:port, or a host for any of its ports; every other registry is
	// reached over HTTPS only, so that no pull credential crosses the
	// network in the clear.
	PlainHTTP []string
	// Timeout bounds each call to a registry; 0: DefaultImageTimeout.
	Timeout time.Duration
	// RetryBase and RetryCap bound the backoff of a resolution that
	// failed; 0: the defaults.
	RetryBase, RetryCap time.Duration
	// CredentialRefresh is how often the pull Secrets of a Sandbox are
	// read again and, changed, handed to its node's agent (Secrets are
	// not watched); 0: DefaultImageCredentialRefresh.
	CredentialRefresh time.Duration
	// Signatures bound what the check of an image's signatures reads of
	// its registry; zero: imagesignature's defaults.
	Signatures imagesignature.Limits
}

func (o *ImageOptions) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultImageTimeout
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultImageRetryBase
	}
	if o.RetryCap < o.RetryBase {
		o.RetryCap = max(DefaultImageRetryCap, o.RetryBase)
	}
}

// ImageReconciler resolves a Sandbox's spec.image to a digest and records
// it in status.image, with the ImageResolved condition, under its own
// field manager: once per reference, and again for a new
// playground.dev/resolve-image annotation, so that every start of the
// sandbox runs the same bytes until one of them changes. It is a
// controller of its own, not a step of the binder: it waits on registries
// (up to Timeout a call), which must not hold up the binding of other
// sandboxes, and its failures have a backoff of their own; the binder
// only reads its condition, to say why a sandbox that waits for its image
// is not Ready.
type ImageReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Options   Options

	transport http.RoundTripper

	mu sync.Mutex
	// done is the resolution this process last recorded for a Sandbox,
	// so that a pass over a cache that lags the write does not resolve
	// (and so answer a re-resolve request) twice.
	done map[ktypes.UID]imageResolution
	// failures counts a Sandbox's resolutions that failed in a row.
	failures map[ktypes.UID]int
}

type imageResolution struct{ reference, request, digest string }

// The image resolver reads Sandboxes and the pull Secrets they name (get,
// around the cache, as signing keys are read); it writes status.image and
// the ImageResolved condition.
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile resolves one Sandbox's image.
func (r *ImageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sbx.DeletionTimestamp.IsZero() {
		r.forget(sbx.UID)
		return ctrl.Result{}, nil
	}
	img := sbx.Spec.Image
	if img == nil {
		r.forget(sbx.UID)
		return ctrl.Result{}, r.apply(ctx, sbx, nil, nil)
	}
	st := sbx.Status.Image
	request := sbx.Annotations[playgroundv1alpha1.ResolveImageAnnotation]
	if backend := playgroundv1alpha1.BackendClassOf(sbx); backend == playgroundv1alpha1.BackendJail || backend == playgroundv1alpha1.BackendLima {
		return ctrl.Result{}, r.refuse(ctx, sbx, playgroundv1alpha1.ReasonImageRefused,
			fmt.Sprintf("Backend %s runs no image: its sandboxes run their node's own system. Remove spec.image, or ask for backend oci or vm (in a new Sandbox: a backend cannot change)", backend))
	}
	want := imageResolution{reference: img.Reference, request: request}
	r.mu.Lock()
	last, recorded := r.done[sbx.UID]
	r.mu.Unlock()
	if recorded && last.reference == want.reference && last.request == want.request {
		// Recorded by this process: a cache that shows otherwise lags.
		if st == nil || st.Reference != last.reference || st.Digest != last.digest || st.ResolveRequest != last.request {
			return ctrl.Result{RequeueAfter: cacheLag}, nil
		}
	}
	if st != nil && st.Reference == img.Reference && st.Digest != "" && st.ResolveRequest == request {
		r.clearFailures(sbx.UID)
		return ctrl.Result{}, r.apply(ctx, sbx, st, resolvedCondition(st))
	}

	log := ctrl.LoggerFrom(ctx)
	ref, err := name.ParseReference(img.Reference)
	if err != nil {
		return ctrl.Result{}, r.refuse(ctx, sbx, playgroundv1alpha1.ReasonImageRefused,
			fmt.Sprintf("Image reference %s cannot be read: %v. Write it as registry/repository[:tag][@sha256:digest]", img.Reference, err))
	}
	if c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ImageResolvedCondition); c != nil && c.Status == metav1.ConditionTrue && st != nil {
		// A resolved sandbox asked for another reference or a new
		// resolution: say at once that it is taken, the digest it runs
		// kept in status.image until the new one is known.
		msg := fmt.Sprintf("Resolving %s (status.image keeps %s of %s until then)", img.Reference, st.Digest, st.Reference)
		if err := r.apply(ctx, sbx, st, &metav1.Condition{Type: playgroundv1alpha1.ImageResolvedCondition, Status: metav1.ConditionFalse,
			Reason: playgroundv1alpha1.ReasonImageResolving, Message: msg}); err != nil {
			return ctrl.Result{}, err
		}
	}
	secrets, why, err := r.pullSecrets(ctx, sbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		return r.failed(ctx, sbx, playgroundv1alpha1.ReasonPullSecretMissing, why)
	}
	// Without Secrets, anonymous: never the manager's own credentials.
	kc := authn.NewMultiKeychain()
	if len(secrets) > 0 {
		if kc, err = k8schain.NewFromPullSecrets(ctx, secrets); err != nil {
			// Its error may quote the Secret's bytes: not repeated.
			return r.failed(ctx, sbx, playgroundv1alpha1.ReasonPullSecretMissing,
				"A pull Secret's .dockerconfigjson is not valid JSON: write it again, as kubectl create secret docker-registry does")
		}
	}
	var digest string
	if d, ok := ref.(name.Digest); ok && len(secrets) == 0 {
		// A digest is the image itself: nothing to resolve, and no
		// credential to check here. The node pulls it and verifies every
		// byte against it (and checks a private one under the tenant's
		// credentials then).
		digest = d.DigestStr()
	} else {
		desc, err := r.head(ctx, ref, kc)
		if err != nil {
			reason, msg := imageFailure(ref, img, err)
			log.Info("Cannot resolve the sandbox's image; trying again", "sandbox", klog.KObj(sbx), "reference", img.Reference, "reason", reason)
			return r.failed(ctx, sbx, reason, msg)
		}
		if !runnable(desc.MediaType) {
			return ctrl.Result{}, r.refuse(ctx, sbx, playgroundv1alpha1.ReasonImageRefused,
				fmt.Sprintf("%s is a %s, not an image a node runs (an OCI or Docker image manifest, or an index of them): name an image", img.Reference, desc.MediaType))
		}
		digest = desc.Digest.String()
	}
	// The digest is what runs: its signatures are checked before it is
	// recorded, so that a node never starts one the policies refuse.
	signedBy, refusal, err := r.signatures(ctx, sbx, ref, digest, kc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if refusal != nil {
		// Looked for again with backoff: a signature is often pushed
		// just after its image.
		log.Info("The sandbox's image is not signed as a TenantPolicy requires; trying again", "sandbox", klog.KObj(sbx), "reference", img.Reference, "digest", digest, "reason", refusal.reason)
		return r.failed(ctx, sbx, refusal.reason, refusal.message)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	resolved := &playgroundv1alpha1.SandboxImageStatus{Reference: img.Reference, Digest: digest, ResolvedAt: &now, ResolveRequest: request, SignedBy: signedBy}
	if err := r.apply(ctx, sbx, resolved, resolvedCondition(resolved)); err != nil {
		return ctrl.Result{}, err
	}
	r.clearFailures(sbx.UID)
	r.mu.Lock()
	if r.done == nil {
		r.done = map[ktypes.UID]imageResolution{}
	}
	want.digest = digest
	r.done[sbx.UID] = want
	r.mu.Unlock()
	log.Info("Resolved the sandbox's image", "sandbox", klog.KObj(sbx), "reference", img.Reference, "digest", digest)
	if st != nil && st.Reference == img.Reference && st.Digest != digest {
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonImageResolved, "ResolveImage",
			"%s now resolves to %s (it was %s): the sandbox runs it from its next start", img.Reference, digest, st.Digest)
	}
	return ctrl.Result{}, nil
}

// resolvedCondition is ImageResolved=True for st.
func resolvedCondition(st *playgroundv1alpha1.SandboxImageStatus) *metav1.Condition {
	msg := fmt.Sprintf("%s resolved to %s", st.Reference, st.Digest)
	if len(st.SignedBy) > 0 {
		msg += ", signed by " + strings.Join(st.SignedBy, ", ")
	}
	return &metav1.Condition{Type: playgroundv1alpha1.ImageResolvedCondition, Status: metav1.ConditionTrue,
		Reason: playgroundv1alpha1.ReasonImageResolved, Message: msg}
}

// runnable says whether a manifest of mediaType is an image a node runs.
func runnable(mediaType types.MediaType) bool {
	switch mediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2, types.OCIImageIndex, types.DockerManifestList:
		return true
	}
	return false
}

// head asks the registry for ref's descriptor, within the call's bound,
// with the credentials of kc, once (the reconciler retries).
func (r *ImageReconciler) head(ctx context.Context, ref name.Reference, kc authn.Keychain) (*v1.Descriptor, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Options.Images.Timeout)
	defer cancel()
	opts := []remote.Option{
		remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(r.transport),
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}), remote.WithUserAgent("playground-manager"),
	}
	desc, err := remote.Head(ref, opts...)
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusMethodNotAllowed {
		// A registry that answers no HEAD of a manifest: GET it.
		got, gerr := remote.Get(ref, opts...)
		if gerr != nil {
			return nil, gerr
		}
		return &got.Descriptor, nil
	}
	return desc, err
}

// imageFailure is the ImageResolved reason and message of a resolution
// that failed with err: what the registry said, and what to do. It never
// holds a credential (the registry's answer and the request's address
// hold none: ggcr redacts the URL's query).
func imageFailure(ref name.Reference, img *playgroundv1alpha1.SandboxImage, err error) (reason, msg string) {
	registry := ref.Context().RegistryStr()
	detail := truncate(err.Error(), 512)
	var te *transport.Error
	if errors.As(err, &te) {
		codes := make([]transport.ErrorCode, 0, len(te.Errors))
		for _, d := range te.Errors {
			codes = append(codes, d.Code)
		}
		has := func(want ...transport.ErrorCode) bool {
			return slices.ContainsFunc(codes, func(c transport.ErrorCode) bool { return slices.Contains(want, c) })
		}
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden ||
			has(transport.UnauthorizedErrorCode, transport.DeniedErrorCode):
			if len(img.PullSecrets) == 0 {
				return playgroundv1alpha1.ReasonImageUnauthorized, fmt.Sprintf(
					"Registry %s refuses %s without credentials (%s): create a kubernetes.io/dockerconfigjson Secret for it in this namespace (kubectl create secret docker-registry NAME --docker-server=%s ...) and name it in spec.image.pullSecrets",
					registry, img.Reference, detail, registry)
			}
			return playgroundv1alpha1.ReasonImageUnauthorized, fmt.Sprintf(
				"Registry %s refuses the credentials of %s for %s (%s): give them the right to pull it, or name a Secret that has it",
				registry, secretNames(img), img.Reference, detail)
		case te.StatusCode == http.StatusNotFound || has(transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode):
			return playgroundv1alpha1.ReasonImageNotFound, fmt.Sprintf(
				"Registry %s has no %s (%s): check the repository and tag, or push it; looked for again with backoff, and at once for a new %s annotation",
				registry, img.Reference, detail, playgroundv1alpha1.ResolveImageAnnotation)
		}
	}
	return playgroundv1alpha1.ReasonRegistryUnavailable, fmt.Sprintf(
		"Registry %s cannot be reached or failed (%s): tried again with backoff; the sandbox, if not yet started, waits for its image",
		registry, detail)
}

func secretNames(img *playgroundv1alpha1.SandboxImage) string {
	names := make([]string, 0, len(img.PullSecrets))
	for _, s := range img.PullSecrets {
		names = append(names, s.Name)
	}
	return "Secret " + strings.Join(names, ", ")
}

// pullSecrets reads the Secrets spec.image.pullSecrets names, or says why
// one cannot be used (never with its content).
func (r *ImageReconciler) pullSecrets(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) ([]corev1.Secret, string, error) {
	var out []corev1.Secret
	for _, ref := range sbx.Spec.Image.PullSecrets {
		s := corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: sbx.Namespace, Name: ref.Name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("Secret %s does not exist in namespace %s: create it with the registry's credentials (kubectl create secret docker-registry %s --docker-server=REGISTRY --docker-username=USER --docker-password=...), or remove it from spec.image.pullSecrets",
					ref.Name, sbx.Namespace, ref.Name), nil
			}
			return nil, "", fmt.Errorf("reading the pull Secret %s/%s: %w", sbx.Namespace, ref.Name, err)
		}
		if s.Type != corev1.SecretTypeDockerConfigJson || len(s.Data[corev1.DockerConfigJsonKey]) == 0 {
			return nil, fmt.Sprintf("Secret %s is of type %q without %s: a pull Secret is of type %s (kubectl create secret docker-registry makes one)",
				s.Name, s.Type, corev1.DockerConfigJsonKey, corev1.SecretTypeDockerConfigJson), nil
		}
		out = append(out, s)
	}
	return out, "", nil
}

// failed reports a resolution that failed and looks again after the
// Sandbox's backoff.
func (r *ImageReconciler) failed(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, reason, msg string) (ctrl.Result, error) {
	if err := r.refuse(ctx, sbx, reason, msg); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.backoff(sbx.UID)}, nil
}

// refuse sets ImageResolved False with reason and msg, keeping
// status.image as it is, and records a Warning Event when it changes.
func (r *ImageReconciler) refuse(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, reason, msg string) error {
	prev := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ImageResolvedCondition)
	msg = truncate(msg, maxDeliveryMessage)
	if err := r.apply(ctx, sbx, sbx.Status.Image, &metav1.Condition{Type: playgroundv1alpha1.ImageResolvedCondition,
		Status: metav1.ConditionFalse, Reason: reason, Message: msg}); err != nil {
		return err
	}
	if prev == nil || prev.Reason != reason || prev.Message != msg {
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "ResolveImage", "%s", truncate(msg, maxEventNote))
	}
	return nil
}

// backoff counts a failure of the Sandbox's resolution and returns when
// to try again: RetryBase, doubled at each failure in a row, up to
// RetryCap.
func (r *ImageReconciler) backoff(uid ktypes.UID) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures == nil {
		r.failures = map[ktypes.UID]int{}
	}
	n := r.failures[uid]
	r.failures[uid] = n + 1
	d := r.Options.Images.RetryBase
	for range n {
		if d *= 2; d >= r.Options.Images.RetryCap {
			return r.Options.Images.RetryCap
		}
	}
	return d
}

func (r *ImageReconciler) clearFailures(uid ktypes.UID) {
	r.mu.Lock()
	delete(r.failures, uid)
	r.mu.Unlock()
}

func (r *ImageReconciler) forget(uid ktypes.UID) {
	r.mu.Lock()
	delete(r.failures, uid)
	delete(r.done, uid)
	r.mu.Unlock()
}

// apply writes, under ImageFieldOwner, status.image as st and the
// ImageResolved condition as c (nil: none), unless the status says so
// already. Each condition keeps its transition time while its status
// holds.
func (r *ImageReconciler) apply(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, st *playgroundv1alpha1.SandboxImageStatus, c *metav1.Condition) error {
	conds := slices.Clone(sbx.Status.Conditions)
	changed := false
	if c == nil {
		changed = meta.RemoveStatusCondition(&conds, playgroundv1alpha1.ImageResolvedCondition)
	} else {
		c.ObservedGeneration = sbx.Generation
		changed = meta.SetStatusCondition(&conds, *c)
	}
	if !changed && equality.Semantic.DeepEqual(st, sbx.Status.Image) {
		return nil
	}
	status := playgroundv1alpha1ac.SandboxStatus().WithConditions(pgreconcile.ApplyConditions(conds, playgroundv1alpha1.ImageResolvedCondition)...)
	if st != nil {
		a := playgroundv1alpha1ac.SandboxImageStatus().WithReference(st.Reference).WithDigest(st.Digest)
		if st.ResolvedAt != nil {
			a.WithResolvedAt(*st.ResolvedAt)
		}
		if st.ResolveRequest != "" {
			a.WithResolveRequest(st.ResolveRequest)
		}
		if len(st.SignedBy) > 0 {
			a.WithSignedBy(st.SignedBy...)
		}
		status.WithImage(a)
	}
	if err := r.Client.Status().Apply(ctx, playgroundv1alpha1ac.Sandbox(sbx.Name, sbx.Namespace).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.ImageFieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("applying the image status of sandbox %s: %w", klog.KObj(sbx), err)
	}
	sbx.Status.Conditions, sbx.Status.Image = conds, st.DeepCopy()
	return nil
}

// waitsForImage is the ImageResolved condition of a sandbox that waits
// for its image and cannot have it yet, or nil: one whose agent reports
// prov is not provisioned, or waits for the image, and whose resolution
// failed or is refused.
func waitsForImage(sbx *playgroundv1alpha1.Sandbox, prov *metav1.Condition) *metav1.Condition {
	if sbx.Spec.Image == nil || prov != nil && prov.Reason != playgroundv1alpha1.ReasonProvisioning && prov.Reason != playgroundv1alpha1.ReasonWaitingForImage {
		return nil
	}
	if c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ImageResolvedCondition); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason != playgroundv1alpha1.ReasonImageResolving {
		return c
	}
	return nil
}

// registryTransport is the transport of every registry request: o's (or
// Go's default, trusting o.RootCAs), HTTPS only but for the registries
// o.PlainHTTP names.
func registryTransport(o ImageOptions) http.RoundTripper {
	return registrytransport.New(registrytransport.Options{Base: o.Transport, RootCAs: o.RootCAs, PlainHTTP: o.PlainHTTP, Flag: "the manager's --image-registry-plain-http"})
}

// SetupWithManager registers the reconciler: a Sandbox is resolved when
// it is created (or the manager starts), when its spec changes, and when
// its resolve annotation does.
func (r *ImageReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Options.Images.defaults()
	r.transport = registryTransport(r.Options.Images)
	changed := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox), e.ObjectNew.(*playgroundv1alpha1.Sandbox)
		return o.Generation != n.Generation || !n.DeletionTimestamp.IsZero() ||
			o.Annotations[playgroundv1alpha1.ResolveImageAnnotation] != n.Annotations[playgroundv1alpha1.ResolveImageAnnotation]
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("image").
		For(&playgroundv1alpha1.Sandbox{}, builder.WithPredicates(changed)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Workers}).
		Complete(r)
}
