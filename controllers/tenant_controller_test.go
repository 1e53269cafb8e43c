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
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
	"github.com/playground-dev/playground/internal/tenanttoken"
)

// Helpers of the Tenant stories.

func getTenant(g Gomega, ns, name string) *playgroundv1alpha1.Tenant {
	var tn playgroundv1alpha1.Tenant
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &tn)).To(Succeed())
	return &tn
}

func getSecret(g Gomega, ns, name string) *corev1.Secret {
	var s corev1.Secret
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
	return &s
}

// updateTenant applies change to the current Tenant, retrying on conflicts.
func updateTenant(t *testing.T, ns, name string, change func(*playgroundv1alpha1.Tenant)) {
	t.Helper()
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		change(tn)
		g.Expect(k8sClient.Update(context.Background(), tn)).To(Succeed())
	})
}

func tenantCondition(tn *playgroundv1alpha1.Tenant, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(tn.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// tokenOf reads the tenant's token from its Secret, checking the Secret's
// conventions (the gateway's contract) on the way.
func tokenOf(g Gomega, tn *playgroundv1alpha1.Tenant) string {
	s := getSecret(g, tn.Namespace, playgroundv1alpha1.CredentialSecretName(tn.Name))
	g.Expect(s.Type).To(Equal(corev1.SecretType(playgroundv1alpha1.CredentialSecretType)))
	g.Expect(s.Labels).To(HaveKeyWithValue(playgroundv1alpha1.TenantLabel, tn.Name))
	g.Expect(metav1.IsControlledBy(s, tn)).To(BeTrue(), "the Secret is not controlled by its Tenant: %v", s.OwnerReferences)
	token := string(s.Data[playgroundv1alpha1.CredentialTokenKey])
	g.Expect(token).To(HavePrefix("pgt_"))
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, "pgt_"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(HaveLen(32), "a token carries 256 random bits")
	return token
}

// sha16 is the fingerprint computed independently of the controller.
func sha16(token string) string {
	return sha256Hex(token)[:16]
}

// sha256Hex is the token's hash as the gateway looks it up, computed
// independently of the controller.
func sha256Hex(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// issuedToken waits until the tenant's status describes the token in its
// Secret, and returns the token.
func issuedToken(t *testing.T, ns, name string) string {
	t.Helper()
	var token string
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		token = tokenOf(g, tn)
		g.Expect(tn.Status.Credentials.SecretRef).To(Equal(&playgroundv1alpha1.LocalObjectReference{Name: playgroundv1alpha1.CredentialSecretName(name)}))
		g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(sha16(token)))
		g.Expect(tn.Status.Credentials.TokenSHA256).To(Equal(sha256Hex(token)), "the gateway authenticates against this hash")
		g.Expect(tn.Status.Credentials.RotationRequest).To(Equal(tn.Spec.Credentials.RotationRequest))
		g.Expect(tn.Status.Credentials.IssuedAt).NotTo(BeNil())
	})
	return token
}

// kstatusOf computes the kstatus of an object as GitOps tools do.
func kstatusOf(g Gomega, gvk schema.GroupVersionKind, ns, name string) *status.Result {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	return res
}

var tenantGVK = playgroundv1alpha1.GroupVersion.WithKind("Tenant")

// tenantEvents returns the Events about the tenant, by reason.
func tenantEvents(g Gomega, ns, name string) map[string][]eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := map[string][]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Tenant" && e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e)
		}
	}
	return out
}

// occurrences counts events, including the repeats an event series folds in.
func occurrences(events []eventsv1.Event) int {
	n := 0
	for _, e := range events {
		if e.Series != nil && e.Series.Count > 1 {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

func newTenant(t *testing.T, ns, name string, spec playgroundv1alpha1.TenantSpec) *playgroundv1alpha1.Tenant {
	t.Helper()
	tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8sClient.Create(context.Background(), tn); err != nil {
		t.Fatalf("creating tenant %s/%s: %v", ns, name, err)
	}
	return tn
}

// TestTenantFinalizerAtCreate: with config/admission's policy installed (as
// the suite's control plane installs it, and both renderings of the
// installation do), a Tenant has the controller's finalizer from its
// create on, beside its own finalizers: the controller has nothing to
// patch. Without it (a Tenant that lost it, or a cluster without the
// policy) the controller adds it back.
func TestTenantFinalizerAtCreate(t *testing.T) {
	ns := newNamespace(t)
	tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fin", Finalizers: []string{"example.com/keep"}}}
	g := NewWithT(t)
	g.Expect(k8sClient.Create(context.Background(), tn)).To(Succeed())
	g.Expect(tn.Finalizers).To(Equal([]string{"example.com/keep", playgroundv1alpha1.TenantFinalizer}), "the create's own answer")
	issuedToken(t, ns, "fin")

	patch := client.MergeFrom(tn.DeepCopy())
	tn.Finalizers = []string{"example.com/keep"}
	g.Expect(k8sClient.Patch(context.Background(), tn, patch)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(getTenant(g, ns, "fin").Finalizers).To(ConsistOf("example.com/keep", playgroundv1alpha1.TenantFinalizer))
	})

	// Let the tenant go: the controller's finalizer leaves once its
	// sandbox is gone, the test's own here.
	g.Expect(k8sClient.Delete(context.Background(), tn)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(getTenant(g, ns, "fin").Finalizers).To(Equal([]string{"example.com/keep"}))
	})
	got := &playgroundv1alpha1.Tenant{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(tn), got)).To(Succeed())
	patch = client.MergeFrom(got.DeepCopy())
	got.Finalizers = nil
	g.Expect(k8sClient.Patch(context.Background(), got, patch)).To(Succeed())
}

