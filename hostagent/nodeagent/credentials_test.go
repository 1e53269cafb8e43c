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
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
)

// setRecorder records the token sets a tokenSource hands over.
type setRecorder struct {
	mu   sync.Mutex
	sets [][]string
}

func (r *setRecorder) set(toks ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets = append(r.sets, toks)
}

func (r *setRecorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sets)
}

func (r *setRecorder) last() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil
	}
	return r.sets[len(r.sets)-1]
}

// watch runs ts.watch until the test ends.
func watch(t *testing.T, ts *tokenSource) *setRecorder {
	r := &setRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.watch(ctx, 10*time.Millisecond, r.set) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return r
}

// A rotated token file takes effect without a restart; a botched one (no
// token left) keeps the previous tokens.
func TestTokenFileRotation(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	_, err := newTokenSource(nil, filepath.Join(dir, "missing"), false)
	g.Expect(err).To(HaveOccurred())
	empty := filepath.Join(dir, "empty")
	g.Expect(os.WriteFile(empty, []byte("\n"), 0o600)).To(Succeed())
	_, err = newTokenSource(nil, empty, false)
	g.Expect(err).To(MatchError(ContainSubstring("accept no gateway")))

	p := filepath.Join(dir, "tokens")
	g.Expect(os.WriteFile(p, []byte("old-token-0123456789\n"), 0o600)).To(Succeed())
	ts, err := newTokenSource([]string{"static-token-0123456789"}, p, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ts.current()).To(ConsistOf("static-token-0123456789", "old-token-0123456789"))
	r := watch(t, ts)
	g.Expect(os.WriteFile(p, []byte("new-token-0123456789\n"), 0o600)).To(Succeed())
	g.Eventually(r.last).Should(ConsistOf("static-token-0123456789", "new-token-0123456789"))
	// An empty file still leaves the static token: a valid set.
	g.Expect(os.WriteFile(p, nil, 0o600)).To(Succeed())
	g.Eventually(r.last).Should(ConsistOf("static-token-0123456789"))

	// Without static tokens, a file emptied by mistake keeps the old set.
	only := filepath.Join(dir, "only")
	g.Expect(os.WriteFile(only, []byte("only-token-0123456789\n"), 0o600)).To(Succeed())
	ts2, err := newTokenSource(nil, only, false)
	g.Expect(err).NotTo(HaveOccurred())
	r2 := watch(t, ts2)
	g.Expect(os.WriteFile(only, []byte("\n"), 0o600)).To(Succeed())
	g.Consistently(r2.calls).WithTimeout(200 * time.Millisecond).Should(BeZero())
	g.Expect(ts2.current()).To(ConsistOf("only-token-0123456789"))
	// A good file afterwards is taken.
	g.Expect(os.WriteFile(only, []byte("next-token-0123456789\n"), 0o600)).To(Succeed())
	g.Eventually(r2.last).Should(ConsistOf("next-token-0123456789"))
}

// writeKeyPair writes a self-signed certificate for cn and its key.
func writeKeyPair(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A renewed key pair on disk is served without a restart; a broken renewal
// keeps the previous pair.
func TestKeyPairReload(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	certFile, keyFile := writeKeyPair(t, dir, "first")
	cfg, stop, err := newTLSConfig(context.Background(), certFile, keyFile, logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	defer stop()
	cn := func() string {
		c, err := cfg.GetCertificate(nil)
		g.Expect(err).NotTo(HaveOccurred())
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		g.Expect(err).NotTo(HaveOccurred())
		return leaf.Subject.CommonName
	}
	g.Expect(cn()).To(Equal("first"))

	writeKeyPair(t, dir, "second")
	g.Eventually(cn).WithTimeout(30 * time.Second).Should(Equal("second"))

	// A broken renewal keeps serving the previous pair.
	g.Expect(os.WriteFile(keyFile, []byte("garbage"), 0o600)).To(Succeed())
	g.Consistently(cn).WithTimeout(time.Second).Should(Equal("second"))

	// No files, no TLS.
	cfg, stop, err = newTLSConfig(context.Background(), "", "", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(BeNil())
	stop()
	_, _, err = newTLSConfig(context.Background(), filepath.Join(dir, "missing.crt"), keyFile, logr.Discard())
	g.Expect(err).To(HaveOccurred())
}
