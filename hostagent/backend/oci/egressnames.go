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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressbroker"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/hostagent/snigate"
)

// Egress by name: a sandbox whose rules name hosts resolves through a
// resolver the agent runs for it (package egressdns) on the node's end of
// its link, port 53, which its /etc/resolv.conf names. The resolver opens
// the addresses it answers in two nftables sets of the sandbox's table,
// whose elements expire with the answer's time to live: namedPorts
// (address . port) and namedAll (address, for rules without ports).
// Connections already made go on when an element expires (the table
// accepts established flows); new ones need a new answer.

// Bounds of one sandbox's named egress: the elements its sets hold (the
// kernel refuses more, and the resolver answers SERVFAIL).
const (
	maxNamedPorts = 4096
	maxNamedAll   = 1024
)

// privateNets are answers no name opens (beyond the deny list of every
// egress rule): an allowed name must not lead into the node's networks.
var privateNets = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}

// namedEgress is the resolver of one sandbox, process-wide by the address
// it serves on: a backend made again over the same state (an agent's
// restart, in tests) takes it over.
type namedEgress struct {
	mu      sync.Mutex
	policy  egressdns.Policy
	res     *egressdns.Resolver
	backend *Backend
	// gate checks the server name of connections to the addresses of
	// rules that ask for it (nil until one does); checked holds, by
	// address and port, the names that answered it and until when.
	gate    *snigate.Gate
	checked map[netip.AddrPort]map[string]time.Time
	// broker ends the TLS of connections to the hosts of brokered rules
	// (brokered) and adds their credentials.
	broker   *egressbroker.Broker
	brokered map[string]bool
	// answered are the names whose answers opened each address, and
	// until when: a flow's record names what let it out.
	answered map[netip.Addr]answer
}

type answer struct {
	name  string
	until time.Time
}

// noteAnswer notes that name's answer opened addr for ttl. Under no lock.
func (ne *namedEgress) noteAnswer(addr netip.Addr, name string, ttl time.Duration) {
	ne.mu.Lock()
	defer ne.mu.Unlock()
	now := time.Now()
	if ne.answered == nil {
		ne.answered = map[netip.Addr]answer{}
	}
	if len(ne.answered) >= maxNamedPorts+maxNamedAll {
		for a, an := range ne.answered {
			if !now.Before(an.until) {
				delete(ne.answered, a)
			}
		}
		if len(ne.answered) >= maxNamedPorts+maxNamedAll {
			return // the sets are as full: the kernel refuses more anyway
		}
	}
	ne.answered[addr] = answer{name: name, until: now.Add(ttl)}
}

// nameOf is the name whose live answer opened addr, if one did.
func (ne *namedEgress) nameOf(addr netip.Addr) string {
	ne.mu.Lock()
	defer ne.mu.Unlock()
	if an, ok := ne.answered[addr]; ok && time.Now().Before(an.until) {
		return an.name
	}
	return ""
}

// sniGatePort is where, on the node end of a sandbox's link, its gate
// takes the connections redirected to it.
const sniGatePort = 15443

// hasCheckedNames says whether sb's rules check server names (brokered
// rules do).
func hasCheckedNames(sb *sandbox) bool {
	for _, r := range sb.spec.Egress {
		if r.CheckServerName || r.Brokered {
			return true
		}
	}
	return false
}

// brokeredHosts are the hosts of sb's brokered rules.
func brokeredHosts(sb *sandbox) map[string]bool {
	m := map[string]bool{}
	for _, r := range sb.spec.Egress {
		if r.Brokered && r.Host != "" {
			m[r.Host] = true
		}
	}
	return m
}

