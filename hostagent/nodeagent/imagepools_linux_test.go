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

package nodeagent_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/registrytest"
)

// imagePoolNode is a node whose oci backend keeps pools of images (and no
// blank sandbox), as opts say, over an image store that pulls from reg.
type imagePoolNode struct {
	*node
	be       *oci.Backend
	store    *imagestore.Store
	storeDir string
}

func startImagePoolNode(t *testing.T, name string, reg *registrytest.Registry, opts nodeagent.ImagePoolOptions, mutate ...func(*nodeagent.Options)) *imagePoolNode {
	t.Helper()
	g := NewWithT(t)
	stateDir := ocitest.StateDir(t)
	be, err := oci.New(oci.Options{StateDir: stateDir, GuestBinary: ocitest.GuestBinary(t), ImagePools: true, WarmPoolRate: 50, NewID: sandboxids.New})
	g.Expect(err).NotTo(HaveOccurred())
	storeDir := t.TempDir()
	store, err := imagestore.Open(imagestore.Options{Dir: storeDir, PlainHTTP: []string{reg.Host}})
	g.Expect(err).NotTo(HaveOccurred())
	n := startNode(t, name, stateDir, "", append([]func(*nodeagent.Options){func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{be}
		o.Images = nodeagent.StoreImages(store)
		o.ImagePools = opts
	}}, mutate...)...)
	return &imagePoolNode{node: n, be: be, store: store, storeDir: storeDir}
}

// ready is how many sandboxes of each image the pools hold ready.
func (n *imagePoolNode) ready() map[string]int {
	out := map[string]int{}
	for _, s := range n.be.ImagePoolStats() {
		out[s.Digest] = s.Ready
	}
	return out
}

// held is how many holds the store has of digest (-1: not in the store).
func (n *imagePoolNode) held(digest string) int {
	for _, i := range n.store.Images() {
		if i.Digest == digest {
			return i.Held
		}
	}
	return -1
}

// resolveImage records, as the manager does, the digest of the Sandbox's
// image reference in its status.
func resolveImage(t *testing.T, ns, name, ref, digest string) {
	t.Helper()
	status := playgroundv1alpha1ac.SandboxStatus().WithImage(playgroundv1alpha1ac.SandboxImageStatus().WithReference(ref).WithDigest(digest))
	if err := k8s.Status().Apply(context.Background(), playgroundv1alpha1ac.Sandbox(name, ns).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.ImageFieldOwner), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

// onImage creates Sandbox name on ref (resolved to digest at once) on
// node, each mutate adjusting it before; before runs between its
// creation and its resolution.
func onImage(t *testing.T, ns, name, node, ref, digest string, before func(*playgroundv1alpha1.Sandbox), mutate ...func(*playgroundv1alpha1.Sandbox)) {
	t.Helper()
	createSandbox(t, ns, name, node, append([]func(*playgroundv1alpha1.Sandbox){func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
	}}, mutate...)...)
	if before != nil {
		g := NewWithT(t)
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sbx)).To(Succeed())
		before(&sbx)
	}
	resolveImage(t, ns, name, ref, digest)
}

