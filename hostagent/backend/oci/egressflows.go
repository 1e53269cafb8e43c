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
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"

	"github.com/playground-dev/playground/hostagent/egressdns"
)

// Egress on record, one flow at a time. The connections a sandbox makes
// out are forwarded, and so tracked, in the agent's network namespace: a
// process-wide watcher of the kernel's connection tracking (ctnetlink)
// takes each flow from a sandbox's address when it ends, with its bytes
// both ways (the agent turns on nf_conntrack_acct and
// nf_conntrack_timestamp there), and records it. Connection attempts the
// table refuses never become flows: the forward chain's refusals add
// their destination (address, protocol, port) to a set of the sandbox's
// table, deniedPorts, whose elements count their packets and expire a
// minute after the last; the watcher reads those of the tables whose
// "denied" counter grew, every deniedPoll, and records each destination
// once per new attempts.

// deniedPoll is how often refused destinations are read.
const deniedPoll = 5 * time.Second

// maxDeniedPorts bounds a sandbox's set of refused destinations.
const maxDeniedPorts = 1024

// flowOwner is whose flows come from an address.
type flowOwner struct {
	id, tenant, table string
	pool, pool6       netip.Prefix
	v6                bool
	// node is the node end of the sandbox's link (its resolver's key);
	// cidrs its rules by network, which name what let a flow out.
	node   netip.Addr
	cidrs  []string
	record func(egressdns.Decision)
}

var flows = struct {
	sync.Mutex
	owners  map[netip.Addr]flowOwner
	started bool
	// denied are, by table, the packets last seen of each refused
	// destination and of the table's "denied" counter.
	denied map[string]*deniedSeen
}{owners: map[netip.Addr]flowOwner{}, denied: map[string]*deniedSeen{}}

type deniedSeen struct {
	total uint64
	dst   map[string]uint64
}

// watchFlows records sb's flows from now on, starting the process's
// watcher if it does not run.
func (b *Backend) watchFlows(sb *sandbox) {
	if b.opts.OnEgressDNS == nil {
		return
	}
	n := b.egressNet(sb)
	// Set at every setup, as forwarding is: another may have turned them
	// off since. The connection tracker is loaded by the sandbox's table
	// (ct state).
	for _, s := range []string{"nf_conntrack_acct", "nf_conntrack_timestamp"} {
		p := "/proc/sys/net/netfilter/" + s
		if v, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(v)) != "1" {
			_ = os.WriteFile(p, []byte("1"), 0o644)
		}
	}
	flows.Lock()
	defer flows.Unlock()
	o := flowOwner{id: sb.spec.ID, tenant: sb.spec.Tenant, table: n.table, pool: b.opts.EgressPool, pool6: b.opts.EgressPool6, v6: b.opts.EgressIPv6,
		node: n.node, record: b.opts.OnEgressDNS}
	for _, r := range sb.spec.Egress {
		if r.CIDR != "" {
			o.cidrs = append(o.cidrs, r.CIDR)
		}
	}
	flows.owners[n.guest] = o
	if o.v6 {
		flows.owners[n.guest6] = o
	}
	if flows.started {
		return
	}
	flows.started = true
	go watchConntrack()
	go pollDenied()
}

// unwatchFlows stops recording sb's flows.
func (b *Backend) unwatchFlows(sb *sandbox) {
	n := b.egressNet(sb)
	flows.Lock()
	defer flows.Unlock()
	if o, ok := flows.owners[n.guest]; ok && o.table == n.table {
		delete(flows.owners, n.guest)
		delete(flows.denied, n.table)
	}
	if o, ok := flows.owners[n.guest6]; ok && o.table == n.table {
		delete(flows.owners, n.guest6)
	}
}

func ownerOf(a netip.Addr) (flowOwner, bool) {
	flows.Lock()
	defer flows.Unlock()
	o, ok := flows.owners[a.Unmap()]
	return o, ok
}

// watchConntrack records ended flows for as long as the process runs,
// listening again when the kernel's socket fails.
func watchConntrack() {
	for {
		err := listenConntrack()
		if err == nil {
			return
		}
		time.Sleep(5 * time.Second)
	}
}

func listenConntrack() error {
	c, err := conntrack.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	// A burst the watcher cannot read loses events, not the socket.
	_ = c.SetOption(netlink.NoENOBUFS, true)
	_ = c.SetReadBuffer(4 << 20)
	query, err := conntrack.Dial(nil)
	if err != nil {
		return err
	}
	defer query.Close()
	events := make(chan conntrack.Event, 1024)
	errs, err := c.Listen(events, 1, []netfilter.NetlinkGroup{netfilter.GroupCTUpdate, netfilter.GroupCTDestroy})
	if err != nil {
		return err
	}
	closed := map[uint32]bool{} // TCP flows recorded as they closed
	for {
		select {
		case err := <-errs:
			if err == nil {
				err = errors.New("conntrack events ended")
			}
			return err
		case ev := <-events:
			recordFlow(query, ev, closed)
		}
	}
}

// TCP states of the connection tracker (nf_conntrack_tcp.h) at which a
// connection has closed: its entry lingers (two minutes in TIME_WAIT), so
// it is recorded then rather than when the entry ends.
const (
	tcpTimeWait = 7
	tcpClose    = 8
)

// maxClosed bounds the TCP flows remembered as recorded.
const maxClosed = 65536

