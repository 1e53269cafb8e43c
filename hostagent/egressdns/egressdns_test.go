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

package egressdns

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestPolicyMatch(t *testing.T) {
	p := Policy{{Host: "pypi.org", Ports: []int32{443}}, {Host: "*.githubusercontent.com", Ports: []int32{443, 80}}, {Host: "pypi.org", Ports: []int32{80}}, {Host: "any.test"}}
	for _, tc := range []struct {
		name  string
		ok    bool
		all   bool
		ports []int32
	}{
		{"pypi.org", true, false, []int32{80, 443}},
		{"PyPI.org.", true, false, []int32{80, 443}},
		{"files.pypi.org", false, false, nil},
		{"raw.githubusercontent.com", true, false, []int32{80, 443}},
		{"a.b.githubusercontent.com", true, false, []int32{80, 443}},
		{"githubusercontent.com", false, false, nil},
		{"evilgithubusercontent.com", false, false, nil},
		{"any.test", true, true, nil},
		{"other.test", false, false, nil},
	} {
		ports, all, ok := p.Match(tc.name)
		if ok != tc.ok || all != tc.all || !slices.Equal(ports, tc.ports) {
			t.Errorf("Match(%q) = %v, %v, %v; want %v, %v, %v", tc.name, ports, all, ok, tc.ports, tc.all, tc.ok)
		}
	}
}

// zone is a test upstream on loopback.
func zone(t *testing.T, records map[string][]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		rrs, ok := records[q.Question[0].Name]
		if !ok {
			m.SetRcode(q, dns.RcodeNameError)
		}
		for _, r := range rrs {
			rr, err := dns.NewRR(r)
			if err != nil {
				t.Error(err)
				continue
			}
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = s.ActivateAndServe() }()
	t.Cleanup(func() { _ = s.Shutdown() })
	return pc.LocalAddr().String()
}

type opened struct {
	addr  netip.Addr
	ports []int32
	all   bool
	ttl   time.Duration
}

