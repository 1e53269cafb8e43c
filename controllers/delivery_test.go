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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

// The manager's deliveries (a brokered egress rule's credential, a
// tenant's own signing key) say what keeps them from a sandbox in the
// Sandbox's conditions and the Tenant's Ready, not only in an Event. No
// agent runs here: the suite's manager delivers nothing (Options.Agents
// is nil), and what a Secret lacks is found before any delivery.

// sandboxEvents are the Events about the Sandbox name, by reason.
func sandboxEvents(g Gomega, ns, name string) map[string][]eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := map[string][]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Sandbox" && e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e)
		}
	}
	return out
}

// TestEgressCredentialRefusedIsSaid: a Tenant whose brokered egress rule
// names a Secret that does not exist is not Ready, and says why and what
// to do, while its sandbox serves; the Sandbox's condition says it too.
// A Secret of another type is refused as well, in its own words; the
// right one lifts it.
func TestEgressCredentialRefusedIsSaid(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "brokered"
	zone := "brokered-" + rand.String(5)
	node := "brokered-node-" + rand.String(5)
	registerAgentAs(t, agentlease.Registration{Node: node, Endpoint: "http://" + node + ":9443", Backends: []string{"oci"},
		Networks: map[string][]string{"oci": {"egress", "none"}}, Labels: map[string]string{"zone": zone}, Duration: time.Hour})
	rule := func(header string) []playgroundv1alpha1.EgressRule {
		return []playgroundv1alpha1.EgressRule{{Host: "llm.test", Ports: []int32{443}, Credential: &playgroundv1alpha1.EgressCredential{
			Header: header, SecretRef: playgroundv1alpha1.SecretKeyReference{Name: "llm-key", Key: "token"}}}}
	}
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{Sandbox: playgroundv1alpha1.SandboxTemplate{
		NodeSelector: map[string]string{"zone": zone},
		Network:      playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress, Egress: rule("Authorization")},
	}})
	eventually(t, func(g Gomega) { g.Expect(getSandbox(g, ns, name).Spec.NodeName).To(Equal(node)) })
	eventually(t, func(g Gomega) { markProvisioned(g, getSandbox(g, ns, name)) })

	refused := func(want ...string) func(g Gomega) {
		return func(g Gomega) {
			sbx := getSandbox(g, ns, name)
			c := conditionOf(sbx, playgroundv1alpha1.EgressCredentialsDeliveredCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonEgressCredentialRefused))
			for _, w := range want {
				g.Expect(c.Message).To(ContainSubstring(w))
			}
			g.Expect(conditionOf(sbx, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), "the sandbox serves meanwhile")
			tn := getTenant(g, ns, name)
			for _, typ := range []string{playgroundv1alpha1.SandboxReadyCondition, playgroundv1alpha1.ReadyCondition} {
				tc := tenantCondition(tn, typ)
				g.Expect([]string{string(tc.Status), tc.Reason}).To(Equal([]string{"False", playgroundv1alpha1.ReasonEgressCredentialRefused}), typ)
				g.Expect(tc.Message).To(ContainSubstring(c.Message), typ)
			}
			g.Expect(tenantCondition(tn, playgroundv1alpha1.ReconcilingCondition).Reason).To(Equal(playgroundv1alpha1.ReasonEgressCredentialRefused))
		}
	}
	eventually(t, refused("Requests to llm.test get no credential (answered 503): Secret llm-key does not exist in namespace "+ns,
		"create it, of type playground.dev/egress-credential",
		"kubectl create secret generic llm-key --type=playground.dev/egress-credential --from-literal=token=..."))
	eventually(t, func(g Gomega) {
		g.Expect(sandboxEvents(g, ns, name)).To(HaveKeyWithValue(playgroundv1alpha1.ReasonEgressCredentialRefused,
			ContainElement(HaveField("Type", corev1.EventTypeWarning))))
	})

	// A Secret of another type: its own words. (Secrets are not watched:
	// the manager looks again every minute, or at a change of the rule,
	// which this test makes rather than wait.)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm-key"}, StringData: map[string]string{"token": "Bearer sk-test"}}
	NewWithT(t).Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Network.Egress = rule("X-Api-Key") })
	eventually(t, refused(`Secret llm-key is of type "Opaque", not playground.dev/egress-credential`))

	// The right one: delivered (to no agent here), nothing refused.
	NewWithT(t).Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
	NewWithT(t).Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm-key"},
		Type: playgroundv1alpha1.EgressCredentialSecretType, StringData: map[string]string{"token": "Bearer sk-test"}})).To(Succeed())
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Network.Egress = rule("Authorization") })
	eventually(t, func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		g.Expect(meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.EgressCredentialsDeliveredCondition)).To(BeNil())
		g.Expect(statusFields(sbx, playgroundv1alpha1.EgressCredentialFieldOwner)).NotTo(ContainSubstring("EgressCredentialsDelivered"))
		tn := getTenant(g, ns, name)
		g.Expect(tenantCondition(tn, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), "%+v", tn.Status.Conditions)
	})
}

