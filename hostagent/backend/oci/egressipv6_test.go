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
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/internal/netnstest"
)

// TestEgressIPv6: on a node with IPv6, a sandbox reaches an allowed
// name's IPv6 address by name, by the rules IPv4 follows: another name
// does not resolve, its address typed by hand is refused, as are the
// allowed address on another port and the node's own address; a name
// that answers loopback, unique local (a cloud's metadata), link-local or
// IPv4-mapped, -compatible or -translated addresses opens none; the server name is checked at the
// node over IPv6 too; refused attempts and flows are on record. The test
// hosts are in a network namespace the test makes, on 2001:2::/48
// (benchmarking).
func TestEgressIPv6(t *testing.T) {
	requireRunc(t)
	const (
		prefix  = "2001:2:79::"
		server  = prefix + "1"
		other   = prefix + "9"
		port    = 18080
		tlsPort = 18443
	)
	world := netnstest.New(t, "198.19.79", 1)
	world.AddIPv6(t, prefix, "1", "9")
	world.ServeZone(t, "198.19.79.1:53", map[string][]string{
		"v6.test.":     {"v6.test. 60 IN AAAA " + server},
		"other6.test.": {"other6.test. 60 IN AAAA " + other},
		"rebind6.test.": {"rebind6.test. 60 IN AAAA ::1", "rebind6.test. 60 IN AAAA fd00:ec2::254", "rebind6.test. 60 IN AAAA fe80::1", "rebind6.test. 60 IN AAAA ::ffff:127.0.0.1",
			"rebind6.test. 60 IN AAAA ::127.0.0.1", "rebind6.test. 60 IN AAAA ::ffff:0:127.0.0.1"},
		"secure6.test.": {"secure6.test. 60 IN AAAA " + server},
	})
	for _, addr := range []string{server, other} {
		go serveHello(world.Listen(t, net.JoinHostPort(addr, fmt.Sprint(port))))
	}
	world.ServeHTTPS(t, net.JoinHostPort(server, fmt.Sprint(tlsPort)), "secure6.test", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hello\n"))
	}))
	// A server on the node's own IPv6 address, which no sandbox reaches.
	var lc net.ListenConfig
	nodeLn, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(world.Node6, fmt.Sprint(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nodeLn.Close() })
	go serveHello(nodeLn)

	var mu sync.Mutex
	var records []egressdns.Decision
	b, err := New(Options{StateDir: newStateDir(t), GuestBinary: guestBinary, Runtime: testRuntime, Network: NetworkEgress, EgressIPv6: true,
		EgressResolvers: []string{"198.19.79.1:53"},
		OnEgressDNS:     func(d egressdns.Decision) { mu.Lock(); defer mu.Unlock(); records = append(records, d) }})
	if err != nil {
		t.Fatal(err)
	}
	spec := backend.Spec{ID: "six", Tenant: "team-a/alice", Egress: []backend.EgressRule{
		{Host: "v6.test", Ports: []int32{port}},
		{Host: "rebind6.test"},
		{Host: "secure6.test", Ports: []int32{tlsPort}, CheckServerName: true},
	}}
	startSandbox(t, b, spec)
	sh := func(cmd string) string {
		t.Helper()
		return strings.TrimSpace(run(t, b, "six", backend.ExecRequest{Shell: backend.ShellClean, Command: cmd}).Stdout)
	}
	reach := func(host string, p int) bool {
		t.Helper()
		return sh(fmt.Sprintf("timeout 3 bash -c 'cat </dev/tcp/%s/%d' 2>/dev/null", host, p)) == "hello"
	}
	if got := sh("getent ahostsv6 v6.test | awk '{print $1}' | sort -u"); got != server {
		t.Fatalf("v6.test resolves to %q in the sandbox; want %s", got, server)
	}
	if !reach("v6.test", port) {
		t.Fatal("v6.test is not reachable by name over IPv6")
	}
	if reach(server, tlsPort+1) {
		t.Error("the allowed name's address is reachable on a port its rule does not list")
	}
	if got := sh("getent ahostsv6 other6.test"); got != "" {
		t.Errorf("other6.test resolves to %q; want nothing", got)
	}
	if reach(other, port) {
		t.Error("other6.test's address, typed by hand, is reachable")
	}
	if reach(world.Node6, port) {
		t.Error("the node's own IPv6 address is reachable")
	}
	if got := sh("getent ahostsv6 rebind6.test"); got != "" {
		t.Errorf("rebind6.test resolves to %q; want none of its internal addresses", got)
	}
	curl := func(args string) string {
		return sh("curl -sk --max-time 5 " + args)
	}
	if got := curl(fmt.Sprintf("https://secure6.test:%d/", tlsPort)); got != "hello" {
		t.Errorf("a TLS connection naming secure6.test over IPv6: %q; want hello", got)
	}
	if got := curl(fmt.Sprintf("--resolve decoy6.test:%d:[%s] https://decoy6.test:%d/", tlsPort, server, tlsPort)); got != "" {
		t.Errorf("a TLS connection to secure6.test's address naming decoy6.test got through: %q", got)
	}

	flowRecorded := func(result egressdns.Result, dst string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range records {
			if d.Type == egressdns.TypeFlow && d.Result == result && d.Dst.String() == dst && (result == egressdns.Denied || d.Rule == "host v6.test") {
				return true
			}
		}
		return false
	}
	allowed, denied := fmt.Sprintf("[%s]:%d", server, port), fmt.Sprintf("[%s]:%d", other, port)
	for deadline := time.Now().Add(30 * time.Second); !flowRecorded(egressdns.Allowed, allowed) || !flowRecorded(egressdns.Denied, denied); {
		if time.Now().After(deadline) {
			t.Fatalf("flow records: allowed %s %v, denied %s %v", allowed, flowRecorded(egressdns.Allowed, allowed), denied, flowRecorded(egressdns.Denied, denied))
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	var refused int
	for _, d := range records {
		if d.Name == "rebind6.test" && d.Type == "AAAA" {
			refused = max(refused, len(d.Refused))
		}
	}
	mu.Unlock()
	if refused != 6 {
		t.Errorf("rebind6.test: %d addresses refused on record; want its 6", refused)
	}
	if err := b.Destroy(context.Background(), "six", false); err != nil {
		t.Fatal(err)
	}
}
