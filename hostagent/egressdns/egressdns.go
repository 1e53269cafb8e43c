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

// Package egressdns is the resolver a node's agent runs for each sandbox
// with egress by name: the sandbox's only DNS server. It answers only the
// names the sandbox's rules allow (NXDOMAIN for the others), asks the
// node's upstream resolvers for them, and opens, through its Opener,
// exactly the IPv4 addresses it answers, for the answer's time to live, on
// the rule's ports (the pattern of FQDN policies in Cilium). An address
// that a deny rule covers (the node, the sandboxes' pool, loopback,
// link-local and cloud metadata, private networks) is taken out of the
// answer and never opened, so that an allowed name cannot rebind to
// something internal, directly or through a CNAME. Only the records on the
// question's CNAME chain are answered or opened: an upstream that adds an
// address of another name opens nothing. Queries are bounded per sandbox:
// a rate, and the upstream queries in flight.
package egressdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
	"golang.org/x/time/rate"

	"github.com/playground-dev/playground/internal/connlimit"
)

// Rule allows a name, or the names under a domain ("*.example.com": one
// or more labels before it), on ports (every port when empty).
type Rule struct {
	Host  string
	Ports []int32
	// CheckServerName opens the name's addresses on Ports only to TLS
	// connections that name it (SNI), which the node checks
	// (Options.OpenChecked): a connection to a shared address that names
	// another host, or none, is refused.
	CheckServerName bool
}

// Policy is a sandbox's name rules.
type Policy []Rule

// Match says whether policy allows name and on which ports its addresses
// are open: all, or the union of the matching rules' ports (but those of
// rules that check the server name: CheckedPorts).
func (p Policy) Match(name string) (ports []int32, all, ok bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, r := range p {
		if !r.matches(name) {
			continue
		}
		ok = true
		if r.CheckServerName {
			continue
		}
		if len(r.Ports) == 0 {
			all = true
		}
		ports = append(ports, r.Ports...)
	}
	slices.Sort(ports)
	return slices.Compact(ports), all, ok
}