// ensureGate starts ne's gate when sb's rules need one. Under ne.mu.
func (b *Backend) ensureGate(sb *sandbox, ne *namedEgress) error {
	if ne.gate != nil || !hasCheckedNames(sb) {
		return nil
	}
	n := b.egressNet(sb)
	g, err := snigate.Start(snigate.Options{
		Listen: netip.AddrPortFrom(n.node, sniGatePort),
		Listen6: func() netip.AddrPort {
			if !b.opts.EgressIPv6 {
				return netip.AddrPort{}
			}
			return netip.AddrPortFrom(n.node6, sniGatePort)
		}(),
		Allowed: func(dst netip.AddrPort, name string) bool {
			ne.mu.Lock()
			defer ne.mu.Unlock()
			until, ok := ne.checked[dst][name]
			return ok && time.Now().Before(until)
		},
		Denied:   b.deniedAnswer,
		MaxConns: b.opts.EgressNodeConns,
		Terminate: func(name string) func(net.Conn, []byte, netip.AddrPort) {
			ne.mu.Lock()
			defer ne.mu.Unlock()
			if !ne.brokered[name] || ne.broker == nil {
				return nil
			}
			br := ne.broker
			return func(c net.Conn, hello []byte, dst netip.AddrPort) { br.Serve(c, hello, dst, name) }
		},
		Record: func(dst netip.AddrPort, name, refused string) {
			if refused == "" || b.opts.OnEgressDNS == nil {
				return
			}
			b.opts.OnEgressDNS(egressdns.Decision{Sandbox: sb.spec.ID, Tenant: sb.spec.Tenant, Name: name, Type: egressdns.TypeServerName,
				Result: egressdns.Denied, Error: fmt.Sprintf("connection to %s refused: %s", dst, refused)})
		},
	})
	if err != nil {
		return fmt.Errorf("oci: sandbox %s: its server-name gate: %w", sb.spec.ID, err)
	}
	ne.gate = g
	return nil
}

// openChecked lets TLS connections to addr on ports through the gate,
// for ttl, when they name the host name answered it.
func (ne *namedEgress) openChecked(table string, addr netip.Addr, name string, ports []int32, ttl time.Duration) error {
	if err := openSet(table, "sniPorts", addr, ports, ttl); err != nil {
		return err
	}
	ne.mu.Lock()
	defer ne.mu.Unlock()
	if ne.checked == nil {
		ne.checked = map[netip.AddrPort]map[string]time.Time{}
	}
	now := time.Now()
	for dst, names := range ne.checked { // forget what expired
		for n, until := range names {
			if !now.Before(until) {
				delete(names, n)
			}
		}
		if len(names) == 0 {
			delete(ne.checked, dst)
		}
	}
	for _, p := range ports {
		dst := netip.AddrPortFrom(addr, uint16(p))
		if ne.checked[dst] == nil {
			ne.checked[dst] = map[string]time.Time{}
		}
		ne.checked[dst][name] = now.Add(ttl)
	}
	return nil
}

var resolvers = struct {
	sync.Mutex
	at map[netip.Addr]*namedEgress
}{at: map[netip.Addr]*namedEgress{}}

// hostRules are sb's egress rules by name.
func hostRules(sb *sandbox) egressdns.Policy {
	var p egressdns.Policy
	for _, r := range sb.spec.Egress {
		if r.Host != "" {
			p = append(p, egressdns.Rule{Host: r.Host, Ports: slices.Clone(r.Ports), CheckServerName: r.CheckServerName || r.Brokered})
		}
	}
	return p
}

// hasNamedEgress says whether sb's rules name hosts.
func hasNamedEgress(sb *sandbox) bool { return len(hostRules(sb)) > 0 }

