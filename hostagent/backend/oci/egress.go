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
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// An egress sandbox has a network namespace of its own that the agent
// creates (a file under the sandbox's directory, so that it outlives the
// agent and runc joins it), joined to the node by a veth pair on a /30 of
// Options.EgressPool, with a default route through the node and masquerade
// NAT. One nftables table per sandbox lets its packets out only to the
// Spec's Egress list and drops everything else, the node itself included.
// The namespace is owned by the node's user namespace, not the sandbox's:
// the sandbox's root cannot change its addresses, routes or firewall.

// Limits on one sandbox's egress list, so a spec cannot grow the ruleset
// without bound.
const (
	maxEgressRules = 64
	maxEgressPorts = 64
)

// alwaysDenied are destinations no egress rule opens: this host's
// loopback, link-local (cloud metadata at 169.254.169.254), multicast and
// reserved ranges. The pool itself (other sandboxes) is added per backend.
var alwaysDenied = []string{"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4"}

// alwaysDenied6 are the IPv6 destinations no egress rule opens: the
// unspecified and loopback addresses, IPv4 inside IPv6 (compatible,
// mapped, translated, NAT64, 6to4, Teredo: ways back into IPv4 space),
// discard and documentation ranges, unique local (fd00:ec2::254, a
// cloud's metadata, among them) and link-local addresses, multicast.
var alwaysDenied6 = []string{"::/128", "::1/128", "::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
	"2001::/32", "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "ff00::/8"}

// validateEgress checks a Spec's egress list: IPv4 CIDRs, ports 1-65535.
func validateEgress(rules []backend.EgressRule) error {
	if len(rules) > maxEgressRules {
		return fmt.Errorf("oci: %d egress rules, over the limit of %d", len(rules), maxEgressRules)
	}
	for _, r := range rules {
		if r.CheckServerName && (r.Host == "" || len(r.Ports) == 0) {
			return fmt.Errorf("oci: egress rule %s%s checks the server name: it needs a host and ports", r.CIDR, r.Host)
		}
		if r.Host != "" {
			if r.CIDR != "" || !validHostPattern(r.Host) {
				return fmt.Errorf("oci: egress host %q is not a lower-case DNS name or *.domain, alone in its rule", r.Host)
			}
			if len(r.Ports) > maxEgressPorts {
				return fmt.Errorf("oci: egress rule %s has %d ports, over the limit of %d", r.Host, len(r.Ports), maxEgressPorts)
			}
			for _, port := range r.Ports {
				if port < 1 || port > 65535 {
					return fmt.Errorf("oci: egress port %d of %s is not in 1-65535", port, r.Host)
				}
			}
			continue
		}
		p, err := netip.ParsePrefix(r.CIDR)
		if err != nil || p.Addr().Is4In6() || p != p.Masked() {
			return fmt.Errorf("oci: egress CIDR %q is not a network address with a prefix length (such as 10.0.0.0/8 or 2001:db8::/32)", r.CIDR)
		}
		if len(r.Ports) > maxEgressPorts {
			return fmt.Errorf("oci: egress rule %s has %d ports, over the limit of %d", r.CIDR, len(r.Ports), maxEgressPorts)
		}
		for _, port := range r.Ports {
			if port < 1 || port > 65535 {
				return fmt.Errorf("oci: egress port %d of %s is not in 1-65535", port, r.CIDR)
			}
		}
	}
	return nil
}

// egressNet is one sandbox's share of the pool and the names derived from
// it. The index is unique per state directory (it comes from the ID-map
// slot) and, through a hash of the state directory, rarely shared between
// agents of one host (tests).
type egressNet struct {
	index   uint32
	subnet  netip.Prefix
	node    netip.Addr // the node's end, the sandbox's gateway
	guest   netip.Addr // the sandbox's eth0
	hostDev string     // the veth end on the node
	table   string     // the nftables table (family inet)
	netns   string     // the namespace file
	// With IPv6 (Options.EgressIPv6): the /120 of EgressPool6 at the same
	// index, its first address the node's end, its second the sandbox's.
	subnet6       netip.Prefix
	node6, guest6 netip.Addr
}

func (b *Backend) egressNet(sb *sandbox) egressNet {
	pool := b.opts.EgressPool
	subnets := uint32(1) << (30 - pool.Bits()) // /30s in the pool
	h := fnv.New32a()
	h.Write([]byte(b.opts.StateDir))
	idx := (h.Sum32()%256*uint32(b.opts.IDMapSlots) + uint32(sb.slot)) % subnets
	base := pool.Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += idx * 4
	at := func(off uint32) netip.Addr {
		x := v + off
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	name := fmt.Sprintf("pge%06x", idx)
	b16 := b.opts.EgressPool6.Addr().As16()
	low := binary.BigEndian.Uint64(b16[8:]) + uint64(idx)<<8
	at6 := func(off uint64) netip.Addr {
		a := b16
		binary.BigEndian.PutUint64(a[8:], low+off)
		return netip.AddrFrom16(a)
	}
	return egressNet{
		index:   idx,
		subnet:  netip.PrefixFrom(at(0), 30),
		node:    at(1),
		guest:   at(2),
		hostDev: name,
		table:   "playground_" + name,
		netns:   filepath.Join(sb.dir, "netns"),
		subnet6: netip.PrefixFrom(at6(0), 120),
		node6:   at6(1),
		guest6:  at6(2),
	}
}

// hasEgress says whether sb runs in an egress namespace.
func hasEgress(sb *sandbox) bool { return len(sb.spec.Egress) > 0 }

// setupEgress creates or completes sb's namespace, veth pair, addresses
// and routes, and (re)applies its ruleset. Every step is idempotent, so an
// agent that restarts reapplies it over what is there.
func (b *Backend) setupEgress(ctx context.Context, sb *sandbox) error {
	n := b.egressNet(sb)
	if err := createNetns(n.netns); err != nil {
		return fmt.Errorf("oci: sandbox %s: network namespace: %w", sb.spec.ID, err)
	}
	// The ruleset goes first: the link never carries a packet unfiltered.
	if err := b.applyEgressRules(ctx, sb); err != nil {
		return err
	}
	if err := enableForwarding(); err != nil {
		return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.hostDev)); err != nil {
		// A half-made pair (an agent killed in between) is made anew.
		_ = b.inNetns(ctx, n.netns, "ip", "link", "del", "eth0")
		if err := b.inNetns(ctx, n.netns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", n.hostDev, "netns", strconv.Itoa(os.Getpid())); err != nil {
			return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
		}
	}
	if err := b.nodeEnd(ctx, sb); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "replace", n.guest.String() + "/30", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "replace", "default", "via", n.node.String()},
	}
	if b.opts.EgressIPv6 {
		// nodad: the /120 is the pair's alone, and an address in
		// duplicate detection cannot be used for a second or so.
		steps = append(steps,
			[]string{"ip", "-6", "addr", "replace", n.guest6.String() + "/120", "dev", "eth0", "nodad"},
			[]string{"ip", "-6", "route", "replace", "default", "via", n.node6.String()})
	}
	for _, s := range steps {
		if err := b.inNetns(ctx, n.netns, s...); err != nil {
			return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
		}
	}
	b.watchFlows(sb)
	return b.ensureResolver(sb)
}