// TestNewTenantReadsNoSecret: a new tenant's way to its token, its
// generated signing key and its Sandbox reads none of its Secrets through
// the API server but for the key's delivery (each such read is a read of
// etcd, which a burst of tenants queues behind): its two Secrets are
// created at once, and the passes
// that their creation and the Sandbox's bring, before the Tenant's own
// status is back in the cache, take the key the manager described; a
// Secret planted under a name is still found, and judged
// (TestTenantConflict, TestTenantAdoptsButNeverTrusts).
func TestNewTenantReadsNoSecret(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8sClient.Create(ctx, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}})).To(Succeed())
	issuedToken(t, ns, "fresh")
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, "fresh")
		g.Expect(tn.Status.SigningKey).NotTo(BeNil())
		g.Expect(tn.Status.SigningKey.Fingerprint).NotTo(BeEmpty())
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fresh"}, &sbx)).To(Succeed())
	})
	// The later passes read no Secret either. The key's Secret is read
	// once, by its delivery to the sandbox's node (SigningKeyReconciler,
	// which a Sandbox that names a key brings).
	secretsDir := "/namespaces/" + ns + "/secrets/"
	g.Consistently(func(g Gomega) {
		g.Expect(managerRequests.matching("GET ", secretsDir+playgroundv1alpha1.CredentialSecretName("fresh"))).To(BeEmpty())
		g.Expect(len(managerRequests.matching("GET ", secretsDir+playgroundv1alpha1.SigningKeySecretName("fresh")))).To(BeNumerically("<=", 1))
	}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(managerRequests.matching("POST ", "/namespaces/"+ns+"/secrets")).To(HaveLen(2), "the token's Secret and the signing key's, each created once")
}

