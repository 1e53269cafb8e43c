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
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/registrytest"
)

// TestSandboxRunsItsImage: a Sandbox on an image waits for the manager's
// digest, then runs the image's system (its /etc/os-release, its tools)
// where a default sandbox on the same node runs the node's; a new digest
// restarts it on the new image, saying so, its workspace kept; deleted,
// its image is no longer held in the node's store.
func TestSandboxRunsItsImage(t *testing.T) {
	reg := registrytest.Start(t)
	const osA, osB = "ID=image-a\n", "ID=image-b\n"
	digestOf := func(ref string) string { return ref[len(ref)-71:] }
	a := digestOf(reg.Push(t, "sys/base", "v1", registrytest.Image(t, []string{"PATH=/usr/bin", "FROM_IMAGE=a"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, osA, true, "dash", "cat")...))), nil))
	b := digestOf(reg.Push(t, "sys/base", "v2", registrytest.Image(t, nil,
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, osB, false, "dash", "cat")...))), nil))
	storeDir := t.TempDir()
	store, err := imagestore.Open(imagestore.Options{Dir: storeDir, PlainHTTP: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, "image")
	n := startNode(t, "image-a", "", "", func(o *nodeagent.Options) { o.Images = nodeagent.StoreImages(store) })
	ref := reg.Host + "/sys/base:v1"
	createSandbox(t, ns, "runs", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
	})
	createSandbox(t, ns, "plain", n.name)
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "runs"))
		g.Expect(c).NotTo(BeNil())
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonWaitingForImage}))
		g.Expect(c.Message).To(ContainSubstring("Waiting for the manager to resolve image " + ref + " to a digest"))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())

	resolve := func(digest string) {
		t.Helper()
		status := playgroundv1alpha1ac.SandboxStatus().WithImage(playgroundv1alpha1ac.SandboxImageStatus().WithReference(ref).WithDigest(digest))
		g.Expect(k8s.Status().Apply(context.Background(), playgroundv1alpha1ac.Sandbox("runs", ns).WithStatus(status),
			client.FieldOwner(playgroundv1alpha1.ImageFieldOwner), client.ForceOwnership)).To(Succeed())
	}
	resolve(a)
	s := waitProvisioned(t, ns, "runs")
	g.Expect(s.Status.Image.Digest).To(Equal(a), "the agent's writes keep the manager's status.image")
	id, plain := s.Status.SandboxID, waitProvisioned(t, ns, "plain").Status.SandboxID
	g.Expect(conformance.Sh(t, n.backend, id, "cat /etc/os-release")).To(Equal(osA))
	node, err := os.ReadFile("/etc/os-release")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conformance.Sh(t, n.backend, plain, "cat /etc/os-release")).To(Equal(string(node)))
	g.Expect(conformance.Sh(t, n.backend, id, "command -v ls || echo none")).To(Equal("none\n"))
	g.Expect(conformance.Sh(t, n.backend, id, "echo kept > /workspace/f; cat /workspace/f")).To(Equal("kept\n"))
	g.Expect(store.Images()).To(ConsistOf(HaveField("Held", 1)))

	// A restarted agent (a new process: its store opened anew) holds the
	// image again for the sandbox it takes over, without the registry.
	n.stop()
	if store, err = imagestore.Open(imagestore.Options{Dir: storeDir, PlainHTTP: []string{reg.Host}}); err != nil {
		t.Fatal(err)
	}
	reg.Stop(true)
	n = startNode(t, n.name, n.stateDir, "", func(o *nodeagent.Options) { o.Images = nodeagent.StoreImages(store) })
	g.Eventually(store.Images).WithTimeout(timeout).Should(ConsistOf(HaveField("Held", 1)))
	g.Expect(conformance.Sh(t, n.backend, id, "cat /etc/os-release /workspace/f")).To(Equal(osA + "kept\n"))
	g.Expect(n.backend.Capabilities().StartCounter.Starts(id)).To(BeZero(), "the restarted agent started the sandbox again, not taking it over as it ran")
	reg.Stop(false)

	// A re-resolve to another digest restarts it on that image.
	resolve(b)
	e := waitEvent(t, ns, "runs", corev1.EventTypeNormal, playgroundv1alpha1.ReasonImageChanged)
	g.Expect(e.Note).To(ContainSubstring("on image " + b))
	g.Expect(conformance.Sh(t, n.backend, id, "cat /etc/os-release /workspace/f")).To(Equal(osB + "kept\n"))
	g.Expect(store.Images()).To(ConsistOf(HaveField("Held", 0), HaveField("Held", 1)))

	// Gone, its image is free for the store's GC.
	g.Expect(k8s.Delete(context.Background(), s)).To(Succeed())
	waitGone(t, ns, "runs")
	g.Expect(store.Images()).To(HaveEach(HaveField("Held", 0)))
}

// TestImageOnABackendWithoutImages: a Sandbox on a backend that runs no
// image (here a test backend in Lima's place) is refused, saying which
// backend does, and never provisioned on the node's system instead.
func TestImageOnABackendWithoutImages(t *testing.T) {
	lima := backendtest.New(string(playgroundv1alpha1.BackendLima), func(string, backend.ExecRequest, backend.Sink) (int, error) { return 0, nil })
	n := startNode(t, "image-lima", "", "", func(o *nodeagent.Options) { o.Backends = append(o.Backends, lima) })
	ns := newNamespace(t, "image-lima")
	ref := "registry.test/sys/base:v1"
	createSandbox(t, ns, "refused", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Backend = playgroundv1alpha1.BackendLima
		s.Spec.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
	})
	status := playgroundv1alpha1ac.SandboxStatus().WithImage(playgroundv1alpha1ac.SandboxImageStatus().WithReference(ref).WithDigest("sha256:" + strings.Repeat("ab", 32)))
	g := NewWithT(t)
	g.Expect(k8s.Status().Apply(context.Background(), playgroundv1alpha1ac.Sandbox("refused", ns).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.ImageFieldOwner), client.ForceOwnership)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "refused"))
		g.Expect(c).NotTo(BeNil())
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonImageRefused}))
		g.Expect(c.Message).To(ContainSubstring("backend lima runs no image"))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(lima.Has(idOf(t, ns, "refused"))).To(BeFalse(), "the sandbox was provisioned without its image")
}