// TestResolver: allowed names are answered and their addresses opened for
// their TTL (clamped); other names are NXDOMAIN and open nothing; an
// allowed name that answers an internal address (directly or through a
// CNAME) has it taken out and not opened; a flood is refused past the
// bound; a rule added applies at the next query.
func TestResolver(t *testing.T) {
	up := zone(t, map[string][]string{
		"allowed.test.": {"allowed.test. 60 IN A 198.51.100.7"},
		"zero.test.":    {"zero.test. 0 IN A 198.51.100.8"},
		"rebind.test.":  {"rebind.test. 60 IN A 127.0.0.1", "rebind.test. 60 IN A 169.254.169.254", "rebind.test. 60 IN A 198.51.100.9"},
		"cdn.test.":     {"cdn.test. 60 IN CNAME internal.corp.", "internal.corp. 60 IN A 10.1.2.3"},
		"other.test.":   {"other.test. 60 IN A 198.51.100.66"},
		"later.test.":   {"later.test. 60 IN A 198.51.100.70"},
	})
	var mu sync.Mutex
	var opens []opened
	var records []Decision
	policy := Policy{{Host: "allowed.test", Ports: []int32{443}}, {Host: "zero.test"}, {Host: "rebind.test"}, {Host: "cdn.test"}}
	r, err := Start(Options{
		Sandbox: "sb", Tenant: "ns/t", Listen: netip.MustParseAddrPort("127.0.0.1:0"), Upstreams: []string{up},
		Policy: func() Policy { mu.Lock(); defer mu.Unlock(); return slices.Clone(policy) },
		Open: func(a netip.Addr, _ string, ports []int32, all bool, ttl time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			opens = append(opens, opened{a, ports, all, ttl})
			return nil
		},
		Denied: func(a netip.Addr) bool {
			return a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsPrivate()
		},
		Record:           func(d Decision) { mu.Lock(); defer mu.Unlock(); records = append(records, d) },
		QueriesPerSecond: 1, Burst: 12,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ask := func(name string, qtype uint16, network string) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		c := &dns.Client{Net: network, Timeout: 5 * time.Second}
		in, _, err := c.Exchange(m, r.Addr().String())
		if err != nil {
			t.Fatalf("%s %s: %v", network, name, err)
		}
		return in
	}
	addrs := func(m *dns.Msg) (out []string) {
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				out = append(out, a.A.String())
			}
		}
		return out
	}
	last := func() opened { mu.Lock(); defer mu.Unlock(); return opens[len(opens)-1] }
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(opens) }

	if m := ask("allowed.test", dns.TypeA, "udp"); m.Rcode != dns.RcodeSuccess || !slices.Equal(addrs(m), []string{"198.51.100.7"}) {
		t.Fatalf("allowed.test: %v", m)
	}
	if o := last(); o.addr != netip.MustParseAddr("198.51.100.7") || !slices.Equal(o.ports, []int32{443}) || o.all || o.ttl != 60*time.Second {
		t.Errorf("opened %+v; want 198.51.100.7 on 443 for 60 s", o)
	}
	if m := ask("Allowed.Test", dns.TypeA, "tcp"); !slices.Equal(addrs(m), []string{"198.51.100.7"}) {
		t.Errorf("over TCP, in other case: %v", m)
	}
	if m := ask("zero.test", dns.TypeA, "udp"); len(addrs(m)) != 1 || last().ttl != 10*time.Second || !last().all {
		t.Errorf("a TTL of 0 opens for the minimum, on every port: %+v", last())
	}
	n := count()
	if m := ask("other.test", dns.TypeA, "udp"); m.Rcode != dns.RcodeNameError || len(m.Answer) != 0 || count() != n {
		t.Errorf("other.test: %v (opened %d more)", m, count()-n)
	}
	if m := ask("rebind.test", dns.TypeA, "udp"); !slices.Equal(addrs(m), []string{"198.51.100.9"}) || last().addr != netip.MustParseAddr("198.51.100.9") {
		t.Errorf("rebind.test answered %v, opened %+v; want only its public address", addrs(m), last())
	}
	n = count()
	if m := ask("cdn.test", dns.TypeA, "udp"); len(addrs(m)) != 0 || count() != n {
		t.Errorf("a CNAME to an internal name answered %v and opened %d", addrs(m), count()-n)
	}
	if m := ask("allowed.test", dns.TypeAAAA, "udp"); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Errorf("AAAA of an allowed name: %v; want an empty answer", m)
	}
	mu.Lock()
	policy = append(policy, Rule{Host: "later.test", Ports: []int32{80}})
	mu.Unlock()
	if m := ask("later.test", dns.TypeA, "udp"); !slices.Equal(addrs(m), []string{"198.51.100.70"}) {
		t.Errorf("a rule added answers at the next query: %v", m)
	}
	refused := 0
	for range 20 {
		if ask("allowed.test", dns.TypeA, "udp").Rcode == dns.RcodeRefused {
			refused++
		}
	}
	if refused == 0 {
		t.Error("a flood past the bound was never refused")
	}
	mu.Lock()
	defer mu.Unlock()
	var denied, rebinds int
	for _, d := range records {
		if d.Tenant != "ns/t" || d.Sandbox != "sb" {
			t.Errorf("a record without its tenant: %+v", d)
		}
		if d.Result == Denied && d.Name == "other.test" {
			denied++
		}
		if d.Name == "rebind.test" && len(d.Refused) == 2 {
			rebinds++
		}
	}
	if denied != 1 || rebinds != 1 {
		t.Errorf("records: %d denials of other.test, %d rebinds refused; want 1 and 1", denied, rebinds)
	}
}