// TestTenantLifecycle: a platform team applies a Tenant and gets a token
// and a sandbox; rotates, suspends and resumes it; loses its Secret; and
// deletes it, leaving nothing behind. The token never shows outside its
// Secret.
func TestTenantLifecycle(t *testing.T) {
	ns := newNamespace(t)
	const name = "alice"
	cpu2, mem := resource.MustParse("2"), resource.MustParse("512Mi")
	created := newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{
		Persona: "alice-agent",
		Sandbox: playgroundv1alpha1.SandboxTemplate{
			Resources:    playgroundv1alpha1.SandboxResources{CPU: &cpu2, Memory: &mem},
			Faculties:    []playgroundv1alpha1.FacultyBundleReference{{Name: "tools"}},
			LoginProfile: playgroundv1alpha1.LoginProfile{Env: []playgroundv1alpha1.EnvVar{{Name: "EDITOR", Value: "vi"}}},
		},
		Pile: playgroundv1alpha1.TenantPile{PileStorage: playgroundv1alpha1.PileStorage{ReclaimPolicy: playgroundv1alpha1.ReclaimDelete}},
	})
	var tokens []string

	// Applied: a token in the Secret, its fingerprint in status, a Sandbox
	// from the template.
	token1 := issuedToken(t, ns, name)
	tokens = append(tokens, token1)
	var sandboxUID types.UID
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		g.Expect(tn.Finalizers).To(ContainElement(playgroundv1alpha1.TenantFinalizer))
		g.Expect(tenantCondition(tn, playgroundv1alpha1.CredentialsReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(tn.Status.SandboxRef).To(Equal(&playgroundv1alpha1.LocalObjectReference{Name: name}))
		g.Expect(tn.Status.SandboxID).To(BeEmpty(), "no agent has chosen the sandbox's ID")

		sbx := getSandbox(g, ns, name)
		g.Expect(metav1.IsControlledBy(sbx, created)).To(BeTrue(), "owner references: %v", sbx.OwnerReferences)
		g.Expect(sbx.Labels).To(HaveKeyWithValue(playgroundv1alpha1.TenantLabel, name))
		g.Expect(sbx.Spec.TenantRef.Name).To(Equal(name))
		g.Expect(sbx.Spec.Persona).To(Equal("alice-agent"))
		g.Expect(sbx.Spec.Backend).To(Equal(playgroundv1alpha1.BackendOCI))
		g.Expect(sbx.Spec.Resources.CPU.Cmp(cpu2)).To(Equal(0))
		g.Expect(sbx.Spec.Resources.Memory.Cmp(mem)).To(Equal(0))
		g.Expect(*sbx.Spec.Resources.PIDs).To(Equal(int64(1024)), "the template's defaults reach the Sandbox")
		g.Expect(sbx.Spec.Pile.ReclaimPolicy).To(Equal(playgroundv1alpha1.ReclaimDelete))
		g.Expect(sbx.Spec.Faculties).To(Equal([]playgroundv1alpha1.FacultyBundleReference{{Name: "tools"}}))
		g.Expect(sbx.Spec.LoginProfile.Env).To(Equal([]playgroundv1alpha1.EnvVar{{Name: "EDITOR", Value: "vi"}}))
		g.Expect(sbx.Spec.Network.Mode).To(Equal(playgroundv1alpha1.NetworkNone), "no network unless asked")
		sandboxUID = sbx.UID

		// No agent runs here, so the sandbox is not Ready, and neither is
		// the tenant; SandboxReady says what the Sandbox says.
		g.Expect(tenantCondition(tn, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
		mirrored := tenantCondition(tn, playgroundv1alpha1.SandboxReadyCondition)
		if sr := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition); sr != nil {
			g.Expect([]string{string(mirrored.Status), mirrored.Reason, mirrored.Message}).To(Equal([]string{string(sr.Status), sr.Reason, sr.Message}))
		} else {
			g.Expect(mirrored.Reason).To(Equal(ReasonSandboxPending))
		}
		g.Expect(kstatusOf(g, tenantGVK, ns, name).Status).To(Equal(status.InProgressStatus))
	})
	// The path to here is the happy one: it records no Event (each would
	// be an API write per tenant).
	eventually(t, func(g Gomega) { g.Expect(tenantEvents(g, ns, name)).To(BeEmpty()) })

	// The template changes: the Sandbox follows.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Persona = ""
		tn.Spec.Sandbox.LoginProfile.Env = append(tn.Spec.Sandbox.LoginProfile.Env, playgroundv1alpha1.EnvVar{Name: "PAGER", Value: "less"})
		tn.Spec.Pile.ReclaimPolicy = playgroundv1alpha1.ReclaimRetain
		tn.Spec.Sandbox.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
			Egress: []playgroundv1alpha1.EgressRule{{CIDR: "203.0.113.0/24", Ports: []int32{443}}}}
	})
	eventually(t, func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		g.Expect(sbx.UID).To(Equal(sandboxUID))
		g.Expect(sbx.Spec.Network.Mode).To(Equal(playgroundv1alpha1.NetworkEgress))
		g.Expect(sbx.Spec.Network.Egress).To(Equal([]playgroundv1alpha1.EgressRule{{CIDR: "203.0.113.0/24", Ports: []int32{443}}}))
		g.Expect(sbx.Spec.Persona).To(Equal(name), "the persona defaults to the tenant's name")
		g.Expect(sbx.Spec.LoginProfile.Env).To(HaveLen(2))
		g.Expect(sbx.Spec.Pile.ReclaimPolicy).To(Equal(playgroundv1alpha1.ReclaimRetain))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonSandboxUpdated))
	})

	// Rotate: a new token in the same Secret, a new fingerprint.
	secretUID := getSecret(NewWithT(t), ns, playgroundv1alpha1.CredentialSecretName(name)).UID
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Credentials.RotationRequest = "2026-01-01" })
	var token2 string
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		token2 = tokenOf(g, tn)
		g.Expect(token2).NotTo(Equal(token1))
		g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(sha16(token2)))
		g.Expect(tn.Status.Credentials.TokenSHA256).To(Equal(sha256Hex(token2)))
		g.Expect(tn.Status.Credentials.RotationRequest).To(Equal("2026-01-01"))
		g.Expect(getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name)).UID).To(Equal(secretUID))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonTokenRotated))
	})
	tokens = append(tokens, token2)
	g := NewWithT(t)
	g.Expect(sha16(token2)).NotTo(Equal(sha16(token1)))

	// Suspend: access revoked, token and sandbox untouched.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Suspended = true })
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		creds := tenantCondition(tn, playgroundv1alpha1.CredentialsReadyCondition)
		g.Expect(creds.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(creds.Reason).To(Equal(ReasonSuspended))
		ready := tenantCondition(tn, playgroundv1alpha1.ReadyCondition)
		g.Expect([]string{string(ready.Status), ready.Reason}).To(Equal([]string{"False", ReasonSuspended}))
		g.Expect(tn.Status.ObservedGeneration).To(Equal(tn.Generation))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonSuspended))
	})
	g.Expect(tokenOf(g, getTenant(g, ns, name))).To(Equal(token2))
	g.Expect(getSandbox(g, ns, name).UID).To(Equal(sandboxUID))
	g.Expect(getSandbox(g, ns, name).DeletionTimestamp).To(BeNil())

	// Resume: the same token works again.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Suspended = false })
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		creds := tenantCondition(tn, playgroundv1alpha1.CredentialsReadyCondition)
		g.Expect([]string{string(creds.Status), creds.Reason}).To(Equal([]string{"True", ReasonTokenIssued}))
		g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(sha16(token2)))
		g.Expect(tn.Status.Credentials.TokenSHA256).To(Equal(sha256Hex(token2)))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonResumed))
	})
	g.Expect(tokenOf(g, getTenant(g, ns, name))).To(Equal(token2))

	// The Secret is deleted: a new token is minted (the credential rotates).
	g.Expect(k8sClient.Delete(context.Background(), getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name)))).To(Succeed())
	var token3 string
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		token3 = tokenOf(g, tn)
		g.Expect(token3).NotTo(Equal(token2))
		g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(sha16(token3)))
		g.Expect(tn.Status.Credentials.TokenSHA256).To(Equal(sha256Hex(token3)))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonTokenReissued))
	})
	tokens = append(tokens, token3)

	// The token is corrupted: replaced by a valid one.
	eventually(t, func(g Gomega) {
		s := getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name))
		s.Data[playgroundv1alpha1.CredentialTokenKey] = []byte("pgt_guessable")
		g.Expect(k8sClient.Update(context.Background(), s)).To(Succeed())
	})
	var token4 string
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		token4 = tokenOf(g, tn)
		g.Expect(token4).NotTo(Equal(token3))
		g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(sha16(token4)))
		g.Expect(tn.Status.Credentials.TokenSHA256).To(Equal(sha256Hex(token4)))
	})
	tokens = append(tokens, token4)

	// No token outside its Secret: not in status, events or logs.
	eventually(t, func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(k8sClient.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
		// Repeated Events (TokenReissued twice) are one with a series.
		g.Expect(occurrences(events.Items)).To(BeNumerically(">=", 6))
		evJSON, err := json.Marshal(events)
		g.Expect(err).NotTo(HaveOccurred())
		tnJSON, err := json.Marshal(getTenant(g, ns, name))
		g.Expect(err).NotTo(HaveOccurred())
		logs := managerLogs()
		g.Expect(logs).To(ContainSubstring(sha16(token4)), "the logs name the fingerprint, so they were captured")
		for _, tok := range tokens {
			g.Expect(string(evJSON)).NotTo(ContainSubstring(tok))
			g.Expect(string(tnJSON)).NotTo(ContainSubstring(tok))
			g.Expect(logs).NotTo(ContainSubstring(tok))
			g.Expect(logs).NotTo(ContainSubstring(strings.TrimPrefix(tok, "pgt_")))
		}
	})

	// Delete: the Sandbox and the Secret go, then the Tenant.
	g.Expect(k8sClient.Delete(context.Background(), created)).To(Succeed())
	eventually(t, func(g Gomega) {
		err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &playgroundv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the tenant is still there: %v", err)
		err = k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &playgroundv1alpha1.Sandbox{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the sandbox is still there: %v", err)
		err = k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name)}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the secret is still there: %v", err)
	})
}