// systemImage pushes to reg, as repo:tag, an image whose os-release is
// id's, and returns its reference by tag and its digest.
func systemImage(t *testing.T, reg *registrytest.Registry, repo, tag, id string, env []string, auth authn.Authenticator) (ref, digest string) {
	t.Helper()
	img := registrytest.Image(t, env, registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID="+id+"\n", true, "dash", "cat")...)))
	byDigest := reg.Push(t, repo, tag, img, auth)
	return reg.Host + "/" + repo + ":" + tag, byDigest[len(byDigest)-71:]
}

// TestImagePoolServesSandboxesOnItsImage: on a node that pools the
// image the platform names and the one image its sandboxes started last,
// a new Sandbox on the named image is claimed from its pool (its one
// start is the pool's): it runs the image's system and its Env, its
// signing key goes in, and its first call works. A private image named
// for the pools is not pooled (the pull is anonymous). A Sandbox on
// another image starts cold and puts its image in use, pooled; when a
// third image takes its place, its pooled sandbox is destroyed and the
// pool's hold of it in the store released: once its own sandbox goes, no
// one holds it, and the store's GC may remove it.
func TestImagePoolServesSandboxesOnItsImage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registrytest.Start(t)
	refA, a := systemImage(t, reg, "sys/a", "v1", "image-a", []string{"PATH=/usr/bin:/bin", "FROM_IMAGE=a"}, nil)
	refB, b := systemImage(t, reg, "sys/b", "v1", "image-b", nil, nil)
	refC, c := systemImage(t, reg, "sys/c", "v1", "image-c", nil, nil)
	reg.Private("team/", "team", "pool-test-password")
	_, p := systemImage(t, reg, "team/p", "v1", "image-p", nil, &authn.Basic{Username: "team", Password: "pool-test-password"})
	ns := newNamespace(t, "image-pool")
	token := serviceAccounts(t, ns, "manager")
	addr := freeAddr(t)
	n := startImagePoolNode(t, "image-pool-a", reg, nodeagent.ImagePoolOptions{
		Named: []string{reg.Host + "/sys/a@" + a, reg.Host + "/team/p@" + p}, InUse: 1, Size: 1, Max: 4,
	}, func(o *nodeagent.Options) {
		o.TrustedManagers = []string{"system:serviceaccount:" + ns + ":manager"}
		o.MetricsBindAddress = addr
	})
	g.Eventually(n.ready).WithTimeout(timeout).WithPolling(50*time.Millisecond).Should(Equal(map[string]int{a: 1}),
		"the named public image is pooled, the private one not")
	g.Expect(n.held(p)).To(Equal(-1), "the private image was pulled anonymously")

	// A Sandbox on the named image: a hit, with its signing key.
	pooledA := n.containers(t)
	onImage(t, ns, "k", n.name, refA, a, nil, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Pile.SigningKey = &playgroundv1alpha1.SigningKeySource{SecretName: "k-key"}
	})
	sbx := waitProvisioned(t, ns, "k")
	id := sbx.Status.SandboxID
	g.Expect(pooledA).To(ContainElement("pg-"+id), "the sandbox is the pooled one")
	g.Expect(n.be.Capabilities().StartCounter.Starts(id)).To(BeEquivalentTo(1), "the sandbox's one start is the pool's")
	g.Expect(n.be.ImagePoolStats()).To(ContainElement(And(HaveField("Digest", a), HaveField("PoolStats.Hits", BeEquivalentTo(1)))))
	mc, err := agentapi.NewClient(n.endpoint, token("manager", agentapi.NodeAudience(n.name)), nil)
	g.Expect(err).NotTo(HaveOccurred())
	key := strings.Repeat("a1", 32)
	_, err = mc.SetSigningKey(ctx, agentapi.SigningKeyRequest{Namespace: ns, Name: "k", UID: string(sbx.UID), Key: key})
	g.Expect(err).NotTo(HaveOccurred())
	h, err := n.client.Open(ctx, ns+"/k", id)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := n.client.Exec(ctx, ns+"/k", h.ID, agentapi.ExecRequest{Command: `cat /etc/os-release /pile/self.key; echo; echo "$FROM_IMAGE"`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal("ID=image-a\n" + key + "\na\n"))
	g.Eventually(n.ready).WithTimeout(timeout).WithPolling(50*time.Millisecond).Should(Equal(map[string]int{a: 1}), "the pool refills")
	m, err := scrape("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	on := []string{"node", n.name, "backend", "oci", "image", a}
	g.Expect(m.value(t, "playground_warm_pool_image_claims_total", append(on, "result", "hit")...)).To(BeEquivalentTo(1))
	g.Expect(m.value(t, "playground_warm_pool_image_size", on...)).To(BeEquivalentTo(1))

	// An image in use: pooled after its first Sandbox, which starts cold.
	before := n.containers(t)
	onImage(t, ns, "b", n.name, refB, b, nil)
	waitProvisioned(t, ns, "b")
	g.Eventually(n.ready).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(map[string]int{a: 1, b: 1}))
	g.Expect(n.held(b)).To(Equal(2), "held by its sandbox and by its pool")
	pooledB := slices.DeleteFunc(n.containers(t), func(c string) bool { return slices.Contains(before, c) || c == containerOf(t, ns, "b") })
	g.Expect(pooledB).To(HaveLen(1))

	// Another takes its place in use: its pool is drained, its hold gone.
	onImage(t, ns, "c", n.name, refC, c, nil)
	waitProvisioned(t, ns, "c")
	g.Eventually(n.ready).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(map[string]int{a: 1, c: 1}))
	g.Eventually(func() int { return n.held(b) }).WithTimeout(timeout).WithPolling(50*time.Millisecond).Should(Equal(1), "the pool's hold of the image is released")
	g.Expect(n.held(a)).To(Equal(2), "held by its sandbox and, once, by its pool, however often the pools changed")
	for _, ctr := range pooledB {
		g.Expect(n.containers(t)).NotTo(ContainElement(ctr), "a pooled sandbox of an image no longer pooled still runs")
	}
	var gone playgroundv1alpha1.Sandbox
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, &gone)).To(Succeed())
	g.Expect(k8s.Delete(ctx, &gone)).To(Succeed())
	waitGone(t, ns, "b")
	g.Expect(n.held(b)).To(BeZero(), "nothing holds the image any more")
}

