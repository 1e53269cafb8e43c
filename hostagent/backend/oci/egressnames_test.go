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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressdns"
)

// serveZone answers DNS queries on worldServer:53 in the world namespace
// from records ("name. ttl IN A addr"), NXDOMAIN for other names.
func (w *world) serveZone(t *testing.T, records map[string][]string) {
	t.Helper()
	w.test().ServeZone(t, worldServer+":53", records)
}

// serveHTTPS answers "hello" over HTTPS on addr in the world, with a
// certificate for names (the sandbox's client does not verify it: what
// is tested is the name it sends).
func (w *world) serveHTTPS(t *testing.T, addr string, names ...string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	l := tls.NewListener(w.listen(t, addr), &tls.Config{Certificates: []tls.Certificate{cert}})
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("hello\n")) }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// TestEgressByName: a sandbox allowed allowed.test on one port reaches it
// by name through the resolver its agent runs; other.test does not
// resolve, and its address typed by hand is refused, as is the allowed
// address on another port; a name that answers internal addresses
// (rebinding) opens none of them; a rule added while the sandbox runs
// works at once, a rule removed stops new connections; every query is on
// record with its tenant.
const httpsPort = 18443

func TestEgressByName(t *testing.T) {
	requireRunc(t)
	_, w := egressWorld(t)
	w.serveZone(t, map[string][]string{
		"allowed.test.": {"allowed.test. 60 IN A " + worldServer},
		"other.test.":   {"other.test. 60 IN A " + worldOther},
		// Rebinding: an allowed name that answers the node's loopback,
		// cloud metadata and a link-local test host, or a private address
		// behind a CNAME.
		"rebind.test.": {"rebind.test. 60 IN A 127.0.0.1", "rebind.test. 60 IN A 169.254.169.254", "rebind.test. 60 IN A " + worldLinkLoc},
		"cname.test.":  {"cname.test. 60 IN CNAME inside.corp.", "inside.corp. 60 IN A 10.1.2.3"},
		"secure.test.": {"secure.test. 60 IN A " + worldServer},
	})
	w.serveHTTPS(t, worldServer+":"+strconv.Itoa(httpsPort), "secure.test", "decoy.test")
	var mu sync.Mutex
	var records []egressdns.Decision
	opts := Options{StateDir: newStateDir(t), GuestBinary: guestBinary, Runtime: testRuntime, Network: NetworkEgress,
		EgressResolvers: []string{worldServer + ":53"},
		OnEgressDNS:     func(d egressdns.Decision) { mu.Lock(); defer mu.Unlock(); records = append(records, d) }}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	spec := backend.Spec{ID: "named", Tenant: "team-a/alice", Egress: []backend.EgressRule{
		{Host: "allowed.test", Ports: []int32{allowedPort}},
		{Host: "rebind.test"},
		{Host: "cname.test"},
		{Host: "secure.test", Ports: []int32{httpsPort}, CheckServerName: true},
	}}
	startSandbox(t, b, spec)

	resolves := func(name string) string {
		t.Helper()
		r := run(t, b, "named", backend.ExecRequest{Shell: backend.ShellClean, Command: "getent ahostsv4 " + name + " | awk '{print $1}' | sort -u | tr '\\n' ' '"})
		return strings.TrimSpace(r.Stdout)
	}
	reach := func(host string, port int) bool {
		t.Helper()
		r := run(t, b, "named", backend.ExecRequest{Shell: backend.ShellClean,
			Command: fmt.Sprintf("timeout 2 bash -c 'cat </dev/tcp/%s/%d'", host, port)})
		return strings.TrimSpace(r.Stdout) == "hello"
	}
	if got := resolves("allowed.test"); got != worldServer {
		t.Fatalf("allowed.test resolves to %q in the sandbox; want %s", got, worldServer)
	}
	if !reach("allowed.test", allowedPort) {
		t.Error("allowed.test is not reachable by name on its port")
	}
	if reach(worldServer, otherPort) {
		t.Error("the allowed name's address is reachable on a port its rule does not list")
	}
	if got := resolves("other.test"); got != "" {
		t.Errorf("other.test resolves to %q; want nothing (NXDOMAIN)", got)
	}
	if reach(worldOther, allowedPort) {
		t.Error("other.test's address, typed by hand, is reachable")
	}
	if got := resolves("rebind.test"); got != "" {
		t.Errorf("rebind.test resolves to %q in the sandbox; want none of its internal addresses", got)
	}
	if reach(worldLinkLoc, allowedPort) {
		t.Error("a link-local address a name answered is reachable")
	}
	// A test host at the cloud metadata address, in the test's world,
	// routed to only for the sandboxes' pool (the node keeps its own
	// route there): a name that answers it opens nothing, and typed by
	// hand it is refused.
	const metadata = "169.254.169.254"
	for _, c := range [][]string{
		{"nsenter", "--net=" + w.ns, "ip", "addr", "add", metadata + "/32", "dev", "eth0"},
		{"ip", "route", "replace", metadata + "/32", "via", worldServer, "table", "4711"},
		{"ip", "rule", "add", "from", b.opts.EgressPool.String(), "to", metadata + "/32", "lookup", "4711", "priority", "4711"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "rule", "del", "priority", "4711").Run()
		_ = exec.Command("ip", "route", "flush", "table", "4711").Run()
	})
	w.serve(t, metadata+":"+strconv.Itoa(allowedPort))
	if reach(metadata, allowedPort) {
		t.Error("the test host at the cloud metadata address is reachable")
	}
	if got := resolves("cname.test"); got != "" {
		t.Errorf("cname.test resolves to %q; want nothing (its CNAME leads to a private address)", got)
	}

	// The server name, checked at the node: a TLS connection that names
	// secure.test goes through; one to the same address and port that
	// names another host, or none, is refused.
	curl := func(args string) string {
		t.Helper()
		r := run(t, b, "named", backend.ExecRequest{Shell: backend.ShellClean, Command: "curl -sk --max-time 5 " + args})
		return strings.TrimSpace(r.Stdout)
	}
	if got := curl(fmt.Sprintf("https://secure.test:%d/", httpsPort)); got != "hello" {
		t.Errorf("a TLS connection naming secure.test: %q; want hello", got)
	}
	if got := curl(fmt.Sprintf("--resolve decoy.test:%d:%s https://decoy.test:%d/", httpsPort, worldServer, httpsPort)); got != "" {
		t.Errorf("a TLS connection to secure.test's address naming decoy.test got through: %q", got)
	}
	if got := curl("https://" + net.JoinHostPort(worldServer, strconv.Itoa(httpsPort)) + "/"); got != "" {
		t.Errorf("a TLS connection to secure.test's address naming no host got through: %q", got)
	}

	// A rule added while the sandbox runs works at once; a rule removed
	// stops new connections at once.
	spec.Egress = []backend.EgressRule{{Host: "other.test", Ports: []int32{allowedPort}}}
	if err := b.Reattach(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if got := resolves("other.test"); got != worldOther || !reach("other.test", allowedPort) {
		t.Errorf("a rule added: other.test resolves to %q, reachable %v", got, reach("other.test", allowedPort))
	}
	if reach(worldServer, allowedPort) {
		t.Error("a rule removed still lets new connections to its address")
	}
	if got := resolves("allowed.test"); got != "" {
		t.Errorf("a rule removed: allowed.test still resolves to %q", got)
	}

	// Each connection is on record when it closes, with its bytes; each
	// refused attempt within a poll of the table's refusals.
	flowRecorded := func(result egressdns.Result, dst string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range records {
			if d.Type == egressdns.TypeFlow && d.Result == result && d.Dst.String() == dst && d.Proto == "tcp" &&
				(result == egressdns.Denied && d.Packets > 0 || result == egressdns.Allowed && d.BytesIn > 0 && d.BytesOut > 0 && d.Name == "allowed.test" && d.Rule == "host allowed.test") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !(flowRecorded(egressdns.Allowed, worldServer+":"+strconv.Itoa(allowedPort)) && flowRecorded(egressdns.Denied, worldOther+":"+strconv.Itoa(allowedPort))) {
		if time.Now().After(deadline) {
			t.Fatalf("no flow records of the connection to allowed.test (%v) or of the refused attempt at other.test's address (%v)",
				flowRecorded(egressdns.Allowed, worldServer+":"+strconv.Itoa(allowedPort)), flowRecorded(egressdns.Denied, worldOther+":"+strconv.Itoa(allowedPort)))
		}
		time.Sleep(100 * time.Millisecond)
	}

	mu.Lock()
	defer mu.Unlock()
	var allowed, denied, refused bool
	for _, d := range records {
		if d.Tenant != "team-a/alice" || d.Sandbox != "named" {
			t.Errorf("a record without its tenant and sandbox: %+v", d)
		}
		switch {
		case d.Name == "allowed.test" && d.Result == egressdns.Allowed && len(d.Opened) == 1:
			allowed = true
		case d.Name == "other.test" && d.Result == egressdns.Denied:
			denied = true
		case d.Name == "rebind.test" && len(d.Refused) == 3:
			refused = true
		}
	}
	if !allowed || !denied || !refused {
		t.Errorf("records: allowed %v, denied %v, rebinding refused %v; want all", allowed, denied, refused)
	}
	// The connections are counted: bytes both ways on the flows let out,
	// the flows, and the packets dropped.
	usage, err := b.EgressUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 1 || usage[0].SandboxID != "named" || usage[0].Tenant != "team-a/alice" {
		t.Fatalf("EgressUsage = %+v; want the sandbox's", usage)
	}
	if u := usage[0]; u.BytesOut == 0 || u.BytesIn == 0 || u.Allowed == 0 || u.Denied == 0 {
		t.Errorf("egress counts %+v; want bytes both ways, flows let out and packets dropped", u)
	}
	if err := b.Destroy(context.Background(), "named", false); err != nil {
		t.Fatal(err)
	}
}
