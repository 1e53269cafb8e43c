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

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
)

// imageUnresolved says why a Sandbox with spec.image cannot be started
// yet: the manager has not recorded the digest of its reference in
// status.image (docs/images.md); "" when it has, or the Sandbox names no
// image. A sandbox runs exactly the digest the manager resolved, never a
// tag read on the node.
func imageUnresolved(sbx *playgroundv1alpha1.Sandbox) string {
	img := sbx.Spec.Image
	if img == nil {
		return ""
	}
	if st := sbx.Status.Image; st != nil && st.Reference == img.Reference && st.Digest != "" {
		return ""
	}
	return fmt.Sprintf("Waiting for the manager to resolve image %s to a digest: the sandbox starts on that digest once it is in status.image (the ImageResolved condition says how it goes)", img.Reference)
}

// waitForImage says, in the Provisioned condition, that sbx waits for its
// image's digest; the manager's write of it brings the Sandbox back
// (imageResolvedChanged).
func (r *sandboxReconciler) waitForImage(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, msg string) error {
	return r.setProvisioned(ctx, sbx, metav1.ConditionFalse, playgroundv1alpha1.ReasonWaitingForImage, msg)
}

// imageResolvedChanged passes the update of a Sandbox whose status.image
// the manager changed: a sandbox that waits for its image starts then.
func imageResolvedChanged(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox).Status.Image, e.ObjectNew.(*playgroundv1alpha1.Sandbox).Status.Image
	if o == nil || n == nil {
		return o != n
	}
	return o.Reference != n.Reference || o.Digest != n.Digest
}

// ImageStore is the node's image store as the agent uses it
// (StoreImages makes one of hostagent/imagestore's, on Linux).
type ImageStore interface {
	// Pull returns the image ref (registry/repo@sha256:…) names, for
	// tenant (namespace/name) with the credentials of kc (nil:
	// anonymous), fetching what the node lacks and reporting the bytes
	// fetched to progress; held until release. Its error is an
	// *ImageError when it says why in a reason of its own.
	Pull(ctx context.Context, ref, tenant string, kc authn.Keychain, progress func(done, total int64)) (*backend.Image, func(), error)
	// Hold holds an image the store has, by digest, without asking the
	// registry: for a sandbox that ran it before the agent restarted.
	Hold(digest string) (*backend.Image, func(), error)
}

// ImageError is an image the store will not give a sandbox, with the
// reason its Provisioned condition carries. Refused says that trying
// again cannot help (the image's content is refused).
type ImageError struct {
	Reason  string
	Refused bool
	Err     error
}

func (e *ImageError) Error() string { return e.Err.Error() }
func (e *ImageError) Unwrap() error { return e.Err }

// Keychains gives the agent the pull credentials of a Sandbox (by its
// namespace, name and UID) that the manager delivered to it; nil, or a
// nil keychain, pulls anonymously.
type Keychains interface {
	Keychain(namespace, name, uid string) authn.Keychain
}

// pullProgressInterval bounds how often a pull's progress is written to
// the Sandbox's condition.
const pullProgressInterval = 2 * time.Second

// sandboxImages are the images the node's sandboxes run, each held in the
// store while its sandbox exists on the node.
type sandboxImages struct {
	store     ImageStore
	keychains Keychains

	mu   sync.Mutex
	held map[string]heldImage // by sandbox ID
}

type heldImage struct {
	img     *backend.Image
	asked   string // the digest status.image named (an index's, or img's)
	release func()
}

func newSandboxImages(store ImageStore, kcs Keychains) *sandboxImages {
	return &sandboxImages{store: store, keychains: kcs, held: map[string]heldImage{}}
}