// TestImageChangeFreesTheOldImage: a sandbox moved to another image keeps
// its workspace and its pile; the image it left, held by no sandbox now,
// is removed from the node's disk (its layer's directory gone) when the
// store next needs the room, for a third image another sandbox runs,
// while the images in use and the layer they share stay.
func TestImageChangeFreesTheOldImage(t *testing.T) {
	reg := registrytest.Start(t)
	system := registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=shared-system\n", true, "dash", "cat")...))
	own, digests := map[string]v1.Layer{}, map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		// Random bytes: the layer takes on disk what it says.
		data := make([]byte, 512<<10)
		if _, err := rand.Read(data); err != nil {
			t.Fatal(err)
		}
		own[n] = registrytest.Layer(t, registrytest.Tar(t, registrytest.File("usr/share/"+n, string(data), 0o644)))
		ref := reg.Push(t, "gc/sys", n, registrytest.Image(t, []string{"PATH=/usr/bin"}, system, own[n]), nil)
		digests[n] = ref[strings.LastIndex(ref, "@")+1:]
	}
	// The bound: room for two of the images (the system layer shared),
	// not three, measured with a store of no bound.
	probe, err := imagestore.Open(imagestore.Options{Dir: t.TempDir(), PlainHTTP: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		_, release, err := probe.Get(context.Background(), imagestore.Request{Ref: reg.Host + "/gc/sys@" + digests[n], Tenant: "probe/p"})
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	bound := probe.Bytes() + 256<<10
	storeDir := t.TempDir()
	store, err := imagestore.Open(imagestore.Options{Dir: storeDir, PlainHTTP: []string{reg.Host}, MaxBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	layerDir := func(l v1.Layer) string {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(storeDir, "layers", d.Hex)
	}

	ns := newNamespace(t, "image-gc")
	n := startNode(t, "image-gc", "", "", func(o *nodeagent.Options) { o.Images = nodeagent.StoreImages(store) })
	g := NewWithT(t)
	resolve := func(name, tag string) {
		t.Helper()
		status := playgroundv1alpha1ac.SandboxStatus().WithImage(playgroundv1alpha1ac.SandboxImageStatus().WithReference(reg.Host + "/gc/sys:" + tag).WithDigest(digests[tag]))
		g.Expect(k8s.Status().Apply(context.Background(), playgroundv1alpha1ac.Sandbox(name, ns).WithStatus(status),
			client.FieldOwner(playgroundv1alpha1.ImageFieldOwner), client.ForceOwnership)).To(Succeed())
	}
	createSandbox(t, ns, "moves", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Image = &playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/gc/sys:a"}
	})
	resolve("moves", "a")
	id := waitProvisioned(t, ns, "moves").Status.SandboxID
	g.Expect(conformance.Sh(t, n.backend, id, "for f in /usr/share/*; do echo ${f##*/}; done; echo kept > /workspace/f; echo piled >> /pile/self.pile")).To(Equal("a\n"))

	// The tag moves to b: the sandbox restarts on it, its files kept.
	status := playgroundv1alpha1ac.SandboxStatus().WithImage(playgroundv1alpha1ac.SandboxImageStatus().WithReference(reg.Host + "/gc/sys:a").WithDigest(digests["b"]))
	g.Expect(k8s.Status().Apply(context.Background(), playgroundv1alpha1ac.Sandbox("moves", ns).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.ImageFieldOwner), client.ForceOwnership)).To(Succeed())
	waitEvent(t, ns, "moves", corev1.EventTypeNormal, playgroundv1alpha1.ReasonImageChanged)
	g.Expect(conformance.Sh(t, n.backend, id, "for f in /usr/share/*; do echo ${f##*/}; done; cat /workspace/f /pile/self.pile")).To(Equal("b\nkept\npiled\n"), "the image change lost the workspace or the pile")
	g.Expect(layerDir(own["a"])).To(BeADirectory(), "within its bound, the store removed an image before it needed the room")

	// Another sandbox on c: the store needs the room, and frees a.
	createSandbox(t, ns, "third", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Image = &playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/gc/sys:c"}
	})
	resolve("third", "c")
	third := waitProvisioned(t, ns, "third").Status.SandboxID
	g.Expect(conformance.Sh(t, n.backend, third, "for f in /usr/share/*; do echo ${f##*/}; done")).To(Equal("c\n"))
	_, err = os.Stat(layerDir(own["a"]))
	g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "the layer of the image no sandbox uses is still on disk: %v", err)
	for _, l := range []v1.Layer{system, own["b"], own["c"]} {
		g.Expect(layerDir(l)).To(BeADirectory(), "a layer in use was removed")
	}
	g.Expect(store.Images()).To(ConsistOf(HaveField("Digest", digests["b"]), HaveField("Digest", digests["c"])))
	g.Expect(store.Bytes()).To(BeNumerically("<=", bound))
	g.Expect(conformance.Sh(t, n.backend, id, "for f in /usr/share/*; do echo ${f##*/}; done; cat /workspace/f")).To(Equal("b\nkept\n"))
}
