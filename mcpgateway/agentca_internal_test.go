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

package mcpgateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/internal/agentpki"
)

// TestAgentCAVerification: why a handshake with an agent fails, for each
// certificate the gateway must refuse, and that it succeeds for the
// certificate the signer issues for that node and address.
func TestAgentCAVerification(t *testing.T) {
	certPEM, keyPEM, err := agentpki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := agentpki.LoadCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, otherKeyPEM, _ := agentpki.NewCA(time.Now())
	otherCA, err := agentpki.LoadCA(otherPEM, otherKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *agentpki.CA, node string, ip net.IP) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: agentpki.CommonName(node)}, IPAddresses: []net.IP{ip}}, key)
		req, _ := x509.ParseCertificateRequest(der)
		out, err := ca.Sign(req, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(key)
		pair, err := tls.X509KeyPair(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	loopback := net.IPv4(127, 0, 0, 1)
	published := &AgentCA{nodeNamed: true}
	for _, tc := range []struct {
		name    string
		ca      *AgentCA
		cert    tls.Certificate
		wantErr string
	}{
		{"the signer's certificate for the node", published, issue(ca, "node-a", loopback), ""},
		{"another CA", published, issue(otherCA, "node-a", loopback), "not one the Playground signer issued"},
		{"another node's certificate", published, issue(ca, "node-b", loopback), `presented the certificate of "playground-agent:node-b"`},
		{"another address", published, issue(ca, "node-a", net.IPv4(10, 0, 0, 1)), "not one the Playground signer issued"},
		{"no bundle yet", &AgentCA{nodeNamed: true}, issue(ca, "node-a", loopback), "no agent CA bundle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ca == published && published.pool.Load() == nil {
				pool, err := agentpki.Pool(certPEM)
				if err != nil {
					t.Fatal(err)
				}
				published.pool.Store(pool)
			}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{tc.cert}}
			srv.StartTLS()
			defer srv.Close()
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.ca.tlsConfigFor("node-a", "127.0.0.1")}}
			resp, err := c.Get(srv.URL)
			if resp != nil {
				resp.Body.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