// nodeEnd gives the node's end of sb's link its addresses and brings it
// up; without IPv6 egress, IPv6 stays off there.
func (b *Backend) nodeEnd(ctx context.Context, sb *sandbox) error {
	n := b.egressNet(sb)
	v6 := "1"
	if b.opts.EgressIPv6 {
		v6 = "0"
	}
	_ = os.WriteFile(filepath.Join("/proc/sys/net/ipv6/conf", n.hostDev, "disable_ipv6"), []byte(v6), 0o644)
	steps := [][]string{{"ip", "addr", "replace", n.node.String() + "/30", "dev", n.hostDev}}
	if b.opts.EgressIPv6 {
		if err := enableForwarding6(); err != nil {
			return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
		}
		steps = append(steps, []string{"ip", "-6", "addr", "replace", n.node6.String() + "/120", "dev", n.hostDev, "nodad"})
	}
	steps = append(steps, []string{"ip", "link", "set", n.hostDev, "up"})
	for _, s := range steps {
		if err := runCmd(ctx, s...); err != nil {
			return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
		}
	}
	return nil
}

// reattachEgress brings a running sandbox's network up to date. It keeps
// the namespace it started in: one that started without egress gets it at
// its next start, one that had egress and lost its list lets nothing out.
// An agent whose own namespace was renewed (a restarted pod) lost the
// namespace's mount and the veth's node end: both are made again, the
// namespace from the container's init.
func (b *Backend) reattachEgress(ctx context.Context, sb *sandbox, pid int) error {
	n := b.egressNet(sb)
	if !backend.FileExists(n.netns) {
		return nil // never had egress
	}
	if !hasEgress(sb) {
		return b.applyEgressRules(ctx, sb)
	}
	if !isNetns(n.netns) && pid > 0 {
		if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/net", pid), n.netns, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("oci: sandbox %s: network namespace of its init: %w", sb.spec.ID, err)
		}
	}
	if backend.IsolationOf(sb.spec) == backend.IsolationGVisor {
		return b.reattachGVisorEgress(ctx, sb)
	}
	return b.setupEgress(ctx, sb)
}