// TestTenantDeletionWaitsForSandbox: the Tenant stays, revoked, until its
// Sandbox is gone; the Sandbox's finalizer is the node agent's to lift.
func TestTenantDeletionWaitsForSandbox(t *testing.T) {
	ns := newNamespace(t)
	const name = "bob"
	tn := newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{})
	issuedToken(t, ns, name)
	// Stand in for the node's agent: hold the Sandbox with its finalizer.
	eventually(t, func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		sbx.Finalizers = append(sbx.Finalizers, playgroundv1alpha1.SandboxFinalizer)
		g.Expect(k8sClient.Update(context.Background(), sbx)).To(Succeed())
	})
	g := NewWithT(t)
	g.Expect(k8sClient.Delete(context.Background(), tn)).To(Succeed())
	eventually(t, func(g Gomega) {
		err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name)}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the token is not revoked at once: %v", err)
		g.Expect(getSandbox(g, ns, name).DeletionTimestamp).NotTo(BeNil())
		got := getTenant(g, ns, name)
		g.Expect(tenantCondition(got, playgroundv1alpha1.ReadyCondition).Reason).To(Equal(ReasonDeleting))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonDeleting))
		g.Expect(kstatusOf(g, tenantGVK, ns, name).Status).To(Equal(status.TerminatingStatus))
	})
	consistently(t, 2*time.Second, func(g Gomega) {
		g.Expect(getTenant(g, ns, name).Finalizers).To(ContainElement(playgroundv1alpha1.TenantFinalizer))
		err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name)}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a deleting tenant got a token again: %v", err)
	}, "the tenant was released while its sandbox still exists")

	// The agent is done.
	eventually(t, func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		sbx.Finalizers = nil
		g.Expect(k8sClient.Update(context.Background(), sbx)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &playgroundv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the tenant is still there: %v", err)
	})
}