// recordFlow records the flow of ev if a sandbox opened it and it ended:
// a TCP connection when it closes (its bytes read then), any other flow
// when its entry ends.
func recordFlow(query *conntrack.Conn, ev conntrack.Event, closed map[uint32]bool) {
	f := ev.Flow
	if f == nil {
		return
	}
	o, ok := ownerOf(f.TupleOrig.IP.SourceAddress)
	if dst := f.TupleOrig.IP.DestinationAddress.Unmap(); !ok || o.pool.Contains(dst) || o.pool6.Contains(dst) {
		return // not a sandbox's, or to its node end (its resolver)
	}
	tcp := f.TupleOrig.Proto.Protocol == 6
	switch ev.Type {
	case conntrack.EventUpdate:
		if !tcp || f.ProtoInfo.TCP == nil || (f.ProtoInfo.TCP.State != tcpTimeWait && f.ProtoInfo.TCP.State != tcpClose) || closed[f.ID] {
			return
		}
		if len(closed) >= maxClosed {
			clear(closed)
		}
		closed[f.ID] = true
		if now, err := query.Get(*f); err == nil {
			f = &now
		}
	case conntrack.EventDestroy:
		if closed[f.ID] {
			delete(closed, f.ID)
			return
		}
	default:
		return
	}
	// The original destination: where the sandbox asked to go, also for
	// a connection redirected to its gate or broker.
	d := egressdns.Decision{Sandbox: o.id, Tenant: o.tenant, Type: egressdns.TypeFlow, Result: egressdns.Allowed,
		Dst: netip.AddrPortFrom(f.TupleOrig.IP.DestinationAddress.Unmap(), f.TupleOrig.Proto.DestinationPort), Proto: protoName(f.TupleOrig.Proto.Protocol),
		BytesOut: int64(f.CountersOrig.Bytes), BytesIn: int64(f.CountersReply.Bytes)}
	d.Name, d.Rule = o.ruleOf(d.Dst.Addr())
	if !f.Timestamp.Start.IsZero() {
		end := f.Timestamp.Stop
		if end.IsZero() {
			end = time.Now()
		}
		d.Duration = end.Sub(f.Timestamp.Start)
	}
	o.record(d)
}

// ruleOf says what let a flow to dst out: the name whose answer opened
// it ("host NAME"), or the network of a rule ("cidr NET").
func (o flowOwner) ruleOf(dst netip.Addr) (name, rule string) {
	resolvers.Lock()
	ne := resolvers.at[o.node]
	resolvers.Unlock()
	if ne != nil {
		if name = ne.nameOf(dst); name != "" {
			return name, "host " + name
		}
	}
	for _, c := range o.cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Contains(dst) {
			return "", "cidr " + c
		}
	}
	return "", ""
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	}
	return "other"
}

// pollDenied reads, every deniedPoll, the refused destinations of the
// tables whose "denied" counter grew, for as long as the process runs.
func pollDenied() {
	for {
		time.Sleep(deniedPoll)
		readDenied()
	}
}

func readDenied() {
	flows.Lock()
	tables := map[string]flowOwner{}
	for _, o := range flows.owners {
		tables[o.table] = o
	}
	flows.Unlock()
	if len(tables) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nft", "-j", "list", "counters").Output()
	if err != nil {
		return
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Family, Name, Table string
				Packets             uint64
			} `json:"counter"`
		} `json:"nftables"`
	}
	if json.Unmarshal(out, &doc) != nil {
		return
	}
	for _, e := range doc.Nftables {
		c := e.Counter
		if c == nil || c.Family != "inet" || c.Name != "denied" {
			continue
		}
		o, ok := tables[c.Table]
		if !ok {
			continue
		}
		flows.Lock()
		seen := flows.denied[c.Table]
		if seen == nil {
			seen = &deniedSeen{dst: map[string]uint64{}}
			flows.denied[c.Table] = seen
		}
		grew := c.Packets != seen.total
		seen.total = c.Packets
		flows.Unlock()
		if grew {
			readDeniedSet(ctx, o, seen)
		}
	}
}

// readDeniedSet records the destinations of o's table refused since they
// were last read.
func readDeniedSet(ctx context.Context, o flowOwner, seen *deniedSeen) {
	sets := []string{"deniedPorts"}
	if o.v6 {
		sets = append(sets, "deniedPorts6")
	}
	type deniedElem struct {
		Elem struct {
			Val struct {
				Concat []any `json:"concat"`
			} `json:"val"`
			Counter struct{ Packets uint64 } `json:"counter"`
		} `json:"elem"`
	}
	var elems []deniedElem
	for _, set := range sets {
		out, err := exec.CommandContext(ctx, "nft", "-j", "list", "set", "inet", o.table, set).Output()
		if err != nil {
			return
		}
		var doc struct {
			Nftables []struct {
				Set *struct {
					Elem []deniedElem `json:"elem"`
				} `json:"set"`
			} `json:"nftables"`
		}
		if json.Unmarshal(out, &doc) != nil {
			return
		}
		for _, e := range doc.Nftables {
			if e.Set != nil {
				elems = append(elems, e.Set.Elem...)
			}
		}
	}
	var records []egressdns.Decision
	flows.Lock()
	current := map[string]uint64{}
	for _, el := range elems {
		v := el.Elem.Val.Concat
		if len(v) != 3 {
			continue
		}
		addr, _ := v[0].(string)
		proto, _ := v[1].(string)
		port, _ := v[2].(float64)
		a, err := netip.ParseAddr(addr)
		if err != nil {
			continue
		}
		key := proto + " " + netip.AddrPortFrom(a, uint16(port)).String()
		n := el.Elem.Counter.Packets
		current[key] = n
		if n > seen.dst[key] {
			records = append(records, egressdns.Decision{Sandbox: o.id, Tenant: o.tenant, Type: egressdns.TypeFlow, Result: egressdns.Denied,
				Dst: netip.AddrPortFrom(a, uint16(port)), Proto: proto, Packets: int64(n - seen.dst[key]),
				Error: "no egress rule allows this destination"})
		}
	}
	seen.dst = current
	flows.Unlock()
	for _, d := range records {
		o.record(d)
	}
}
