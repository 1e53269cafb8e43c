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
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/internal/netnstest"
	"github.com/playground-dev/playground/internal/sysctltest"
)

// The test network: a namespace standing for the world outside the node,
// joined to the node by a veth pair.
const (
	worldNodeAddr = "198.18.0.2"   // the node's end
	worldServer   = "198.18.0.1"   // allowed, on allowedPort only
	worldOther    = "198.18.0.9"   // never allowed
	worldLinkLoc  = "169.254.99.1" // link-local, routed to the world: allowed in the list, still denied
	allowedPort   = 18080
	otherPort     = 18081
)

func TestEgressRulesValidation(t *testing.T) {
	for _, tc := range []struct {
		rules []backend.EgressRule
		ok    bool
	}{
		{[]backend.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{443}}}, true},
		{[]backend.EgressRule{{CIDR: "0.0.0.0/0"}}, true},
		{[]backend.EgressRule{{CIDR: "10.0.0.1/8"}}, false},
		{[]backend.EgressRule{{CIDR: "10.0.0.1"}}, false},
		{[]backend.EgressRule{{CIDR: "2001:db8::/32", Ports: []int32{443}}}, true},
		{[]backend.EgressRule{{CIDR: "2001:db8::1/32"}}, false},
		{[]backend.EgressRule{{CIDR: "::ffff:10.0.0.0/104"}}, false},
		{[]backend.EgressRule{{CIDR: "10.0.0.0/8; flush ruleset"}}, false},
		{[]backend.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{0}}}, false},
		{[]backend.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{65536}}}, false},
	} {
		if err := validateEgress(tc.rules); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.rules, err)
		}
	}
}

// TestEgressOptions: a pool too small for a /30 per slot, or not IPv4, and
// deny entries that are not networks are refused.
func TestEgressOptions(t *testing.T) {
	for _, tc := range []struct {
		pool string
		deny []string
		ok   bool
	}{
		{"100.64.0.0/10", []string{"10.244.0.0/16"}, true},
		{"100.64.0.0/18", nil, true},
		{"100.64.0.0/24", nil, false},
		{"fd00::/64", nil, false},
		{"100.64.0.0/10", []string{"10.244.0.1/16"}, false},
		{"100.64.0.0/10", []string{"10.0.0.0/8 } accept"}, false},
		{"100.64.0.0/10", []string{"fd12::/16"}, true},
		{"100.64.0.0/10", []string{"fd12::1/16"}, false},
	} {
		o := Options{StateDir: "/state", GuestBinary: "/guest", Network: NetworkEgress, EgressPool: netip.MustParsePrefix(tc.pool), EgressDeny: tc.deny}
		if err := o.setDefaults(); (err == nil) != tc.ok {
			t.Errorf("pool %s, deny %q: %v", tc.pool, tc.deny, err)
		}
	}
	// The IPv6 pool: an IPv6 network of at least a /64.
	for _, p6 := range []string{"100.64.0.0/10", "fd70::/96", "fd70::1/64"} {
		o := Options{StateDir: "/state", GuestBinary: "/guest", Network: NetworkEgress, EgressPool6: netip.MustParsePrefix(p6)}
		if err := o.setDefaults(); err == nil {
			t.Errorf("IPv6 pool %s accepted", p6)
		}
	}
}

// TestEgressRuleset: the script denies before it accepts, ends with a
// drop, renders ports once each, and nft accepts it (checked, not applied).
func TestEgressRuleset(t *testing.T) {
	b := &Backend{opts: Options{StateDir: "/state", IDMapSlots: 4096, EgressPool: DefaultEgressPool, EgressDeny: []string{"10.244.0.0/16"}}}
	sb := &sandbox{dir: "/state/sandboxes/x", slot: 7, spec: backend.Spec{ID: "x", Egress: []backend.EgressRule{
		{CIDR: "10.0.0.0/8", Ports: []int32{443, 53, 443}},
		{CIDR: "203.0.113.7/32"},
	}}}
	n := b.egressNet(sb)
	if n.subnet.Bits() != 30 || !DefaultEgressPool.Contains(n.subnet.Addr()) || n.node.Next() != n.guest {
		t.Fatalf("subnet %s, node %s, guest %s", n.subnet, n.node, n.guest)
	}
	if len(n.hostDev) > 15 {
		t.Fatalf("device name %q is over 15 bytes", n.hostDev)
	}
	script := b.egressRuleset(sb)
	deny := strings.Index(script, "ip daddr { 100.64.0.0/10, 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/4, 240.0.0.0/4, 10.244.0.0/16 } counter name \"denied\" drop")
	accept := strings.Index(script, "ip daddr 10.0.0.0/8 meta l4proto { tcp, udp } th dport { 53, 443 } counter name \"allowed\" accept")
	all := strings.Index(script, "ip daddr 203.0.113.7/32 counter name \"allowed\" accept")
	last := strings.LastIndex(script, "iifname \""+n.hostDev+"\" counter name \"denied\" drop")
	if deny < 0 || accept < deny || all < accept || last < all {
		t.Fatalf("rules out of order (%d %d %d %d):\n%s", deny, accept, all, last, script)
	}
	nftAccepts(t, script)
}