// reattachGVisorEgress renews the node's side of a running gVisor
// sandbox's egress: its ruleset, forwarding, the address of the veth's
// node end. The namespace's side is gVisor's: its network stack took eth0's
// address and routes when it started and removed them from the namespace,
// so that the node's kernel would not answer for it; setting them again
// would have the node's kernel reset gVisor's connections. A veth pair
// that is gone (a new agent pod's namespace) cannot be handed to a running
// gVisor stack: the sandbox must be restarted.
func (b *Backend) reattachGVisorEgress(ctx context.Context, sb *sandbox) error {
	n := b.egressNet(sb)
	if err := b.applyEgressRules(ctx, sb); err != nil {
		return err
	}
	if err := enableForwarding(); err != nil {
		return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.hostDev)); err != nil {
		return fmt.Errorf("oci: sandbox %s: its network link %s to the node is gone, and gVisor cannot take a new one while it runs: restart the sandbox (kubectl playground tenant restart)", sb.spec.ID, n.hostDev)
	}
	if err := b.nodeEnd(ctx, sb); err != nil {
		return err
	}
	b.watchFlows(sb)
	return b.ensureResolver(sb)
}

// applyEgressRules replaces sb's nftables table in one transaction. With
// an empty egress list (a spec changed to none while the container runs
// in its egress namespace) nothing is let out.
func (b *Backend) applyEgressRules(ctx context.Context, sb *sandbox) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(b.egressRuleset(sb))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("oci: sandbox %s: nft: %w: %s", sb.spec.ID, err, bytes.TrimSpace(out))
	}
	return nil
}