// TestImagePoolKeepsPrivateImagesPrivate: a private image pulled with
// team A's credentials is in use on the node, and pooled; team B's
// Sandbox on it, without credentials, is refused it (ImageDenied) as a
// cold start would be, and is not handed the pooled sandbox, which waits
// in the pool; a Sandbox of team B's given credentials that the registry
// takes claims it.
func TestImagePoolKeepsPrivateImagesPrivate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registrytest.Start(t)
	const user, password = "team-a", "private-pool-password"
	reg.Private("team/", user, password)
	ref, digest := systemImage(t, reg, "team/os", "v1", "private-os", nil, &authn.Basic{Username: user, Password: password})
	nsA, nsB := newNamespace(t, "pool-private-a"), newNamespace(t, "pool-private-b")
	tokenA, tokenB := serviceAccounts(t, nsA, "manager"), serviceAccounts(t, nsB, "manager")
	n := startImagePoolNode(t, "pool-private", reg, nodeagent.ImagePoolOptions{InUse: 1, Size: 1, Max: 1}, func(o *nodeagent.Options) {
		o.TrustedManagers = []string{"system:serviceaccount:" + nsA + ":manager", "system:serviceaccount:" + nsB + ":manager"}
	})
	withCredentials := func(token func(string, ...string) string) func(*playgroundv1alpha1.Sandbox) {
		return func(sbx *playgroundv1alpha1.Sandbox) {
			mc, err := agentapi.NewClient(n.endpoint, token("manager", agentapi.NodeAudience(n.name)), nil)
			g.Expect(err).NotTo(HaveOccurred())
			auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
			config := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, auth)
			g.Expect(mc.SetImageCredentials(ctx, agentapi.ImageCredentialsRequest{Namespace: sbx.Namespace, Name: sbx.Name, UID: string(sbx.UID),
				Configs: [][]byte{[]byte(config)}})).To(Succeed())
		}
	}
	pullSecret := func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Image.PullSecrets = []playgroundv1alpha1.LocalObjectReference{{Name: "pull"}}
	}

	onImage(t, nsA, "a", n.name, ref, digest, withCredentials(tokenA), pullSecret)
	waitProvisioned(t, nsA, "a")
	g.Eventually(n.ready).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(map[string]int{digest: 1}))
	pooled := n.be.ImagePoolStats()[0]
	pooledIDs := slices.DeleteFunc(n.containers(t), func(c string) bool { return c == containerOf(t, nsA, "a") })

	onImage(t, nsB, "b", n.name, ref, digest, nil)
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, nsB, "b"))
		g.Expect(c).NotTo(BeNil())
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonImageDenied}))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(getSandbox(g, nsB, "b").Status.SandboxID).To(BeEmpty(), "the tenant without a right to the image got a sandbox")
	g.Expect(n.be.ImagePoolStats()).To(ConsistOf(And(HaveField("Ready", 1), HaveField("PoolStats.Hits", pooled.Hits))), "the pooled sandbox was handed out")

	onImage(t, nsB, "c", n.name, ref, digest, withCredentials(tokenB), pullSecret)
	id := waitProvisioned(t, nsB, "c").Status.SandboxID
	g.Expect(pooledIDs).To(ContainElement("pg-"+id), "the sandbox is the pooled one")
	g.Expect(n.be.Capabilities().StartCounter.Starts(id)).To(BeEquivalentTo(1), "the sandbox's one start is the pool's")
	g.Expect(n.be.ImagePoolStats()).To(ConsistOf(HaveField("PoolStats.Hits", pooled.Hits+1)))
}

