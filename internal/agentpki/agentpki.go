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

// Package agentpki is the agent API's certificate authority: the signer
// name under which agents request serving certificates through the
// CertificateSigningRequest API, where the manager keeps and publishes the
// CA, and the signing itself. The manager decides whom to sign for
// (controllers); agents and the gateway only need the names.
package agentpki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

const (
	// SignerName is the signer of the agents' serving certificates.
	SignerName = "playground.dev/agent-serving"
	// CASecretName is the Secret, in the lease namespace, holding the CA's
	// certificate and key (type kubernetes.io/tls); only the manager reads it.
	CASecretName = "playground-agent-ca"
	// CAConfigMapName is the ConfigMap, in the lease namespace, where the
	// manager publishes the CA certificate (key CABundleKey) for the gateway.
	CAConfigMapName = "playground-agent-ca"
	// CABundleKey is the key of the CA certificate in that ConfigMap.
	CABundleKey = "ca.crt"
	// ComponentLabel marks the objects above as Playground's, with the
	// value ComponentValue.
	ComponentLabel = "playground.dev/component"
	// ComponentValue is ComponentLabel's value on the objects above.
	ComponentValue = "agent-ca"
)

// The user info extras the API server sets for a ServiceAccount token bound
// to a Pod (the projected token of a pod): the node the pod is scheduled
// on, and the pod. A CSR records its requester's extras in spec.extra.
const (
	NodeNameExtra = "authentication.kubernetes.io/node-name"
	NodeUIDExtra  = "authentication.kubernetes.io/node-uid"
	PodNameExtra  = "authentication.kubernetes.io/pod-name"
	PodUIDExtra   = "authentication.kubernetes.io/pod-uid"
)

const (
	// CommonNamePrefix starts the subject of every agent certificate; the
	// node's name follows.
	CommonNamePrefix = "playground-agent:"

	// caLifetime is the CA's validity; a new CA needs a restart of the
	// agents' renewals (their certificates are re-issued under it).
	caLifetime = 10 * 365 * 24 * time.Hour
	// backdate tolerates clocks slightly behind the manager's.
	backdate = 5 * time.Minute
)

// CommonName is the subject common name of node's agent certificate.
func CommonName(node string) string { return CommonNamePrefix + node }

// CA is a loaded certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// NewCA generates a CA (ECDSA P-256) and returns its certificate and key
// in PEM.
func NewCA(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "playground-agent-ca@" + fmt.Sprint(now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// LoadCA parses a CA's certificate and key as NewCA returns them.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("agent CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("agent CA: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("agent CA: the certificate is not a CA")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("agent CA: the key cannot sign")
	}
	return &CA{Cert: cert, CertPEM: bytes.Clone(certPEM), key: signer}, nil
}

// Sign issues a serving certificate for the request, valid from now for
// lifetime (never past the CA's own expiry), and returns it in PEM. The
// caller has checked the request (ParseRequest and its policy).
func (ca *CA) Sign(req *x509.CertificateRequest, now time.Time, lifetime time.Duration) ([]byte, error) {
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.Subject.CommonName},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPAddresses,
	}
	if _, ok := req.PublicKey.(*ecdsa.PublicKey); !ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment // RSA key exchange
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// ParseRequest decodes a CSR's PEM request and checks its signature.
func ParseRequest(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" || len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("the request is not one PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	return req, nil
}

// Pool parses a PEM bundle into a certificate pool; it fails on a bundle
// without any certificate.
func Pool(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, errors.New("the CA bundle holds no PEM certificate")
	}
	return pool, nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// CheckRequest is the signer's policy for what a request for node's agent
// may say: exactly the subject CommonName(node), no other subject field, no
// URI or e-mail SAN, and only DNS names and IP addresses in allowed (the
// node's name and addresses, its agent pod's IPs). At least one SAN.
func CheckRequest(req *x509.CertificateRequest, node string, allowed []string) error {
	want := pkix.Name{CommonName: CommonName(node)}
	if req.Subject.String() != want.String() {
		return fmt.Errorf("the subject must be exactly CN=%s, not %q", CommonName(node), req.Subject.String())
	}
	if len(req.URIs) > 0 || len(req.EmailAddresses) > 0 {
		return errors.New("only DNS and IP subject alternative names may be requested")
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return errors.New("the request names no DNS name or IP address")
	}
	ok := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		ok[a] = true
	}
	for _, d := range req.DNSNames {
		if !ok[d] {
			return fmt.Errorf("DNS name %q is not an address of node %s or of its agent pod", d, node)
		}
	}
	for _, ip := range req.IPAddresses {
		if !ok[ip.String()] {
			return fmt.Errorf("IP address %s is not an address of node %s or of its agent pod", ip, node)
		}
	}
	switch k := req.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return errors.New("ECDSA keys must use P-256 or P-384")
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return errors.New("RSA keys must have at least 2048 bits")
		}
	default:
		return fmt.Errorf("unsupported key type %T", k)
	}
	return nil
}