// egressRuleset renders sb's table as an nft script that replaces it. Only
// parsed values reach the script: prefixes printed back from netip, ports
// as numbers, the device name quoted. Rules with an invalid CIDR (which
// validateEgress refuses before) are left out, so they open nothing.
func (b *Backend) egressRuleset(sb *sandbox) string {
	n := b.egressNet(sb)
	dev := strconv.Quote(n.hostDev)
	var r strings.Builder
	fmt.Fprintf(&r, "table inet %s\ndelete table inet %s\ntable inet %s {\n", n.table, n.table, n.table)
	v6 := b.opts.EgressIPv6
	r.WriteString(namedSets(v6))
	// What the sandbox sent and received on the flows let out, the flows
	// let out and the packets dropped (EgressUsage reads them).
	r.WriteString("\tcounter out { }\n\tcounter in { }\n\tcounter allowed { }\n\tcounter denied { }\n")
	// The destinations of refused attempts, each counting its packets,
	// for a minute after the last (egressflows.go reads them).
	fmt.Fprintf(&r, "\tset deniedPorts {\n\t\ttype ipv4_addr . inet_proto . inet_service\n\t\tflags dynamic,timeout\n\t\ttimeout 60s\n\t\tsize %d\n\t}\n", maxDeniedPorts)
	if v6 {
		fmt.Fprintf(&r, "\tset deniedPorts6 {\n\t\ttype ipv6_addr . inet_proto . inet_service\n\t\tflags dynamic,timeout\n\t\ttimeout 60s\n\t\tsize %d\n\t}\n", maxDeniedPorts)
	}
	// Nothing from the sandbox reaches the agent's namespace itself (its
	// addresses, the agent's port, node-local services) but its resolver,
	// when its rules name hosts.
	fmt.Fprintf(&r, "\tchain input {\n\t\ttype filter hook input priority -10; policy accept;\n")
	// The connections the sandbox holds to the agent's listeners on its
	// link, accepted or waiting in their queues, are bounded here too: a
	// second line under the listeners' own bound (EgressNodeConns), which
	// holds whatever the agent does.
	fmt.Fprintf(&r, "\t\tiifname %s meta l4proto tcp ct state new ct count over %d reject with tcp reset\n", dev, 4*b.opts.EgressNodeConns)
	if hasNamedEgress(sb) {
		fmt.Fprintf(&r, "\t\tiifname %s ip daddr %s meta l4proto { tcp, udp } th dport 53 accept\n", dev, n.node)
	}
	if hasCheckedNames(sb) {
		fmt.Fprintf(&r, "\t\tiifname %s ip daddr %s tcp dport %d accept\n", dev, n.node, sniGatePort)
		if v6 {
			fmt.Fprintf(&r, "\t\tiifname %s ip6 daddr %s tcp dport %d accept\n", dev, n.node6, sniGatePort)
		}
	}
	if v6 {
		// Neighbour discovery between the sandbox and its gateway.
		fmt.Fprintf(&r, "\t\tiifname %s ip6 daddr { %s, fe80::/10, ff02::1:ff00:0/104 } icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept\n", dev, n.node6)
	}
	fmt.Fprintf(&r, "\t\tiifname %s drop\n\t}\n", dev)
	fmt.Fprintf(&r, "\tchain forward {\n\t\ttype filter hook forward priority -10; policy accept;\n")
	// Nothing reaches the sandbox but answers to what it opened.
	fmt.Fprintf(&r, "\t\toifname %s ct state established,related counter name \"in\" accept\n\t\toifname %s drop\n", dev, dev)
	denied := []string{b.opts.EgressPool.String()}
	for _, c := range append(slices.Clone(alwaysDenied), b.opts.EgressDeny...) {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			denied = append(denied, p.Masked().String())
		}
	}
	const noted = "meta l4proto { tcp, udp } update @deniedPorts { ip daddr . meta l4proto . th dport counter }"
	fmt.Fprintf(&r, "\t\tiifname %s ip daddr { %s } %s\n", dev, strings.Join(denied, ", "), noted)
	fmt.Fprintf(&r, "\t\tiifname %s ip daddr { %s } counter name \"denied\" drop\n", dev, strings.Join(denied, ", "))
	const noted6 = "meta l4proto { tcp, udp } update @deniedPorts6 { ip6 daddr . meta l4proto . th dport counter }"
	if v6 {
		denied6 := []string{b.opts.EgressPool6.String()}
		for _, c := range append(slices.Clone(alwaysDenied6), b.opts.EgressDeny...) {
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is6() {
				denied6 = append(denied6, p.Masked().String())
			}
		}
		fmt.Fprintf(&r, "\t\tiifname %s ip6 daddr { %s } %s\n", dev, strings.Join(denied6, ", "), noted6)
		fmt.Fprintf(&r, "\t\tiifname %s ip6 daddr { %s } counter name \"denied\" drop\n", dev, strings.Join(denied6, ", "))
	}
	// A flow let out goes on when what let it out expires (an answer's
	// time to live) or is removed: only new connections are checked.
	fmt.Fprintf(&r, "\t\tiifname %s ct state established,related counter name \"out\" accept\n", dev)
	fmt.Fprintf(&r, "\t\tiifname %s meta l4proto { tcp, udp } ip daddr . th dport @namedPorts counter name \"allowed\" accept\n", dev)
	fmt.Fprintf(&r, "\t\tiifname %s ip daddr @namedAll counter name \"allowed\" accept\n", dev)
	if v6 {
		fmt.Fprintf(&r, "\t\tiifname %s meta l4proto { tcp, udp } ip6 daddr . th dport @namedPorts6 counter name \"allowed\" accept\n", dev)
		fmt.Fprintf(&r, "\t\tiifname %s ip6 daddr @namedAll6 counter name \"allowed\" accept\n", dev)
	}
	for _, rule := range sb.spec.Egress {
		p, err := netip.ParsePrefix(rule.CIDR)
		// An IPv6 network opens nothing where the node gives no IPv6.
		if rule.Host != "" || err != nil || (p.Addr().Is6() && !v6) {
			continue
		}
		cidr, family := p.Masked().String(), "ip"
		if p.Addr().Is6() {
			family = "ip6"
		}
		if len(rule.Ports) == 0 {
			fmt.Fprintf(&r, "\t\tiifname %s %s daddr %s counter name \"allowed\" accept\n", dev, family, cidr)
			continue
		}
		ports := slices.Clone(rule.Ports)
		slices.Sort(ports)
		var list []string
		for _, p := range slices.Compact(ports) {
			if p >= 1 && p <= 65535 {
				list = append(list, strconv.Itoa(int(p)))
			}
		}
		if len(list) == 0 {
			continue
		}
		fmt.Fprintf(&r, "\t\tiifname %s %s daddr %s meta l4proto { tcp, udp } th dport { %s } counter name \"allowed\" accept\n", dev, family, cidr, strings.Join(list, ", "))
	}
	fmt.Fprintf(&r, "\t\tiifname %s %s\n", dev, noted)
	if v6 {
		fmt.Fprintf(&r, "\t\tiifname %s %s\n", dev, noted6)
	}
	fmt.Fprintf(&r, "\t\tiifname %s counter name \"denied\" drop\n\t}\n", dev)
	// Connections to the addresses of names whose server name is checked
	// go to the sandbox's gate (snigate), which lets them through itself.
	fmt.Fprintf(&r, "\tchain prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n")
	fmt.Fprintf(&r, "\t\tiifname %s meta l4proto tcp ip daddr . th dport @sniPorts dnat ip to %s:%d\n", dev, n.node, sniGatePort)
	if v6 {
		fmt.Fprintf(&r, "\t\tiifname %s meta l4proto tcp ip6 daddr . th dport @sniPorts6 dnat ip6 to [%s]:%d\n", dev, n.node6, sniGatePort)
	}
	r.WriteString("\t}\n")
	fmt.Fprintf(&r, "\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\t\tip saddr %s oifname != %s masquerade\n", n.subnet, dev)
	if v6 {
		fmt.Fprintf(&r, "\t\tip6 saddr %s oifname != %s masquerade\n", n.subnet6, dev)
	}
	r.WriteString("\t}\n}\n")
	return r.String()
}

