//go:build linux

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
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/internal/netnstest"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// TestBrokeredCredential: a Tenant's egress rule brokers api.test with a
// header from a Secret of its namespace. Through the gateway, with a real
// MCP client, the tenant's curl reaches api.test (a test host in a
// network namespace the test makes, behind a test DNS zone), over TLS it
// verifies, and the server sees the header; the secret is nowhere in the
// sandbox: not in its environment, its processes' environments or its
// files. The manager hands the credential to the node's agent, and again
// when that agent restarts; a Secret of another type is refused with an
// Event that says what to do, and its rule's requests get no credential.
func TestBrokeredCredential(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	secret := "pg-e2e-" + hex.EncodeToString(raw)

	const api = "198.19.77.1"
	world := netnstest.New(t, "198.19.77", 1)
	world.ServeZone(t, api+":53", map[string][]string{"api.test.": {"api.test. 60 IN A " + api}})
	roots := world.ServeHTTPS(t, api+":443", "api.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+secret {
			_, _ = w.Write([]byte("authorized\n"))
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("anonymous\n"))
	}))
	egressBackend := func(stateDir string) backend.Backend {
		be, err := oci.New(oci.Options{StateDir: stateDir, GuestBinary: ocitest.GuestBinary(t), Network: oci.NetworkEgress,
			EgressResolvers: []string{api + ":53"}, EgressRoots: roots})
		if err != nil {
			t.Fatal(err)
		}
		return be
	}

	startManager(t)
	n := &node{name: "broker-1", labels: pool("broker"), stateDir: ocitest.StateDir(t)}
	n.backends = []backend.Backend{egressBackend(n.stateDir)}
	startNode(t, n)
	url := startGateway(t)
	ns := newNamespace(t)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-key"}, Type: playgroundv1alpha1.EgressCredentialSecretType,
			StringData: map[string]string{"token": "Bearer " + secret}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opaque"}, Type: corev1.SecretTypeOpaque,
			StringData: map[string]string{"token": "Bearer " + secret}},
	} {
		g.Expect(k8sClient.Create(ctx, s)).To(Succeed())
	}
	brokered := func(secretName string) func(*playgroundv1alpha1.Tenant) {
		return func(tn *playgroundv1alpha1.Tenant) {
			tn.Spec.Sandbox.NodeSelector = pool("broker")
			tn.Spec.Sandbox.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
				Egress: []playgroundv1alpha1.EgressRule{{Host: "api.test", Ports: []int32{443},
					Credential: &playgroundv1alpha1.EgressCredential{SecretRef: playgroundv1alpha1.SecretKeyReference{Name: secretName}}}}}
		}
	}
	applyTenant(t, ns, "alice", brokered("api-key"))
	applyTenant(t, ns, "bob", brokered("opaque"))
	waitReady(t, ns, "alice")
	// Bob's sandbox serves, but his Tenant is not Ready: its status says
	// which Secret is refused, why, and what to do.
	g.Eventually(func(g Gomega) {
		var sbx playgroundv1alpha1.Sandbox
		var tn playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bob"}, &sbx)).To(Succeed())
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bob"}, &tn)).To(Succeed())
		g.Expect(isTrue(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeTrue(), "bob's sandbox serves: %+v", sbx.Status.Conditions)
		refused := apimeta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.EgressCredentialsDeliveredCondition)
		g.Expect(refused).NotTo(BeNil())
		g.Expect(refused.Reason).To(Equal(playgroundv1alpha1.ReasonEgressCredentialRefused))
		g.Expect(refused.Message).To(ContainSubstring(`Requests to api.test get no credential (answered 503): Secret opaque is of type "Opaque", not playground.dev/egress-credential`))
		ready := apimeta.FindStatusCondition(tn.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect([]string{string(ready.Status), ready.Reason}).To(Equal([]string{"False", playgroundv1alpha1.ReasonEgressCredentialRefused}))
		g.Expect(ready.Message).To(ContainSubstring(refused.Message))
	}, settle, 200*time.Millisecond).Should(Succeed())
	var aliceSbx playgroundv1alpha1.Sandbox
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &aliceSbx)).To(Succeed())
	g.Expect(apimeta.FindStatusCondition(aliceSbx.Status.Conditions, playgroundv1alpha1.EgressCredentialsDeliveredCondition)).To(BeNil(),
		"a delivered credential leaves no condition")

	session := func(name string) func(command string) string {
		c := connectTenant(t, url, ns, name)
		var open tools.OpenSessionOutput
		c.must("open_session", map[string]any{}, &open)
		return func(command string) string {
			var out tools.ExecOutput
			c.must("exec", map[string]any{"handle": open.Handle, "command": command}, &out)
			return strings.TrimSpace(out.Stdout + out.Stderr)
		}
	}
	alice, bob := session("alice"), session("bob")
	// No -k: the sandbox verifies the node's certificate for api.test.
	const curl = "curl -sS --max-time 10 https://api.test/v1/models 2>&1"
	g.Eventually(func() string { return alice(curl) }, settle, 200*time.Millisecond).Should(Equal("authorized"),
		"the server sees the brokered header")
	g.Expect(alice("env; cat /proc/[0-9]*/environ; grep -rl -- '"+secret+"' /etc /tmp /run /home /workspace /pile 2>/dev/null; true")).
		NotTo(ContainSubstring(secret), "the credential is nowhere in the sandbox")

	// A Secret of another type is never handed to a node.
	g.Eventually(func(g Gomega) {
		var evs corev1.EventList
		g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range evs.Items {
			if e.Reason == playgroundv1alpha1.ReasonEgressCredentialRefused && e.InvolvedObject.Name == "bob" {
				notes = append(notes, e.Message)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(`Secret opaque is of type "Opaque", not playground.dev/egress-credential`)))
	}, settle, 200*time.Millisecond).Should(Succeed())
	g.Expect(bob(curl)).To(ContainSubstring("has not reached this node yet"), "a refused Secret's host gets no credential")

	// The agent keeps credentials in memory only: a new agent process is
	// given them again, without a change to any object.
	n.agent.Stop(t)
	n.backends = []backend.Backend{egressBackend(n.stateDir)}
	startNode(t, n)
	alice = session("alice")
	g.Eventually(func() string { return alice(curl) }, settle, 200*time.Millisecond).Should(Equal("authorized"),
		"a restarted agent is given the credential again")
}