// TestDeniedAnswers: no answered address that leads back into IPv4 space
// (mapped, compatible, translated, NAT64, 6to4), to the node, its pool or
// a private network is opened, whatever the names' rules say; a public
// address is.
func TestDeniedAnswers(t *testing.T) {
	b := &Backend{opts: Options{EgressPool: DefaultEgressPool, EgressIPv6: true, EgressPool6: DefaultEgressPool6, EgressDeny: []string{"203.0.113.0/24"}}}
	for _, tc := range []struct {
		addr   string
		denied bool
	}{
		{"198.51.100.7", false},
		{"2001:4860::8888", false},
		{"127.0.0.1", true},
		{"169.254.169.254", true},
		{"10.1.2.3", true},
		{"203.0.113.9", true},
		{"::1", true},
		{"::", true},
		{"::ffff:127.0.0.1", true},
		{"::127.0.0.1", true},        // IPv4-compatible
		{"::169.254.169.254", true},  // IPv4-compatible
		{"::ffff:0:127.0.0.1", true}, // IPv4-translated
		{"::ffff:0:a9fe:a9fe", true}, // IPv4-translated metadata
		{"64:ff9b::7f00:1", true},
		{"2002:7f00:1::", true},
		{"fd00:ec2::254", true},
		{"fe80::1", true},
	} {
		if got := b.deniedAnswer(netip.MustParseAddr(tc.addr)); got != tc.denied {
			t.Errorf("deniedAnswer(%s) = %v, want %v", tc.addr, got, tc.denied)
		}
	}
}

// TestEgressRuleset6: the IPv6 forward chain drops every range that
// leads back into IPv4 space before any rule accepts, and nft accepts the
// script (checked, not applied).
func TestEgressRuleset6(t *testing.T) {
	b := &Backend{opts: Options{StateDir: "/state", IDMapSlots: 4096, EgressPool: DefaultEgressPool, EgressIPv6: true, EgressPool6: DefaultEgressPool6}}
	sb := &sandbox{dir: "/state/sandboxes/x", slot: 7, spec: backend.Spec{ID: "x", Egress: []backend.EgressRule{{CIDR: "::/0"}}}}
	script := b.egressRuleset(sb)
	var deny string
	for _, line := range strings.Split(script, "\n") {
		if strings.Contains(line, "ip6 daddr {") && strings.HasSuffix(line, `counter name "denied" drop`) {
			deny = line
		}
	}
	for _, c := range []string{"::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "2002::/16"} {
		p := netip.MustParsePrefix(c).String() // as the script writes it
		if !strings.Contains(deny, " "+p+",") && !strings.Contains(deny, " "+p+" }") {
			t.Errorf("the IPv6 deny rule does not drop %s: %q", p, deny)
		}
	}
	if d, a := strings.Index(script, deny), strings.Index(script, `ip6 daddr ::/0 counter name "allowed" accept`); deny == "" || a < 0 || a < d {
		t.Fatalf("the IPv6 deny rule is not before the rule that accepts ::/0:\n%s", script)
	}
	nftAccepts(t, script)
}