// TestSigningKeyRefusedIsSaid: a Tenant that names a signing key Secret
// that does not exist waits for it, and its Sandbox's and Tenant's Ready
// say that the Secret is missing and how to make it, not only that the
// sandbox waits for its key; the Secret, once made, lifts it.
func TestSigningKeyRefusedIsSaid(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "custodian"
	zone := "custodian-" + rand.String(5)
	node := "custodian-node-" + rand.String(5)
	registerAgent(t, node, map[string]string{"zone": zone}, time.Hour)
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{
		Sandbox: playgroundv1alpha1.SandboxTemplate{NodeSelector: map[string]string{"zone": zone}},
		Pile:    playgroundv1alpha1.TenantPile{SigningKey: playgroundv1alpha1.SigningKeySpec{SecretName: "team-key"}},
	})
	eventually(t, func(g Gomega) { g.Expect(getSandbox(g, ns, name).Spec.NodeName).To(Equal(node)) })
	// What the agent reports of a sandbox that waits for its key: it
	// runs, and is not provisioned until the key is in its pile.
	eventually(t, func(g Gomega) {
		cur := getSandbox(g, ns, name)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.ProvisionedCondition, Status: metav1.ConditionFalse,
			Reason: playgroundv1alpha1.ReasonWaitingForSigningKey, ObservedGeneration: cur.Generation,
			Message: "Waiting for the signing key of Secret team-key: the manager delivers it to node " + node + "'s agent, which writes it into the pile before the sandbox serves"})
		cur.Status.SandboxID = "sbx-00000000000000000002"
		g.Expect(k8sClient.Status().Update(ctx, cur, client.FieldOwner(playgroundv1alpha1.AgentFieldOwner))).To(Succeed())
	})

	const missing = "Secret team-key does not exist in namespace "
	eventually(t, func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		c := conditionOf(sbx, playgroundv1alpha1.SigningKeyDeliveredCondition)
		g.Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"False", playgroundv1alpha1.ReasonSigningKeyRefused}))
		g.Expect(c.Message).To(And(ContainSubstring(missing+ns),
			ContainSubstring("kubectl create secret generic team-key --type=playground.dev/signing-key --from-file=self.key=PATH"),
			ContainSubstring("a sandbox not yet started waits for its key")))
		ready := conditionOf(sbx, playgroundv1alpha1.ReadyCondition)
		g.Expect([]string{string(ready.Status), ready.Reason, ready.Message}).To(Equal([]string{"False", playgroundv1alpha1.ReasonSigningKeyRefused, c.Message}),
			"the sandbox's Ready says why the key does not come, not that it waits")
		tn := getTenant(g, ns, name)
		tr := tenantCondition(tn, playgroundv1alpha1.ReadyCondition)
		g.Expect([]string{string(tr.Status), tr.Reason}).To(Equal([]string{"False", playgroundv1alpha1.ReasonSigningKeyRefused}))
		g.Expect(tr.Message).To(ContainSubstring(missing + ns))
		g.Expect(sandboxEvents(g, ns, name)).To(HaveKey(playgroundv1alpha1.ReasonSigningKeyRefused))
	})

	// The Secret, made as the message says: the Tenant reads it at its
	// next pass (here: a touch, rather than the minute's look), and the
	// refusal goes.
	NewWithT(t).Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-key"},
		Type:       playgroundv1alpha1.SigningKeySecretType,
		StringData: map[string]string{playgroundv1alpha1.SigningKeySecretKey: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"}})).To(Succeed())
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { metav1.SetMetaDataAnnotation(&tn.ObjectMeta, "test/touch", "1") })
	eventually(t, func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		g.Expect(meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.SigningKeyDeliveredCondition)).To(BeNil())
		g.Expect(conditionOf(sbx, playgroundv1alpha1.ReadyCondition).Reason).To(Equal(playgroundv1alpha1.ReasonWaitingForSigningKey),
			"the sandbox waits for its key's delivery, which nothing refuses")
	})
}