// TestTenantReady: with an agent to bind to, the tenant turns Ready and
// kstatus reads Current; template changes never move the binding; a
// backend change stalls until it is reverted.
func TestTenantReady(t *testing.T) {
	ns := newNamespace(t)
	const name = "carol"
	zone := "tenant-ready-" + rand.String(5)
	node := "tenant-node-" + rand.String(5)
	registerAgent(t, node, map[string]string{"zone": zone}, time.Hour)
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{
		Sandbox: playgroundv1alpha1.SandboxTemplate{NodeSelector: map[string]string{"zone": zone}},
	})
	issuedToken(t, ns, name)
	eventually(t, func(g Gomega) { g.Expect(getSandbox(g, ns, name).Spec.NodeName).To(Equal(node)) })
	eventually(t, func(g Gomega) { markProvisioned(g, getSandbox(g, ns, name)) })

	ready := func(g Gomega) {
		tn := getTenant(g, ns, name)
		for _, typ := range []string{playgroundv1alpha1.ReadyCondition, playgroundv1alpha1.CredentialsReadyCondition, playgroundv1alpha1.SandboxReadyCondition} {
			g.Expect(tenantCondition(tn, typ).Status).To(Equal(metav1.ConditionTrue), "%s: %+v", typ, tn.Status.Conditions)
		}
		g.Expect(meta.FindStatusCondition(tn.Status.Conditions, playgroundv1alpha1.ReconcilingCondition)).To(BeNil())
		g.Expect(meta.FindStatusCondition(tn.Status.Conditions, playgroundv1alpha1.StalledCondition)).To(BeNil())
		g.Expect(tn.Status.ObservedGeneration).To(Equal(tn.Generation))
		g.Expect(tn.Status.SandboxID).To(And(Not(BeEmpty()), Equal(getSandbox(g, ns, name).Status.SandboxID)), "the tenant shows the ID its agent chose")
		g.Expect(kstatusOf(g, tenantGVK, ns, name).Status).To(Equal(status.CurrentStatus))
		g.Expect(kstatusOf(g, corev1.SchemeGroupVersion.WithKind("Secret"), ns, playgroundv1alpha1.CredentialSecretName(name)).Status).To(Equal(status.CurrentStatus))
		g.Expect(kstatusOf(g, playgroundv1alpha1.GroupVersion.WithKind("Sandbox"), ns, name).Status).To(Equal(status.CurrentStatus))
	}
	eventually(t, ready)

	// A template change reaches the Sandbox; its binding stays.
	mem := resource.MustParse("2Gi")
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Resources.Memory = &mem })
	eventually(t, func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		g.Expect(sbx.Spec.Resources.Memory.Cmp(mem)).To(Equal(0))
		g.Expect(sbx.Spec.NodeName).To(Equal(node))
	})
	eventually(t, ready)

	// Suspended: not Ready, and not Reconciling either: it is where the spec asks.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Suspended = true })
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		g.Expect(tenantCondition(tn, playgroundv1alpha1.ReadyCondition).Reason).To(Equal(ReasonSuspended))
		g.Expect(tenantCondition(tn, playgroundv1alpha1.SandboxReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(meta.FindStatusCondition(tn.Status.Conditions, playgroundv1alpha1.ReconcilingCondition)).To(BeNil())
	})
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Suspended = false })
	eventually(t, ready)

	// The backend cannot change: Stalled, until the change is reverted.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Backend = playgroundv1alpha1.BackendLima })
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		stalled := tenantCondition(tn, playgroundv1alpha1.StalledCondition)
		g.Expect([]string{string(stalled.Status), stalled.Reason}).To(Equal([]string{"True", ReasonBackendImmutable}))
		g.Expect(tenantCondition(tn, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(tn.Status.ObservedGeneration).To(Equal(tn.Generation))
		g.Expect(kstatusOf(g, tenantGVK, ns, name).Status).To(Equal(status.FailedStatus))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonBackendImmutable))
	})
	g := NewWithT(t)
	g.Expect(getSandbox(g, ns, name).Spec.Backend).To(Equal(playgroundv1alpha1.BackendOCI))
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Backend = playgroundv1alpha1.BackendOCI })
	eventually(t, ready)

	// So can its isolation: Stalled, until reverted.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Isolation = playgroundv1alpha1.IsolationGVisor })
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		stalled := tenantCondition(tn, playgroundv1alpha1.StalledCondition)
		g.Expect([]string{string(stalled.Status), stalled.Reason}).To(Equal([]string{"True", ReasonIsolationImmutable}))
		g.Expect(stalled.Message).To(ContainSubstring("delete Sandbox " + name))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonIsolationImmutable))
	})
	g.Expect(getSandbox(g, ns, name).Spec.Isolation).To(BeEmpty())
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Isolation = playgroundv1alpha1.IsolationContainer })
	eventually(t, ready)

	// Storage limits are fixed once bound: Stalled, until reverted; the
	// pile's reclaim policy still follows the Tenant.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Pile.Inodes = ptr.To[int64](8192)
		tn.Spec.Pile.ReclaimPolicy = playgroundv1alpha1.ReclaimDelete
	})
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		stalled := tenantCondition(tn, playgroundv1alpha1.StalledCondition)
		g.Expect([]string{string(stalled.Status), stalled.Reason}).To(Equal([]string{"True", ReasonStorageImmutable}))
		g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonStorageImmutable))
		sbx := getSandbox(g, ns, name)
		g.Expect(sbx.Spec.Pile.Inodes).To(HaveValue(BeEquivalentTo(4096)))
		g.Expect(sbx.Spec.Pile.ReclaimPolicy).To(Equal(playgroundv1alpha1.ReclaimDelete))
	})
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Pile.Inodes = ptr.To[int64](4096) })
	eventually(t, ready)
}

// TestTenantConflict: a Secret of another kind under the token's name is
// not taken over; the tenant stalls and says so.
func TestTenantConflict(t *testing.T) {
	ns := newNamespace(t)
	const name = "dave"
	g := NewWithT(t)
	g.Expect(k8sClient.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name)},
		StringData: map[string]string{"token": "someone else's"},
	})).To(Succeed())
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{})
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		stalled := tenantCondition(tn, playgroundv1alpha1.StalledCondition)
		g.Expect([]string{string(stalled.Status), stalled.Reason}).To(Equal([]string{"True", ReasonSecretConflict}))
		g.Expect(tenantCondition(tn, playgroundv1alpha1.CredentialsReadyCondition).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(kstatusOf(g, tenantGVK, ns, name).Status).To(Equal(status.FailedStatus))
		g.Expect(tn.Status.SandboxRef).NotTo(BeNil(), "the sandbox does not wait for the credential")
		g.Expect(tn.Status.Credentials.TokenSHA256).To(BeEmpty(), "a hash was published for a Secret the tenant does not own")
	})
	s := getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name))
	g.Expect(string(s.Data["token"])).To(Equal("someone else's"))
	g.Expect(s.OwnerReferences).To(BeEmpty())
}

// TestTenantConflictRevokes: when the tenant's Secret is taken over by
// another controller, its hash leaves the status, so the gateway accepts
// neither the token it held nor any other.
func TestTenantConflictRevokes(t *testing.T) {
	ns := newNamespace(t)
	const name = "trent"
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{})
	token := issuedToken(t, ns, name)
	g := NewWithT(t)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-else"}}
	g.Expect(k8sClient.Create(context.Background(), other)).To(Succeed())
	eventually(t, func(g Gomega) {
		s := getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name))
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}}
		g.Expect(k8sClient.Update(context.Background(), s)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		g.Expect(tenantCondition(tn, playgroundv1alpha1.StalledCondition).Reason).To(Equal(ReasonSecretConflict))
		g.Expect(tn.Status.Credentials.TokenSHA256).To(BeEmpty())
	})
	s := getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name))
	g.Expect(string(s.Data[playgroundv1alpha1.CredentialTokenKey])).To(Equal(token), "the manager wrote a Secret it does not own")
}

