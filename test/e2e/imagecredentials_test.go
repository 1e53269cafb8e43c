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
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/registrytest"
)

// lockedBuffer collects a component's log lines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		fmt.Fprintln(&b.buf, prefix, args)
	}, funcr.Options{Verbosity: 10})
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// dockerConfig is a pull Secret's .dockerconfigjson for one registry.
func dockerConfig(registry, user, password string) []byte {
	b, err := json.Marshal(map[string]any{"auths": map[string]any{registry: map[string]string{
		"username": user, "password": password, "auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}})
	if err != nil {
		panic(err)
	}
	return b
}

// TestImageCredentials: the manager hands the credentials of a
// Sandbox's pull Secrets to its node's agent, which then holds a
// keychain the private registry accepts (a real HEAD of the private
// image with it); a changed Secret reaches it, and so does everything
// again after the agent starts anew with nothing in memory; a Secret past
// the bound is refused in the Sandbox's condition while the node keeps
// what it had; the pull Secret removed from the spec, or the Sandbox
// deleted, the keychain is gone. The agent refuses credentials for a Sandbox of another node, for
// another UID, and past its bounds. No password is in the Sandbox's
// status, its Events, or the manager's and the agent's logs.
func TestImageCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registrytest.Start(t)
	const user, password, rotated = "team-a", "first-pull-password-e2e", "second-pull-password-e2e"
	reg.Private("team/private", user, password)
	img := registrytest.Image(t, nil, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("etc/os-release", "ID=private\n", 0o644))))
	reg.Push(t, "team/private", "v1", img, &authn.Basic{Username: user, Password: password})
	ref := reg.Host + "/team/private:v1"
	parsed, err := name.ParseReference(ref)
	g.Expect(err).NotTo(HaveOccurred())
	head := func(kc authn.Keychain) error {
		_, err := remote.Head(parsed, remote.WithAuthFromKeychain(kc), remote.WithContext(ctx))
		return err
	}
	g.Expect(head(authn.NewMultiKeychain())).To(HaveOccurred(), "the image is not private")

	var managerLogs, agentLogs lockedBuffer
	startManagerLogged(t, managerLogs.logger(), func(o *controllers.Options) {
		o.Images.PlainHTTP = []string{"127.0.0.1"}
		o.Images.CredentialRefresh = 500 * time.Millisecond
	})
	creds := hostagent.NewImageCredentials()
	n := &node{name: "pullcreds-1", labels: pool("pullcreds"), imageCredentials: creds, logger: agentLogs.logger()}
	startNode(t, n)
	other := &node{name: "pullcreds-2", labels: pool("pullcreds-other")}
	startNode(t, other)

	ns := newNamespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(reg.Host, user, password)}}
	g.Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	withImage := func(pool string, secrets ...string) func(*playgroundv1alpha1.Tenant) {
		return func(tn *playgroundv1alpha1.Tenant) {
			inPool(pool)(tn)
			tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
			for _, s := range secrets {
				tn.Spec.Sandbox.Image.PullSecrets = append(tn.Spec.Sandbox.Image.PullSecrets, playgroundv1alpha1.LocalObjectReference{Name: s})
			}
		}
	}
	applyTenant(t, ns, "alice", withImage("pullcreds", "pull"))
	applyTenant(t, ns, "bob", withImage("pullcreds-other", "pull"))
	bound := func(name, node string) *playgroundv1alpha1.Sandbox {
		var sbx playgroundv1alpha1.Sandbox
		g.Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sbx)).To(Succeed())
			g.Expect(sbx.Spec.NodeName).To(Equal(node))
		}, settle, 100*time.Millisecond).Should(Succeed())
		return &sbx
	}
	alice, bob := bound("alice", n.name), bound("bob", other.name)
	authenticates := func(creds *hostagent.ImageCredentials) func(g Gomega) {
		return func(g Gomega) {
			kc := creds.Keychain(ns, "alice", string(alice.UID))
			g.Expect(kc).NotTo(BeNil(), "no credentials delivered")
			g.Expect(head(kc)).To(Succeed())
		}
	}

	// Delivered to the sandbox's node: the registry takes them.
	g.Eventually(authenticates(creds), settle, 100*time.Millisecond).Should(Succeed())
	g.Expect(creds.Keychain(ns, "bob", string(bob.UID))).To(BeNil(), "another node's sandbox's credentials")

	// The password rotated at the registry and in the Secret: the node
	// has the new one.
	before := creds.Keychain(ns, "alice", string(alice.UID))
	reg.Private("team/private", user, rotated)
	g.Expect(head(before)).To(HaveOccurred(), "the old password still works")
	secret.Data[corev1.DockerConfigJsonKey] = dockerConfig(reg.Host, user, rotated)
	g.Expect(k8sClient.Update(ctx, secret)).To(Succeed())
	g.Eventually(authenticates(creds), settle, 100*time.Millisecond).Should(Succeed())

	// The agent starts anew, with nothing in memory: the manager
	// delivers again.
	n.agent.Stop(t)
	creds = hostagent.NewImageCredentials()
	n.imageCredentials = creds
	startNode(t, n)
	g.Eventually(authenticates(creds), settle, 100*time.Millisecond).Should(Succeed())

	// The agent takes credentials only from the manager, for a Sandbox of
	// its node by its UID, within its bounds.
	agent, err := agentapi.NewClient(n.endpoint, agentToken, nil)
	g.Expect(err).NotTo(HaveOccurred())
	give := func(sbx *playgroundv1alpha1.Sandbox, uid string, configs ...[]byte) error {
		return agent.SetImageCredentials(ctx, agentapi.ImageCredentialsRequest{Namespace: ns, Name: sbx.Name, UID: uid, Configs: configs})
	}
	stolen := dockerConfig(reg.Host, user, rotated)
	g.Expect(agentapi.CodeOf(give(bob, string(bob.UID), stolen))).To(Equal(agentapi.CodeNotFound), "a Sandbox of another node")
	g.Expect(creds.Keychain(ns, "bob", string(bob.UID))).To(BeNil())
	g.Expect(agentapi.CodeOf(give(alice, "not-its-uid", stolen))).To(Equal(agentapi.CodeNotFound), "another incarnation of the Sandbox")
	g.Expect(creds.Keychain(ns, "alice", "not-its-uid")).To(BeNil())
	err = give(alice, string(alice.UID), bytes.Repeat([]byte(" "), agentapi.MaxImageCredentialConfigBytes+1))
	g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeInvalid))
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("registry credentials 1 of Sandbox %s/alice are %d bytes: a pull Secret's .dockerconfigjson must hold 1 to %d bytes",
		ns, agentapi.MaxImageCredentialConfigBytes+1, agentapi.MaxImageCredentialConfigBytes)))
	many := make([][]byte, agentapi.MaxImageCredentialConfigs+1)
	for i := range many {
		many[i] = stolen
	}
	err = give(alice, string(alice.UID), many...)
	g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeInvalid))
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("at most %d (one per pull Secret of spec.image)", agentapi.MaxImageCredentialConfigs)))
	g.Expect(agentapi.CodeOf(give(alice, string(alice.UID), []byte("not json")))).To(Equal(agentapi.CodeInvalid))
	g.Eventually(authenticates(creds)).Should(Succeed(), "a refused delivery took the credentials away")

	// A pull Secret past the bound is refused by the manager, saying
	// which and why; the node keeps what it had.
	big := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig("big.registry.test", user, strings.Repeat("x", agentapi.MaxImageCredentialConfigBytes))}}
	g.Expect(k8sClient.Create(ctx, big)).To(Succeed())
	touch := func(mutate func(*playgroundv1alpha1.Tenant)) {
		var tn playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &tn)).To(Succeed())
		patch := client.MergeFrom(tn.DeepCopy())
		mutate(&tn)
		g.Expect(k8sClient.Patch(ctx, &tn, patch)).To(Succeed())
	}
	touch(withImage("pullcreds", "pull", "big"))
	g.Eventually(func(g Gomega) {
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(alice), &sbx)).To(Succeed())
		c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ImageCredentialsDeliveredCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageCredentialsRefused))
		g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("Secret big holds a .dockerconfigjson of %d bytes, more than the %d bytes a node's agent takes for one pull Secret",
			len(big.Data[corev1.DockerConfigJsonKey]), agentapi.MaxImageCredentialConfigBytes)))
	}, settle, 100*time.Millisecond).Should(Succeed())
	g.Expect(head(creds.Keychain(ns, "alice", string(alice.UID)))).To(Succeed(), "the node lost the credentials it had")

	// The pull Secrets removed from the spec: no keychain, no condition.
	touch(withImage("pullcreds"))
	g.Eventually(func(g Gomega) {
		g.Expect(creds.Keychain(ns, "alice", string(alice.UID))).To(BeNil())
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(alice), &sbx)).To(Succeed())
		g.Expect(meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ImageCredentialsDeliveredCondition)).To(BeNil())
	}, settle, 100*time.Millisecond).Should(Succeed())

	// Named again, then the Sandbox deleted: the agent drops them itself.
	touch(withImage("pullcreds", "pull"))
	g.Eventually(authenticates(creds), settle, 100*time.Millisecond).Should(Succeed())
	g.Expect(k8sClient.Delete(ctx, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice"}})).To(Succeed())
	g.Eventually(func() authn.Keychain { return creds.Keychain(ns, "alice", string(alice.UID)) }, settle, 100*time.Millisecond).Should(BeNil())

	// No credential in a status, an Event or a log line.
	var sandboxes playgroundv1alpha1.SandboxList
	var events eventsv1.EventList
	g.Expect(k8sClient.List(ctx, &sandboxes, client.InNamespace(ns))).To(Succeed())
	g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	seen, err := json.Marshal([]any{sandboxes, events})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managerLogs.String()).To(ContainSubstring("imagecredential"), "the manager's logs were not captured")
	g.Expect(agentLogs.String()).NotTo(BeEmpty(), "the agent's logs were not captured")
	for _, where := range []struct{ what, text string }{{"a status or an Event", string(seen)}, {"the manager's logs", managerLogs.String()}, {"the agent's logs", agentLogs.String()}} {
		for _, secret := range []string{password, rotated, base64.StdEncoding.EncodeToString([]byte(user + ":" + password)), base64.StdEncoding.EncodeToString([]byte(user + ":" + rotated))} {
			g.Expect(where.text).NotTo(ContainSubstring(secret), "a credential is in %s", where.what)
		}
	}
}
