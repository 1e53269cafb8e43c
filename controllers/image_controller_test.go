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
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/registrytest"
)

// image is a small image of the test registry whose file says which.
func image(t *testing.T, which string) v1.Image {
	t.Helper()
	return registrytest.Image(t, nil, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("etc/os-release", "ID="+which+"\n", 0o644))))
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// imageSandbox creates a Sandbox (no Tenant: the resolver reads Sandboxes)
// that runs the image ref.
func imageSandbox(t *testing.T, ns, name string, img playgroundv1alpha1.SandboxImage, backend playgroundv1alpha1.BackendClass) {
	t.Helper()
	s := &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: playgroundv1alpha1.SandboxSpec{
		TenantRef:       playgroundv1alpha1.LocalObjectReference{Name: name},
		SandboxTemplate: playgroundv1alpha1.SandboxTemplate{Backend: backend, Image: &img},
	}}
	if err := k8sClient.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// imageResolved is what a user reads of a Sandbox's image: its
// ImageResolved condition and status.image.
func imageResolved(g Gomega, ns, name string) (metav1.Condition, playgroundv1alpha1.SandboxImageStatus) {
	s := getSandbox(g, ns, name)
	st := playgroundv1alpha1.SandboxImageStatus{}
	if s.Status.Image != nil {
		st = *s.Status.Image
	}
	return conditionOf(s, playgroundv1alpha1.ImageResolvedCondition), st
}

// dockerConfig is a kubernetes.io/dockerconfigjson Secret's data for a
// user and password at host.
func dockerConfig(host, user, password string) map[string][]byte {
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}})
	return map[string][]byte{corev1.DockerConfigJsonKey: cfg}
}

// TestImageTagIsPinned: a Tenant names an image by its tag; its Sandbox's
// status holds the tag's digest, and keeps it when the tag moves, across
// changes of the spec, until the Tenant asks for a re-resolve: then the
// new digest, the request it answered, and an Event that says the tag
// moved.
func TestImageTagIsPinned(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.Start(t)
	first, second := image(t, "first"), image(t, "second")
	reg.Push(t, "team/base", "v1", first, nil)
	ns := newNamespace(t)
	ref := reg.Host + "/team/base:v1"
	g := NewWithT(t)
	tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"}, Spec: playgroundv1alpha1.TenantSpec{
		Sandbox: playgroundv1alpha1.SandboxTemplate{Image: &playgroundv1alpha1.SandboxImage{Reference: ref}},
	}}
	g.Expect(k8sClient.Create(ctx, tn)).To(Succeed())
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, "pinned")
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionTrue, playgroundv1alpha1.ReasonImageResolved}), "%+v", c)
		g.Expect(c.Message).To(Equal(ref + " resolved to " + digestOf(t, first)))
		g.Expect([]any{st.Reference, st.Digest, st.ResolveRequest}).To(Equal([]any{ref, digestOf(t, first), ""}))
		g.Expect(st.ResolvedAt).NotTo(BeNil())
	})

	// The tag moves; the spec changes elsewhere: the digest stays.
	reg.Push(t, "team/base", "v1", second, nil)
	updateTenant(t, ns, "pinned", func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Sandbox.LoginProfile.Env = []playgroundv1alpha1.EnvVar{{Name: "A", Value: "1"}}
	})
	eventually(t, func(g Gomega) {
		g.Expect(getSandbox(g, ns, "pinned").Spec.LoginProfile.Env).To(HaveLen(1))
	})
	consistently(t, 2*time.Second, func(g Gomega) {
		_, st := imageResolved(g, ns, "pinned")
		g.Expect(st.Digest).To(Equal(digestOf(t, first)), "the digest changed without a re-resolve")
	})

	// A re-resolve asked of the Tenant: the tag's digest now, once.
	updateTenant(t, ns, "pinned", func(tn *playgroundv1alpha1.Tenant) {
		metav1.SetMetaDataAnnotation(&tn.ObjectMeta, playgroundv1alpha1.ResolveImageAnnotation, "2026-12-07")
	})
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, "pinned")
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageResolved))
		g.Expect([]any{st.Digest, st.ResolveRequest}).To(Equal([]any{digestOf(t, second), "2026-12-07"}))
		moved := sandboxEvents(g, ns, "pinned")[playgroundv1alpha1.ReasonImageResolved]
		g.Expect(moved).NotTo(BeEmpty())
		g.Expect(moved[0].Note).To(ContainSubstring(ref + " now resolves to " + digestOf(t, second) + " (it was " + digestOf(t, first) + ")"))
	})

	// The image removed: its status goes with it.
	updateTenant(t, ns, "pinned", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Image = nil })
	eventually(t, func(g Gomega) {
		s := getSandbox(g, ns, "pinned")
		g.Expect(s.Status.Image).To(BeNil())
		g.Expect(conditionOf(s, playgroundv1alpha1.ImageResolvedCondition).Type).To(BeEmpty())
	})
}

