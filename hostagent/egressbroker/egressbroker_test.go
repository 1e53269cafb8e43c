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

package egressbroker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// brokered is a broker in front of an upstream TLS server (httptest's,
// whose certificate names example.com), reached through a loopback
// listener that stands in for the sandbox's redirected connections.
type brokered struct {
	b        *Broker
	client   *http.Client
	mu       sync.Mutex
	seen     []http.Header
	requests []Request
}

func newBrokered(t *testing.T) *brokered {
	t.Helper()
	bt := &brokered{}
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bt.mu.Lock()
		bt.seen = append(bt.seen, r.Header.Clone())
		bt.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte("upstream saw "+r.Host+" "), body...))
	}))
	t.Cleanup(up.Close)
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	dst := netip.MustParseAddrPort(up.Listener.Addr().String())
	b, err := New(Options{
		CAFile: filepath.Join(t.TempDir(), "ca.pem"), Name: "test", Roots: roots,
		Denied: func(netip.Addr) bool { return false },
		Record: func(r Request) { bt.mu.Lock(); bt.requests = append(bt.requests, r); bt.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	bt.b = b
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); b.Serve(c, nil, dst, "example.com") }()
		}
	}()
	trust := x509.NewCertPool()
	if !trust.AppendCertsFromPEM(b.CAPEM()) {
		t.Fatal("the broker's CA is not PEM")
	}
	bt.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp4", ln.Addr().String())
		},
		TLSClientConfig: &tls.Config{RootCAs: trust, MinVersion: tls.VersionTLS12},
	}}
	t.Cleanup(bt.client.CloseIdleConnections)
	return bt
}

func (bt *brokered) do(t *testing.T, host string, header http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://example.com/v1/things", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := bt.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got)
}

func TestBrokerAddsTheCredential(t *testing.T) {
	bt := newBrokered(t)
	bt.b.Set([]Credential{{Host: "example.com", Header: "Authorization", Value: "Bearer s3cret"}})

	// The sandbox's own value under the header is replaced, not kept
	// beside it.
	status, body := bt.do(t, "example.com", http.Header{"Authorization": {"Bearer forged"}}, "payload")
	if status != http.StatusOK || body != "upstream saw example.com payload" {
		t.Fatalf("brokered request: %d %q", status, body)
	}
	bt.mu.Lock()
	got := bt.seen[0].Values("Authorization")
	recs := append([]Request(nil), bt.requests...)
	bt.mu.Unlock()
	if len(got) != 1 || got[0] != "Bearer s3cret" {
		t.Fatalf("the upstream saw Authorization %q, want only the brokered value", got)
	}
	if len(recs) != 1 || recs[0].Status != http.StatusOK || recs[0].Refused != "" || recs[0].BytesOut != int64(len("payload")) || recs[0].BytesIn != int64(len(body)) {
		t.Fatalf("record %+v", recs)
	}
	var rec bytes.Buffer
	for _, r := range recs {
		rec.WriteString(r.Host + r.Method + r.Path + r.Refused)
	}
	if strings.Contains(rec.String(), "s3cret") {
		t.Fatal("the record carries the credential")
	}
}

func TestBrokerRefusesAnotherHost(t *testing.T) {
	bt := newBrokered(t)
	bt.b.Set([]Credential{{Host: "example.com", Header: "Authorization", Value: "Bearer s3cret"}})

	// A Host other than the name the connection named: the credential
	// would go to a host the rule does not name.
	status, body := bt.do(t, "evil.example", nil, "")
	if status != http.StatusMisdirectedRequest || !strings.Contains(body, `is not the server name "example.com"`) {
		t.Fatalf("request for another host: %d %q", status, body)
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if len(bt.seen) != 0 {
		t.Fatalf("the upstream saw %d requests", len(bt.seen))
	}
}

func TestBrokerWithoutTheCredentialYet(t *testing.T) {
	bt := newBrokered(t)
	status, body := bt.do(t, "example.com", nil, "")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "has not reached this node yet") {
		t.Fatalf("request before the credential: %d %q", status, body)
	}
	bt.b.Set([]Credential{{Host: "example.com", Header: "X-Api-Key", Value: "k"}})
	if status, _ := bt.do(t, "example.com:443", nil, ""); status != http.StatusOK {
		t.Fatalf("request after the credential: %d", status)
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if got := bt.seen[0].Get("X-Api-Key"); got != "k" {
		t.Fatalf("X-Api-Key %q", got)
	}
}

func TestBrokerKeepsItsCA(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.pem")
	opts := Options{CAFile: file, Denied: func(netip.Addr) bool { return false }}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if !bytes.Equal(a.CAPEM(), b.CAPEM()) {
		t.Fatal("a broker made again over the same file has another CA: the sandbox would stop trusting it")
	}
}