// imageRef is the reference by digest the node pulls: the repository of
// the reference the manager resolved, at its digest.
func imageRef(st *playgroundv1alpha1.SandboxImageStatus) string {
	repo := st.Reference
	if at := strings.LastIndex(repo, "@"); at >= 0 {
		repo = repo[:at]
	}
	// A tag follows the last ':' that is after the last '/' (a registry's
	// port comes before it).
	if colon := strings.LastIndex(repo, ":"); colon > strings.LastIndex(repo, "/") {
		repo = repo[:colon]
	}
	return repo + "@" + st.Digest
}

// forSandbox returns the image sbx's sandbox runs (nil: the node's
// system), getting and holding it in the store if the sandbox does not
// hold it yet, and the digest the sandbox held before ("" for none):
// another than the image's means the image changed.
func (s *sandboxImages) forSandbox(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, spec backend.Spec, progress func(done, total int64)) (img *backend.Image, before string, err error) {
	s.mu.Lock()
	old, had := s.held[spec.ID]
	s.mu.Unlock()
	if had {
		before = old.img.Digest
	}
	if sbx.Spec.Image == nil || sbx.Status.Image == nil || sbx.Status.Image.Digest == "" {
		s.release(spec.ID)
		return nil, before, nil
	}
	digest := sbx.Status.Image.Digest
	if had && old.asked == digest {
		return old.img, before, nil
	}
	img, release, err := s.get(ctx, sbx, spec.Tenant, progress)
	if err != nil {
		return nil, before, err
	}
	s.keep(spec.ID, digest, img, release)
	return img, before, nil
}

// get gets sbx's image (status.image's digest) from the store for tenant,
// with the Sandbox's pull credentials, and holds it until release.
func (s *sandboxImages) get(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, tenant string, progress func(done, total int64)) (*backend.Image, func(), error) {
	if s.store == nil {
		return nil, nil, &ImageError{Reason: playgroundv1alpha1.ReasonImageRefused, Refused: true,
			Err: fmt.Errorf("this node's agent runs no images (its backends offer none, or it has no image store)")}
	}
	var kc authn.Keychain
	if s.keychains != nil {
		kc = s.keychains.Keychain(sbx.Namespace, sbx.Name, string(sbx.UID))
	}
	return s.store.Pull(ctx, imageRef(sbx.Status.Image), tenant, kc, progress)
}

// gotImage is an image the store gave a Sandbox before its sandbox had
// an ID (imageBeforeClaim); its zero value is none.
type gotImage struct {
	img     *backend.Image
	asked   string // status.image's digest
	release func()
}

// drop releases the image: the sandbox got no ID.
func (g gotImage) drop() {
	if g.release != nil {
		g.release()
	}
}

// keep makes the image the one sandbox id holds.
func (g gotImage) keep(s *sandboxImages, id string) {
	if g.img != nil {
		s.keep(id, g.asked, g.img, g.release)
	}
}

// imageBeforeClaim gets, where images are pooled, the image of a Sandbox
// that has no sandbox yet, for its tenant, before it takes an ID: a
// pooled sandbox of the image is claimed only with what the store gave
// (assignID), exactly as a cold start would have it: the store checks a
// cached private image against the tenant's credentials whether or not a
// sandbox of it already runs. None (the zero gotImage) where the cold
// path gets it after the ID, as ever.
func (r *sandboxReconciler) imageBeforeClaim(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) (gotImage, error) {
	if r.imagePools == nil || sbx.Spec.Image == nil || sbx.Status.Image == nil || sbx.Status.Image.Digest == "" ||
		sbx.Spec.Suspended || sbx.Spec.FromSnapshot != "" || len(sbx.Bundles()) > 0 {
		return gotImage{}, nil
	}
	if be, ok := r.agent.Backend(backendClass(sbx)); !ok || !be.Capabilities().Images || be.Capabilities().WarmPool == nil {
		return gotImage{}, nil
	}
	// A lookup that fails is assignID's to report; the image got is
	// dropped then.
	if id, _ := r.idOf(sbx); id != "" {
		return gotImage{}, nil
	}
	img, release, err := r.images.get(ctx, sbx, specOf("", sbx).Tenant, r.pullProgress(ctx, sbx))
	if err != nil {
		return gotImage{}, err
	}
	return gotImage{img: img, asked: sbx.Status.Image.Digest, release: release}, nil
}