// TestPrivateImageNeedsItsPullSecret: a private image named without a
// pull Secret is refused by its registry, and the Sandbox says so and
// what to do; a Secret named that does not exist, then one with a wrong
// password, are said in their own words; the right password resolves it
// within the backoff, without a change of the spec. The password is in no
// status, Event or log line.
func TestPrivateImageNeedsItsPullSecret(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.Start(t)
	const user, password, wrong = "team-a", "s3cret-pull-password", "not-the-password"
	reg.Private("private/", user, password)
	img := image(t, "private")
	reg.Push(t, "private/base", "v1", img, &authn.Basic{Username: user, Password: password})
	ns := newNamespace(t)
	ref := reg.Host + "/private/base:v1"
	imageSandbox(t, ns, "private", playgroundv1alpha1.SandboxImage{Reference: ref}, "")
	reason := func(want, says string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			c, st := imageResolved(g, ns, "private")
			g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, want}), "%+v", c)
			g.Expect(c.Message).To(ContainSubstring(says))
			g.Expect(st.Digest).To(BeEmpty())
			g.Expect(sandboxEvents(g, ns, "private")).To(HaveKey(want))
		})
	}
	reason(playgroundv1alpha1.ReasonImageUnauthorized, "Registry "+reg.Host+" refuses "+ref+" without credentials")

	eventually(t, func(g Gomega) {
		s := getSandbox(g, ns, "private")
		s.Spec.Image.PullSecrets = []playgroundv1alpha1.LocalObjectReference{{Name: "regcred"}}
		g.Expect(k8sClient.Update(ctx, s)).To(Succeed())
	})
	reason(playgroundv1alpha1.ReasonPullSecretMissing, "Secret regcred does not exist in namespace "+ns)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: dockerConfig(reg.Host, user, wrong)}
	NewWithT(t).Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	reason(playgroundv1alpha1.ReasonImageUnauthorized, "Registry "+reg.Host+" refuses the credentials of Secret regcred for "+ref)

	secret.Data = dockerConfig(reg.Host, user, password)
	NewWithT(t).Expect(k8sClient.Update(ctx, secret)).To(Succeed())
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, "private")
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageResolved), "%+v", c)
		g.Expect(st.Digest).To(Equal(digestOf(t, img)))
	})

	g := NewWithT(t)
	s := getSandbox(g, ns, "private")
	for _, c := range s.Status.Conditions {
		g.Expect(c.Message).NotTo(Or(ContainSubstring(password), ContainSubstring(wrong)))
	}
	for _, evs := range sandboxEvents(g, ns, "private") {
		for _, e := range evs {
			g.Expect(e.Note).NotTo(Or(ContainSubstring(password), ContainSubstring(wrong)))
		}
	}
	logs := managerLogs()
	for _, secretText := range []string{password, wrong, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))} {
		g.Expect(strings.Contains(logs, secretText)).To(BeFalse(), "the manager logged a credential")
	}
}

// TestRegistryDownIsSaid: a Sandbox whose registry is down says so
// (RegistryUnavailable) and is resolved once the registry answers again,
// without anything else changing.
func TestRegistryDownIsSaid(t *testing.T) {
	reg := registrytest.Start(t)
	img := image(t, "down")
	reg.Push(t, "team/base", "v2", img, nil)
	reg.Stop(true)
	ns := newNamespace(t)
	imageSandbox(t, ns, "waits", playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/team/base:v2"}, "")
	eventually(t, func(g Gomega) {
		c, _ := imageResolved(g, ns, "waits")
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonRegistryUnavailable}), "%+v", c)
		g.Expect(c.Message).To(ContainSubstring("Registry " + reg.Host + " cannot be reached or failed"))
	})
	reg.Stop(false)
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, "waits")
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageResolved), "%+v", c)
		g.Expect(st.Digest).To(Equal(digestOf(t, img)))
	})
}

// TestImageByDigest: a reference by digest is recorded as it is, with no
// registry to ask (the registry is down), and an index of several
// platforms resolves to the index's own digest (each node picks its
// platform). A jail, which runs no image, is refused with the reason.
func TestImageByDigest(t *testing.T) {
	reg := registrytest.Start(t)
	img := image(t, "by-digest")
	byDigest := reg.Push(t, "team/pinned", "v1", img, nil)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: image(t, "arm"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	idxRef, err := name.ParseReference(reg.Host + "/team/multi:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(idxRef, idx); err != nil {
		t.Fatal(err)
	}
	idxDigest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	imageSandbox(t, ns, "multi", playgroundv1alpha1.SandboxImage{Reference: idxRef.String()}, "")
	eventually(t, func(g Gomega) {
		_, st := imageResolved(g, ns, "multi")
		g.Expect(st.Digest).To(Equal(idxDigest.String()))
	})

	reg.Stop(true)
	imageSandbox(t, ns, "digest", playgroundv1alpha1.SandboxImage{Reference: byDigest}, "")
	imageSandbox(t, ns, "jailed", playgroundv1alpha1.SandboxImage{Reference: byDigest}, playgroundv1alpha1.BackendJail)
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, "digest")
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageResolved), "%+v", c)
		g.Expect([]any{st.Reference, st.Digest}).To(Equal([]any{byDigest, digestOf(t, img)}))
		c, st = imageResolved(g, ns, "jailed")
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonImageRefused}), "%+v", c)
		g.Expect(c.Message).To(ContainSubstring("Backend jail runs no image"))
		g.Expect(st.Digest).To(BeEmpty())
	})
}

