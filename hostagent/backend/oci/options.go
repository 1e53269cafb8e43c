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
	"crypto/x509"
	"net/netip"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressdns"
)

// The options are portable, so that the agent's command line builds on
// every system; the backend itself is Linux's (oci_other.go).

// Network selects a sandbox's networking.
type Network string

const (
	// NetworkNone gives each sandbox its own network namespace with only a
	// loopback interface: no route anywhere, not even to the node. A Spec
	// with an egress list is refused.
	NetworkNone Network = "none"
	// NetworkEgress gives a sandbox whose Spec lists egress rules its own
	// network namespace with a NATed route out, open only to that list
	// (see egress.go); a sandbox without rules gets loopback only, as with
	// NetworkNone. It needs nft, ip and nsenter on the node.
	NetworkEgress Network = "egress"
)

// Options configure a Backend. Only StateDir is required.
type Options struct {
	// StateDir holds every sandbox, runc's state and the installed guest
	// binary. It must be an absolute path whose ancestors are searchable by
	// others (mode o+x): the sandbox's unprivileged root traverses it to
	// reach its bundle. Distinct state directories never see each other's
	// sandboxes (tests use that to stand in for several nodes).
	StateDir string
	// Runtime is the OCI runtime binary; default "runc" from PATH.
	Runtime string
	// GVisorRuntime is runsc, gVisor's OCI runtime, which runs the
	// sandboxes whose Spec asks for backend.IsolationGVisor (see
	// gvisor.go); empty: this backend refuses them. Its state is kept
	// apart from Runtime's, under StateDir/runsc.
	GVisorRuntime string
	// GuestBinary is the static playground-sandbox binary to install into
	// sandboxes. Default: backend.GuestBinaryName next to the running executable
	// (the agent image ships both in one directory), else from PATH. Tests
	// build it and pass its path. It is copied into StateDir by content
	// hash, so running sandboxes keep the binary they started with.
	GuestBinary string
	// BaseRoot is the directory whose system directories form the
	// sandbox's read-only base; default "/" (the agent image or the node).
	BaseRoot string
	// BaseDirs are the directories of BaseRoot mounted read-only (or, when
	// they are symlinks, such as /bin on merged-/usr systems, recreated as
	// symlinks). Missing ones are skipped. Default: /usr /bin /sbin /lib
	// /lib32 /lib64 /libx32.
	BaseDirs []string
	// EtcFiles are the entries of BaseRoot/etc visible in the sandbox,
	// each read-only: copied into a snapshot that runc sandboxes see
	// through overlays of their own (overlay.go; a sandbox sees a change
	// from its next start), bind-mounted under gVisor. The rest of /etc is
	// generated (passwd, group, hosts, resolv.conf, profile…). Missing ones
	// are skipped. Default: DefaultEtcFiles.
	EtcFiles []string
	// Network is NetworkNone (default) or NetworkEgress.
	Network Network
	// EgressPool is the IPv4 range egress sandboxes' /30 subnets come
	// from; default DefaultEgressPool. It is never reachable from a
	// sandbox, so it must not overlap anything a sandbox should reach.
	EgressPool netip.Prefix
	// EgressIPv6 gives egress sandboxes IPv6 as well, by the same rules:
	// an address of EgressPool6 (a /120 each), AAAA answers opened as A
	// ones, NAT66 on the way out. Only where the agent's namespace has an
	// IPv6 route out (HasIPv6Route).
	EgressIPv6 bool
	// EgressPool6 is the IPv6 range (a /64 or wider, unique local) the
	// sandboxes' /120s come from; default DefaultEgressPool6.
	EgressPool6 netip.Prefix
	// EgressDeny are IPv4 CIDRs no egress rule opens, beyond the pool,
	// loopback, link-local (cloud metadata), multicast and reserved
	// ranges: say, the pod network holding the agents.
	EgressDeny []string
	// EgressResolvers are the upstream resolvers ("host:port") of the
	// resolvers the agent runs for sandboxes with egress by name; default
	// the nameservers of BaseRoot's /etc/resolv.conf.
	EgressResolvers []string
	// EgressRoots verify the servers that brokered requests go to
	// (EgressRule.Brokered); nil: the node's roots.
	EgressRoots *x509.CertPool
	// OnEgressDNS receives each query of a sandbox's resolver and what it
	// did (metrics, the record); nil: none.
	OnEgressDNS func(egressdns.Decision)
	// EgressNodeConns bounds the connections one sandbox holds at once to
	// each of the agent's listeners on its link, its resolver (TCP) and
	// its server-name gate (default DefaultEgressNodeConns): past it the
	// resolver accepts no more until one closes, the gate closes the new
	// one. The sandbox's nftables ruleset refuses new connections to them
	// past four times it (connections the agent has not accepted yet
	// included), a second line that holds without the agent.
	EgressNodeConns int
	// DefaultResources fill in zero fields of a Spec's Resources. Default:
	// 1000 millicores, 1 GiB, 1024 PIDs.
	DefaultResources backend.Resources
	// IDMapBase is the first host UID/GID of sandbox ID maps. Each sandbox
	// gets its own 65536 IDs at IDMapBase + slot×65536. Default 1<<28,
	// clear of /etc/subuid's usual 100000+ ranges.
	IDMapBase uint32
	// IDMapSlots is how many sandboxes' ranges fit above IDMapBase;
	// default 4096.
	IDMapSlots int
	// CgroupParent is where sandbox cgroups go. A relative path nests them
	// under the agent's own cgroup (per controller on cgroup v1); an
	// absolute one places them there. Default: relative
	// "playground/<hash of StateDir>" on cgroup v1, absolute
	// "/playground/<hash>" on a cgroup v2-only host (where the agent's own
	// cgroup, holding processes, cannot delegate controllers). An agent
	// running as a pod sets an absolute parent outside its pod's cgroup,
	// so that sandboxes outlive the pod.
	CgroupParent string
	// SpareShepherds is how many idle shepherds each sandbox keeps, so a
	// command never waits for one to start; default 1. Each is a small Go
	// process of about 1 MiB; one spare measured as fast as two (see
	// docs/benchmarks.md, P1 and P6). A sandbox waiting in the warm pool
	// keeps none until it is claimed or first used.
	SpareShepherds int
	// PileFiles are created (empty, owned by the tenant, append-only) in
	// every pile. The tenant cannot create files in the pile itself: see
	// docs/isolation.md. Default: {"self.pile"}.
	PileFiles []string
	// StartTimeout bounds starting a container and reaching its init, and
	// a command's start when the caller's context has no deadline; default
	// 30s.
	StartTimeout time.Duration

	// DefaultStorage fills in zero limits of a Spec's Storage; its own zero
	// fields default to DefaultStorage (the package variable). Limits are
	// fixed when a sandbox is provisioned (see disk.go).
	DefaultStorage backend.Storage
	// StorageReserve is the free space, in bytes, that the state
	// directory's filesystem keeps: below it, Provision refuses new
	// sandboxes with backend.ErrInsufficientStorage (existing ones are
	// reattached and started as usual). Zero disables the check.
	StorageReserve int64
	// UnboundedStorage opts out of disk limits: the writable layer and the
	// pile are plain directories of the state directory, and one sandbox
	// can fill the node. Only for hosts without loop devices, knowingly;
	// without it, New fails there.
	UnboundedStorage bool
	// Mkfs is the mkfs.ext4 binary (e2fsprogs); default "mkfs.ext4" from
	// PATH.
	Mkfs string

	// WarmPool is how many blank sandboxes the backend keeps started
	// ahead of demand (backend.WarmPool; pool.go): a new tenant whose
	// sandbox fits (container isolation, the default storage, no egress,
	// no faculties) claims one instead of waiting for a start. Each costs
	// what an idle sandbox does (docs/benchmarks.md, P6) and an ID-map
	// slot. Zero, the default, keeps none.
	WarmPool int
	// WarmPoolRate bounds how many pooled sandboxes start per second when
	// the pool refills, blank and images' together; default
	// DefaultWarmPoolRate.
	WarmPoolRate float64
	// ImagePools lets the agent keep pools of images beside the blank one
	// (backend.WarmPool.SetImagePools): which images, and how many
	// sandboxes of each, are the agent's to set. Without it the backend
	// pools no image.
	ImagePools bool
	// NewID makes the IDs of pooled sandboxes: each is its tenant's
	// sandbox ID once claimed, so it has their format. Required with
	// WarmPool or ImagePools.
	NewID func() string
}

// DefaultEgressNodeConns bounds a sandbox's connections to each of the
// agent's listeners on its link (Options.EgressNodeConns): a resolver
// answers each query at once, and a TLS client opens a few connections
// per host.
const DefaultEgressNodeConns = 64

// DefaultWarmPoolRate is how many pooled sandboxes start per second at
// most, by default: refilling yields to the starts tenants wait for.
const DefaultWarmPoolRate = 5.0

// DefaultEgressPool is where egress sandboxes' /30 subnets come from: the
// shared address space of RFC 6598, which no cloud or cluster routes.
var DefaultEgressPool = netip.MustParsePrefix("100.64.0.0/10")

// DefaultEgressPool6 is where egress sandboxes' IPv6 /120s come from: a
// unique local range of Playground's.
var DefaultEgressPool6 = netip.MustParsePrefix("fd70:6c61:7967::/64")
