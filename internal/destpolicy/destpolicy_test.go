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

package destpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	mustParse := func(cidrs ...string) []netip.Prefix {
		p, err := Parse("test", cidrs)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	node := func(a netip.Addr) (string, bool) {
		if a == netip.MustParseAddr("10.0.0.5") {
			return "the address of node n1", true
		}
		return "", false
	}
	for _, tc := range []struct {
		name   string
		policy Policy
		host   string
		want   string // a part of the refusal, "" when permitted
	}{
		{"a pod", Policy{}, "10.244.1.7", ""},
		{"a pod, IPv6", Policy{}, "fd12::7", ""},
		{"loopback", Policy{}, "127.0.0.1", "loopback"},
		{"loopback, elsewhere in 127/8", Policy{}, "127.3.2.1", "loopback"},
		{"loopback, IPv6", Policy{}, "::1", "loopback"},
		{"loopback, IPv4 in IPv6", Policy{}, "::ffff:127.0.0.1", "loopback"},
		{"loopback, bracketed", Policy{}, "[::1]", "loopback"},
		{"loopback through NAT64", Policy{}, "64:ff9b::7f00:1", "reserved"},
		{"loopback, IPv4-compatible", Policy{}, "::127.0.0.1", "reserved"},
		{"metadata, IPv4-compatible", Policy{}, "::169.254.169.254", "reserved"},
		{"loopback, IPv4-translated", Policy{}, "::ffff:0:127.0.0.1", "reserved"},
		{"metadata, IPv4-translated", Policy{}, "::ffff:0:a9fe:a9fe", "reserved"},
		{"metadata", Policy{}, "169.254.169.254", "metadata"},
		{"metadata, AWS IPv6", Policy{}, "fd00:ec2::254", "metadata"},
		{"unspecified", Policy{}, "0.0.0.0", "reserved"},
		{"broadcast", Policy{}, "255.255.255.255", "reserved"},
		{"link-local IPv6 with a zone", Policy{}, "fe80::1%eth0", "link-local"},
		{"a name", Policy{}, "kubernetes.default.svc", "never names"},
		{"a node", Policy{}, "10.0.0.5", "node n1"},
		{"denied", Policy{Deny: mustParse("10.96.0.0/12")}, "10.96.0.1", "denies"},
		{"denied beats allowed", Policy{Allow: mustParse("10.0.0.0/8"), Deny: mustParse("10.96.0.0/12")}, "10.96.0.1", "denies"},
		{"outside the allowed", Policy{Allow: mustParse("10.244.0.0/16")}, "10.1.2.3", "outside"},
		{"allowed", Policy{Allow: mustParse("10.244.0.0/16")}, "10.244.2.3", ""},
		{"allowed is a grant: loopback", Policy{Allow: mustParse("127.0.0.1")}, "127.0.0.1", ""},
		{"allowed is a grant: a node", Policy{Allow: mustParse("10.0.0.0/24")}, "10.0.0.5", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.CheckHost(tc.host, node)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%s refused: %v", tc.host, err)
			case tc.want != "" && err == nil:
				t.Fatalf("%s permitted, want refused (%s)", tc.host, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("%s: %v, want it to say %q", tc.host, err, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	got, err := Parse("--deny", []string{"10.0.0.0/8", " 192.168.1.1 ", "", "fd00::/8", "10.1.2.3/8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.168.1.1/32", "fd00::/8", "10.0.0.0/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	if _, err := Parse("--deny", []string{"ten.0.0.0/8"}); err == nil || !strings.Contains(err.Error(), "--deny") {
		t.Errorf("a bad CIDR: %v", err)
	}
}
