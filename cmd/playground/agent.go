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

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/playground-dev/playground/cmd/internal/cmdflags"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentserver"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/hostagent/faculty"
	"github.com/playground-dev/playground/hostagent/hostpath"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/budget"
)

// runAgent runs the host agent of this node until ctx ends.
func runAgent(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("playground agent", flag.ContinueOnError)
	var (
		opts        nodeagent.Options
		ociOpts     oci.Options
		network     string
		egressPool  string
		labels      string
		kubeconfig  string
		reserve     string
		builderCPU  string
		builderMem  string
		builderDisk string
		runsc       string
	)
	fs.StringVar(&opts.NodeName, "node-name", defaultNodeName(), "the node this agent serves ($NODE_NAME, else the hostname)")
	fs.StringVar(&ociOpts.StateDir, "state-dir", "/var/lib/playground", "absolute directory holding the node's sandboxes and the record of which Sandbox owns each; it must outlive the agent")
	fs.StringVar(&ociOpts.GuestBinary, "guest-binary", "", "the static playground-sandbox binary (default: next to this executable, else from PATH)")
	fs.StringVar(&runsc, "runsc", "", "runsc, gVisor's runtime, for Sandboxes of isolation gvisor (default: runsc from PATH; none: this node offers no gVisor, and its Lease says so); \"off\" refuses gVisor even if runsc is installed")
	fs.StringVar(&ociOpts.CgroupParent, "cgroup-parent", "", "cgroup for the sandboxes; an agent in a pod sets an absolute one outside the pod's cgroup")
	fs.StringVar(&network, "network", string(oci.NetworkEgress), "sandbox networking this node offers: egress (each sandbox picks by its Tenant: loopback only without egress rules; with them, what they allow by address or by name, through NAT and an nftables ruleset per sandbox, and nothing else; needs nft, ip and nsenter) or none (loopback only for every sandbox, egress lists refused)")
	fs.Var(cmdflags.StringList(&ociOpts.EgressDeny), "egress-deny", "CIDRs (IPv4 or IPv6) no sandbox egress rule opens, beyond loopback, link-local (cloud metadata), multicast, private ranges and the pools (repeatable, or comma-separated): say, the pod network")
	auditTrail := auditFlags(fs)
	tracerOf := traceFlags(fs)
	egressIPv6 := fs.String("egress-ipv6", "auto", "IPv6 for egress sandboxes, by the same rules as IPv4: on, off, or auto (on where this agent's network namespace has an IPv6 default route)")
	egressPool6 := fs.String("egress-pool6", oci.DefaultEgressPool6.String(), "IPv6 range (a /64 or wider, unique local) from which egress sandboxes get a /120 each; unreachable from sandboxes")
	fs.Var(cmdflags.StringList(&ociOpts.EgressResolvers), "egress-resolver", "upstream DNS servers (host:port, repeatable) of the resolvers the agent runs for sandboxes with egress by name (default: the nameservers of /etc/resolv.conf)")
	fs.StringVar(&egressPool, "egress-pool", oci.DefaultEgressPool.String(), "IPv4 range from which egress sandboxes get a /30 each; unreachable from sandboxes")
	fs.StringVar(&reserve, "storage-reserve", "2Gi", "free space (a quantity, e.g. 10Gi) that the state directory's filesystem keeps: below it no new sandbox is provisioned on this node (0 disables)")
	fs.BoolVar(&ociOpts.UnboundedStorage, "unbounded-storage", false, "run without per-sandbox disk limits (no loop devices needed): one sandbox can then fill the node's disk; see docs/isolation.md")
	fs.IntVar(&ociOpts.WarmPool, "warm-pool", 0, "how many blank sandboxes the oci backend keeps started ahead of demand: a new Sandbox that fits (isolation container, the default storage, no egress, no faculties) claims one instead of waiting for a start; 0 keeps none")
	fs.Float64Var(&ociOpts.WarmPoolRate, "warm-pool-rate", oci.DefaultWarmPoolRate, "how many pooled sandboxes start per second at most when the warm pools refill (the blank one and the images' together)")
	fs.IntVar(&opts.ImagePools.InUse, "warm-pool-images", 0, "how many of the distinct images this node's sandboxes started most recently the oci backend keeps warm sandboxes of (--warm-pool-image-size each), so that a new Sandbox on one is claimed, not started, once the node's image store has let its tenant have the image; 0 pools none of them")
	fs.Var(cmdflags.StringList(&opts.ImagePools.Named), "warm-pool-image", "an image by digest (registry/repo@sha256:...) the oci backend keeps warm sandboxes of as long as the agent runs, pulled anonymously when it starts (repeatable, or comma-separated): a private image cannot be pooled so, and is refused in the agent's log")
	fs.IntVar(&opts.ImagePools.Size, "warm-pool-image-size", nodeagent.DefaultImagePoolSize, "how many warm sandboxes of each pooled image (--warm-pool-images, --warm-pool-image) are kept started")
	fs.IntVar(&opts.ImagePools.Max, "warm-pool-images-max", nodeagent.DefaultImagePoolMax, "the most warm sandboxes of images kept started on the node, every image together: the named images first, then those in use, the most recent first")
	fs.StringVar(&opts.ListenAddress, "listen", ":9443", "address of the agent API")
	fs.StringVar(&opts.Endpoint, "advertise", "", "URL of the agent API published in the node's Lease (default: http(s)://$POD_IP, else the listen host, else the hostname, with the listen port)")
	fs.StringVar(&opts.TokenFile, "token-file", "", "file of shared bearer tokens the API accepts as a trusted gateway's, one per line, re-read on change (playground-dev; clusters trust the gateway's identity instead)")
	fs.Var(cmdflags.StringList(&opts.TrustedManagers), "trusted-manager", "the manager's Kubernetes user, e.g. system:serviceaccount:playground-system:playground-manager, which alone delivers the brokered egress credentials of this node's sandboxes with a token bound to this node (repeatable, or comma-separated)")
	fs.Var(cmdflags.StringList(&opts.TrustedGateways), "trusted-gateway", "a Kubernetes user trusted as a gateway, e.g. system:serviceaccount:playground-system:playground-gateway, presenting a token bound to this node (repeatable, or comma-separated)")
	tlsMode := fs.String("tls", "", "how the API serves TLS: csr (a certificate from the Playground signer through the CertificateSigningRequest API, renewed automatically), files (--tls-cert and --tls-key, e.g. from cert-manager) or off (cleartext HTTP/2, for playground-dev only); default files when --tls-cert is set, else csr")
	fs.DurationVar(&opts.CertLifetime, "tls-cert-lifetime", nodeagent.DefaultCertLifetime, "with --tls=csr, the certificate lifetime to request (the signer may issue a shorter one); renewed at two thirds of it")
	fs.StringVar(&opts.TLSCertFile, "tls-cert", "", "with --tls=files, the PEM certificate of the API, re-read when it changes")
	fs.StringVar(&opts.TLSKeyFile, "tls-key", "", "with --tls=files, the PEM key of the API")
	fs.StringVar(&opts.LeaseNamespace, "lease-namespace", agentlease.DefaultNamespace, "namespace of the agents' registration Leases (it must exist)")
	fs.DurationVar(&opts.LeaseDuration, "lease-duration", agentlease.DefaultDuration, "how long the registration lasts unrenewed; renewed every third of it")
	fs.DurationVar(&opts.UsageInterval, "usage-interval", nodeagent.DefaultUsageInterval, "how often the sandboxes' use of the node (CPU, memory; disk every fourth time) is read from their counters into the usage metrics and limits")
	fs.Float64Var(&opts.Agent.UsageLimitOvershoot, "usage-limit-overshoot", hostagent.DefaultUsageLimitOvershoot, "CPU-seconds a sandbox may use past its spent spec.usageLimits.cpuSeconds before the agent freezes it (plus the freeze's latency): a sandbox near its limit is checked sooner as its budget shrinks, and every overshoot/cores near the end; at least 0.1")
	fs.DurationVar(&opts.StateWriteInterval, "state-write-interval", nodeagent.DefaultStateWriteInterval, "the least time between two writes of a sandbox's runtime state (its Running condition: asleep for idleness, waking, frozen for its usage limit, running) to its status: a change within it is written when it has passed, the latest state winning, so that a sandbox that sleeps and wakes again and again costs one status write per interval at most")
	fs.IntVar(&opts.Workers, "workers", nodeagent.DefaultWorkers, "how many sandboxes are provisioned or destroyed at once")
	fs.IntVar(&opts.SnapshotsPerSandbox, "snapshots-per-sandbox", nodeagent.DefaultSnapshotsPerSandbox, "how many SandboxSnapshots this node keeps of one sandbox: past it a new one is refused (each holds a copy of the sandbox's disk, and of its memory on gVisor)")
	fs.StringVar(&labels, "node-labels", "", "the node's labels for node selectors, as k=v,k=v")
	fs.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", "0", "address of the metrics endpoint; 0 disables it")
	fs.StringVar(&opts.PprofBindAddress, "pprof-bind-address", "0", pprofUsage)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	fs.StringVar(&builderCPU, "faculty-builder-cpu", resource.NewMilliQuantity(faculty.DefaultCPUMillis, resource.DecimalSI).String(), "CPU of each throwaway builder of a faculty bundle (a quantity, e.g. 500m)")
	fs.StringVar(&builderMem, "faculty-builder-memory", resource.NewQuantity(faculty.DefaultMemoryBytes, resource.BinarySI).String(), "memory of each faculty builder (a quantity, e.g. 2Gi)")
	fs.StringVar(&builderDisk, "faculty-builder-storage", resource.NewQuantity(faculty.DefaultStorageBytes, resource.BinarySI).String(), "disk each faculty builder may write, /out included (a quantity, e.g. 4Gi)")
	fs.DurationVar(&opts.Faculties.RetryAfter, "faculty-retry-after", faculty.DefaultRetryAfter, "how long a failed faculty build is answered with its failure before it is built again")
	fs.DurationVar(&opts.FacultyReread, "faculty-reread", nodeagent.DefaultFacultyReread, "how often a faculty bundle's hostPath source is read again for changes")
	fs.DurationVar(&opts.Faculties.MaxTimeout, "faculty-max-build-timeout", faculty.DefaultMaxTimeout, "the longest a faculty build may run: a bundle whose spec.build.timeout asks more is built with this one")
	fs.Var(cmdflags.StringList(&opts.FacultyHostPathPrefixes), "faculty-host-path-prefix", "a node directory under which FacultyBundles may take their source from a hostPath (repeatable, or comma-separated); none by default: no hostPath source is read. Never /, nor under /proc, /sys or /dev, nor overlapping --state-dir; see docs/faculties.md")
	fs.DurationVar(&opts.Agent.SigningKeyWait, "signing-key-wait", hostagent.DefaultSigningKeyWait, "the longest a call (a session's opening, a worker's start) waits for the signing key of a sandbox that serves before its key is in (a warm claim, whose key the manager delivers beside it): past it the call is refused as unavailable, to be retried")
	fs.DurationVar(&opts.Agent.FileTimeout, "file-timeout", hostagent.DefaultFileTimeout, "the longest a file operation (read, write, their ranged forms, a digest) may run in a sandbox: past it, or when its caller goes, its processes are killed and the call fails saying so; a digest reads about a GiB a second")
	newBackends := backendFlags(fs, &ociOpts)
	var images imageStoreFlags
	fs.StringVar(&images.dir, "image-store-dir", "", "directory of the node's image store: the images Sandboxes run, each layer unpacked once (default: image-store under --state-dir; it should outlive the agent, or every image is pulled again)")
	fs.StringVar(&images.bytes, "image-store-bytes", "20Gi", "disk the image store's unpacked layers may take (a quantity): past it the least recently used images no sandbox runs are removed, and an image that does not fit even so is refused")
	fs.StringVar(&images.layerBytes, "image-layer-bytes", "4Gi", "the most one layer of an image may take, compressed or unpacked (a quantity): a decompression bomb stops here")
	fs.DurationVar(&images.checkTTL, "image-check-ttl", defaultImageCheckTTL, "how long the registry's answer that a tenant may pull a private image the node has cached is trusted before it is asked again")
	fs.Var(cmdflags.StringList(&images.plainHTTP), "image-registry-plain-http", "an image registry (host:port, or a host for any port) the node pulls from over cleartext HTTP; repeatable. Every other registry is reached over HTTPS only, so that no pull credential crosses the network in the clear")
	fs.StringVar(&images.caFile, "image-registry-ca-file", "", "PEM file of CAs trusted, beside the system's, for the registries the node pulls images from")
	fs.IntVar(&ociOpts.EgressNodeConns, "egress-node-connections", oci.DefaultEgressNodeConns, "connections one sandbox holds at once to each of the agent's listeners on its link, its resolver (TCP) and its server-name gate; its nftables ruleset refuses new ones past four times this")
	budgetFlags(fs, &opts.Budget, budget.Limits{})
	httpFlags(fs, &opts.HTTP, agentserver.DefaultHTTPLimits())
	connBudget := connectionBudgetFlag(fs)
	logOpts := cmdflags.LogFlags(fs, "json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := connBudget(); err != nil {
		return err
	}
	if ociOpts.EgressNodeConns <= 0 {
		return fmt.Errorf("--egress-node-connections must be positive, not %d", ociOpts.EgressNodeConns)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := checkFacultyFlags(opts, ociOpts.StateDir); err != nil {
		return err
	}
	if opts.Agent.FileTimeout <= 0 {
		return fmt.Errorf("--file-timeout: want a positive duration, not %s", opts.Agent.FileTimeout)
	}
	if opts.Agent.SigningKeyWait <= 0 {
		return fmt.Errorf("--signing-key-wait: want a positive duration, not %s", opts.Agent.SigningKeyWait)
	}

	opts.Logger = logOpts.SetLogger()
	opts.Logger.Info("Starting the host agent", "version", buildVersion())
	opts.Owner = ownServiceAccount(opts.Logger)

	if *tlsMode == "" {
		*tlsMode = "csr"
		if opts.TLSCertFile != "" {
			*tlsMode = "files"
		}
	}
	switch *tlsMode {
	case "csr":
		if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
			return errors.New("--tls=csr: --tls-cert and --tls-key are for --tls=files")
		}
		opts.TLSFromCSR = true
	case "files":
		if opts.TLSCertFile == "" || opts.TLSKeyFile == "" {
			return errors.New("--tls=files needs --tls-cert and --tls-key")
		}
	case "off":
		if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
			return errors.New("--tls=off: --tls-cert and --tls-key are for --tls=files")
		}
	default:
		return fmt.Errorf("--tls: want csr, files or off, not %q", *tlsMode)
	}

	switch n := oci.Network(network); n {
	case oci.NetworkNone, oci.NetworkEgress:
		ociOpts.Network = n
	default:
		return fmt.Errorf("--network: want none or egress, not %q", network)
	}
	switch *egressIPv6 {
	case "on":
		ociOpts.EgressIPv6 = true
	case "off":
	case "auto":
		ociOpts.EgressIPv6 = oci.HasIPv6Route()
	default:
		return fmt.Errorf("--egress-ipv6: want on, off or auto, not %q", *egressIPv6)
	}
	pool6, err := netip.ParsePrefix(*egressPool6)
	if err != nil {
		return fmt.Errorf("--egress-pool6: %w", err)
	}
	ociOpts.EgressPool6 = pool6
	pool, err := netip.ParsePrefix(egressPool)
	if err != nil {
		return fmt.Errorf("--egress-pool: %w", err)
	}
	ociOpts.EgressPool = pool
	q, err := resource.ParseQuantity(reserve)
	if err != nil || q.Sign() < 0 {
		return fmt.Errorf("--storage-reserve: want a non-negative quantity such as 10Gi, not %q", reserve)
	}
	ociOpts.StorageReserve = q.Value()
	if ociOpts.WarmPool < 0 || ociOpts.WarmPoolRate <= 0 {
		return fmt.Errorf("--warm-pool must not be negative, and --warm-pool-rate must be positive")
	}
	if ociOpts.ImagePools, err = checkImagePools(opts.ImagePools); err != nil {
		return err
	}
	ociOpts.NewID = sandboxids.New
	for _, f := range []struct {
		flag, value string
		to          *int64
		milli       bool
	}{
		{"--faculty-builder-cpu", builderCPU, &opts.Faculties.Resources.CPUMillis, true},
		{"--faculty-builder-memory", builderMem, &opts.Faculties.Resources.MemoryBytes, false},
		{"--faculty-builder-storage", builderDisk, &opts.Faculties.Storage.LayerBytes, false},
	} {
		q, err := resource.ParseQuantity(f.value)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("%s: want a positive quantity, not %q", f.flag, f.value)
		}
		if *f.to = q.Value(); f.milli {
			*f.to = q.MilliValue()
		}
	}
	if opts.Labels, err = parseLabels(labels); err != nil {
		return fmt.Errorf("--node-labels: %w", err)
	}
	if err := opts.Budget.Validate(); err != nil {
		return fmt.Errorf("--budget-*: %w", err)
	}
	if err := opts.HTTP.Validate(); err != nil {
		return fmt.Errorf("--http-*: %w", err)
	}
	if opts.TokenFile == "" && len(opts.TrustedGateways) == 0 {
		return fmt.Errorf("--trusted-gateway (the gateway's ServiceAccount) or --token-file is required: otherwise no gateway can reach the agent")
	}
	if opts.Endpoint == "" {
		if opts.AdvertiseHost, err = advertiseHost(opts.ListenAddress, os.Getenv("POD_IP")); err != nil {
			return err
		}
	}
	if opts.Config, err = restConfig(kubeconfig); err != nil {
		return err
	}
	if ociOpts.GVisorRuntime, err = cmdflags.LookRunsc(runsc); err != nil {
		return err
	}
	opts.StateDir = ociOpts.StateDir
	hub := &egressdns.Hub{}
	ociOpts.OnEgressDNS, opts.EgressDNS = hub.Record, hub
	// The backends this node offers: on Linux oci, vm and lima; on
	// FreeBSD jail (agent_<os>.go).
	if opts.Backends, err = newBackends(ctx, opts.Logger); err != nil {
		return err
	}
	if opts.Images, err = images.open(ociOpts.StateDir, opts.Backends); err != nil {
		return err
	}
	if ociOpts.ImagePools && opts.Images == nil {
		return errors.New("--warm-pool-images, --warm-pool-image: this node's backends run no image (only oci does, on Linux): drop them")
	}
	// The agent records the calls of users who reach it directly; the
	// gateways' calls are in the gateways' trails.
	if opts.Audit, err = auditTrail("agent", true); err != nil {
		return err
	}
	defer func() {
		if err := opts.Audit.Close(); err != nil {
			opts.Logger.Error(err, "Closing the audit trail")
		}
	}()
	tracer, stopTracer, err := tracerOf("agent", opts.NodeName, opts.Logger)
	if err != nil {
		return err
	}
	defer stopTracer()
	opts.Agent.Tracer = tracer
	return nodeagent.Run(ctx, opts)
}

