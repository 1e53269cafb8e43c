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
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// TestSandboxWaitsForItsImage: a Sandbox that names an image is not
// provisioned on its node until the manager has recorded its reference's
// digest: its Provisioned condition says it waits for the image, and no
// container exists; the digest written (as the manager writes it, under
// its own field manager) starts it.
func TestSandboxWaitsForItsImage(t *testing.T) {
	ns := newNamespace(t, "image")
	n := startNode(t, "image-a", "", "")
	const ref = "registry.example.com/team/base:v1"
	createSandbox(t, ns, "waits", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
	})
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "waits"))
		g.Expect(c).NotTo(BeNil())
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonWaitingForImage}))
		g.Expect(c.Message).To(ContainSubstring("Waiting for the manager to resolve image " + ref + " to a digest"))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(n.containers(t)).To(BeEmpty(), "a sandbox started before its image's digest is known")

	digest := "sha256:" + strings.Repeat("ab", 32)
	status := playgroundv1alpha1ac.SandboxStatus().WithImage(playgroundv1alpha1ac.SandboxImageStatus().WithReference(ref).WithDigest(digest))
	g.Expect(k8s.Status().Apply(context.Background(), playgroundv1alpha1ac.Sandbox("waits", ns).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.ImageFieldOwner), client.ForceOwnership)).To(Succeed())
	s := waitProvisioned(t, ns, "waits")
	g.Expect(n.containers(t)).To(ConsistOf(containerOf(t, ns, "waits")))
	g.Expect(s.Status.Image.Digest).To(Equal(digest), "the agent's writes keep the manager's status.image")
}
