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
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/imagesignature"
	"github.com/playground-dev/playground/internal/registrytest"
)

// signingPolicy is a TenantPolicy of ns that trusts keys (by name) to
// sign its sandboxes' images, required or not.
func signingPolicy(t *testing.T, ns string, required bool, keys map[string]registrytest.SigningKey) *playgroundv1alpha1.TenantPolicy {
	t.Helper()
	labelNamespace(t, ns, "ceilings.test/ns", true)
	return policyFor(t, ns, func(s *playgroundv1alpha1.TenantPolicySpec) {
		sig := &playgroundv1alpha1.ImageSignaturePolicy{Required: ptr.To(required)}
		for n, k := range keys {
			sig.Keys = append(sig.Keys, playgroundv1alpha1.ImageSigningKey{Name: n, PublicKey: k.PublicPEM})
		}
		s.Sandbox.ImageSignatures = sig
	})
}

// refusedWith waits for the Sandbox's ImageResolved to be False with
// reason, its message saying each of says, and no digest recorded (so its
// node runs nothing).
func refusedWith(t *testing.T, ns, name, reason string, says ...string) {
	t.Helper()
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, name)
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, reason}), "%+v", c)
		for _, s := range says {
			g.Expect(c.Message).To(ContainSubstring(s))
		}
		g.Expect(st.Digest).To(BeEmpty(), "a digest was recorded for a node to run")
		g.Expect(sandboxEvents(g, ns, name)).To(HaveKey(reason))
	})
}

// TestSignedImageRuns: a TenantPolicy that requires images signed by its
// key: an image signed by it (as cosign signs: a .sig tag beside it)
// resolves, with the key that verified it in status and the condition;
// one without a signature is refused (ImageUnsigned, naming the key tried
// and the tag looked for) and resolves once it is signed, without a
// change of its spec; one by digest is checked too.
func TestSignedImageRuns(t *testing.T) {
	reg := registrytest.Start(t)
	release := registrytest.NewSigningKey(t)
	ns := newNamespace(t)
	p := signingPolicy(t, ns, true, map[string]registrytest.SigningKey{"release": release})

	img := image(t, "signed")
	reg.Push(t, "team/signed", "v1", img, nil)
	reg.PushSignatures(t, "team/signed", digestOf(t, img), registrytest.Sign(t, release, registrytest.Payload(t, reg.Host+"/team/signed", digestOf(t, img))))
	imageSandbox(t, ns, "signed", playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/team/signed:v1"}, "")
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, "signed")
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionTrue, playgroundv1alpha1.ReasonImageResolved}), "%+v", c)
		g.Expect(c.Message).To(HaveSuffix("signed by " + p.Name + "/release"))
		g.Expect([]any{st.Digest, st.SignedBy}).To(Equal([]any{digestOf(t, img), []string{p.Name + "/release"}}))
	})

	unsigned := image(t, "unsigned")
	byDigest := reg.Push(t, "team/unsigned", "v1", unsigned, nil)
	imageSandbox(t, ns, "unsigned", playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/team/unsigned:v1"}, "")
	imageSandbox(t, ns, "by-digest", playgroundv1alpha1.SandboxImage{Reference: byDigest}, "")
	tag := "sha256-" + strings.TrimPrefix(digestOf(t, unsigned), "sha256:") + imagesignature.TagSuffix
	for _, name := range []string{"unsigned", "by-digest"} {
		refusedWith(t, ns, name, playgroundv1alpha1.ReasonImageUnsigned,
			"TenantPolicy "+p.Name+" requires", "signed by one of its keys ("+p.Name+"/release)",
			"the registry holds no signature of it (no tag "+tag+" in "+reg.Host+"/team/unsigned)")
	}

	// Signed now: resolved within the backoff.
	reg.PushSignatures(t, "team/unsigned", digestOf(t, unsigned), registrytest.Sign(t, release, registrytest.Payload(t, reg.Host+"/team/unsigned", digestOf(t, unsigned))))
	for _, name := range []string{"unsigned", "by-digest"} {
		eventually(t, func(g Gomega) {
			c, st := imageResolved(g, ns, name)
			g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageResolved), "%+v", c)
			g.Expect([]any{st.Digest, st.SignedBy}).To(Equal([]any{digestOf(t, unsigned), []string{p.Name + "/release"}}))
		})
	}
}