// checkImagePools checks the flags of the warm pools of images, and
// says whether any image is pooled.
func checkImagePools(o nodeagent.ImagePoolOptions) (bool, error) {
	if o.InUse < 0 || o.Size < 0 || o.Max < 0 {
		return false, fmt.Errorf("--warm-pool-images, --warm-pool-image-size and --warm-pool-images-max must not be negative")
	}
	for _, ref := range o.Named {
		if _, err := name.NewDigest(ref, name.StrictValidation); err != nil {
			return false, fmt.Errorf("--warm-pool-image %q: want an image by digest, registry/repo@sha256:<64 hex digits> (the node pools exactly those bytes; `crane digest REF` resolves a tag): %w", ref, err)
		}
	}
	if (o.InUse > 0 || len(o.Named) > 0) && (o.Size == 0 || o.Max == 0) {
		return false, fmt.Errorf("--warm-pool-image-size and --warm-pool-images-max must be positive where images are pooled (--warm-pool-images, --warm-pool-image)")
	}
	return o.InUse > 0 || len(o.Named) > 0, nil
}

// checkFacultyFlags refuses a host path prefix that no agent may grant
// (package hostpath) and a maximum build timeout that is not positive.
func checkFacultyFlags(opts nodeagent.Options, stateDir string) error {
	if _, err := hostpath.New(opts.FacultyHostPathPrefixes, stateDir, filepath.Join(stateDir, "faculties")); err != nil {
		return fmt.Errorf("--faculty-host-path-prefix: %w", err)
	}
	if opts.Faculties.MaxTimeout <= 0 {
		return fmt.Errorf("--faculty-max-build-timeout: want a positive duration, not %s", opts.Faculties.MaxTimeout)
	}
	return nil
}

// restConfig loads the client configuration of the agent and the gateway:
// the kubeconfig file when given, else ctrl.GetConfig's order ($KUBECONFIG,
// in-cluster, ~/.kube/config). Like controller-runtime's loader, it leaves
// throttling to the API server's priority and fairness: client-go's default
// of 5 requests/s would make an agent take minutes to bring up a thousand
// sandboxes.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

func defaultNodeName() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return strings.ToLower(h)
}

// advertiseHost is the host of the agent API's URL as peers reach it
// (the port is the listener's): the pod's IP when set, else the listen
// host unless it is a wildcard, else the hostname.
func advertiseHost(listen, podIP string) (string, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	if podIP != "" {
		return podIP, nil
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return host, nil
	}
	if host, err = os.Hostname(); err != nil {
		return "", fmt.Errorf("deriving --advertise: %w", err)
	}
	return host, nil
}

// parseLabels parses k=v,k=v into node labels, validated as Kubernetes
// labels.
func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
		}
		labels[k] = v
	}
	return labels, nil
}