// TestTenantAdoptsButNeverTrusts: a Secret of the token's name and type
// that this Tenant did not mint is adopted, and its token replaced: with
// the tenant label, or without it (then the manager's cache, which holds
// only labelled Secrets, does not have it: it is read from the API server).
func TestTenantAdoptsButNeverTrusts(t *testing.T) {
	for name, labels := range map[string]map[string]string{
		"frank": {playgroundv1alpha1.TenantLabel: "frank"},
		"fiona": nil,
	} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			planted, err := tenanttoken.Mint()
			g := NewWithT(t)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(k8sClient.Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name), Labels: labels},
				Type:       playgroundv1alpha1.CredentialSecretType,
				Data:       map[string][]byte{playgroundv1alpha1.CredentialTokenKey: []byte(planted)},
			})).To(Succeed())
			newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{})
			token := issuedToken(t, ns, name) // also checks the Secret is now controlled by the Tenant, and labelled
			g.Expect(token).NotTo(Equal(planted), "a planted token was trusted")
			g.Expect(getTenant(g, ns, name).Status.Credentials.TokenSHA256).NotTo(Equal(sha256Hex(planted)), "a planted token's hash was published")
			eventually(t, func(g Gomega) { g.Expect(tenantEvents(g, ns, name)).To(HaveKey(ReasonTokenReissued)) })
		})
	}
}

// TestManagerRestart: restarting the manager re-mints nothing and
// re-creates nothing; neither does a status lost on the way (a restore
// without status).
func TestManagerRestart(t *testing.T) {
	ns := newNamespace(t)
	const name = "erin"
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{Credentials: playgroundv1alpha1.CredentialsSpec{RotationRequest: "first"}})
	token := issuedToken(t, ns, name)
	g := NewWithT(t)
	var sbx *playgroundv1alpha1.Sandbox
	eventually(t, func(g Gomega) {
		sbx = getSandbox(g, ns, name)
		g.Expect(getTenant(g, ns, name).Status.ObservedGeneration).To(Equal(int64(1)))
	})
	secret := getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name))
	fp := getTenant(g, ns, name).Status.Credentials.Fingerprint

	restartManager(t)

	unchanged := func(g Gomega) {
		tn := getTenant(g, ns, name)
		g.Expect(tokenOf(g, tn)).To(Equal(token))
		g.Expect(getSecret(g, ns, secret.Name).ResourceVersion).To(Equal(secret.ResourceVersion), "the Secret was written")
		s := getSandbox(g, ns, name)
		g.Expect(s.UID).To(Equal(sbx.UID))
		g.Expect(s.Generation).To(Equal(sbx.Generation))
		events := tenantEvents(g, ns, name)
		g.Expect(events).NotTo(HaveKey(ReasonTokenRotated))
		g.Expect(events).NotTo(HaveKey(ReasonTokenReissued))
	}
	consistently(t, 3*time.Second, unchanged)

	// The status is lost: it comes back from the Secret, the same.
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		tn.Status = playgroundv1alpha1.TenantStatus{}
		g.Expect(k8sClient.Status().Update(context.Background(), tn)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(fp))
		g.Expect(tn.Status.Credentials.TokenSHA256).To(Equal(sha256Hex(token)))
		g.Expect(tn.Status.Credentials.RotationRequest).To(Equal("first"))
		g.Expect(tn.Status.SandboxRef).NotTo(BeNil())
	})

	// The new manager serves this tenant: a change still reaches the Sandbox.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Persona = "erin-again" })
	eventually(t, func(g Gomega) { g.Expect(getSandbox(g, ns, name).Spec.Persona).To(Equal("erin-again")) })
	sbx = getSandbox(g, ns, name)
	unchanged(g)
}

// TestUpgradePublishesHash: a Tenant whose status a previous version wrote,
// without the token's hash, gets it from the new manager's first pass over
// every Tenant at start, from the Secret the Tenant controls: the gateway
// then accepts the same token, and nothing is re-minted.
func TestUpgradePublishesHash(t *testing.T) {
	ns := newNamespace(t)
	const name = "ursula"
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{})
	token := issuedToken(t, ns, name)
	g := NewWithT(t)
	secret := getSecret(g, ns, playgroundv1alpha1.CredentialSecretName(name))
	eventually(t, func(g Gomega) {
		g.Expect(getTenant(g, ns, name).Status.ObservedGeneration).To(Equal(int64(1)))
	})

	restartManager(t, func() {
		// What the previous version's status looked like: no hash.
		eventually(t, func(g Gomega) {
			tn := getTenant(g, ns, name)
			tn.Status.Credentials.TokenSHA256 = ""
			g.Expect(k8sClient.Status().Update(context.Background(), tn)).To(Succeed())
		})
	})

	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		g.Expect(tn.Status.Credentials.TokenSHA256).To(Equal(sha256Hex(token)))
		g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(sha16(token)))
	})
	g.Expect(getSecret(g, ns, secret.Name).ResourceVersion).To(Equal(secret.ResourceVersion), "the Secret was written")
	g.Expect(tenantEvents(g, ns, name)).NotTo(Or(HaveKey(ReasonTokenReissued), HaveKey(ReasonTokenRotated)))
}

