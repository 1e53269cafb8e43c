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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// TestFacultyBundleAcrossNodes: the manager and two real agents. A bundle
// that one node's sandbox lists is Ready once that node built it; when a
// sandbox on a second node lists it too, it is Ready again only with both
// nodes' builds, of the fingerprint the manager published; its binary runs
// by name in both sandboxes.
func TestFacultyBundleAcrossNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	a := &node{name: "fac-a", labels: pool("faculties")}
	b := &node{name: "fac-b", labels: pool("faculties")}
	startNode(t, a)
	startNode(t, b)
	ns := newNamespace(t)

	g.Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"},
		Data: map[string]string{"hello": "#!/bin/sh\necho hello from $PERSONA\n"}})).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: "tools"}},
			Build:    &playgroundv1alpha1.BundleBuild{Command: []string{"/bin/sh", "-c", "cp /src/hello /out/hello && chmod 0755 /out/hello"}},
			Binaries: []string{"hello"},
		}})).To(Succeed())
	on := func(n *node) func(*playgroundv1alpha1.Tenant) {
		return func(tn *playgroundv1alpha1.Tenant) {
			tn.Spec.Sandbox.NodeSelector = map[string]string{"e2e-pool": "faculties", "kubernetes.io/hostname": n.name}
			tn.Spec.Sandbox.Faculties = []playgroundv1alpha1.FacultyBundleReference{{Name: "tools"}}
		}
	}
	bundle := func(g Gomega) *playgroundv1alpha1.FacultyBundle {
		var fb playgroundv1alpha1.FacultyBundle
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, &fb)).To(Succeed())
		return &fb
	}
	builtOn := func(g Gomega, fb *playgroundv1alpha1.FacultyBundle, nodes ...string) {
		g.Expect(fb.Status.Fingerprint).To(HaveLen(64))
		for _, name := range nodes {
			g.Expect(fb.Status.Nodes).To(ContainElement(And(HaveField("NodeName", name), HaveField("Ready", true),
				HaveField("Fingerprint", fb.Status.Fingerprint), HaveField("ObservedGeneration", fb.Generation))), "node %s", name)
		}
		g.Expect(fb.Status.ReadyNodes).To(BeEquivalentTo(len(nodes)))
		g.Expect(isTrue(fb.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeTrue(), "%+v", fb.Status.Conditions)
	}

	applyTenant(t, ns, "first", on(a))
	_, first := waitReady(t, ns, "first")
	g.Eventually(func(g Gomega) { builtOn(g, bundle(g), a.name) }).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(bundle(g).Status.Nodes).NotTo(ContainElement(HaveField("NodeName", b.name)), "node b built a bundle none of its sandboxes lists")

	applyTenant(t, ns, "second", on(b))
	_, second := waitReady(t, ns, "second")
	g.Eventually(func(g Gomega) { builtOn(g, bundle(g), a.name, b.name) }).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

	g.Expect(shell(t, first, "hello")).To(Equal("hello from first\n"))
	g.Expect(shell(t, second, "hello")).To(Equal("hello from second\n"))
	g.Expect(second.Status.Faculties).To(ConsistOf(And(HaveField("Name", "tools"), HaveField("State", playgroundv1alpha1.FacultyInstalled),
		HaveField("Fingerprint", bundle(g).Status.Fingerprint))))
}
