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

// Package destpolicy decides which network addresses the gateway may
// forward a tenant's traffic to. A WorkerMapping's Service destination is
// resolved through EndpointSlices, which whoever may create objects in the
// mapping's namespace can write: without a policy, a team could point the
// gateway (and the worker bearer it presents) at the node, the control
// plane, a cloud metadata service or the gateway's own loopback.
//
// The policy is the cluster admin's, given to the manager and to the
// gateway in their own configuration, never taken from an object:
//
//  1. an address in a Deny range is refused;
//  2. when Allow is set, an address in one of its ranges is permitted (a
//     grant: it passes whatever else it is) and any other is refused;
//  3. otherwise an address is refused when it is in AlwaysDenied
//     (unspecified, loopback, link-local and with it the usual metadata
//     address, multicast, reserved, and prefixes that embed an IPv4
//     address) or is one the caller knows to be the node's or the control
//     plane's, and permitted else.
package destpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// AlwaysDenied are the ranges no worker endpoint may be in unless Allow
// grants them.
var AlwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network", unspecified
	netip.MustParsePrefix("127.0.0.0/8"),        // loopback
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local, cloud metadata (169.254.169.254)
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud's metadata
	netip.MustParsePrefix("224.0.0.0/4"),        // multicast
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved, broadcast
	netip.MustParsePrefix("::/128"),             // unspecified
	netip.MustParsePrefix("::1/128"),            // loopback
	netip.MustParsePrefix("::/96"),              // IPv4-compatible (deprecated): ::127.0.0.1 and the like
	netip.MustParsePrefix("::ffff:0:0:0/96"),    // IPv4-translated (SIIT)
	netip.MustParsePrefix("fe80::/10"),          // link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS's IPv6 metadata
	netip.MustParsePrefix("ff00::/8"),           // multicast
	netip.MustParsePrefix("64:ff9b::/96"),       // NAT64: any IPv4 address, loopback included
	netip.MustParsePrefix("64:ff9b:1::/48"),     // local-use NAT64
	netip.MustParsePrefix("2002::/16"),          // 6to4: an IPv4 address inside
}

// Policy is the admin's Allow and Deny ranges. The zero Policy refuses
// AlwaysDenied only.
type Policy struct {
	Allow []netip.Prefix
	Deny  []netip.Prefix
}

// Parse reads CIDRs (or single addresses) into prefixes; what argument
// names the flag they came from, for the error.
func Parse(what string, cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				errs = append(errs, fmt.Errorf("%s: %q is neither a CIDR nor an IP address", what, c))
				continue
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, errors.Join(errs...)
}

// Refusal says why an address is refused.
type Refusal struct {
	Addr   netip.Addr
	Reason string
}

func (r *Refusal) Error() string {
	if !r.Addr.IsValid() {
		return r.Reason
	}
	return fmt.Sprintf("%s is %s", r.Addr, r.Reason)
}

// Check returns nil when the policy permits addr, else a *Refusal.
// internal, when not nil, says whether addr is the node's or the control
// plane's (with the reason), which only the manager knows.
func (p Policy) Check(addr netip.Addr, internal func(netip.Addr) (string, bool)) error {
	if !addr.IsValid() {
		return &Refusal{Reason: "no IP address"}
	}
	addr = addr.Unmap().WithZone("")
	if in(p.Deny, addr) {
		return &Refusal{Addr: addr, Reason: "in a range the cluster admin denies (the deny CIDRs of the manager and the gateway)"}
	}
	if len(p.Allow) > 0 {
		if in(p.Allow, addr) {
			return nil
		}
		return &Refusal{Addr: addr, Reason: "outside the ranges the cluster admin allows (the allow CIDRs of the manager and the gateway)"}
	}
	if in(AlwaysDenied, addr) {
		return &Refusal{Addr: addr, Reason: "loopback, link-local (cloud metadata), multicast or otherwise reserved, never a worker's unless the cluster admin allows it"}
	}
	if internal != nil {
		if why, ok := internal(addr); ok {
			return &Refusal{Addr: addr, Reason: why}
		}
	}
	return nil
}

// CheckHost is Check of a literal IP address given as text (a URL's host):
// anything else, a name included, is refused, so that nothing is resolved.
func (p Policy) CheckHost(host string, internal func(netip.Addr) (string, bool)) error {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return &Refusal{Reason: fmt.Sprintf("not an IP address (%q): worker endpoints are the addresses of EndpointSlices, never names", host)}
	}
	return p.Check(a, internal)
}

func in(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
