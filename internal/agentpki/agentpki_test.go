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

package agentpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"testing"
	"time"
)

func TestCheckRequest(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"node-a", "10.0.0.1", "10.244.0.5"}
	for _, tc := range []struct {
		name string
		tmpl x509.CertificateRequest
		key  *ecdsa.PrivateKey
		ok   bool
	}{
		{"node IP", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a")}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, key, true},
		{"pod IP and node name", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a")}, DNSNames: []string{"node-a"}, IPAddresses: []net.IP{net.ParseIP("10.244.0.5")}}, key, true},
		{"other node's CN", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-b")}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, key, false},
		{"extra organization", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a"), Organization: []string{"system:masters"}}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, key, false},
		{"foreign IP", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a")}, IPAddresses: []net.IP{net.ParseIP("10.0.0.2")}}, key, false},
		{"foreign DNS", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a")}, DNSNames: []string{"kubernetes.default.svc"}}, key, false},
		{"URI SAN", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a")}, DNSNames: []string{"node-a"}, URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}}, key, false},
		{"no SAN", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a")}}, key, false},
		{"weak curve", x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("node-a")}, DNSNames: []string{"node-a"}}, weak, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			der, err := x509.CreateCertificateRequest(rand.Reader, &tc.tmpl, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			req, err := ParseRequest(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckRequest(req, "node-a", allowed); (err == nil) != tc.ok {
				t.Fatalf("CheckRequest = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestSignChainsToCA(t *testing.T) {
	now := time.Now()
	certPEM, keyPEM, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: CommonName("n")}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}, key)
	req, _ := x509.ParseCertificateRequest(der)
	out, err := ca.Sign(req, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(out)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := Pool(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatal(err)
	}
	if cert.IsCA || cert.NotAfter.After(now.Add(time.Hour)) {
		t.Fatalf("issued a CA or past its lifetime: %v %v", cert.IsCA, cert.NotAfter)
	}
}