// TestCloseAtOnceFreesPort: a resolver closed as soon as Start returns
// (a sandbox taken over by a new agent at once) gives its port back, so
// that the next resolver on the same address starts, and serves at once.
// A Close that came before the servers began serving used to find them not
// started, close nothing and wait on them for good, the port taken.
func TestCloseAtOnceFreesPort(t *testing.T) {
	// No rule allows a name, so that the upstream (loopback) is never
	// asked and a query is answered NXDOMAIN by the resolver itself.
	opts := Options{
		Sandbox: "sb", Tenant: "ns/t", Listen: netip.MustParseAddrPort("127.0.0.1:0"), Upstreams: []string{"127.0.0.1:1"},
		Policy: func() Policy { return nil },
		Open: func(netip.Addr, string, []int32, bool, time.Duration) error {
			t.Error("a resolver without rules opened an address")
			return nil
		},
		Denied: func(netip.Addr) bool { return true },
	}
	// closeNow closes r and fails the test if Close does not return: a
	// server it did not stop serves, and holds the port, for good, which
	// the next Start then shows.
	closeNow := func(r *Resolver) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = r.Close()
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("Close of the resolver on %s did not return", r.Addr())
		}
	}
	r, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Every later resolver takes the port the first was given.
	opts.Listen = r.Addr()
	closeNow(r)
	for i := range 50 {
		r, err := Start(opts)
		if err != nil {
			t.Fatalf("restart %d on %s after a Close at once: %v", i+1, opts.Listen, err)
		}
		closeNow(r)
	}
	r, err = Start(opts)
	if err != nil {
		t.Fatalf("start on %s after a Close at once: %v", opts.Listen, err)
	}
	defer closeNow(r)
	for _, network := range []string{"udp", "tcp"} {
		m := new(dns.Msg)
		m.SetQuestion("denied.test.", dns.TypeA)
		c := &dns.Client{Net: network, Timeout: 5 * time.Second}
		in, _, err := c.Exchange(m, r.Addr().String())
		if err != nil {
			t.Fatalf("%s query as Start returns: %v", network, err)
		}
		if in.Rcode != dns.RcodeNameError {
			t.Errorf("%s query of a denied name: %s; want NXDOMAIN", network, dns.RcodeToString[in.Rcode])
		}
	}
}