// TestImagePoolBound: with more images in use than the bound on pooled
// sandboxes of images allows, the node keeps no more than the bound
// (the most recently started images first) and runs no more.
func TestImagePoolBound(t *testing.T) {
	g := NewWithT(t)
	reg := registrytest.Start(t)
	ns := newNamespace(t, "image-pool-bound")
	n := startImagePoolNode(t, "image-pool-bound", reg, nodeagent.ImagePoolOptions{InUse: 3, Size: 2, Max: 3})
	var digests []string
	for i, name := range []string{"x", "y", "z"} {
		ref, d := systemImage(t, reg, "sys/"+name, "v1", "image-"+name, nil, nil)
		onImage(t, ns, name, n.name, ref, d, nil)
		waitProvisioned(t, ns, name)
		digests = append(digests, d)
		_ = i
	}
	// The last two started fill the bound: two of z, one of y; x none.
	want := map[string]int{digests[2]: 2, digests[1]: 1}
	g.Eventually(n.ready).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(want))
	g.Consistently(func() int { return len(n.containers(t)) }).WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).Should(Equal(3+3),
		"three tenants' sandboxes and three pooled")
	g.Expect(n.held(digests[0])).To(Equal(1), "an image past the bound is held by its sandbox alone")
}

// TestImagePoolAcrossRestarts: a graceful stop of the agent destroys its
// pooled sandboxes of images with the blank ones, leaving its tenants'
// running; the next agent, taking over the sandbox that runs the image,
// finds the image in use again and pools it anew, held in its store.
func TestImagePoolAcrossRestarts(t *testing.T) {
	g := NewWithT(t)
	reg := registrytest.Start(t)
	ref, d := systemImage(t, reg, "sys/r", "v1", "image-r", nil, nil)
	ns := newNamespace(t, "image-pool-restart")
	opts := nodeagent.ImagePoolOptions{InUse: 1, Size: 1, Max: 1}
	n := startImagePoolNode(t, "image-pool-restart", reg, opts)
	onImage(t, ns, "s", n.name, ref, d, nil)
	waitProvisioned(t, ns, "s")
	g.Eventually(n.ready).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(map[string]int{d: 1}))

	n.stop()
	g.Expect(n.containers(t)).To(ConsistOf(containerOf(t, ns, "s")), "only the tenant's sandbox runs after the agent stopped")

	store, err := imagestore.Open(imagestore.Options{Dir: n.storeDir, PlainHTTP: []string{reg.Host}})
	g.Expect(err).NotTo(HaveOccurred())
	be, err := oci.New(oci.Options{StateDir: n.stateDir, GuestBinary: ocitest.GuestBinary(t), ImagePools: true, WarmPoolRate: 50, NewID: sandboxids.New})
	g.Expect(err).NotTo(HaveOccurred())
	reg.Stop(true) // the image comes from the node's store
	m := &imagePoolNode{node: startNode(t, n.name, n.stateDir, "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{be}
		o.Images = nodeagent.StoreImages(store)
		o.ImagePools = opts
	}), be: be, store: store}
	g.Eventually(m.ready).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(map[string]int{d: 1}))
	g.Expect(m.held(d)).To(Equal(2), "held by the sandbox taken over and by its pool")
	g.Expect(m.containers(t)).To(HaveLen(2))
}
