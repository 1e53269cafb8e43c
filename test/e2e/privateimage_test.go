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
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/registrytest"
)

// TestPrivateImageStaysPrivateOnTheNode: a private image, pulled on a
// node with one team's pull Secret (handed to the node by the manager),
// runs that team's sandbox as its system; another team's Sandbox naming
// the same image by digest and no pull Secret (which the manager records
// without asking the registry) is bound to the same node, which holds the
// image, and is refused it there (Provisioned=False, ImageDenied): the
// node asks the registry under that team's credentials, none, before it
// uses a cached private image. Given a pull Secret of its own, the second
// team runs it too.
func TestPrivateImageStaysPrivateOnTheNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registrytest.Start(t)
	const user, password = "team-a", "private-image-password-e2e"
	reg.Private("team/secret-os", user, password)
	image := registrytest.Image(t, []string{"PATH=/usr/bin:/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=secret-os\n", true, "dash", "cat")...)))
	byDigest := reg.Push(t, "team/secret-os", "v1", image, &authn.Basic{Username: user, Password: password})

	startManager(t, func(o *controllers.Options) {
		o.Images.PlainHTTP = []string{"127.0.0.1"}
		o.Images.CredentialRefresh = 500 * time.Millisecond
	})
	store, err := imagestore.Open(imagestore.Options{Dir: t.TempDir(), PlainHTTP: []string{"127.0.0.1"}})
	g.Expect(err).NotTo(HaveOccurred())
	n := &node{name: "private-image-1", labels: pool("private-image"), images: nodeagent.StoreImages(store)}
	startNode(t, n)

	pullSecret := func(ns string) {
		g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(reg.Host, user, password)}})).To(Succeed())
	}
	withImage := func(ref string, secrets ...string) func(*playgroundv1alpha1.Tenant) {
		return func(tn *playgroundv1alpha1.Tenant) {
			inPool("private-image")(tn)
			tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
			for _, s := range secrets {
				tn.Spec.Sandbox.Image.PullSecrets = append(tn.Spec.Sandbox.Image.PullSecrets, playgroundv1alpha1.LocalObjectReference{Name: s})
			}
		}
	}

	// Team A, with its pull Secret, runs the image by its tag.
	teamA := newNamespace(t)
	pullSecret(teamA)
	applyTenant(t, teamA, "alice", withImage(reg.Host+"/team/secret-os:v1", "pull"))
	_, alice := waitReady(t, teamA, "alice")
	g.Expect(alice.Status.Image).NotTo(BeNil())
	g.Expect(reg.Host + "/team/secret-os@" + alice.Status.Image.Digest).To(Equal(byDigest))
	g.Expect(shell(t, alice, "cat /etc/os-release")).To(Equal("ID=secret-os\n"), "team A's sandbox runs the private image")
	g.Expect(store.Images()).To(HaveLen(1), "the node holds the image")

	// Team B names it by digest with no pull Secret: bound to the node
	// that holds it, and refused it there.
	teamB := newNamespace(t)
	applyTenant(t, teamB, "bob", withImage(byDigest))
	refusals := reg.Refusals()
	g.Eventually(func(g Gomega) {
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "bob"}, &sbx)).To(Succeed())
		g.Expect(sbx.Spec.NodeName).To(Equal(n.name))
		c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageDenied), c.Message)
		g.Expect(meta.IsStatusConditionTrue(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeFalse(), "team B's sandbox runs")
	}, settle, 100*time.Millisecond).Should(Succeed())
	g.Expect(reg.Refusals()).To(BeNumerically(">", refusals), "the node asked the registry under team B's (no) credentials")

	// Given a pull Secret of its own, team B runs it, from the node's
	// copy: no layer fetched again.
	layers, err := image.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	d, err := layers[0].Digest()
	g.Expect(err).NotTo(HaveOccurred())
	gets := reg.BlobGets(d.String())
	pullSecret(teamB)
	g.Eventually(func() error {
		var tn playgroundv1alpha1.Tenant
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "bob"}, &tn); err != nil {
			return err
		}
		withImage(byDigest, "pull")(&tn)
		return k8sClient.Update(ctx, &tn)
	}, settle, 100*time.Millisecond).Should(Succeed())
	_, bob := waitReady(t, teamB, "bob")
	g.Expect(strings.TrimSpace(shell(t, bob, "cat /etc/os-release"))).To(Equal("ID=secret-os"))
	g.Expect(reg.BlobGets(d.String())).To(Equal(gets), "the layer was fetched again")
}