// reattached is an agent's restart: a new backend with opts, which
// reattaches spec.
func reattached(t *testing.T, opts Options, spec backend.Spec) *Backend {
	t.Helper()
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Reattach(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEgress: an egress sandbox reaches the address and port its list
// allows and nothing else: not another port or address, not the node (its
// addresses, an agent's port, even when listed), not link-local addresses
// even when listed; a sandbox without a list reaches nothing. After an
// agent restart the rules are applied again, a changed list takes effect
// on the running sandbox, an agent whose own namespace was renewed makes
// the sandbox's network again, and Destroy leaves nothing on the node.
func TestEgress(t *testing.T) {
	requireRunc(t)
	agentPort, _ := egressWorld(t)
	// The node reaches the world, so a failure below is the policy's.
	if got := dialHello(worldServer + ":" + strconv.Itoa(allowedPort)); got != "hello" {
		t.Fatalf("node cannot reach the test server: %q", got)
	}

	state := newStateDir(t)
	opts := Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, Network: NetworkEgress}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	spec := backend.Spec{ID: "egress", Egress: []backend.EgressRule{
		{CIDR: worldServer + "/32", Ports: []int32{allowedPort}},
		{CIDR: "169.254.0.0/16", Ports: []int32{allowedPort}},
		{CIDR: worldNodeAddr + "/32"},
		{CIDR: "192.0.2.0/24"},
	}}
	startSandbox(t, b, spec)
	startSandbox(t, b, backend.Spec{ID: "closed"})
	gateway := b.egressNet(mustLoad(t, b, "egress")).node.String()

	reach := func(b *Backend, id, addr string) bool {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		r := run(t, b, id, backend.ExecRequest{Shell: backend.ShellClean,
			Command: fmt.Sprintf("timeout 2 bash -c 'cat </dev/tcp/%s/%s'", host, port)})
		return strings.TrimSpace(r.Stdout) == "hello"
	}
	check := func(b *Backend, id string, want map[string]bool) {
		t.Helper()
		for addr, ok := range want {
			if got := reach(b, id, addr); got != ok {
				t.Errorf("%s: reach %s = %v, want %v", id, addr, got, ok)
			}
		}
	}
	port := strconv.Itoa
	nodeAddrs := nodeAddresses(t)
	denied := map[string]bool{
		worldServer + ":" + port(otherPort):    false,
		worldOther + ":" + port(allowedPort):   false,
		worldLinkLoc + ":" + port(allowedPort): false,
		gateway + ":" + port(agentPort):        false,
		"127.0.0.1:" + port(agentPort):         false,
	}
	for _, a := range nodeAddrs {
		denied[a+":"+port(agentPort)] = false
	}
	want := map[string]bool{worldServer + ":" + port(allowedPort): true}
	for k, v := range denied {
		want[k] = v
	}
	check(b, "egress", want)
	closed := map[string]bool{worldServer + ":" + port(allowedPort): false, gateway + ":" + port(agentPort): false}
	check(b, "closed", closed)
	if out := sh(t, b, "closed", "cat /proc/net/dev"); strings.Contains(out, "eth0") {
		t.Errorf("a sandbox without egress has an interface: %s", out)
	}
	// The sandbox's root may not rewrite its own network.
	if r := run(t, b, "egress", backend.ExecRequest{Shell: backend.ShellClean, Command: "ip route del default 2>&1 || echo refused"}); !strings.Contains(r.Stdout, "refused") && r.Status.ExitCode == 0 {
		t.Errorf("tenant changed the sandbox's routes: %q", r.Stdout)
	}

	// An agent restart: a new backend over the same state reattaches, with
	// a changed list that applies to the running sandbox.
	spec.Egress[0].Ports = []int32{otherPort}
	b2 := reattached(t, opts, spec)
	want[worldServer+":"+port(allowedPort)] = false
	want[worldServer+":"+port(otherPort)] = true
	check(b2, "egress", want)

	// An agent pod restarted: its namespace, with the veth's node end and
	// the ruleset, is new, and the namespace file is no longer mounted.
	n := b2.egressNet(mustLoad(t, b2, "egress"))
	if err := unix.Unmount(n.netns, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"ip", "link", "del", n.hostDev}, {"nft", "delete", "table", "inet", n.table}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	if err := b2.Reattach(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	check(b2, "egress", want)

	// A backend with network none refuses egress.
	if err := newBackend(t, newStateDir(t)).Provision(context.Background(), backend.Spec{ID: "refused", Egress: spec.Egress}); err == nil {
		t.Error("a backend with network none provisioned an egress sandbox")
	}

	if err := b2.Destroy(context.Background(), "egress", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.hostDev)); err == nil {
		t.Errorf("veth %s outlived its sandbox", n.hostDev)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", n.table).CombinedOutput(); err == nil {
		t.Errorf("table %s outlived its sandbox:\n%s", n.table, out)
	}
}

func mustLoad(t *testing.T, b *Backend, id string) *sandbox {
	t.Helper()
	sb, err := b.load(id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// nodeAddresses are the node's global IPv4 addresses.
func nodeAddresses(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			out = append(out, ip.IP.String())
		}
	}
	return out
}

// world is a network namespace (its file) joined to the node by a veth
// pair.
type world struct{ ns string }

// egressWorld makes the world the egress tests dial (servers on the
// allowed and other ports and addresses) and an agent's API port on the
// node, on every address, which no sandbox may reach; it returns that port.
func egressWorld(t *testing.T) (int, *world) {
	t.Helper()
	for _, tool := range []string{"nft", "ip", "nsenter", "bash", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run make prereqs", tool)
		}
	}
	world := newWorld(t)
	for _, addr := range []string{worldServer + ":" + strconv.Itoa(allowedPort), worldServer + ":" + strconv.Itoa(otherPort),
		worldOther + ":" + strconv.Itoa(allowedPort), worldLinkLoc + ":" + strconv.Itoa(allowedPort)} {
		world.serve(t, addr)
	}
	agent, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	go serveHello(agent)
	return agent.Addr().(*net.TCPAddr).Port, world
}