// ensureResolver runs sb's resolver with its current rules, when they
// name hosts; a resolver that runs already takes the new rules at its
// next query. Its link's node end must have its address.
func (b *Backend) ensureResolver(sb *sandbox) error {
	if !hasNamedEgress(sb) {
		return nil
	}
	n := b.egressNet(sb)
	resolvers.Lock()
	defer resolvers.Unlock()
	ne := resolvers.at[n.node]
	if ne != nil && ne.backend == b {
		ne.mu.Lock()
		defer ne.mu.Unlock()
		ne.policy = hostRules(sb)
		// The table was applied anew: its sets are empty.
		ne.checked, ne.answered = nil, nil
		ne.brokered = brokeredHosts(sb)
		ne.broker.Set(credentialsFor(sb))
		return b.ensureGate(sb, ne)
	}
	if ne != nil {
		ne.close()
	}
	upstreams := b.opts.EgressResolvers
	if len(upstreams) == 0 {
		var err error
		if upstreams, err = egressdns.Upstreams(filepath.Join(b.opts.BaseRoot, "etc", "resolv.conf")); err != nil {
			return fmt.Errorf("oci: sandbox %s: the node's resolvers: %w", sb.spec.ID, err)
		}
	}
	ne = &namedEgress{policy: hostRules(sb), brokered: brokeredHosts(sb)}
	br, err := b.startBroker(sb)
	if err != nil {
		return err
	}
	ne.broker = br
	table := n.table
	res, err := egressdns.Start(egressdns.Options{
		Sandbox: sb.spec.ID, Tenant: sb.spec.Tenant,
		Listen:    netip.AddrPortFrom(n.node, 53),
		Upstreams: upstreams,
		Policy: func() egressdns.Policy {
			ne.mu.Lock()
			defer ne.mu.Unlock()
			return ne.policy
		},
		Open: func(addr netip.Addr, name string, ports []int32, all bool, ttl time.Duration) error {
			if err := openNamed(table, addr, ports, all, ttl); err != nil {
				return err
			}
			ne.noteAnswer(addr, name, ttl)
			return nil
		},
		OpenChecked: func(addr netip.Addr, name string, ports []int32, ttl time.Duration) error {
			if err := ne.openChecked(table, addr, name, ports, ttl); err != nil {
				return err
			}
			ne.noteAnswer(addr, name, ttl)
			return nil
		},
		Denied:      b.deniedAnswer,
		IPv6:        b.opts.EgressIPv6,
		Record:      b.opts.OnEgressDNS,
		MaxTCPConns: b.opts.EgressNodeConns,
	})
	if err != nil {
		_ = br.Close()
		delete(resolvers.at, n.node)
		return fmt.Errorf("oci: sandbox %s: its resolver: %w", sb.spec.ID, err)
	}
	ne.res = res
	ne.backend = b
	resolvers.at[n.node] = ne
	ne.mu.Lock()
	defer ne.mu.Unlock()
	return b.ensureGate(sb, ne)
}

// close stops ne's resolver, gate and broker.
func (ne *namedEgress) close() {
	_ = ne.res.Close()
	ne.mu.Lock()
	g, br := ne.gate, ne.broker
	ne.gate, ne.broker = nil, nil
	ne.mu.Unlock()
	if g != nil {
		_ = g.Close()
	}
	if br != nil {
		_ = br.Close()
	}
}

// stopResolver stops sb's resolver, if one runs.
func (b *Backend) stopResolver(sb *sandbox) {
	n := b.egressNet(sb)
	resolvers.Lock()
	defer resolvers.Unlock()
	if ne := resolvers.at[n.node]; ne != nil {
		ne.close()
		delete(resolvers.at, n.node)
	}
}

// deniedAnswer says whether an answered address must not be opened: the
// deny list of every rule, the pool and private networks.
func (b *Backend) deniedAnswer(a netip.Addr) bool {
	if a.Is6() {
		if !b.opts.EgressIPv6 || b.opts.EgressPool6.Contains(a) {
			return true
		}
		for _, c := range slices.Concat(alwaysDenied6, b.opts.EgressDeny) {
			if p, err := netip.ParsePrefix(c); err == nil && p.Contains(a) {
				return true
			}
		}
		return false
	}
	if !a.Is4() || b.opts.EgressPool.Contains(a) {
		return true
	}
	for _, c := range slices.Concat(alwaysDenied, privateNets, b.opts.EgressDeny) {
		if p, err := netip.ParsePrefix(c); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}

// openNamed adds addr to table's sets for ttl, renewing an element that
// is there (added, deleted and added again in one transaction, which
// succeeds whether or not it was).
func openNamed(table string, addr netip.Addr, ports []int32, all bool, ttl time.Duration) error {
	if all {
		return openSet(table, "namedAll", addr, nil, ttl)
	}
	return openSet(table, "namedPorts", addr, ports, ttl)
}

// openSet adds addr (with each of ports, when given) to table's set for
// ttl, renewing what is there.
func openSet(table, set string, addr netip.Addr, ports []int32, ttl time.Duration) error {
	if addr.Is6() {
		set += "6" // the family's own set
	}
	secs := max(int(ttl/time.Second), 1)
	var elems, keys []string
	if ports == nil {
		elems, keys = []string{fmt.Sprintf("%s timeout %ds", addr, secs)}, []string{addr.String()}
	}
	for _, p := range ports {
		k := addr.String() + " . " + strconv.Itoa(int(p))
		keys = append(keys, k)
		elems = append(elems, fmt.Sprintf("%s timeout %ds", k, secs))
	}
	if len(keys) == 0 {
		return nil
	}
	script := fmt.Sprintf("add element inet %[1]s %[2]s { %[3]s }\ndelete element inet %[1]s %[2]s { %[4]s }\nadd element inet %[1]s %[2]s { %[3]s }\n",
		table, set, strings.Join(elems, ", "), strings.Join(keys, ", "))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("opening %s: nft: %w: %s", addr, err, bytes.TrimSpace(out))
	}
	return nil
}

