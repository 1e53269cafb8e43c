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
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/internal/tenanttoken"
	"github.com/playground-dev/playground/mcpgateway"
)

// startGateway runs an MCP gateway as its ServiceAccount, with only its
// generated rights (no Secrets), and returns its MCP endpoint.
func startGateway(t *testing.T) string {
	t.Helper()
	cfg, err := rbactest.Grant(context.Background(), k8sClient, cp.Config, "gateway", rbactest.ServiceAccountUser("gateway"), rbactest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return serveGateway(t, mcpgateway.Options{Config: cfg})
}

// serveGateway runs a gateway of opts (presenting the suite's agent token)
// on loopback until the test ends, waits until it is ready, and returns
// its MCP endpoint.
func serveGateway(t *testing.T, opts mcpgateway.Options) string {
	t.Helper()
	opts.AgentToken = mcpgateway.StaticToken(agentToken)
	// The suite's agents serve cleartext on loopback, but those of the TLS
	// stories.
	opts.AgentCleartext = opts.AgentCA == nil && opts.AgentTLS == nil
	gw, err := mcpgateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goRun(t, func(ctx context.Context) error { return gw.Run(ctx, ln) })
	NewWithT(t).Eventually(gw.Ready, settle, 50*time.Millisecond).Should(Succeed())
	return "http://" + ln.Addr().String() + "/mcp"
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect connects an MCP client with token, once, without retrying.
func mcpConnect(url, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1,
	}, nil)
}

// echo runs a command in the tenant's sandbox through the gateway.
func echo(g Gomega, cs *mcp.ClientSession, word string) string {
	return mcpExec(g, cs, "echo "+word)
}

// TestGatewayCredentials: with the real manager and a gateway that reads no
// Secrets, a tenant's token works from the moment its Tenant is Ready, and
// its rotated token from the moment the status reports the rotation (one
// attempt each, no retry), while the old one stops; tokens planted in
// Secrets by someone who may create them never work: under the name of a
// tenant before it exists (refused by the manager as SecretConflict, or
// adopted and replaced), or beside an existing tenant's.
func TestGatewayCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	n := &node{name: "cred-1", labels: pool("cred")}
	startNode(t, n)
	url := startGateway(t)
	ns := newNamespace(t)

	stranger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranger"}}
	g.Expect(k8sClient.Create(ctx, stranger)).To(Succeed())
	plant := func(secret, tenant string, owners []metav1.OwnerReference) string {
		token, err := tenanttoken.Mint()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, OwnerReferences: owners,
				Labels: map[string]string{playgroundv1alpha1.TenantLabel: tenant}},
			Type: playgroundv1alpha1.CredentialSecretType,
			Data: map[string][]byte{playgroundv1alpha1.CredentialTokenKey: []byte(token)},
		})).To(Succeed())
		return token
	}
	planted := map[string]string{
		"conflict": plant(playgroundv1alpha1.CredentialSecretName("mallory"), "mallory",
			[]metav1.OwnerReference{*metav1.NewControllerRef(stranger, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}),
		"adopted": plant(playgroundv1alpha1.CredentialSecretName("nobody"), "nobody", nil),
	}
	applyTenant(t, ns, "mallory", inPool("cred"))
	applyTenant(t, ns, "nobody", inPool("cred"))
	applyTenant(t, ns, "alice", inPool("cred"))

	// alice: the token read from the Secret once the Tenant is Ready works
	// at the first attempt, end to end.
	tn, _ := waitReady(t, ns, "alice")
	token := tokenOf(g, ns, "alice")
	g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(fingerprint(token)))
	cs, err := mcpConnect(url, token)
	g.Expect(err).NotTo(HaveOccurred(), "the token of a Ready tenant was refused")
	g.Expect(echo(g, cs, "hello")).To(Equal("hello\n"))
	_ = cs.Close()
	planted["beside alice"] = plant("alice-token-2", "alice", nil)

	// mallory stalls on the Secret it cannot own; nobody's planted Secret
	// is adopted with a new token, which works.
	g.Eventually(func(g Gomega) {
		var m playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mallory"}, &m)).To(Succeed())
		stalled := meta.FindStatusCondition(m.Status.Conditions, playgroundv1alpha1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(controllers.ReasonSecretConflict))
		g.Expect(m.Status.Credentials.TokenSHA256).To(BeEmpty())
	}, settle, 100*time.Millisecond).Should(Succeed())
	waitReady(t, ns, "nobody")
	adopted := tokenOf(g, ns, "nobody")
	g.Expect(adopted).NotTo(Equal(planted["adopted"]))
	cs, err = mcpConnect(url, adopted)
	g.Expect(err).NotTo(HaveOccurred(), "the token minted over an adopted Secret was refused")
	_ = cs.Close()

	for what, tok := range planted {
		if cs, err := mcpConnect(url, tok); err == nil {
			_ = cs.Close()
			t.Errorf("the token planted %s was accepted", what)
		}
	}

	// Rotation: once the status reports the rotation, the new token works
	// at the first attempt and the old one is refused.
	patch := client.MergeFrom(tn.DeepCopy())
	tn.Spec.Credentials.RotationRequest = "rotated"
	g.Expect(k8sClient.Patch(ctx, tn, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var cur playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tn), &cur)).To(Succeed())
		g.Expect(cur.Status.Credentials.RotationRequest).To(Equal("rotated"))
	}, settle, 20*time.Millisecond).Should(Succeed())
	rotated := tokenOf(g, ns, "alice")
	g.Expect(rotated).NotTo(Equal(token))
	cs, err = mcpConnect(url, rotated)
	g.Expect(err).NotTo(HaveOccurred(), "the rotated token was refused once the status reported it")
	g.Expect(echo(g, cs, "again")).To(Equal("again\n"))
	_ = cs.Close()
	if cs, err := mcpConnect(url, token); err == nil {
		_ = cs.Close()
		t.Error("the token rotated away was accepted")
	}
}