// keep records that sandbox id holds img, releasing what it held before.
func (s *sandboxImages) keep(id, asked string, img *backend.Image, release func()) {
	s.mu.Lock()
	old, had := s.held[id]
	s.held[id] = heldImage{img: img, asked: asked, release: release}
	s.mu.Unlock()
	if had {
		old.release()
	}
}

// reattach holds again, without asking the registry, the image a sandbox
// ran before the agent restarted.
func (s *sandboxImages) reattach(sbx *playgroundv1alpha1.Sandbox, id string) (*backend.Image, error) {
	if sbx.Spec.Image == nil || sbx.Status.Image == nil || sbx.Status.Image.Digest == "" {
		return nil, nil
	}
	if s.store == nil {
		return nil, errors.New("this node's agent runs no images")
	}
	img, release, err := s.store.Hold(sbx.Status.Image.Digest)
	if err != nil {
		return nil, err
	}
	s.keep(id, sbx.Status.Image.Digest, img, release)
	return img, nil
}

// current is the image sandbox id holds; nil for none.
func (s *sandboxImages) current(id string) *backend.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[id].img
}

// release lets the store remove the image sandbox id held (it was
// removed, or runs no image any more).
func (s *sandboxImages) release(id string) {
	s.mu.Lock()
	old, had := s.held[id]
	delete(s.held, id)
	s.mu.Unlock()
	if had {
		old.release()
	}
}

// pullProgress writes a pull's progress in sbx's Provisioned condition,
// at most once per pullProgressInterval.
func (r *sandboxReconciler) pullProgress(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) func(done, total int64) {
	var last time.Time
	return func(done, total int64) {
		if time.Since(last) < pullProgressInterval && done < total {
			return
		}
		last = time.Now()
		msg := fmt.Sprintf("Pulling image %s to node %s: %d of %d bytes", imageRef(sbx.Status.Image), r.node, done, total)
		_ = r.setProvisioned(ctx, sbx, metav1.ConditionFalse, playgroundv1alpha1.ReasonPullingImage, msg)
	}
}

// imageFailed says in sbx's Provisioned condition (and a Warning Event)
// why it cannot have its image: a refused image waits for another digest;
// anything else is tried again with backoff. A sandbox that runs keeps
// running on the system it has, its condition as it is: the Event alone
// says why its image did not change.
func (r *sandboxReconciler) imageFailed(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, err error) error {
	reason, refused := playgroundv1alpha1.ReasonImagePullFailed, false
	var ie *ImageError
	if errors.As(err, &ie) {
		reason, refused = ie.Reason, ie.Refused
	}
	if ctx.Err() != nil {
		return err
	}
	msg := truncate(err.Error())
	if prov := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition); prov != nil && prov.Status == metav1.ConditionTrue {
		// A running sandbox whose new image cannot be had keeps running,
		// and serving, on the system it has: Provisioned=False would have
		// the gateway refuse every call to it. The Event says why it has
		// not changed; the change is tried again as a first start is.
		r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "Restart",
			"The sandbox keeps running on its current system: %s", msg)
		if refused {
			return nil
		}
		return err
	}
	r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, "Provision", "%s", msg)
	if serr := r.setProvisioned(ctx, sbx, metav1.ConditionFalse, reason, msg); serr != nil {
		return errors.Join(err, serr)
	}
	if refused {
		return nil // a new digest in status.image brings it back
	}
	return err
}

// digestOf is an image's digest; "" for the node's system.
func digestOf(img *backend.Image) string {
	if img == nil {
		return ""
	}
	return img.Digest
}

// systemName says what a sandbox runs on, for Events.
func systemName(img *backend.Image) string {
	if img == nil || img.Digest == "" {
		return "the node's system"
	}
	return "image " + img.Digest
}