// TestAnswersOnTheChain: of an upstream's answer, only the records on the
// question's CNAME chain are answered and opened, for A and AAAA: an
// address of another name beside an allowed name's CNAME (the attack: an
// upstream answering "allowed. CNAME x." with "evil. A 198.51.100.66"),
// an address of a name part-way along the chain, a second CNAME of a
// name, a chain that loops or that is longer than the bound opens
// nothing, and each record left out is on record.
func TestAnswersOnTheChain(t *testing.T) {
	const maxCNAMEs = 3
	records := map[string][]string{
		"plain.test.": {"plain.test. 60 IN A 198.51.100.1"},
		"beside.test.": {"beside.test. 60 IN CNAME x.test.", "evil.other. 60 IN A 198.51.100.66",
			"beside.test. 60 IN AAAA 2001:2::66"},
		"chain.test.": {"chain.test. 60 IN CNAME a.test.", "a.test. 60 IN CNAME b.test.", "b.test. 60 IN A 198.51.100.2",
			"evil.other. 60 IN A 198.51.100.66", "a.test. 60 IN A 198.51.100.67", "chain.test. 60 IN A 198.51.100.68"},
		"unordered.test.": {"b.test. 60 IN A 198.51.100.3", "a.test. 60 IN CNAME b.test.", "UNORDERED.test. 60 IN CNAME A.Test."},
		"forked.test.":    {"forked.test. 60 IN CNAME a.test.", "forked.test. 60 IN CNAME evil.other.", "a.test. 60 IN A 198.51.100.4", "evil.other. 60 IN A 198.51.100.66"},
		"loop.test.":      {"loop.test. 60 IN CNAME x.test.", "x.test. 60 IN CNAME loop.test.", "loop.test. 60 IN A 198.51.100.66"},
		"long.test.": {"long.test. 60 IN CNAME c1.test.", "c1.test. 60 IN CNAME c2.test.", "c2.test. 60 IN CNAME c3.test.",
			"c3.test. 60 IN CNAME c4.test.", "c4.test. 60 IN A 198.51.100.66"},
		"bound.test.": {"bound.test. 60 IN CNAME c1.test.", "c1.test. 60 IN CNAME c2.test.", "c2.test. 60 IN CNAME c4.test.",
			"c4.test. 60 IN A 198.51.100.5"},
		"six.test.": {"six.test. 60 IN CNAME y.test.", "y.test. 60 IN AAAA 2001:2::5", "evil.other. 60 IN AAAA 2001:2::66"},
	}
	up := zone(t, records)
	var mu sync.Mutex
	var opens []netip.Addr
	// The resolver records a query after it has answered it.
	decisions := make(chan Decision, 1)
	r, err := Start(Options{
		Sandbox: "sb", Tenant: "ns/t", Listen: netip.MustParseAddrPort("127.0.0.1:0"), Upstreams: []string{up},
		Policy: func() Policy { return Policy{{Host: "*.test"}} },
		Open: func(a netip.Addr, _ string, _ []int32, _ bool, _ time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			opens = append(opens, a)
			return nil
		},
		Denied:    func(a netip.Addr) bool { return a.IsLoopback() || a.IsPrivate() },
		IPv6:      true,
		MaxCNAMEs: maxCNAMEs,
		Record:    func(d Decision) { decisions <- d },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	for _, tc := range []struct {
		name     string
		qtype    uint16
		addrs    []string // answered and opened
		cnames   int      // CNAMEs answered
		offChain []string
	}{
		{"plain.test", dns.TypeA, []string{"198.51.100.1"}, 0, nil},
		{"beside.test", dns.TypeA, nil, 1, []string{"evil.other. A", "beside.test. AAAA"}},
		{"chain.test", dns.TypeA, []string{"198.51.100.2"}, 2, []string{"evil.other. A", "a.test. A", "chain.test. A"}},
		{"unordered.test", dns.TypeA, []string{"198.51.100.3"}, 2, nil},
		{"forked.test", dns.TypeA, []string{"198.51.100.4"}, 1, []string{"forked.test. CNAME", "evil.other. A"}},
		{"loop.test", dns.TypeA, nil, 2, []string{"loop.test. A"}},
		{"long.test", dns.TypeA, nil, maxCNAMEs, []string{"c3.test. CNAME", "c4.test. A"}},
		{"bound.test", dns.TypeA, []string{"198.51.100.5"}, maxCNAMEs, nil},
		{"six.test", dns.TypeAAAA, []string{"2001:2::5"}, 1, []string{"evil.other. AAAA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			opens = nil
			mu.Unlock()
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(tc.name), tc.qtype)
			c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
			in, _, err := c.Exchange(m, r.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			cnames := 0
			for _, rr := range in.Answer {
				switch rr := rr.(type) {
				case *dns.A:
					addrs = append(addrs, rr.A.String())
				case *dns.AAAA:
					addrs = append(addrs, rr.AAAA.String())
				case *dns.CNAME:
					cnames++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			var opened []string
			for _, a := range opens {
				opened = append(opened, a.String())
			}
			if in.Rcode != dns.RcodeSuccess || !slices.Equal(addrs, tc.addrs) || !slices.Equal(opened, tc.addrs) || cnames != tc.cnames {
				t.Errorf("%s: %s, answered %v and %d CNAMEs, opened %v; want %v and %d CNAMEs, both", tc.name, dns.RcodeToString[in.Rcode], addrs, cnames, opened, tc.addrs, tc.cnames)
			}
			select {
			case d := <-decisions:
				if d.Name != tc.name || !slices.Equal(d.OffChain, tc.offChain) {
					t.Errorf("%s: on record %s off the chain %q; want %q", tc.name, d.Name, d.OffChain, tc.offChain)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: no record", tc.name)
			}
		})
	}
}