// namedRuleset is the part of sb's table for egress by name: its sets,
// and what the forward chain lets out through them (after the deny
// rules).
func namedSets(v6 bool) string {
	sets := fmt.Sprintf("\tset namedPorts {\n\t\ttype ipv4_addr . inet_service\n\t\tflags timeout\n\t\tsize %d\n\t}\n"+
		"\tset namedAll {\n\t\ttype ipv4_addr\n\t\tflags timeout\n\t\tsize %d\n\t}\n"+
		"\tset sniPorts {\n\t\ttype ipv4_addr . inet_service\n\t\tflags timeout\n\t\tsize %d\n\t}\n", maxNamedPorts, maxNamedAll, maxNamedPorts)
	if v6 {
		// The same for the IPv6 answers, in sets of their own (a set
		// holds one family).
		sets += strings.NewReplacer("ipv4_addr", "ipv6_addr", "namedPorts", "namedPorts6", "namedAll", "namedAll6", "sniPorts", "sniPorts6").Replace(sets)
	}
	return sets
}

// resolvConf is the /etc/resolv.conf of a sandbox with egress by name:
// its resolver, and nothing else.
func (b *Backend) resolvConf(sb *sandbox) string {
	return "# Generated by the playground agent: the sandbox's resolver, which answers the names its egress rules allow.\nnameserver " +
		b.egressNet(sb).node.String() + "\noptions timeout:2 attempts:2\n"
}

// validHostPattern says whether h is a lower-case DNS name, or "*." and
// one: what the Tenant's CRD admits.
func validHostPattern(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// EgressUsage implements backend.EgressMeter: the counters of every
// egress sandbox's table, read in one listing.
func (b *Backend) EgressUsage(ctx context.Context) ([]backend.EgressUsage, error) {
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	byTable := map[string]*backend.EgressUsage{}
	for _, e := range entries {
		sb, err := b.load(e.Name())
		if err != nil || !backend.FileExists(b.egressNet(sb).netns) {
			continue
		}
		byTable[b.egressNet(sb).table] = &backend.EgressUsage{SandboxID: sb.spec.ID, Tenant: sb.spec.Tenant}
	}
	if len(byTable) == 0 {
		return nil, nil
	}
	out, err := exec.CommandContext(ctx, "nft", "-j", "list", "counters").Output()
	if err != nil {
		return nil, fmt.Errorf("nft list counters: %w", err)
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Family, Name, Table string
				Packets, Bytes      uint64
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("nft list counters: %w", err)
	}
	for _, o := range doc.Nftables {
		c := o.Counter
		if c == nil || c.Family != "inet" {
			continue
		}
		u := byTable[c.Table]
		if u == nil {
			continue
		}
		switch c.Name {
		case "out":
			u.BytesOut = c.Bytes
		case "in":
			u.BytesIn = c.Bytes
		case "allowed":
			u.Allowed = c.Packets
		case "denied":
			u.Denied = c.Packets
		}
	}
	usage := make([]backend.EgressUsage, 0, len(byTable))
	for _, u := range byTable {
		usage = append(usage, *u)
	}
	return usage, nil
}
