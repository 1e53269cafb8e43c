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

package oci

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressdns"
)

// serveAPI serves HTTPS on addr in the world with a certificate for name
// from a CA of its own, which it returns; it answers whether the request
// carried Authorization: Bearer secret (never echoing what it got).
func (w *world) serveAPI(t *testing.T, addr, name, secret string) *x509.CertPool {
	t.Helper()
	return w.test().ServeHTTPS(t, addr, name, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+secret {
			_, _ = rw.Write([]byte("authorized\n"))
			return
		}
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte("anonymous\n"))
	}))
}

// TestEgressBrokered: a sandbox whose rule brokers api.test reaches it
// over TLS it verifies (the broker's CA is in its trust bundle), and the
// server sees the credential the agent was given, which exists nowhere in
// the sandbox: not in its environment, its processes' environments or its
// files. Before the credential arrives the broker says so; a request whose
// Host is not the name its connection named is refused; every request is
// on record without the credential.
func TestEgressBrokered(t *testing.T) {
	requireRunc(t)
	_, w := egressWorld(t)
	const apiPort = 18444
	w.serveZone(t, map[string][]string{"api.test.": {"api.test. 60 IN A " + worldServer}})
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	secret := "pg-test-" + hex.EncodeToString(raw)
	roots := w.serveAPI(t, worldServer+":"+strconv.Itoa(apiPort), "api.test", secret)
	var mu sync.Mutex
	var records []egressdns.Decision
	b, err := New(Options{StateDir: newStateDir(t), GuestBinary: guestBinary, Runtime: testRuntime, Network: NetworkEgress,
		EgressResolvers: []string{worldServer + ":53"}, EgressRoots: roots,
		OnEgressDNS: func(d egressdns.Decision) { mu.Lock(); defer mu.Unlock(); records = append(records, d) }})
	if err != nil {
		t.Fatal(err)
	}
	spec := backend.Spec{ID: "brokered", Tenant: "team-a/alice", Egress: []backend.EgressRule{
		{Host: "api.test", Ports: []int32{apiPort}, Brokered: true},
	}}
	startSandbox(t, b, spec)
	curl := func(args string) string {
		t.Helper()
		// No -k: the sandbox verifies the broker's certificate.
		r := run(t, b, "brokered", backend.ExecRequest{Shell: backend.ShellClean, Command: "curl -sS --max-time 10 " + args + " 2>&1"})
		return strings.TrimSpace(r.Stdout)
	}
	url := fmt.Sprintf("https://api.test:%d/v1/models", apiPort)
	if got := curl(url); !strings.Contains(got, "has not reached this node yet") {
		t.Fatalf("before the credential: %q; want the broker to say it has not arrived", got)
	}
	if err := b.SetEgressCredentials("brokered", []backend.EgressCredential{{Host: "api.test", Header: "Authorization", Value: "Bearer " + secret}}); err != nil {
		t.Fatal(err)
	}
	if got := curl(url); got != "authorized" {
		t.Fatalf("with the credential: %q; want the server to see it", got)
	}
	if got := curl("-H 'Authorization: Bearer forged' " + url); got != "authorized" {
		t.Errorf("a sandbox's own Authorization: %q; want the brokered one in its place", got)
	}
	if got := curl("-H 'Host: evil.test' " + url); !strings.Contains(got, `is not the server name "api.test"`) {
		t.Errorf("a Host that is not the server name: %q; want refused", got)
	}
	// The secret is nowhere in the sandbox.
	r := run(t, b, "brokered", backend.ExecRequest{Shell: backend.ShellLogin, Command: "env; cat /proc/[0-9]*/environ; grep -rl -- '" + secret + "' /etc /tmp /run /home /workspace /pile 2>/dev/null; true"})
	if strings.Contains(r.Stdout+r.Stderr, secret) {
		t.Error("the credential is visible in the sandbox")
	}
	// A credential for a host no brokered rule names is not used, and
	// taking them away stops them at once.
	if err := b.SetEgressCredentials("brokered", []backend.EgressCredential{{Host: "other.test", Header: "Authorization", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	if got := curl(url); !strings.Contains(got, "has not reached this node yet") {
		t.Errorf("with its credential taken away: %q", got)
	}
	for _, bad := range []backend.EgressCredential{
		{Host: "api.test", Header: "Authorization", Value: "a\r\nX-Injected: 1"},
		{Host: "api.test", Header: "Bad Header", Value: "v"},
		{Host: "*.test", Header: "Authorization", Value: "v"},
	} {
		err := b.SetEgressCredentials("brokered", []backend.EgressCredential{bad})
		if err == nil || strings.Contains(err.Error(), bad.Value) {
			t.Errorf("credential %q %q: err %v; want refused without its value", bad.Host, bad.Header, err)
		}
	}

	mu.Lock()
	var ok, refused bool
	for _, d := range records {
		if strings.Contains(fmt.Sprintf("%+v", d), secret) {
			t.Errorf("a record carries the credential: %+v", d)
		}
		if d.Type != egressdns.TypeBrokered {
			continue
		}
		switch {
		case d.Result == egressdns.Allowed && d.Status == http.StatusOK && d.Method == http.MethodGet && d.Path == "/v1/models" && d.BytesIn > 0 && d.Dst.Port() == apiPort:
			ok = true
		case d.Result == egressdns.Denied && d.Status == http.StatusMisdirectedRequest:
			refused = true
		}
	}
	mu.Unlock()
	if !ok || !refused {
		t.Errorf("records of brokered requests: forwarded %v, refused %v; want both", ok, refused)
	}
	if err := b.Destroy(context.Background(), "brokered", false); err != nil {
		t.Fatal(err)
	}
}
