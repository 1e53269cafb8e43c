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

package mcpgateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/mcpgateway"
)

// servingKeyPair returns a TLS key pair for 127.0.0.1: signed by ca, or
// self-signed when ca is nil.
func servingKeyPair(t *testing.T, ca *agentpki.CA, node string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var certPEM []byte
	if ca != nil {
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: agentpki.CommonName(node)}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}, key)
		if err != nil {
			t.Fatal(err)
		}
		req, err := x509.ParseCertificateRequest(der)
		if err != nil {
			t.Fatal(err)
		}
		if certPEM, err = ca.Sign(req, time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
	} else {
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: agentpki.CommonName(node)},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// publishCA writes the CA bundle as the manager does.
func publishCA(t *testing.T) *agentpki.CA {
	t.Helper()
	certPEM, keyPEM, err := agentpki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := agentpki.LoadCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentpki.CAConfigMapName},
		Data:       map[string]string{agentpki.CABundleKey: string(certPEM)},
	}
	err = k8s.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		err = k8s.Update(ctx, cm)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestAgentTLSVerifiedAgainstPublishedCA: the gateway, with its own
// rights, reads the CA bundle the manager publishes and serves a tenant
// through an agent whose certificate chains to it and names its node; it
// refuses, before sending it anything, an agent whose certificate does not
// chain to it (self-signed) and one presenting another node's certificate.
func TestAgentTLSVerifiedAgainstPublishedCA(t *testing.T) {
	ca := publishCA(t)
	// counting serves the agent's certificate once it is set, and counts
	// the requests that reach the agent.
	type counting struct {
		cert    atomic.Pointer[tls.Certificate]
		reached atomic.Int32
	}
	start := func(c *counting) *node {
		return startNodeWith(t, nodeOptions{leaseNS: agentlease.DefaultNamespace, protocol: agentapi.Current.String(),
			tls: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return c.cert.Load(), nil
			}},
			wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.reached.Add(1); h.ServeHTTP(w, r) })
			}})
	}
	var good, selfSigned, misnamed counting
	trusted, impostor, other := start(&good), start(&selfSigned), start(&misnamed)
	for c, pair := range map[*counting]tls.Certificate{
		&good:       servingKeyPair(t, ca, trusted.name),
		&selfSigned: servingKeyPair(t, nil, impostor.name),
		&misnamed:   servingKeyPair(t, ca, trusted.name), // valid, for another node
	} {
		c.cert.Store(&pair)
	}
	ns := newNamespace(t)
	ok := newTenant(t, ns, "trusted", trusted)
	refused := map[string]*tenant{
		"a self-signed certificate":  newTenant(t, ns, "impostor", impostor),
		"another node's certificate": newTenant(t, ns, "misnamed", other),
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agentCA := mcpgateway.WatchAgentCA(ctx, kubernetes.NewForConfigOrDie(gatewayConfig(t, "", "")), agentlease.DefaultNamespace, logr.Discard())
	g := startGateway(t, mcpgateway.Options{AgentCA: agentCA})
	g.waitReady(t)

	cs := connect(t, g.url, ok.token, nil)
	waitFor(t, "a session through the agent with the Playground signer's certificate", 10*time.Second, func() error {
		if res := call(t, cs, "open_session", map[string]any{}); res.IsError {
			return fmt.Errorf("%w: %s", errNotYet, resultText(res))
		}
		return nil
	})
	for what, tn := range refused {
		res := call(t, connect(t, g.url, tn.token, nil), "open_session", map[string]any{})
		if !res.IsError {
			t.Fatalf("the gateway opened a session through an agent with %s", what)
		}
		t.Logf("%s refused: %s", what, resultText(res))
	}
	if n := selfSigned.reached.Load() + misnamed.reached.Load(); n != 0 {
		t.Fatalf("%d requests reached the refused agents", n)
	}
	if good.reached.Load() == 0 {
		t.Fatal("no request reached the trusted agent")
	}

	// A user's own tools (kubectl playground exec) read the bundle once
	// and verify the agents the same way.
	userCA, err := mcpgateway.ReadAgentCA(ctx, kubernetes.NewForConfigOrDie(cp.Config), agentlease.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	users, err := mcpgateway.NewUserAgents(mcpgateway.StaticToken(agentToken), userCA, false)
	if err != nil {
		t.Fatal(err)
	}
	open := func(tn *tenant) error {
		var sbx playgroundv1alpha1.Sandbox
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: tn.name}, &sbx); err != nil {
			t.Fatal(err)
		}
		id, agent, err := users.Sandbox(ctx, &sbx)
		if err != nil {
			return err
		}
		h, err := agent.Open(ctx, tn.String(), id)
		if err == nil {
			err = agent.Close(ctx, tn.String(), h.ID)
		}
		return err
	}
	if err := open(ok); err != nil {
		t.Fatalf("a user's client through the agent with the Playground signer's certificate: %v", err)
	}
	for what, tn := range refused {
		if err := open(tn); err == nil {
			t.Fatalf("a user's client opened a session through an agent with %s", what)
		}
	}
	if n := selfSigned.reached.Load() + misnamed.reached.Load(); n != 0 {
		t.Fatalf("%d requests reached the refused agents", n)
	}
}