// TestRegistryTransportIsHTTPSOnly: a registry that serves cleartext HTTP
// is refused unless the manager's configuration names it, so that no pull
// credential crosses the network in the clear.
func TestRegistryTransportIsHTTPSOnly(t *testing.T) {
	reg := registrytest.Start(t)
	reg.Push(t, "team/base", "v1", image(t, "plain"), nil)
	ref, err := name.ParseReference(reg.Host + "/team/base:v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plain []string
		ok    bool
	}{{nil, false}, {[]string{"registry.example.com"}, false}, {[]string{reg.Host}, true}, {[]string{"127.0.0.1"}, true}} {
		r := &ImageReconciler{Options: Options{Images: ImageOptions{PlainHTTP: tc.plain}}}
		r.Options.Images.defaults()
		r.transport = registryTransport(r.Options.Images)
		_, err := r.head(context.Background(), ref, authn.NewMultiKeychain())
		if tc.ok != (err == nil) {
			t.Errorf("plain HTTP to %v: err %v", tc.plain, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "is reached over HTTPS only")) {
			t.Errorf("plain HTTP to %v: want the refusal to say why, got %v", tc.plain, err)
		}
	}
}

// TestRegistryCallIsBounded: a registry that accepts the connection and
// never answers holds a resolution for the manager's timeout, not
// longer, and is said to be unavailable.
func TestRegistryCallIsBounded(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) { <-req.Context().Done() }))
	defer hung.Close()
	host := strings.TrimPrefix(hung.URL, "http://")
	ref, err := name.ParseReference(host + "/team/base:v1")
	if err != nil {
		t.Fatal(err)
	}
	r := &ImageReconciler{Options: Options{Images: ImageOptions{PlainHTTP: []string{"127.0.0.1"}, Timeout: 300 * time.Millisecond}}}
	r.Options.Images.defaults()
	r.transport = registryTransport(r.Options.Images)
	start := time.Now()
	_, err = r.head(context.Background(), ref, authn.NewMultiKeychain())
	if took := time.Since(start); err == nil || took > 10*time.Second {
		t.Fatalf("a registry that never answers: %v after %s", err, took)
	}
	img := &playgroundv1alpha1.SandboxImage{Reference: ref.String()}
	if reason, msg := imageFailure(ref, img, err); reason != playgroundv1alpha1.ReasonRegistryUnavailable || !strings.Contains(msg, "cannot be reached or failed") {
		t.Errorf("a registry that never answers: %s: %s", reason, msg)
	}
}

// TestImageOutsideATightenedPolicyIsReported: a Tenant admitted on an
// image that a TenantPolicy's allowedImages, written after it, leaves
// out is reported in its PolicyCompliant condition with the admission
// policy's words (the list allowed); its sandbox keeps its image.
func TestImageOutsideATightenedPolicyIsReported(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.Start(t)
	img := image(t, "before-the-policy")
	reg.Push(t, "team/base", "v1", img, nil)
	ns := newNamespace(t)
	labelNamespace(t, ns, "ceilings.test/ns", true)
	ref := reg.Host + "/team/base:v1"
	tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early"}, Spec: playgroundv1alpha1.TenantSpec{
		Sandbox: playgroundv1alpha1.SandboxTemplate{Image: &playgroundv1alpha1.SandboxImage{Reference: ref}},
	}}
	NewWithT(t).Expect(k8sClient.Create(ctx, tn)).To(Succeed())
	eventually(t, func(g Gomega) {
		_, st := imageResolved(g, ns, "early")
		g.Expect(st.Digest).To(Equal(digestOf(t, img)))
	})
	p := policyFor(t, ns, func(s *playgroundv1alpha1.TenantPolicySpec) {
		s.Sandbox.AllowedImages = []string{"registry.example.com/golden/"}
	})
	eventually(t, func(g Gomega) {
		c := tenantCondition(getTenant(g, ns, "early"), playgroundv1alpha1.PolicyCompliantCondition)
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonPolicyExceeded}), "%+v", c)
		g.Expect(c.Message).To(ContainSubstring("TenantPolicy " + p.Name + ": spec.sandbox.image.reference " + ref + " is not allowed: the images allowed are registry.example.com/golden/"))
	})
	_, st := imageResolved(NewWithT(t), ns, "early")
	NewWithT(t).Expect(st.Digest).To(Equal(digestOf(t, img)), "the sandbox keeps its image")
}
