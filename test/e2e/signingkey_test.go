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

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/signingkey"
)

// TestSigningKey: each tenant's signing key is /pile/self.key in its
// sandbox, readable and not writable by it, kept by a close and reopen,
// an agent restart and a suspension, different between tenants; a
// rotation reaches the running sandbox, its old fingerprint kept in
// status; a key the platform team names in a Secret is the one mounted,
// and a change of that Secret reaches the sandbox. The key is in no
// status or Event.
func TestSigningKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	n := &node{name: "key-1", labels: pool("key")}
	startNode(t, n)
	ns := newNamespace(t)
	applyTenant(t, ns, "alice", inPool("key"))
	applyTenant(t, ns, "bob", inPool("key"))
	_, alice := waitReady(t, ns, "alice")
	_, bob := waitReady(t, ns, "bob")

	secretKey := func(g Gomega, name string) string {
		var s corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		g.Expect(s.Type).To(BeEquivalentTo(playgroundv1alpha1.SigningKeySecretType))
		return string(s.Data[playgroundv1alpha1.SigningKeySecretKey])
	}
	keyStatus := func(g Gomega, name string) *playgroundv1alpha1.TenantSigningKeyStatus {
		var tn playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tn)).To(Succeed())
		g.Expect(tn.Status.SigningKey).NotTo(BeNil())
		return tn.Status.SigningKey
	}
	const readKey = "cat /pile/self.key"

	// Generated once per tenant, in the pile before the sandbox is Ready.
	aKey := secretKey(g, playgroundv1alpha1.SigningKeySecretName("alice"))
	bKey := secretKey(g, playgroundv1alpha1.SigningKeySecretName("bob"))
	g.Expect(aKey).To(HaveLen(signingkey.Len))
	g.Expect(aKey).NotTo(Equal(bKey))
	g.Expect(shell(t, alice, readKey)).To(Equal(aKey))
	g.Expect(shell(t, bob, readKey)).To(Equal(bKey))
	// Read-only to the tenant: every change is refused and the key stays.
	g.Expect(shell(t, alice, "for c in 'echo x >> /pile/self.key' 'echo x > /pile/self.key' 'rm -f /pile/self.key' "+
		"'mv /pile/self.key /pile/k' 'chmod 600 /pile/self.key && echo x >> /pile/self.key'; do sh -c \"$c\" 2>/dev/null && echo \"$c worked\"; done; "+
		"stat -c '%a %U' /pile/self.key; "+readKey)).To(Equal("400 sandbox\n" + aKey))
	aFP := signingkey.Fingerprint([]byte(aKey))
	g.Eventually(func(g Gomega) {
		st := keyStatus(g, "alice")
		g.Expect(st.Generated).To(BeTrue())
		g.Expect(st.SecretName).To(Equal(playgroundv1alpha1.SigningKeySecretName("alice")))
		g.Expect(st.Fingerprint).To(Equal(aFP))
		g.Expect(st.PublicKey).To(Equal(signingkey.PublicKey([]byte(aKey))))
		g.Expect(st.SandboxFingerprint).To(Equal(aFP))
	}, settle, 100*time.Millisecond).Should(Succeed())

	// An agent restart, a suspension: the same key.
	n.agent.Stop(t)
	startNode(t, n)
	_, alice = waitReady(t, ns, "alice")
	g.Expect(shell(t, alice, readKey)).To(Equal(aKey))
	suspend := func(on bool) {
		var tn playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &tn)).To(Succeed())
		patch := client.MergeFrom(tn.DeepCopy())
		tn.Spec.Suspended = on
		g.Expect(k8sClient.Patch(ctx, &tn, patch)).To(Succeed())
	}
	suspend(true)
	g.Eventually(func(g Gomega) {
		var sb playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(alice), &sb)).To(Succeed())
		g.Expect(sb.Status.Phase).To(Equal(playgroundv1alpha1.SandboxSuspended))
	}, settle, 100*time.Millisecond).Should(Succeed())
	suspend(false)
	_, alice = waitReady(t, ns, "alice")
	g.Expect(shell(t, alice, readKey)).To(Equal(aKey))

	// A rotation on request: a new key in the Secret and in the running
	// sandbox, the old fingerprint kept.
	touch := func(name string, mutate func(*playgroundv1alpha1.Tenant)) {
		var tn playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tn)).To(Succeed())
		patch := client.MergeFrom(tn.DeepCopy())
		mutate(&tn)
		g.Expect(k8sClient.Patch(ctx, &tn, patch)).To(Succeed())
	}
	touch("alice", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Pile.SigningKey.RotationRequest = "first" })
	var rotated string
	g.Eventually(func(g Gomega) {
		rotated = secretKey(g, playgroundv1alpha1.SigningKeySecretName("alice"))
		g.Expect(rotated).NotTo(Equal(aKey))
		st := keyStatus(g, "alice")
		g.Expect(st.Fingerprint).To(Equal(signingkey.Fingerprint([]byte(rotated))))
		g.Expect(st.SandboxFingerprint).To(Equal(st.Fingerprint), "the sandbox holds the new key")
		g.Expect(st.PreviousFingerprints).To(Equal([]string{aFP}))
		g.Expect(st.RotationRequest).To(Equal("first"))
	}, settle, 100*time.Millisecond).Should(Succeed())
	g.Expect(shell(t, alice, readKey)).To(Equal(rotated))
	g.Expect(shell(t, bob, readKey)).To(Equal(bKey), "another tenant's key did not move")

	// A key of the platform team's: the one mounted; its change reaches
	// the sandbox.
	k1, err := signingkey.Generate()
	g.Expect(err).NotTo(HaveOccurred())
	platform := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "carol-key"},
		Type:       playgroundv1alpha1.SigningKeySecretType,
		Data:       map[string][]byte{playgroundv1alpha1.SigningKeySecretKey: append(k1, '\n')},
	}
	g.Expect(k8sClient.Create(ctx, platform)).To(Succeed())
	applyTenant(t, ns, "carol", func(tn *playgroundv1alpha1.Tenant) {
		inPool("key")(tn)
		tn.Spec.Pile.SigningKey.SecretName = platform.Name
	})
	_, carol := waitReady(t, ns, "carol")
	g.Expect(shell(t, carol, readKey)).To(Equal(string(k1)))
	k2, err := signingkey.Generate()
	g.Expect(err).NotTo(HaveOccurred())
	platform.Data[playgroundv1alpha1.SigningKeySecretKey] = k2
	g.Expect(k8sClient.Update(ctx, platform)).To(Succeed())
	g.Eventually(func(g Gomega) {
		// A pass of the Tenant reads its Secret again (the manager looks
		// every minute by itself).
		touch("carol", func(tn *playgroundv1alpha1.Tenant) {
			metav1.SetMetaDataAnnotation(&tn.ObjectMeta, "e2e/touched", time.Now().String())
		})
		st := keyStatus(g, "carol")
		g.Expect(st.Generated).To(BeFalse())
		g.Expect(st.Fingerprint).To(Equal(signingkey.Fingerprint(k2)))
		g.Expect(st.SandboxFingerprint).To(Equal(st.Fingerprint))
		g.Expect(st.PreviousFingerprints).To(ContainElement(signingkey.Fingerprint(k1)))
	}, settle, 500*time.Millisecond).Should(Succeed())
	g.Expect(shell(t, carol, readKey)).To(Equal(string(k2)))

	// No key in any status or Event.
	var tenants playgroundv1alpha1.TenantList
	var sandboxes playgroundv1alpha1.SandboxList
	var events corev1.EventList
	g.Expect(k8sClient.List(ctx, &tenants, client.InNamespace(ns))).To(Succeed())
	g.Expect(k8sClient.List(ctx, &sandboxes, client.InNamespace(ns))).To(Succeed())
	g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	seen, err := json.Marshal([]any{tenants, sandboxes, events})
	g.Expect(err).NotTo(HaveOccurred())
	for _, key := range []string{aKey, bKey, rotated, string(k1), string(k2)} {
		g.Expect(strings.Contains(string(seen), key)).To(BeFalse(), "a signing key is in a status or an Event")
	}
}

