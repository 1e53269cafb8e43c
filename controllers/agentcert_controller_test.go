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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/rbactest"
)

const agentUser = "system:serviceaccount:playground-system:playground-agent"

// csrRequester lets every authenticated user create and read CSRs, as the
// agent's role does; the signer's policy, not RBAC, decides the outcome.
func csrRequester(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-csr-requester"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-csr-requester"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8sClient.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if err := rbactest.AwaitAllowed(ctx, restConfig, "any-authenticated-user", []string{"system:authenticated"},
		authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create"}); err != nil {
		t.Fatal(err)
	}
}

// testNode creates a Node with one internal IP (no kubelet runs: the Node
// is only a record of its addresses).
func testNode(t *testing.T, name, ip string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8sClient.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}
	if err := k8sClient.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// requestCert submits, as cfg's user, a CSR for the agent signer naming
// node in its subject and ip as its SAN, and returns the CSR's name.
func requestCert(t *testing.T, cfg *rest.Config, node, ip string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: agentpki.CommonName(node)}, IPAddresses: []net.IP{net.ParseIP(ip)},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-agent-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        agentpki.SignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			ExpirationSeconds: ptr.To[int32](3600),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return csr.Name
}

// impersonating acts as user with the node extra the API server sets for a
// token bound to a pod on node ("" for none).
func impersonating(user, node string) *rest.Config {
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{agentpki.NodeNameExtra: {node}}
	}
	return cfg
}

// agentPod creates the agent's pod on node in the lease namespace (no
// kubelet runs it: a record of where it was scheduled) and returns a
// configuration acting as user with a token bound to it.
func agentPod(t *testing.T, user, node, name string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "agent", Image: "playground"}}}}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pod) })
	return rbactest.OnPod(impersonating(user, ""), node, pod.Name, string(pod.UID))
}

func csrOutcome(t *testing.T, name string) (approved, denied bool, cert []byte, msg string) {
	t.Helper()
	var csr certificatesv1.CertificateSigningRequest
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &csr); err != nil {
		t.Fatal(err)
	}
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
			msg = c.Message
		}
	}
	return approved, denied, csr.Status.Certificate, msg
}

// caPool reads the CA bundle the manager publishes for the gateway.
func caPool(g Gomega) *x509.CertPool {
	var cm corev1.ConfigMap
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentpki.CAConfigMapName}, &cm)).To(Succeed())
	pool, err := agentpki.Pool([]byte(cm.Data[agentpki.CABundleKey]))
	g.Expect(err).NotTo(HaveOccurred())
	return pool
}

func TestAgentCertSignedOnlyForTheAgentOfItsNode(t *testing.T) {
	csrRequester(t)
	testNode(t, "cert-node-a", "198.51.100.1")
	testNode(t, "cert-node-b", "198.51.100.2")

	onA := agentPod(t, agentUser, "cert-node-a", "agent-on-cert-node-a")
	ok := requestCert(t, onA, "cert-node-a", "198.51.100.1")
	eventually(t, func(g Gomega) {
		approved, _, cert, _ := csrOutcome(t, ok)
		g.Expect(approved).To(BeTrue())
		g.Expect(cert).NotTo(BeEmpty())
		block, _ := pem.Decode(cert)
		g.Expect(block).NotTo(BeNil())
		c, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.Verify(x509.VerifyOptions{Roots: caPool(g), DNSName: "198.51.100.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		g.Expect(err).NotTo(HaveOccurred(), "the certificate chains to the published CA")
		g.Expect(c.Subject.CommonName).To(Equal(agentpki.CommonName("cert-node-a")))
		g.Expect(c.NotAfter).To(BeTemporally("<=", time.Now().Add(time.Hour+time.Minute)), "the requested lifetime bounds it")
	}, "the agent of node a gets a certificate for node a")

	denials := map[string]string{
		"another node's name":                requestCert(t, onA, "cert-node-b", "198.51.100.2"),
		"another node's address":             requestCert(t, onA, "cert-node-a", "198.51.100.2"),
		"a token bound to no node":           requestCert(t, impersonating(agentUser, ""), "cert-node-a", "198.51.100.1"),
		"a token bound to a node, not a pod": requestCert(t, impersonating(agentUser, "cert-node-a"), "cert-node-a", "198.51.100.1"),
		"a user that is not an agent":        requestCert(t, agentPod(t, "system:serviceaccount:playground-system:someone", "cert-node-a", "someone-on-cert-node-a"), "cert-node-a", "198.51.100.1"),
		"a node that does not exist":         requestCert(t, agentPod(t, agentUser, "cert-node-gone", "agent-on-cert-node-gone"), "cert-node-gone", "198.51.100.1"),
		"another pod's UID":                  requestCert(t, rbactest.OnPod(impersonating(agentUser, ""), "cert-node-a", "agent-on-cert-node-a", "00000000-0000-0000-0000-000000000000"), "cert-node-a", "198.51.100.1"),
	}
	for what, name := range denials {
		eventually(t, func(g Gomega) {
			approved, denied, cert, msg := csrOutcome(t, name)
			g.Expect(denied).To(BeTrue())
			g.Expect(msg).NotTo(BeEmpty())
			g.Expect(approved).To(BeFalse())
			g.Expect(cert).To(BeEmpty())
		}, "denied: "+what)
	}
}

// TestAgentCertFromPodBoundToken asks the real API server what it records
// of a pod-bound ServiceAccount token in a CSR: the node and pod the
// signer's policy relies on.
func TestAgentCertFromPodBoundToken(t *testing.T) {
	csrRequester(t)
	testNode(t, "cert-node-p", "198.51.100.11")
	ctx := context.Background()
	ns := agentlease.DefaultNamespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "playground-agent"}}
	if err := k8sClient.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "agent-"},
		Spec: corev1.PodSpec{
			NodeName: "cert-node-p", ServiceAccountName: sa.Name, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "agent", Image: "playground"}},
		},
	}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pod) })
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.7"}}
	pod.Status.PodIP = "10.244.1.7"
	if err := k8sClient.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(restConfig)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(restConfig)
	cfg.BearerToken = tr.Status.Token

	name := requestCert(t, cfg, "cert-node-p", "10.244.1.7")
	var csr certificatesv1.CertificateSigningRequest
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &csr); err != nil {
		t.Fatal(err)
	}
	t.Logf("spec.extra of a pod-bound token's CSR: %v", csr.Spec.Extra)
	NewWithT(t).Expect(csr.Spec.Extra).To(HaveKeyWithValue(agentpki.NodeNameExtra, certificatesv1.ExtraValue{"cert-node-p"}))
	NewWithT(t).Expect(csr.Spec.Extra).To(HaveKeyWithValue(agentpki.PodNameExtra, certificatesv1.ExtraValue{pod.Name}))
	eventually(t, func(g Gomega) {
		approved, denied, cert, msg := csrOutcome(t, name)
		g.Expect(denied).To(BeFalse(), msg)
		g.Expect(approved).To(BeTrue())
		g.Expect(cert).NotTo(BeEmpty())
	}, "the pod's own IP is an allowed SAN")

	other := requestCert(t, cfg, "cert-node-p", "10.244.9.9")
	eventually(t, func(g Gomega) {
		_, denied, _, _ := csrOutcome(t, other)
		g.Expect(denied).To(BeTrue())
	}, "an IP of neither the node nor the pod is refused")
}