func newWorld(t *testing.T) *world {
	t.Helper()
	suffix := strconv.Itoa(os.Getpid() % 100000)
	w := &world{ns: filepath.Join(newStateDir(t), "world")}
	dev := "pgtw" + suffix
	sysctltest.HoldIPv4Forwarding(t)
	t.Cleanup(func() {
		_ = exec.Command("ip", "route", "del", worldLinkLoc+"/32").Run()
		_ = exec.Command("ip", "link", "del", dev).Run()
		_ = removeNetns(w.ns)
	})
	if err := createNetns(w.ns); err != nil {
		t.Fatal(err)
	}
	in := func(args ...string) []string { return append([]string{"nsenter", "--net=" + w.ns}, args...) }
	for _, c := range [][]string{
		in("ip", "link", "add", "eth0", "type", "veth", "peer", "name", dev, "netns", strconv.Itoa(os.Getpid())),
		{"ip", "addr", "add", worldNodeAddr + "/24", "dev", dev},
		{"ip", "link", "set", dev, "up"},
		in("ip", "link", "set", "lo", "up"),
		in("ip", "addr", "add", worldServer+"/24", "dev", "eth0"),
		in("ip", "addr", "add", worldOther+"/24", "dev", "eth0"),
		in("ip", "addr", "add", worldLinkLoc+"/32", "dev", "eth0"),
		in("ip", "link", "set", "eth0", "up"),
		// Answers to the sandboxes' pool go back through the node.
		in("ip", "route", "add", "default", "via", worldNodeAddr),
		{"ip", "route", "replace", worldLinkLoc + "/32", "via", worldServer},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	return w
}

// test is the world as package netnstest serves in it.
func (w *world) test() *netnstest.World { return &netnstest.World{Net: w.ns} }

// listen makes a TCP listener on addr in the world namespace.
func (w *world) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	return w.test().Listen(t, addr)
}

// serve answers "hello" on addr, a TCP address in the world namespace.
func (w *world) serve(t *testing.T, addr string) {
	t.Helper()
	go serveHello(w.listen(t, addr))
}

func serveHello(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("hello\n"))
		c.Close()
	}
}

func dialHello(addr string) string {
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	buf := make([]byte, 16)
	n, _ := c.Read(buf)
	return strings.TrimSpace(string(buf[:n]))
}

// nftAccepts checks script with nft -c (which applies nothing), or skips
// where there is no nft or no root.
func nftAccepts(t *testing.T, script string) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed: run make prereqs")
	}
	if os.Geteuid() != 0 {
		t.Skip("nft -c needs root")
	}
	cmd := exec.Command("nft", "-c", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft refuses the script: %v: %s\n%s", err, out, script)
	}
}
