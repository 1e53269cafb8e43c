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
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/internal/registrytest"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// TestSignedImageThroughTheGateway: a platform's TenantPolicy trusts one
// key to sign images. A tenant on an image signed by it runs it, through
// the gateway, and the audit trail's record of each of its calls names
// the digest its sandbox runs; a tenant on an unsigned image is never
// run: its Sandbox says ImageUnsigned, and its node fetched no byte of it.
func TestSignedImageThroughTheGateway(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registrytest.Start(t)
	release := registrytest.NewSigningKey(t)
	system := func(id string) []registrytest.Entry {
		return registrytest.System(t, "ID="+id+"\n", true, "dash", "cat")
	}
	signedImg := registrytest.Image(t, []string{"PATH=/usr/bin:/bin"}, registrytest.Layer(t, registrytest.Tar(t, system("signed-os")...)))
	signedRef := reg.Push(t, "team/signed-os", "v1", signedImg, nil)
	digest := signedRef[strings.LastIndex(signedRef, "@")+1:]
	reg.PushSignatures(t, "team/signed-os", digest, registrytest.Sign(t, release, registrytest.Payload(t, reg.Host+"/team/signed-os", digest)))
	unsignedImg := registrytest.Image(t, []string{"PATH=/usr/bin:/bin"}, registrytest.Layer(t, registrytest.Tar(t, system("unsigned-os")...)))
	reg.Push(t, "team/unsigned-os", "v1", unsignedImg, nil)

	startManager(t, func(o *controllers.Options) { o.Images.PlainHTTP = []string{"127.0.0.1"} })
	n := &node{name: "signed-image-1", labels: pool("signed-image"), images: imageStore(t, t.TempDir())}
	startNode(t, n)
	path := filepath.Join(t.TempDir(), "audit.log")
	sink, err := audit.File(audit.FileOptions{Path: path})
	g.Expect(err).NotTo(HaveOccurred())
	trail := audit.New(audit.LevelMetadata, "gateway", sink)
	cfg, err := rbactest.Grant(ctx, k8sClient, cp.Config, "gateway", rbactest.ServiceAccountUser("gateway"), rbactest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	url := serveGateway(t, mcpgateway.Options{Config: cfg, Audit: trail})

	ns := newNamespace(t)
	policy := &playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "signed-" + ns}, Spec: playgroundv1alpha1.TenantPolicySpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		Sandbox: playgroundv1alpha1.SandboxCeilings{ImageSignatures: &playgroundv1alpha1.ImageSignaturePolicy{
			Keys: []playgroundv1alpha1.ImageSigningKey{{Name: "release", PublicKey: release.PublicPEM}}}},
	}}
	g.Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })

	withImage := func(ref string) func(*playgroundv1alpha1.Tenant) {
		return func(tn *playgroundv1alpha1.Tenant) {
			inPool("signed-image")(tn)
			tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
		}
	}
	applyTenant(t, ns, "alice", withImage(reg.Host+"/team/signed-os:v1"))
	applyTenant(t, ns, "mallory", withImage(reg.Host+"/team/unsigned-os:v1"))
	_, alice := waitReady(t, ns, "alice")
	g.Expect(alice.Status.Image.Digest).To(Equal(digest))
	g.Expect(alice.Status.Image.SignedBy).To(Equal([]string{policy.Name + "/release"}))

	c := connectTenant(t, url, ns, "alice")
	var open tools.OpenSessionOutput
	c.must("open_session", map[string]any{}, &open)
	var out tools.ExecOutput
	c.must("exec", map[string]any{"handle": open.Handle, "command": "cat /etc/os-release"}, &out)
	g.Expect(out.Stdout).To(Equal("ID=signed-os\n"), "alice's sandbox runs the signed image")
	g.Expect(trail.Close()).To(Succeed())
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	var called []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r audit.Record
		g.Expect(json.Unmarshal([]byte(l), &r)).To(Succeed())
		g.Expect(r.ImageDigest).To(Equal(digest), "%+v", r)
		called = append(called, r.Tool)
	}
	g.Expect(called).To(Equal([]string{"open_session", "exec"}))

	// The unsigned image is refused, and no byte of it reaches the node.
	g.Eventually(func(g Gomega) {
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mallory"}, &sbx)).To(Succeed())
		c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ImageResolvedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageUnsigned), c.Message)
		g.Expect(sbx.Status.Image).To(BeNil())
		g.Expect(meta.IsStatusConditionTrue(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeFalse())
	}, settle, 100*time.Millisecond).Should(Succeed())
	layers, err := unsignedImg.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	d, err := layers[0].Digest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reg.BlobGets(d.String())).To(BeZero(), "the node fetched the unsigned image's layer")
}