// teardownEgress removes sb's ruleset, veth pair and namespace, whichever
// exist. The caller has removed the container.
func (b *Backend) teardownEgress(ctx context.Context, sb *sandbox) error {
	n := b.egressNet(sb)
	b.stopResolver(sb)
	b.unwatchFlows(sb)
	if !backend.FileExists(n.netns) {
		// Made first and removed last: without it there is nothing, and
		// a sandbox that never had egress needs no nft on the node.
		return nil
	}
	var errs []error
	if out, err := exec.CommandContext(ctx, "nft", "delete", "table", "inet", n.table).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("No such file")) {
		errs = append(errs, fmt.Errorf("nft: %w: %s", err, bytes.TrimSpace(out)))
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.hostDev)); err == nil {
		errs = append(errs, runCmd(ctx, "ip", "link", "del", n.hostDev))
	}
	errs = append(errs, removeNetns(n.netns))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("oci: sandbox %s: removing its network: %w", sb.spec.ID, err)
	}
	return nil
}

// isNetns says whether path is a mounted network namespace.
func isNetns(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// createNetns makes path a new network namespace, kept by a bind mount.
func createNetns(path string) error {
	if isNetns(path) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread enters the new namespace and leaves it; if it cannot
		// leave, it stays locked and ends with the goroutine.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		err = unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		if err != nil {
			err = fmt.Errorf("bind mount: %w", err)
		}
		errc <- err
	}()
	return <-errc
}

// removeNetns unmounts and removes a namespace file; the namespace itself
// ends with its last user.
func removeNetns(path string) error {
	if isNetns(path) {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// enableForwarding turns on IPv4 forwarding, without which nothing is
// routed out of a sandbox (Kubernetes nodes have it on already).
func enableForwarding() error {
	const p = "/proc/sys/net/ipv4/ip_forward"
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(data)) == "1" {
		return nil
	}
	return os.WriteFile(p, []byte("1"), 0o644)
}

// enableForwarding6 turns IPv6 forwarding on. Forwarding makes the
// kernel ignore router advertisements on interfaces that take them
// (accept_ra 1), so those are set to take them even so (2) first: a node
// whose IPv6 route comes from advertisements keeps it.
func enableForwarding6() error {
	const p = "/proc/sys/net/ipv6/conf/all/forwarding"
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("IPv6 forwarding: %w", err)
	}
	if strings.TrimSpace(string(data)) == "1" {
		return nil
	}
	ifaces, _ := filepath.Glob("/proc/sys/net/ipv6/conf/*/accept_ra")
	for _, f := range ifaces {
		if v, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(v)) == "1" {
			_ = os.WriteFile(f, []byte("2"), 0o644)
		}
	}
	return os.WriteFile(p, []byte("1"), 0o644)
}

// HasIPv6Route says whether this network namespace has an IPv6 default
// route through a gateway: where an agent offers egress over IPv6
// (--egress-ipv6=auto).
func HasIPv6Route() bool {
	data, err := os.ReadFile("/proc/net/ipv6_route")
	if err != nil {
		return false
	}
	zero := strings.Repeat("0", 32)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// Destination ::/0, a gateway, not rejected (RTF_REJECT 0x0200),
		// not on loopback.
		if len(f) == 10 && f[0] == zero && f[1] == "00" && f[4] != zero && f[9] != "lo" {
			if flags, err := strconv.ParseUint(f[8], 16, 32); err == nil && flags&0x0200 == 0 {
				return true
			}
		}
	}
	return false
}

// inNetns runs a command in the network namespace at path.
func (b *Backend) inNetns(ctx context.Context, path string, args ...string) error {
	return runCmd(ctx, append([]string{"nsenter", "--net=" + path}, args...)...)
}

func runCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