// TestBadSignaturesAreRefused: a signature by a key the policy does not
// trust, one by its key whose payload names another digest, and a
// malformed one are each refused (ImageSignatureInvalid), saying which
// keys were tried and what is wrong with each signature; a payload past
// the manager's bound is refused without being read.
func TestBadSignaturesAreRefused(t *testing.T) {
	reg := registrytest.Start(t)
	release, stranger := registrytest.NewSigningKey(t), registrytest.NewSigningKey(t)
	ns := newNamespace(t)
	p := signingPolicy(t, ns, true, map[string]registrytest.SigningKey{"release": release})
	notBase64 := "%not base64%"
	for _, tc := range []struct {
		name string
		sig  func(repo, digest string) registrytest.Signature
		says string
	}{
		{"untrusted", func(repo, digest string) registrytest.Signature {
			return registrytest.Sign(t, stranger, registrytest.Payload(t, repo, digest))
		}, "signature 1: not by any of the keys tried"},
		{"other-digest", func(repo, _ string) registrytest.Signature {
			return registrytest.Sign(t, release, registrytest.Payload(t, repo, digestOf(t, image(t, "another"))))
		}, "signature 1: by key " + p.Name + "/release, but it signs digest"},
		{"malformed", func(repo, digest string) registrytest.Signature {
			return registrytest.Signature{Payload: registrytest.Payload(t, repo, digest), Raw: &notBase64}
		}, "signature 1: no signature in base64"},
		{"oversized", func(repo, digest string) registrytest.Signature {
			body := registrytest.Payload(t, repo, digest)
			body = append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("x", imagesignature.DefaultMaxBytes)+`"}`)...)
			return registrytest.Sign(t, release, body)
		}, "signature 1: a payload of"},
	} {
		img := image(t, tc.name)
		repo := "team/" + tc.name
		reg.Push(t, repo, "v1", img, nil)
		reg.PushSignatures(t, repo, digestOf(t, img), tc.sig(reg.Host+"/"+repo, digestOf(t, img)))
		imageSandbox(t, ns, tc.name, playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/" + repo + ":v1"}, "")
	}
	for _, name := range []string{"untrusted", "other-digest", "malformed", "oversized"} {
		refusedWith(t, ns, name, playgroundv1alpha1.ReasonImageSignatureInvalid,
			"signed by one of its keys ("+p.Name+"/release)", "no signature of tag sha256-")
	}
	refusedWith(t, ns, "untrusted", playgroundv1alpha1.ReasonImageSignatureInvalid, "signature 1: not by any of the keys tried")
	refusedWith(t, ns, "other-digest", playgroundv1alpha1.ReasonImageSignatureInvalid, "signature 1: by key "+p.Name+"/release, but it signs digest")
	refusedWith(t, ns, "malformed", playgroundv1alpha1.ReasonImageSignatureInvalid, "signature 1: no signature in base64")
	refusedWith(t, ns, "oversized", playgroundv1alpha1.ReasonImageSignatureInvalid, "signature 1: a payload of", "larger than 65536")
}

// TestSignatureNotRequiredReports: a policy whose signatures are not
// required lets an unsigned image run, saying in a Warning Event that it
// is not signed by its key, and records the key of a signed one.
func TestSignatureNotRequiredReports(t *testing.T) {
	reg := registrytest.Start(t)
	audit := registrytest.NewSigningKey(t)
	ns := newNamespace(t)
	p := signingPolicy(t, ns, false, map[string]registrytest.SigningKey{"audit": audit})
	img := image(t, "unsigned-but-allowed")
	reg.Push(t, "team/free", "v1", img, nil)
	imageSandbox(t, ns, "free", playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/team/free:v1"}, "")
	eventually(t, func(g Gomega) {
		c, st := imageResolved(g, ns, "free")
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageResolved), "%+v", c)
		g.Expect([]any{st.Digest, st.SignedBy}).To(Equal([]any{digestOf(t, img), []string(nil)}))
		evs := sandboxEvents(g, ns, "free")[playgroundv1alpha1.ReasonImageUnsigned]
		g.Expect(evs).NotTo(BeEmpty())
		g.Expect(evs[0].Note).To(And(ContainSubstring("TenantPolicy "+p.Name+" requires"), HaveSuffix("(not required: the image runs)")))
	})
}

// TestUnreadableSigningKeyIsSaid: a TenantPolicy key that has PEM's shape
// but is no public key is said on the policy (Ready=False,
// InvalidSigningKey, naming the key), and a sandbox that needs it is
// refused, saying the key cannot be read.
func TestUnreadableSigningKeyIsSaid(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.Start(t)
	ns := newNamespace(t)
	labelNamespace(t, ns, "ceilings.test/ns", true)
	p := policyFor(t, ns, func(s *playgroundv1alpha1.TenantPolicySpec) {
		s.Sandbox.ImageSignatures = &playgroundv1alpha1.ImageSignaturePolicy{Keys: []playgroundv1alpha1.ImageSigningKey{
			{Name: "garbled", PublicKey: "-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----\n"}}}
	})
	img := image(t, "garbled-key")
	reg.Push(t, "team/garbled", "v1", img, nil)
	imageSandbox(t, ns, "garbled", playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/team/garbled:v1"}, "")
	eventually(t, func(g Gomega) {
		var got playgroundv1alpha1.TenantPolicy
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Name}, &got)).To(Succeed())
		ready := meta.FindStatusCondition(got.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect([]any{ready.Status, ready.Reason}).To(Equal([]any{metav1.ConditionFalse, ReasonInvalidSigningKey}))
		g.Expect(ready.Message).To(ContainSubstring("spec.sandbox.imageSignatures.keys[0]: key garbled is not a public key in PEM"))
	})
	refusedWith(t, ns, "garbled", playgroundv1alpha1.ReasonImageSignatureInvalid,
		"unreadable: key "+p.Name+"/garbled is not a public key in PEM", "none of its keys can be read: correct them in the TenantPolicy")
}