// Pure helpers.

func TestUpdateSandbox(t *testing.T) {
	one, two := resource.MustParse("1"), resource.MustParse("2")
	oneMilli := resource.MustParse("1000m")
	base := func() *playgroundv1alpha1.Sandbox {
		return &playgroundv1alpha1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{playgroundv1alpha1.TenantLabel: "t"}},
			Spec: playgroundv1alpha1.SandboxSpec{
				TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "t"},
				Persona:   "t",
				SandboxTemplate: playgroundv1alpha1.SandboxTemplate{
					Backend:   playgroundv1alpha1.BackendOCI,
					Resources: playgroundv1alpha1.SandboxResources{CPU: &one},
				},
			},
		}
	}
	for _, tc := range []struct {
		name        string
		have, want  func(*playgroundv1alpha1.Sandbox)
		changed     []string
		fixed       bool
		storage     bool
		nodeName    string
		selectorSet bool
	}{
		{name: "equal", changed: nil},
		{name: "equal quantities in other words", want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Resources.CPU = &oneMilli }},
		{name: "nil and empty lists are equal", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Faculties = []playgroundv1alpha1.FacultyBundleReference{} }},
		{name: "resources", want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Resources.CPU = &two }, changed: []string{"resources"}},
		{name: "persona and faculties", want: func(s *playgroundv1alpha1.Sandbox) {
			s.Spec.Persona = "p"
			s.Spec.Faculties = []playgroundv1alpha1.FacultyBundleReference{{Name: "f"}}
		}, changed: []string{"persona", "faculties"}},
		{name: "backend is never changed", want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Backend = playgroundv1alpha1.BackendLima }, fixed: true},
		{name: "selector while unbound", want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeSelector = map[string]string{"a": "b"} },
			changed: []string{"nodeSelector"}, selectorSet: true},
		{name: "selector once bound", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeSelector = map[string]string{"a": "b"} }, nodeName: "n1"},
		{name: "nodeName is the binder's", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Resources.CPU = &two }, changed: []string{"resources"}, nodeName: "n1"},
		{name: "label repaired", have: func(s *playgroundv1alpha1.Sandbox) { s.Labels = nil }, changed: []string{"labels"}},
		{name: "storage while unbound", want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Storage.Size = &two }, changed: []string{"storage"}},
		{name: "storage limits once bound", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Pile.Inodes = ptr.To[int64](300) }, storage: true, nodeName: "n1"},
		{name: "pile limits while unbound", want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Pile.Inodes = ptr.To[int64](300) }, changed: []string{"pile"}},
		{name: "writable layer once bound", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Storage.Size = &two }, storage: true, nodeName: "n1"},
		{name: "shared pile and signing key, once bound too", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) {
				s.Spec.Pile.Shared = &playgroundv1alpha1.FacultyBundleReference{Name: "commons"}
				s.Spec.Pile.SigningKey = &playgroundv1alpha1.SigningKeySource{SecretName: "t-signing-key"}
			}, changed: []string{"pile.shared", "pile.signingKey"}, nodeName: "n1"},
		{name: "idle suspension, once bound too", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) {
				s.Spec.IdleSuspend = &playgroundv1alpha1.IdleSuspend{After: metav1.Duration{Duration: time.Minute}}
			}, changed: []string{"idleSuspend"}, nodeName: "n1"},
		{name: "usage limits, once bound too", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) {
				s.Spec.UsageLimits = &playgroundv1alpha1.UsageLimits{Period: metav1.Duration{Duration: time.Hour}, CPUSeconds: ptr.To[int64](60)}
			}, changed: []string{"usageLimits"}, nodeName: "n1"},
		{name: "reclaim policy once bound", have: func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "n1" },
			want: func(s *playgroundv1alpha1.Sandbox) { s.Spec.Pile.ReclaimPolicy = playgroundv1alpha1.ReclaimDelete }, changed: []string{"pile"}, nodeName: "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			have, want := base(), base()
			if tc.have != nil {
				tc.have(have)
			}
			if tc.want != nil {
				tc.want(want)
			}
			changed, fixed, storage := updateSandbox(have, want)
			g.Expect(changed).To(Equal(tc.changed))
			g.Expect(fixed).To(Equal(tc.fixed))
			g.Expect(storage).To(Equal(tc.storage))
			g.Expect(have.Spec.Backend).To(Equal(playgroundv1alpha1.BackendOCI))
			g.Expect(have.Spec.NodeName).To(Equal(tc.nodeName))
			g.Expect(have.Spec.NodeSelector != nil).To(Equal(tc.selectorSet))
			if tc.changed != nil {
				again, _, _ := updateSandbox(have, want)
				g.Expect(again).To(BeEmpty(), "not idempotent")
			}
		})
	}
}

func TestDesiredSandbox(t *testing.T) {
	g := NewWithT(t)
	tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: strings.Repeat("a", 200)}}
	s := desiredSandbox(tn)
	g.Expect(s.Spec.Persona).To(HaveLen(128), "a Sandbox's persona is at most 128 characters")
	g.Expect(s.Spec.TenantRef.Name).To(Equal(tn.Name))
	tn.Spec.Persona = "someone"
	tn.Spec.Sandbox.Faculties = []playgroundv1alpha1.FacultyBundleReference{{Name: "f"}}
	s = desiredSandbox(tn)
	g.Expect(s.Spec.Persona).To(Equal("someone"))
	s.Spec.Faculties[0].Name = "changed"
	g.Expect(tn.Spec.Sandbox.Faculties[0].Name).To(Equal("f"), "the template is copied, not shared")
}

