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

package nodeagent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/playground-dev/playground/internal/agentpki"
)

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=create;get

const (
	// DefaultCertLifetime is the lifetime the agent asks for; the signer
	// may issue a shorter one, and the agent renews at two thirds of what
	// it got.
	DefaultCertLifetime = 24 * time.Hour
	// minExpirationSeconds is the API server's lower bound on a CSR's
	// spec.expirationSeconds.
	minExpirationSeconds = 600
	// certWait bounds one request's wait for the signer.
	certWait = 2 * time.Minute
)

// servingCert is the agent API's serving certificate, requested through the
// CertificateSigningRequest API from the Playground signer with a key that
// never leaves this process, and renewed before it expires. Handshakes
// pick up a renewed certificate at once; open connections keep theirs.
type servingCert struct {
	client   kubernetes.Interface
	node     string
	endpoint string // its host is the certificate's only SAN
	lifetime time.Duration
	log      logr.Logger

	cert atomic.Pointer[issuedCert]
}

// issuedCert is a certificate and when the agent received it: the signer
// backdates NotBefore for clock skew, which must not advance renewal.
type issuedCert struct {
	*tls.Certificate
	received time.Time
}

func (s *servingCert) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c := s.cert.Load()
		if c == nil {
			return nil, errors.New("no serving certificate yet")
		}
		return c.Certificate, nil
	}}
}

// obtain requests the first certificate, waiting for the signer.
func (s *servingCert) obtain(ctx context.Context) error {
	c, err := s.request(ctx)
	if err != nil {
		return err
	}
	s.cert.Store(c)
	return nil
}

// run renews the certificate at two thirds of its lifetime until ctx ends;
// a failed renewal is retried (with backoff, at most a minute apart) while
// the current certificate is still served.
func (s *servingCert) run(ctx context.Context) error {
	for {
		cur := s.cert.Load()
		renew := cur.received.Add(cur.Leaf.NotAfter.Sub(cur.received) * 2 / 3)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(renew)):
		}
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: 1 << 30}
		err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			c, err := s.request(ctx)
			if err != nil {
				s.log.Error(err, "Renewing the agent API's serving certificate; serving the current one", "notAfter", cur.Leaf.NotAfter)
				return false, nil
			}
			s.cert.Store(c)
			s.log.Info("Renewed the agent API's serving certificate", "notAfter", c.Leaf.NotAfter)
			return true, nil
		})
		if ctx.Err() != nil {
			return nil //nolint:nilerr // stopping, not failing
		}
		if err != nil {
			return err
		}
	}
}

// request submits a CSR for the node's endpoint and waits for the signer's
// answer.
func (s *servingCert) request(ctx context.Context) (*issuedCert, error) {
	u, err := url.Parse(s.endpoint)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: agentpki.CommonName(s.node)}}
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{u.Hostname()}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, err
	}
	csrs := s.client.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "playground-agent-" + s.node + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        agentpki.SignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			ExpirationSeconds: ptr.To(int32(max(s.lifetime/time.Second, minExpirationSeconds))),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a CertificateSigningRequest: %w", err)
	}
	var certPEM []byte
	wctx, cancel := context.WithTimeout(ctx, certWait)
	defer cancel()
	err = wait.PollUntilContextCancel(wctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			s.log.V(1).Info("Reading the CertificateSigningRequest", "csr", csr.Name, "error", err.Error())
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if (c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed) && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("CertificateSigningRequest %s %s: %s: %s", csr.Name, c.Type, c.Reason, c.Message)
			}
		}
		certPEM = got.Status.Certificate
		return len(certPEM) > 0, nil
	})
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("CertificateSigningRequest %s: no certificate within %s (is the manager running?)", csr.Name, certWait)
		}
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, fmt.Errorf("CertificateSigningRequest %s: %w", csr.Name, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &issuedCert{Certificate: &pair, received: time.Now()}, nil
}