// CheckedPorts are the ports of name's addresses that the rules open to
// TLS connections naming it only.
func (p Policy) CheckedPorts(name string) []int32 {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	var ports []int32
	for _, r := range p {
		if r.CheckServerName && r.matches(name) {
			ports = append(ports, r.Ports...)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// matches says whether r's host is name, or a wildcard over it (name
// lower case, without its final dot).
func (r Rule) matches(name string) bool {
	h := strings.ToLower(r.Host)
	if suffix, wild := strings.CutPrefix(h, "*"); wild {
		return strings.HasSuffix(name, suffix) && len(name) > len(suffix)
	}
	return name == h
}

// Result is what became of a query, as Decision reports it.
type Result string

// The results of a query.
const (
	// Allowed: the name is allowed; Opened lists what was opened.
	Allowed Result = "allowed"
	// Denied: no rule allows the name (NXDOMAIN).
	Denied Result = "denied"
	// Throttled: the sandbox asked faster than its bound (REFUSED).
	Throttled Result = "throttled"
	// Failed: the upstream did not answer, or answered an error
	// (SERVFAIL, or its code).
	Failed Result = "failed"
)

// Decision is one query and what the resolver did, for the record: the
// sandbox's tenant, the name, the addresses opened and those refused
// (rebinding), and why.
type Decision struct {
	Sandbox, Tenant string
	Name            string
	Type            string
	Result          Result
	Opened          []netip.Addr
	// Refused are answered addresses a deny rule covers: left out of the
	// answer, not opened.
	Refused []netip.Addr
	// OffChain are the answer's CNAME and address records whose owner is
	// not on the question's CNAME chain ("evil.test. A"): left out of the
	// answer, not opened.
	OffChain []string
	Error    string
	// Of a brokered request (Type TypeBrokered): where it went, what it
	// asked, the upstream's status and the bodies' bytes. Of a flow (Type
	// TypeFlow): where it went, its protocol, bytes (allowed) or packets
	// (denied), how long it lasted, and the rule that let it out (Rule;
	// Name, the name whose answer opened its address).
	Dst               netip.AddrPort
	Method, Path      string
	Status            int
	BytesOut, BytesIn int64
	Proto             string
	Packets           int64
	Duration          time.Duration
	Rule              string
}

// The Types of Decisions on other things than queries.
const (
	// TypeBrokered is a brokered HTTPS request.
	TypeBrokered = "HTTPS"
	// TypeFlow is a connection the sandbox made (Allowed, when it ended)
	// or attempted and the table refused (Denied).
	TypeFlow = "FLOW"
	// TypeServerName is a connection the server-name gate refused.
	TypeServerName = "TLS"
)

// Options configure a Resolver.
type Options struct {
	// Sandbox and Tenant name whose resolver it is, for the record.
	Sandbox, Tenant string
	// Listen is where it serves, UDP and TCP: the node's end of the
	// sandbox's link, port 53.
	Listen netip.AddrPort
	// Upstreams are the resolvers asked, in turn ("host:port").
	Upstreams []string
	// Policy returns the sandbox's rules now: a change applies from the
	// next query.
	Policy func() Policy
	// Open lets the sandbox connect to addr, which name answered, on
	// ports (all: every port) for ttl.
	Open func(addr netip.Addr, name string, ports []int32, all bool, ttl time.Duration) error
	// OpenChecked opens addr on ports, for ttl, to TLS connections that
	// name name; nil: rules that check the server name open nothing.
	OpenChecked func(addr netip.Addr, name string, ports []int32, ttl time.Duration) error
	// Denied says whether an answered address must not be opened.
	Denied func(netip.Addr) bool
	// IPv6 answers AAAA questions as A ones, opening the IPv6 addresses;
	// without it they get an empty answer (the sandbox has no IPv6
	// route out).
	IPv6 bool
	// Record receives each decision (metrics, logs); nil: none.
	Record func(Decision)
	// QueriesPerSecond and Burst bound the sandbox's queries; MaxInFlight
	// its queries waiting on an upstream (defaults 50, 200, 16).
	QueriesPerSecond float64
	Burst            int
	MaxInFlight      int
	// MaxTCPConns bounds the sandbox's TCP connections to the resolver
	// held at once (default 16): past it the resolver accepts no more
	// until one closes (they wait in the kernel's queue, holding none of
	// the agent's files), and each is charged to the process's connection
	// budget (package connlimit). A TCP connection idle for
	// tcpIdleTimeout, or slow to send its query, is closed.
	MaxTCPConns int

	// MaxCNAMEs is the longest CNAME chain followed from the question's
	// name (default DefaultMaxCNAMEs); the addresses of a longer one are
	// left out.
	MaxCNAMEs int
	// MinTTL and MaxTTL clamp how long an answered address stays open
	// (defaults 10 s, so that a client can connect to an answer of TTL 0,
	// and 1 h).
	MinTTL, MaxTTL time.Duration
	Log            logr.Logger
}

// tcpIdleTimeout closes a TCP connection that sends no query for this long.
const tcpIdleTimeout = 5 * time.Second

// DefaultMaxCNAMEs is Options.MaxCNAMEs' default, the bound BIND and
// Unbound also keep to (16 and 11).
const DefaultMaxCNAMEs = 16

// Resolver is a running resolver of one sandbox.
type Resolver struct {
	opts     Options
	limit    *rate.Limiter
	inflight chan struct{}
	udp, tcp *dns.Server
	client   *dns.Client
	wg       sync.WaitGroup
}

// portTries bounds how many ports a resolver asked for any port tries
// before it gives up: each is free for UDP and, most often, for TCP.
const portTries = 16

// listenBoth listens on addr over UDP and TCP, on one port. For port 0 it
// is the port the kernel gives UDP; TCP may hold that port already (a
// connection's local port), and then another is taken.
func listenBoth(addr netip.AddrPort) (net.PacketConn, net.Listener, error) {
	var lc net.ListenConfig
	for try := 1; ; try++ {
		pc, err := lc.ListenPacket(context.Background(), "udp4", addr.String())
		if err != nil {
			return nil, nil, err
		}
		ln, err := lc.Listen(context.Background(), "tcp4", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if addr.Port() != 0 || !errors.Is(err, syscall.EADDRINUSE) || try == portTries {
			return nil, nil, err
		}
	}
}

// Start binds opts.Listen (UDP and TCP) and serves until Close.
func Start(opts Options) (*Resolver, error) {
	if opts.Policy == nil || opts.Open == nil || opts.Denied == nil {
		return nil, errors.New("egressdns: Policy, Open and Denied are required")
	}
	if len(opts.Upstreams) == 0 {
		return nil, errors.New("egressdns: no upstream resolver: the node's /etc/resolv.conf names none; give the agent --egress-resolver")
	}
	if opts.QueriesPerSecond <= 0 {
		opts.QueriesPerSecond = 50
	}
	if opts.Burst <= 0 {
		opts.Burst = 200
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 16
	}
	if opts.MaxTCPConns <= 0 {
		opts.MaxTCPConns = 16
	}
	if opts.MaxCNAMEs <= 0 {
		opts.MaxCNAMEs = DefaultMaxCNAMEs
	}
	if opts.MinTTL <= 0 {
		opts.MinTTL = 10 * time.Second
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = time.Hour
	}
	pc, ln, err := listenBoth(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("egressdns: %w", err)
	}
	r := &Resolver{
		opts:     opts,
		limit:    rate.NewLimiter(rate.Limit(opts.QueriesPerSecond), opts.Burst),
		inflight: make(chan struct{}, opts.MaxInFlight),
		client:   &dns.Client{Net: "udp", Timeout: 2 * time.Second},
	}
	h := dns.HandlerFunc(r.serve)
	// Start returns once both servers serve: a Close before that would
	// find them not started, leave their sockets open, and the port taken
	// for good (a sandbox taken over by a new agent at once).
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	r.udp = &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: notify}
	r.tcp = &dns.Server{Listener: connlimit.Listen(ln, connlimit.Options{Name: "resolver", Max: opts.MaxTCPConns}), Handler: h,
		ReadTimeout: 5 * time.Second, IdleTimeout: func() time.Duration { return tcpIdleTimeout }, MaxTCPQueries: 64, NotifyStartedFunc: notify}
	failed := make(chan error, 2)
	for _, s := range []*dns.Server{r.udp, r.tcp} {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := s.ActivateAndServe(); err != nil {
				failed <- err
			}
		}()
	}
	for range 2 {
		select {
		case <-started:
		case err := <-failed:
			pc.Close()
			ln.Close()
			_ = r.Close()
			return nil, fmt.Errorf("egressdns: %w", err)
		}
	}
	return r, nil
}

// Addr is where the resolver serves (UDP and TCP).
func (r *Resolver) Addr() netip.AddrPort {
	return r.udp.PacketConn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Close stops serving.
func (r *Resolver) Close() error {
	err := errors.Join(r.udp.Shutdown(), r.tcp.Shutdown())
	r.wg.Wait()
	return err
}

func (r *Resolver) serve(w dns.ResponseWriter, q *dns.Msg) {
	reply := new(dns.Msg)
	if len(q.Question) != 1 || q.Opcode != dns.OpcodeQuery {
		reply.SetRcode(q, dns.RcodeFormatError)
		_ = w.WriteMsg(reply)
		return
	}
	qn := q.Question[0]
	d := Decision{Sandbox: r.opts.Sandbox, Tenant: r.opts.Tenant, Name: strings.TrimSuffix(strings.ToLower(qn.Name), "."), Type: dns.TypeToString[qn.Qtype]}
	defer func() {
		if r.opts.Record != nil {
			r.opts.Record(d)
		}
	}()
	if !r.limit.Allow() {
		d.Result = Throttled
		reply.SetRcode(q, dns.RcodeRefused)
		_ = w.WriteMsg(reply)
		return
	}
	policy := r.opts.Policy()
	ports, all, ok := policy.Match(d.Name)
	checked := policy.CheckedPorts(d.Name)
	if !ok || qn.Qclass != dns.ClassINET {
		d.Result = Denied
		reply.SetRcode(q, dns.RcodeNameError)
		_ = w.WriteMsg(reply)
		return
	}
	d.Result = Allowed
	reply.SetReply(q)
	reply.RecursionAvailable = true
	if qn.Qtype != dns.TypeA && (qn.Qtype != dns.TypeAAAA || !r.opts.IPv6) {
		// Nothing but addresses is needed to connect, and IPv6 ones only
		// with an IPv6 route out: an empty answer (the name exists).
		_ = w.WriteMsg(reply)
		return
	}
	select {
	case r.inflight <- struct{}{}:
		defer func() { <-r.inflight }()
	default:
		d.Result, d.Error = Throttled, "too many queries in flight"
		reply.SetRcode(q, dns.RcodeServerFailure)
		_ = w.WriteMsg(reply)
		return
	}
	up, err := r.ask(dns.Question{Name: d.Name, Qtype: qn.Qtype, Qclass: qn.Qclass})
	if err != nil {
		d.Result, d.Error = Failed, err.Error()
		reply.SetRcode(q, dns.RcodeServerFailure)
		_ = w.WriteMsg(reply)
		return
	}
	if up.Rcode != dns.RcodeSuccess {
		d.Result, d.Error = Failed, dns.RcodeToString[up.Rcode]
		reply.SetRcode(q, up.Rcode)
		_ = w.WriteMsg(reply)
		return
	}
	answer, offChain := onChain(d.Name, up.Answer, r.opts.MaxCNAMEs)
	d.OffChain = offChain
	for _, rr := range answer {
		switch rr := rr.(type) {
		case *dns.CNAME:
			reply.Answer = append(reply.Answer, rr)
		case *dns.A, *dns.AAAA:
			var addr netip.Addr
			var ttl uint32
			if a, ok := rr.(*dns.A); ok {
				addr, _ = netip.AddrFromSlice(a.A.To4())
				ttl = a.Hdr.Ttl
			} else {
				a := rr.(*dns.AAAA)
				addr, _ = netip.AddrFromSlice(a.AAAA.To16())
				ttl = a.Hdr.Ttl
			}
			// An address of the other family than asked, or none, is
			// not an answer.
			if !addr.IsValid() || (qn.Qtype == dns.TypeA) != addr.Is4() {
				continue
			}
			if r.opts.Denied(addr) {
				d.Refused = append(d.Refused, addr)
				continue
			}
			open := min(max(time.Duration(ttl)*time.Second, r.opts.MinTTL), r.opts.MaxTTL)
			if len(ports) > 0 || all {
				if err := r.opts.Open(addr, d.Name, ports, all, open); err != nil {
					d.Error = err.Error()
					continue
				}
			}
			if len(checked) > 0 && r.opts.OpenChecked != nil {
				if err := r.opts.OpenChecked(addr, d.Name, checked, open); err != nil {
					d.Error = err.Error()
					continue
				}
			}
			d.Opened = append(d.Opened, addr)
			reply.Answer = append(reply.Answer, rr)
		}
	}
	if len(d.Opened) == 0 && d.Error != "" {
		d.Result = Failed
		reply.Answer = nil
		reply.SetRcode(q, dns.RcodeServerFailure)
	}
	_ = w.WriteMsg(reply)
}

// onChain keeps of answer the records on the CNAME chain from name: the
// CNAME that name owns, the one its target owns, and so on (at most
// maxCNAMEs of them), then the addresses of the name the chain ends at, in
// the answer's order. A chain that loops, or goes on past maxCNAMEs, ends
// at no name: it keeps no address. The other CNAME and address records
// are off the chain, returned as owner and type; records of other types
// are neither.
func onChain(name string, answer []dns.RR, maxCNAMEs int) (kept []dns.RR, offChain []string) {
	owner := dns.CanonicalName(name)
	used := make([]bool, len(answer))
	seen := []string{owner}
	for hops := 0; owner != ""; hops++ {
		next := -1
		for i, rr := range answer {
			if c, ok := rr.(*dns.CNAME); ok && dns.CanonicalName(c.Hdr.Name) == owner {
				next = i
				break
			}
		}
		if next < 0 {
			break
		}
		if hops == maxCNAMEs {
			owner = ""
			break
		}
		used[next] = true
		kept = append(kept, answer[next])
		owner = dns.CanonicalName(answer[next].(*dns.CNAME).Target)
		if slices.Contains(seen, owner) {
			owner = ""
		}
		seen = append(seen, owner)
	}
	for i, rr := range answer {
		switch rr.(type) {
		case *dns.A, *dns.AAAA:
			if dns.CanonicalName(rr.Header().Name) == owner {
				kept = append(kept, rr)
				continue
			}
		case *dns.CNAME:
			if used[i] {
				continue
			}
		default:
			continue
		}
		offChain = append(offChain, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
	}
	return kept, offChain
}

// ask asks the upstreams in turn, over TCP when an answer is truncated.
func (r *Resolver) ask(qn dns.Question) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(qn.Name), qn.Qtype)
	m.RecursionDesired = true
	var errs []error
	for _, u := range r.opts.Upstreams {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		in, _, err := r.client.ExchangeContext(ctx, m, u)
		if err == nil && in.Truncated {
			tc := &dns.Client{Net: "tcp", Timeout: 3 * time.Second}
			in, _, err = tc.ExchangeContext(ctx, m, u)
		}
		cancel()
		if err == nil {
			return in, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
	}
	return nil, errors.Join(errs...)
}

// Upstreams reads the nameservers of a resolv.conf, as host:port.
func Upstreams(path string) ([]string, error) {
	c, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range c.Servers {
		out = append(out, net.JoinHostPort(s, c.Port))
	}
	return out, nil
}

// Hub fans the decisions of a node's resolvers out to the agent's sinks
// (metrics, logs, Events), which subscribe after the backends that hold
// the resolvers are made: a backend's Options.OnEgressDNS is Hub.Record.
type Hub struct {
	mu    sync.Mutex
	sinks map[int]func(Decision)
	next  int
}

// Record hands d to every sink.
func (h *Hub) Record(d Decision) {
	h.mu.Lock()
	sinks := make([]func(Decision), 0, len(h.sinks))
	for _, s := range h.sinks {
		sinks = append(sinks, s)
	}
	h.mu.Unlock()
	for _, s := range sinks {
		s(d)
	}
}

// Subscribe adds sink until the returned cancel is called.
func (h *Hub) Subscribe(sink func(Decision)) (cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sinks == nil {
		h.sinks = map[int]func(Decision){}
	}
	id := h.next
	h.next++
	h.sinks[id] = sink
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.sinks, id)
	}
}