// TestSharedPile: a shared pile, a FacultyBundle whose source is a host
// path the node's agent grants (the platform's bytes), is mounted
// read-only at /pile/shared in the sandboxes of the Tenants that list it:
// the same bytes in both, which neither can write; a Tenant that does not
// list it does not see it, and a Tenant cannot list it beside its
// faculties.
func TestSharedPile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	src := t.TempDir()
	n := &node{name: "shared-1", labels: pool("shared"), hostPathPrefixes: []string{src}}
	startNode(t, n)
	ns := newNamespace(t)
	records := "records the platform signed\n"
	g.Expect(os.WriteFile(filepath.Join(src, "shared.pile"), []byte(records), 0o644)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "commons"},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{HostPath: &playgroundv1alpha1.HostPathSource{Path: src}},
			Binaries: []string{"shared.pile"},
		}})).To(Succeed())
	listing := func(tn *playgroundv1alpha1.Tenant) {
		inPool("shared")(tn)
		tn.Spec.Pile.Shared = &playgroundv1alpha1.FacultyBundleReference{Name: "commons"}
	}
	applyTenant(t, ns, "alice", listing)
	applyTenant(t, ns, "bob", listing)
	applyTenant(t, ns, "carol", inPool("shared"))
	_, alice := waitReady(t, ns, "alice")
	_, bob := waitReady(t, ns, "bob")
	_, carol := waitReady(t, ns, "carol")

	const shared = "/pile/shared/shared.pile"
	for _, sbx := range []*playgroundv1alpha1.Sandbox{alice, bob} {
		g.Expect(shell(t, sbx, "cat "+shared)).To(Equal(records), "the shared pile in %s", sbx.Name)
		g.Expect(shell(t, sbx, "for c in 'echo x >> "+shared+"' 'echo x > "+shared+"' 'rm -f "+shared+"' 'touch /pile/shared/new' "+
			"'mv "+shared+" /pile/shared/moved' 'chmod 666 "+shared+"'; do sh -c \"$c\" 2>/dev/null && echo \"$c worked\"; done; "+
			"cat "+shared+"; ls /pile/shared")).To(Equal(records+"shared.pile\n"), "%s changed the shared pile", sbx.Name)
		// The tenant's own pile is as it was beside it.
		g.Expect(shell(t, sbx, "echo mine >> /pile/self.pile && cat /pile/self.pile")).To(Equal("mine\n"))
	}
	g.Expect(shell(t, carol, "ls /pile; if test -e /pile/shared; then echo shared; fi")).To(Equal("self.key\nself.pile\n"), "a tenant that lists no shared pile sees one")
	data, err := os.ReadFile(filepath.Join(src, "shared.pile"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(records), "the platform's bytes changed")

	bad := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "both"}}
	bad.Spec.Pile.Shared = &playgroundv1alpha1.FacultyBundleReference{Name: "commons"}
	bad.Spec.Sandbox.Faculties = []playgroundv1alpha1.FacultyBundleReference{{Name: "commons"}}
	err = k8sClient.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("either a faculty or the shared pile"))
}
