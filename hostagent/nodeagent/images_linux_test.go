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
	"os"
	"strings"
	"testing"
	"time"

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