func TestTenantReadySummary(t *testing.T) {
	cond := func(typ string, st metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: reason + " message"}
	}
	credsOK := cond(playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionTrue, ReasonTokenIssued)
	sbxOK := cond(playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionTrue, "Ready")
	sbxWaiting := cond(playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionFalse, "NoEligibleNode")
	workerOK := cond(playgroundv1alpha1.WorkerReadyCondition, metav1.ConditionTrue, "Ready")
	noMapping := cond(playgroundv1alpha1.WorkerReadyCondition, metav1.ConditionFalse, ReasonNoMapping)
	for _, tc := range []struct {
		name        string
		catalog     playgroundv1alpha1.Catalog
		suspended   bool
		conds       []metav1.Condition
		status      metav1.ConditionStatus
		reason      string
		progressing bool
	}{
		{"ready", "", false, []metav1.Condition{credsOK, sbxOK}, metav1.ConditionTrue, "Ready", false},
		{"sandbox waiting", "", false, []metav1.Condition{credsOK, sbxWaiting}, metav1.ConditionFalse, "NoEligibleNode", true},
		{"credentials first", "", false, []metav1.Condition{cond(playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionUnknown, ReasonCredentialsError), sbxWaiting},
			metav1.ConditionFalse, ReasonCredentialsError, true},
		{"nothing reported", "", false, nil, metav1.ConditionFalse, "Pending", true},
		{"suspended and settled", "", true, []metav1.Condition{cond(playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionFalse, ReasonSuspended), sbxOK},
			metav1.ConditionFalse, ReasonSuspended, false},
		{"workers: ready with its mapping", playgroundv1alpha1.CatalogWorkers, false, []metav1.Condition{credsOK, sbxOK, workerOK}, metav1.ConditionTrue, "Ready", false},
		{"workers: no mapping", playgroundv1alpha1.CatalogWorkers, false, []metav1.Condition{credsOK, sbxOK, noMapping}, metav1.ConditionFalse, ReasonNoMapping, true},
		{"workers: not reported", playgroundv1alpha1.CatalogWorkers, false, []metav1.Condition{credsOK, sbxOK}, metav1.ConditionFalse, "Pending", true},
		{"sandbox: a stale WorkerReady does not count", playgroundv1alpha1.CatalogSandbox, false, []metav1.Condition{credsOK, sbxOK, noMapping}, metav1.ConditionTrue, "Ready", false},
		{"suspended, sandbox stopped by its agent", "", true, []metav1.Condition{cond(playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionFalse, ReasonSuspended),
			cond(playgroundv1alpha1.SandboxReadyCondition, metav1.ConditionFalse, playgroundv1alpha1.ReasonSuspended)},
			metav1.ConditionFalse, ReasonSuspended, false},
		{"suspended, sandbox on its way", "", true, []metav1.Condition{cond(playgroundv1alpha1.CredentialsReadyCondition, metav1.ConditionFalse, ReasonSuspended), sbxWaiting},
			metav1.ConditionFalse, ReasonSuspended, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tn := &playgroundv1alpha1.Tenant{Spec: playgroundv1alpha1.TenantSpec{Suspended: tc.suspended, Catalog: tc.catalog}, Status: playgroundv1alpha1.TenantStatus{Conditions: tc.conds}}
			ready, progressing := tenantReady(tn)
			g.Expect(ready.Status).To(Equal(tc.status))
			g.Expect(ready.Reason).To(Equal(tc.reason))
			g.Expect(ready.Message).NotTo(BeEmpty())
			g.Expect(progressing).To(Equal(tc.progressing))
		})
	}
}

// The summary the reconcilers share maps to what kstatus computes.
func TestSummarizeKstatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ready       metav1.ConditionStatus
		progressing bool
		err         error
		want        status.Status
	}{
		{"ready", metav1.ConditionTrue, false, nil, status.CurrentStatus},
		{"working", metav1.ConditionFalse, true, nil, status.InProgressStatus},
		{"stalled", metav1.ConditionTrue, false, pgreconcile.Stall("Why", "Because"), status.FailedStatus},
		{"error", metav1.ConditionTrue, false, context.DeadlineExceeded, status.InProgressStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			tn.Status.ObservedGeneration = 3
			// Left over from an earlier pass: must not survive a settled one.
			tn.Status.Conditions = []metav1.Condition{
				{Type: playgroundv1alpha1.StalledCondition, Status: metav1.ConditionTrue, Reason: "Old", LastTransitionTime: metav1.Now()},
				{Type: playgroundv1alpha1.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: "Old", LastTransitionTime: metav1.Now()},
			}
			pgreconcile.Summarize(&tn.Status.Conditions, tn.Generation, metav1.Condition{Status: tc.ready, Reason: "R", Message: "M"}, tc.progressing, tc.err)
			for _, c := range tn.Status.Conditions {
				g.Expect(c.ObservedGeneration).To(Equal(int64(3)), c.Type)
			}
			m, err := json.Marshal(tn)
			g.Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			g.Expect(u.UnmarshalJSON(append([]byte(`{"apiVersion":"playground.dev/v1alpha1","kind":"Tenant",`), m[1:]...))).To(Succeed())
			res, err := status.Compute(u)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tc.want), "%+v", tn.Status.Conditions)
		})
	}
}
