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

package nodeagent_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/rbactest"
)

// startSigner runs the manager's agent certificate signer alone (not the
// binder, which the other tests of this package stand in for), issuing
// certificates of the given lifetime.
func startSigner(t *testing.T, lifetime time.Duration) {
	t.Helper()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:  controllers.Scheme(),
		Cache:   controllers.CacheOptions(controllers.Options{}),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ca := &controllers.AgentCA{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: agentlease.DefaultNamespace, Now: time.Now}
	if err := mgr.Add(ca); err != nil {
		t.Fatal(err)
	}
	if err := (&controllers.AgentCertReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("agentcert-test"),
		CA: ca, AgentUsers: []string{agentUser}, Lifetime: lifetime,
	}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("signer: %v", err)
		}
	})
}

// tlsNode runs an agent (with an in-memory backend) on node name, on a
// loopback port, serving TLS with a certificate from the signer, and
// returns its address. The agent acts as its ServiceAccount with a token
// bound to a pod on name (the extra the API server would set).
func tlsNode(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	if err := k8s.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: "agent-on-" + name},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "agent", Image: "playground"}}}}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod) })
	cfg := rbactest.OnPod(agentConfig, name, pod.Name, string(pod.UID))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- nodeagent.Run(actx, nodeagent.Options{
			Config: cfg, NodeName: name, StateDir: t.TempDir(), Listener: ln, Tokens: []string{token},
			Backends:      []backend.Backend{backendtest.New("fake", backendtest.Writes())},
			AdvertiseHost: "127.0.0.1", TLSFromCSR: true, LeaseDuration: leaseDuration,
			Logger: log.WithName(name), ShutdownGrace: 5 * time.Second,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent of %s: %v", name, err)
		}
	})
	NewWithT(t).Eventually(func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(name)}, &lease)).To(Succeed())
		l, err := agentlease.FromLease(&lease)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Endpoint).To(Equal("https://" + ln.Addr().String()))
	}).WithTimeout(timeout).Should(Succeed(), "the agent registers an https endpoint")
	return ln.Addr().String()
}

// publishedCA is the CA bundle the manager publishes for the gateway.
func publishedCA(t *testing.T) *x509.CertPool {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentpki.CAConfigMapName}, &cm); err != nil {
		t.Fatal(err)
	}
	pool, err := agentpki.Pool([]byte(cm.Data[agentpki.CABundleKey]))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestServingCertificateFromSigner: the agent obtains its certificate from
// the Playground signer and serves TLS only; a plain HTTP request is
// refused; the certificate is renewed (a short lifetime here) while
// requests, on one connection and on new ones, keep succeeding.
func TestServingCertificateFromSigner(t *testing.T) {
	const lifetime = 6 * time.Second
	startSigner(t, lifetime)
	addr := tlsNode(t, "tls-node")
	pool := publishedCA(t)

	serials := map[string]bool{}
	tlsConfig := func() *tls.Config {
		return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, VerifyConnection: func(cs tls.ConnectionState) error {
			leaf := cs.PeerCertificates[0]
			if leaf.Subject.CommonName != agentpki.CommonName("tls-node") {
				return fmt.Errorf("certificate of %q", leaf.Subject.CommonName)
			}
			serials[leaf.SerialNumber.String()] = true // one goroutine dials at a time here
			return nil
		}}
	}
	get := func(c *http.Client) error {
		resp, err := c.Get("https://" + addr + "/healthz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}

	t.Run("plain HTTP is refused", func(t *testing.T) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
				t.Fatalf("plain HTTP: %s %q, want 400 from a TLS-only server", resp.Status, body)
			}
		}
		h2c := &http.Client{Transport: agentapi.NewTransport(nil), Timeout: 5 * time.Second}
		if err := get2(h2c, "http://"+addr+"/healthz"); err == nil {
			t.Fatal("cleartext HTTP/2 was served")
		}
	})

	t.Run("rotation without a failed request", func(t *testing.T) {
		persistent := &http.Client{Transport: agentapi.NewTransport(tlsConfig()), Timeout: 5 * time.Second}
		deadline := time.Now().Add(4 * lifetime)
		requests := 0
		for len(serials) < 3 && time.Now().Before(deadline) {
			if err := get(persistent); err != nil {
				t.Fatalf("request %d on the open connection: %v", requests, err)
			}
			fresh := &http.Client{Transport: agentapi.NewTransport(tlsConfig()), Timeout: 5 * time.Second}
			if err := get(fresh); err != nil {
				t.Fatalf("request %d on a new connection: %v", requests, err)
			}
			fresh.CloseIdleConnections()
			requests++
			time.Sleep(50 * time.Millisecond)
		}
		if len(serials) < 3 {
			t.Fatalf("saw %d certificates in %s, want a renewal at two thirds of %s twice", len(serials), 4*lifetime, lifetime)
		}
		t.Logf("%d requests over %d certificates, none failed", 2*requests, len(serials))
	})
}

func get2(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}
