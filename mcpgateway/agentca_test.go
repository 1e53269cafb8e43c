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
	if err := k8s.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
		err = k8s.Update(ctx, cm)
	} else if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestAgentTLSVerifiedAgainstPublishedCA: the gateway, with its own
// rights, reads the CA bundle the manager publishes and serves a tenant
// through an agent whose certificate chains to it; it refuses an agent
// whose certificate does not (self-signed), before sending it anything.
func TestAgentTLSVerifiedAgainstPublishedCA(t *testing.T) {
	ca := publishCA(t)
	good := servingKeyPair(t, ca, "good")
	rogue := servingKeyPair(t, nil, "rogue")
	trusted := startNodeWith(t, nodeOptions{leaseNS: agentlease.DefaultNamespace, protocol: agentapi.Current.String(),
		tls: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{good}}})
	var reached atomic.Int32
	impostor := startNodeWith(t, nodeOptions{leaseNS: agentlease.DefaultNamespace, protocol: agentapi.Current.String(),
		tls: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{rogue}},
		wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1); h.ServeHTTP(w, r) })
		}})
	ns := newNamespace(t)
	ok := newTenant(t, ns, "trusted", trusted)
	bad := newTenant(t, ns, "impostor", impostor)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agentCA := mcpgateway.WatchAgentCA(ctx, kubernetes.NewForConfigOrDie(gatewayConfig(t, "", "")), agentlease.DefaultNamespace, nil)
	g := startGateway(t, mcpgateway.Options{AgentCA: agentCA})
	g.waitReady(t)

	cs := connect(t, g.url, ok.token, nil)
	waitFor(t, "a session through the agent with the Playground signer's certificate", 10*time.Second, func() error {
		if res := call(t, cs, "open_session", map[string]any{}); res.IsError {
			return fmt.Errorf("%w: %s", errNotYet, resultText(res))
		}
		return nil
	})
	other := connect(t, g.url, bad.token, nil)
	res := call(t, other, "open_session", map[string]any{})
	if !res.IsError {
		t.Fatal("the gateway opened a session through an agent whose certificate the Playground signer did not issue")
	}
	t.Logf("refused: %s", resultText(res))
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d requests reached the impostor agent", n)
	}
}
