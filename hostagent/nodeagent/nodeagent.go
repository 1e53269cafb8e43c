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

// Package nodeagent runs the host agent of one node: the execution kernel
// (hostagent.Agent) on a backend, its authenticated API (agentapi), the
// node's registration Lease (agentlease) and the node-local reconciler that
// drives the kernel from the Sandboxes bound to the node, as the kubelet
// does with its Pods.
//
// Start-up order: the API listener is bound, the Lease is registered (so a
// restart within the Lease's duration does not make the node look
// unhealthy), the node's provisioned Sandboxes are reattached, and only
// then are the API served and the reconciler started.
//
// On shutdown the Lease is left to expire rather than deleted: a restarted
// agent renews it before it lapses, so its Sandboxes stay Ready across a
// rollout, while an agent that is gone for good is noticed by the manager
// once the Lease's duration has passed.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/agentserver"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/hostagent/faculty"
	"github.com/playground-dev/playground/hostagent/hostpath"
	"github.com/playground-dev/playground/hostagent/jobs"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/internal/httpserve"
	"github.com/playground-dev/playground/internal/scheme"
	"github.com/playground-dev/playground/internal/selfowner"
)

// Defaults of Options.
const (
	DefaultShutdownGrace  = 30 * time.Second
	DefaultResyncInterval = 5 * time.Second
	DefaultUsageInterval  = 15 * time.Second
	// DefaultSnapshotsPerSandbox is Options.SnapshotsPerSandbox's default.
	DefaultSnapshotsPerSandbox = 8
	DefaultTokenReloadInterval = 30 * time.Second
	DefaultWorkers             = 16
	// DefaultReattachTimeout bounds the take-over of each sandbox when the
	// agent starts; past it the sandbox is left to the reconciler, which
	// reports it on its Sandbox and retries with backoff.
	DefaultReattachTimeout = 30 * time.Second
)

// idleCheckInterval is how often the agent looks for sandboxes idle past
// their spec.idleSuspend: a sandbox sleeps within this much of its time.
const idleCheckInterval = time.Second

// Options configure a node's agent.
type Options struct {
	// Config reaches the API server.
	Config *rest.Config
	// NodeName is the node this agent serves: it reconciles the Sandboxes
	// whose spec.nodeName it is, and registers under it.
	NodeName string

	// Backends run the sandboxes, one per backend class: the agent offers
	// them in its Lease, serves the Sandboxes bound to its node whose
	// spec.backend names one, and closes them when it stops. At least
	// one; cmd constructs them.
	Backends []backend.Backend
	// EgressDNS, when set, is the hub the backends' resolvers record
	// their decisions to (oci.Options.OnEgressDNS): the agent counts,
	// logs and reports them as Events.
	EgressDNS *egressdns.Hub
	// StateDir holds the agent's own records: which Sandbox owns which
	// sandbox ID (StateDir/sandbox-ids, a file per sandbox). Like the
	// backends' state, it must outlive the agent: without its records, a
	// sandbox's files are not found again. Required.
	StateDir string
	// Agent configures the execution kernel; its Backends are ignored.
	Agent hostagent.Options
	// Budget bounds the API's synchronous calls (exec, read, write) in
	// flight and the bytes they hold, per tenant and in total (zero
	// fields: the defaults of package budget).
	Budget budget.Limits
	// HTTP bounds the API's connections, streams and the time a peer may
	// take (zero: agentserver.DefaultHTTPLimits).
	HTTP httpserve.Limits

	// Listener serves the agent API (Run closes it); nil means listen on
	// ListenAddress.
	Listener      net.Listener
	ListenAddress string
	// Endpoint is the agent API's URL published in the Lease and in the
	// Sandboxes' status. Empty means derived: AdvertiseHost (the pod's IP,
	// say) with the listener's port, or else the listener's address, which
	// must then be a specific one.
	Endpoint      string
	AdvertiseHost string
	// TrustedGateways are the Kubernetes users (a gateway's ServiceAccount,
	// system:serviceaccount:NAMESPACE:NAME) whose tokens bound to this
	// node's audience make them a trusted gateway, which may act as any
	// tenant. Every other caller the API server authenticates is a user,
	// allowed only the tenants its RBAC lets it "use" (stdio mode).
	TrustedGateways []string
	// TrustedManagers are the manager's Kubernetes users, whose tokens
	// bound to this node's audience deliver the brokered egress
	// credentials of the node's sandboxes, and do nothing else.
	TrustedManagers []string
	// Audit records the calls of callers other than a trusted gateway
	// and the manager (a stdio user, the kubectl plugin's exec); nil:
	// none.
	Audit *audit.Trail
	// Tokens are shared bearer tokens the API accepts as a trusted
	// gateway's (playground-dev), and TokenFile a file holding more, one
	// per line, re-read every TokenReloadInterval so a rotated Secret
	// takes effect without a restart. With neither a token nor a trusted
	// gateway the agent refuses to start: no gateway could reach it.
	Tokens              []string
	TokenFile           string
	TokenReloadInterval time.Duration
	// AuthCacheTTL bounds how long a caller's TokenReview is trusted
	// (default agentserver.DefaultAuthCacheTTL).
	AuthCacheTTL time.Duration
	// TLSFromCSR serves the API over TLS with a certificate for the
	// endpoint's host that the agent requests through the
	// CertificateSigningRequest API from the Playground signer (the
	// manager), renewed at two thirds of its lifetime. CertLifetime is the
	// lifetime asked for (default DefaultCertLifetime; the signer may
	// issue a shorter one).
	TLSFromCSR   bool
	CertLifetime time.Duration
	// TLSCertFile and TLSKeyFile serve the API over TLS from files (another
	// issuer, such as cert-manager; re-read when they change). Without
	// them or TLSFromCSR it speaks cleartext HTTP/2 (h2c): playground-dev
	// only.
	TLSCertFile string
	TLSKeyFile  string

	// Owner, the agent's ServiceAccount, owns the agent's Lease, so that
	// uninstalling removes it (package selfowner); nil outside a cluster.
	Owner *selfowner.Owner
	// LeaseNamespace holds the agent's Lease; it must exist.
	// Default agentlease.DefaultNamespace.
	LeaseNamespace string
	// LeaseDuration is the registration's lifetime, renewed every third of
	// it; whole seconds, at least 3. Default agentlease.DefaultDuration.
	LeaseDuration time.Duration
	// Labels are the node's labels as node selectors see them. The agent
	// adds kubernetes.io/hostname=NodeName unless set.
	Labels map[string]string

	// Logger is the agent's logger; the zero value discards.
	Logger logr.Logger
	// MetricsBindAddress serves controller-runtime's metrics; "" or "0"
	// disables them.
	MetricsBindAddress string
	// PprofBindAddress serves Go's profiles (/debug/pprof/), without
	// authentication; "" or "0", the default, disables them.
	PprofBindAddress string
	// ShutdownGrace bounds the API's graceful shutdown and the kill of
	// running jobs.
	ShutdownGrace time.Duration
	// ResyncInterval is how often the agent compares what it serves (open
	// session handles, its status fields) with the Sandboxes' status and
	// re-reconciles the ones that drifted.
	ResyncInterval time.Duration
	// StateWriteInterval paces the reports of a sandbox's runtime state
	// (its Running condition: asleep for idleness, waking, frozen for its
	// usage limit, running): a change is written at once when the
	// sandbox's state was last written this long ago or more, else when
	// it has been, the latest state winning (states.go). It bounds the
	// status writes of a sandbox that sleeps and wakes again and again to
	// one per interval (default DefaultStateWriteInterval).
	StateWriteInterval time.Duration
	// UsageInterval is how often the sandboxes' use of the node is read
	// from their counters (CPU, memory; their disk every fourth time)
	// into the usage book, its metrics and limits (default
	// DefaultUsageInterval).
	UsageInterval time.Duration
	// Workers is the number of Sandboxes reconciled concurrently, and of
	// sandboxes taken over at once when the agent starts.
	Workers int
	// SnapshotsPerSandbox bounds the SandboxSnapshots the node keeps of
	// one sandbox: past it a new one is refused (SnapshotFailed), so that
	// a team's snapshots take at most this many copies of a sandbox's disk
	// and memory; DefaultSnapshotsPerSandbox when zero.
	SnapshotsPerSandbox int
	// ReattachTimeout bounds the take-over of each sandbox when the agent
	// starts (DefaultReattachTimeout). The API serves meanwhile: a
	// sandbox's own calls are answered as unavailable until it is taken
	// over, and no sandbox holds the others.
	ReattachTimeout time.Duration

	// Images is the node's image store, from which the sandboxes whose
	// Sandbox names an image get it (StoreImages); nil: such a sandbox is
	// refused (ImageRefused).
	Images ImageStore
	// ImagePools are the warm pools of images (imagepools.go): none
	// unless set; they need Images, and a backend that runs images with
	// its image pools on (oci.Options.ImagePools).
	ImagePools ImagePoolOptions
	// ImageKeychains gives the pull credentials of a Sandbox; nil: those
	// the manager delivered to this agent (the Agent's ImageCredentials).
	ImageKeychains Keychains

	// Faculties configures the node's build cache of FacultyBundles: its
	// Dir defaults to StateDir/faculties (the cache must outlive the
	// agent, so that a restarted agent reattaches sandboxes with their
	// builds without building again), its Builder to the first backend
	// that builds (backend.Builder), its Logger to the agent's.
	Faculties faculty.Options
	// FacultyReread is how often a bundle's host path source is read again
	// for changes (default DefaultFacultyReread); a ConfigMap source is
	// watched.
	FacultyReread time.Duration
	// FacultyHostPathPrefixes are the node's directories under which a
	// FacultyBundle's spec.source.hostPath may lie (package hostpath). They
	// are the cluster admin's grant, never a bundle's: a bundle names any
	// path its namespace likes. Empty, the default: no host path is read.
	// A prefix that is "/", lies under /proc, /sys or /dev, or overlaps
	// StateDir is refused at start.
	FacultyHostPathPrefixes []string
}

func (o *Options) setDefaults() error {
	if o.Config == nil {
		return errors.New("nodeagent: a rest.Config is required")
	}
	if errs := validation.IsDNS1123Subdomain(o.NodeName); len(errs) > 0 {
		return fmt.Errorf("nodeagent: node name %q: %s", o.NodeName, strings.Join(errs, "; "))
	}
	if len(o.Backends) == 0 {
		return errors.New("nodeagent: at least one backend is required")
	}
	if !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("nodeagent: the state directory %q must be an absolute path", o.StateDir)
	}
	if o.Faculties.Dir == "" {
		o.Faculties.Dir = filepath.Join(o.StateDir, "faculties")
	}
	if _, err := hostpath.New(o.FacultyHostPathPrefixes, o.StateDir, o.Faculties.Dir); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	if o.Listener == nil && o.ListenAddress == "" {
		return errors.New("nodeagent: a listener or a listen address is required")
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return errors.New("nodeagent: TLS needs both a certificate and a key")
	}
	if o.TLSFromCSR && o.TLSCertFile != "" {
		return errors.New("nodeagent: TLS from a CSR and from files exclude each other")
	}
	if o.CertLifetime <= 0 {
		o.CertLifetime = DefaultCertLifetime
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = agentlease.DefaultNamespace
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = agentlease.DefaultDuration
	}
	if o.LeaseDuration < 3*time.Second || o.LeaseDuration%time.Second != 0 {
		return fmt.Errorf("nodeagent: lease duration %s: want whole seconds, at least 3s", o.LeaseDuration)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	if o.PprofBindAddress == "" {
		o.PprofBindAddress = "0"
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.UsageInterval <= 0 {
		o.UsageInterval = DefaultUsageInterval
	}
	if o.StateWriteInterval <= 0 {
		o.StateWriteInterval = DefaultStateWriteInterval
	}
	if o.SnapshotsPerSandbox <= 0 {
		o.SnapshotsPerSandbox = DefaultSnapshotsPerSandbox
	}
	if o.TokenReloadInterval <= 0 {
		o.TokenReloadInterval = DefaultTokenReloadInterval
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.ReattachTimeout <= 0 {
		o.ReattachTimeout = DefaultReattachTimeout
	}
	if err := o.Budget.Validate(); err != nil {
		return fmt.Errorf("nodeagent: budget: %w", err)
	}
	if o.HTTP == (httpserve.Limits{}) {
		o.HTTP = agentserver.DefaultHTTPLimits()
	}
	if err := o.HTTP.Validate(); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	labels := make(map[string]string, len(o.Labels)+1)
	for k, v := range o.Labels {
		labels[k] = v
	}
	if _, ok := labels["kubernetes.io/hostname"]; !ok {
		labels["kubernetes.io/hostname"] = o.NodeName
	}
	o.Labels = labels
	return nil
}

// Scheme returns the scheme the agent's clients use.
func Scheme() *runtime.Scheme { return scheme.New() }

// Run runs the node's agent until ctx ends. It returns nil after a clean
// shutdown, or the error that stopped it.
func Run(ctx context.Context, opts Options) error {
	if err := opts.setDefaults(); err != nil {
		return err
	}
	log := opts.Logger.WithValues("node", opts.NodeName)
	ctx = logr.NewContext(ctx, log)

	// Callers first: an agent that no gateway could reach is a
	// misconfiguration to report before touching anything.
	tokens, err := newTokenSource(opts.Tokens, opts.TokenFile, len(opts.TrustedGateways) > 0)
	if err != nil {
		return err
	}
	reviews, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	tlsConfig, stopTLS, err := newTLSConfig(ctx, opts.TLSCertFile, opts.TLSKeyFile, log)
	if err != nil {
		return err
	}
	defer stopTLS()

	agentOpts := opts.Agent
	agentOpts.Backends = opts.Backends
	if agentOpts.UsageFile == "" {
		agentOpts.UsageFile = filepath.Join(opts.StateDir, "usage.json")
	}
	if agentOpts.Logger.GetSink() == nil {
		agentOpts.Logger = log.WithName("kernel")
	}
	agent, err := hostagent.New(agentOpts)
	if err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	if opts.ImageKeychains == nil {
		// The node's pulls use what the manager delivered to this agent
		// for each Sandbox (POST /v1/image-credentials).
		opts.ImageKeychains = agent.ImageCredentials()
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownGrace)
		defer cancel()
		if err := agent.Close(cctx); err != nil {
			log.Error(err, "Stopping the agent's jobs")
		}
		// What the process's exit would do: a backend that holds
		// connections to its sandboxes (a VM's port takes one at a
		// time) lets go, so that the next agent connects.
		for _, be := range opts.Backends {
			if c, ok := be.(io.Closer); ok {
				_ = c.Close()
			}
		}
	}()
	lim, err := budget.New(opts.Budget)
	if err != nil {
		return fmt.Errorf("nodeagent: budget: %w", err)
	}
	defer registerMetrics(agent, lim, opts.NodeName, log)() // registered now, unregistered on return

	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", opts.ListenAddress); err != nil {
			return fmt.Errorf("nodeagent: agent API: %w", err)
		}
	}
	defer ln.Close()
	endpoint := opts.Endpoint
	if endpoint == "" {
		if endpoint, err = endpointOf(ln.Addr(), opts.AdvertiseHost, tlsConfig != nil || opts.TLSFromCSR); err != nil {
			return err
		}
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("nodeagent: endpoint %q is not an http(s) URL", endpoint)
	} else if (u.Scheme == "https") != (tlsConfig != nil || opts.TLSFromCSR) {
		return fmt.Errorf("nodeagent: endpoint %q: the scheme must be https exactly when the API serves TLS", endpoint)
	}
	// The certificate comes before the registration: the gateway never
	// sees an https endpoint that cannot complete a handshake.
	var cert *servingCert
	if opts.TLSFromCSR {
		cert = &servingCert{client: reviews, node: opts.NodeName, endpoint: endpoint, lifetime: opts.CertLifetime, log: log.WithName("cert")}
		if err := cert.obtain(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("nodeagent: serving certificate: %w", err)
		}
		tlsConfig = cert.tlsConfig()
		log.Info("Obtained the agent API's serving certificate", "signer", agentpki.SignerName, "notAfter", cert.cert.Load().Leaf.NotAfter)
	}

	ids, err := sandboxids.Open(filepath.Join(opts.StateDir, "sandbox-ids"))
	if err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	mgr, rec, err := newManager(opts, agent, ids, endpoint)
	if err != nil {
		return err
	}
	defer registerFacultyMetrics(rec.faculties.cache, opts.NodeName, log)()
	defer recordEgress(ctx, opts.EgressDNS, rec, log)()
	defer registerEgressMetrics(opts.Backends, opts.NodeName, log)()

	server := agentserver.NewServer(agent, log.WithName("api"), tokens.current()...)
	server.SetBudget(lim)
	server.SetHTTPLimits(opts.HTTP)
	server.SetAudit(opts.Audit, opts.NodeName)
	server.SetKeyInbox(rec.keys)
	pullCreds, err := newCredentialInbox(ctx, mgr, opts.NodeName, agent.ImageCredentials())
	if err != nil {
		return err
	}
	server.SetPullCredentialInbox(pullCreds)
	server.SetPiles(&pileKeeper{r: rec, log: log.WithName("piles")})
	if opts.Agent.Tracer != nil {
		server.SetTracer(opts.Agent.Tracer)
	}
	server.SetIdentities(&agentserver.KubeAuth{
		Client:   reviews,
		Audience: agentapi.NodeAudience(opts.NodeName),
		Gateways: opts.TrustedGateways,
		Managers: opts.TrustedManagers,
		CacheTTL: opts.AuthCacheTTL,
	})
	started := time.Now()
	hb := &heartbeat{
		reader: mgr.GetAPIReader(),
		writer: mgr.GetClient(),
		node:   opts.NodeName,
		ns:     opts.LeaseNamespace,
		owner:  opts.Owner,
		period: opts.LeaseDuration / 3,
		registration: func() agentlease.Registration {
			return agentlease.Registration{
				Node:            opts.NodeName,
				Endpoint:        endpoint,
				Protocol:        agentapi.Current.String(),
				Backends:        backendNames(opts.Backends),
				Isolations:      isolations(opts.Backends),
				Networks:        networks(opts.Backends),
				MemorySuspend:   memorySuspend(opts.Backends),
				Notes:           backendNotes(opts.Backends),
				Labels:          opts.Labels,
				AdmissionHalted: haltSummary(agent.Jobs().Halts()),
				Duration:        opts.LeaseDuration,
				Started:         started,
			}
		},
	}
	if err := hb.renew(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("nodeagent: registering node %s in Lease %s/%s: %w", opts.NodeName, opts.LeaseNamespace, agentlease.Name(opts.NodeName), err)
	}
	log.Info("Registered the node", "lease", opts.LeaseNamespace+"/"+agentlease.Name(opts.NodeName), "endpoint", endpoint)

	return runAll(ctx,
		task{"lease heartbeat", hb.run},
		task{"reattach and serve", func(ctx context.Context) error {
			// The API serves as soon as the agent knows which sandboxes
			// it takes over: each sandbox's own calls wait for its own
			// take-over, and none waits for another's.
			pending, err := rec.pendingReattach(ctx)
			if err != nil {
				return err
			}
			return runAll(ctx,
				task{"agent API", func(ctx context.Context) error {
					log.Info("Serving the agent API", "address", ln.Addr().String(), "tls", tlsConfig != nil)
					return server.Serve(ctx, ln, tlsConfig, opts.ShutdownGrace)
				}},
				task{"reattach, then reconcile", func(ctx context.Context) error {
					if err := rec.reattachAll(ctx, pending, opts.Workers, opts.ReattachTimeout); err != nil {
						return err
					}
					return runAll(ctx,
						task{"reconciler", mgr.Start},
						task{"runtime states", func(ctx context.Context) error { return rec.watchStates(ctx, agent.StateChanges()) }},
						task{"usage", func(ctx context.Context) error { return sampleUsage(ctx, agent.Usage(), opts.UsageInterval, log) }},
						task{"usage limits", func(ctx context.Context) error { return agent.Limiter().RunLimits(ctx, opts.UsageInterval) }},
						// After the reattach: the sandboxes tenants have
						// come before blank ones. A graceful stop takes the
						// blank ones with it.
						task{"warm pools", func(ctx context.Context) error {
							return agent.Pools().RunPools(ctx, func(id string) bool { _, ok := ids.Owner(id); return ok }, opts.ShutdownGrace)
						}},
						task{"images named for the warm pools", func(ctx context.Context) error {
							return rec.imagePools.pullNamed(ctx, log.WithName("image-pools"))
						}},
					)
				}},
			)
		}},
		task{"idle suspension", func(ctx context.Context) error {
			return agent.Idleness().RunIdle(ctx, idleCheckInterval)
		}},
		task{"token reload", func(ctx context.Context) error {
			return tokens.watch(ctx, opts.TokenReloadInterval, server.SetTokens)
		}},
		task{"serving certificate renewal", func(ctx context.Context) error {
			if cert == nil {
				<-ctx.Done()
				return nil
			}
			return cert.run(ctx)
		}},
	)
}

// endpointOf derives the API's URL from the listener's port and host, or
// the listener's address when it is a specific one: a wildcard address
// says nothing about how peers reach it.
func endpointOf(addr net.Addr, host string, tls bool) (string, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "", fmt.Errorf("nodeagent: the API listens on %s, not TCP: set the endpoint to advertise", addr)
	}
	if host == "" {
		if tcp.IP == nil || tcp.IP.IsUnspecified() {
			return "", fmt.Errorf("nodeagent: the API listens on %s: set the endpoint or host to advertise", addr)
		}
		host = tcp.IP.String()
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)), nil
}

// task is one long-running component of the agent.
type task struct {
	name string
	run  func(context.Context) error
}

// runAll runs tasks until ctx ends or one of them stops, then stops the
// others and waits for all. It returns the first error; a task that stops
// on its own before ctx ends is an error too.
func runAll(ctx context.Context, tasks ...task) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(tasks))
	for _, t := range tasks {
		go func() {
			err := t.run(ctx)
			switch {
			case ctx.Err() != nil && errors.Is(err, context.Canceled):
				err = nil // stopped as asked
			case err == nil && ctx.Err() == nil:
				err = fmt.Errorf("nodeagent: %s stopped unexpectedly", t.name)
			case err != nil:
				err = fmt.Errorf("nodeagent: %s: %w", t.name, err)
			}
			errc <- err
		}()
	}
	var first error
	for range tasks {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
		cancel()
	}
	return first
}

// haltSummary says, for the node's Lease, in which sandboxes job admission
// is halted; each Sandbox's JobsAdmitted condition has the details.
func haltSummary(halts []jobs.AdmissionStatus) string {
	if len(halts) == 0 {
		return ""
	}
	ids := make([]string, 0, min(len(halts), 8))
	for _, h := range halts[:min(len(halts), 8)] {
		ids = append(ids, h.SandboxID)
	}
	more := ""
	if len(halts) > len(ids) {
		more = fmt.Sprintf(" and %d more", len(halts)-len(ids))
	}
	return fmt.Sprintf("in %d sandbox(es): %s%s (see their JobsAdmitted condition)", len(halts), strings.Join(ids, ", "), more)
}

// backendNotes are what the backends say of themselves, by class.
func backendNotes(bes []backend.Backend) map[string]string {
	var notes map[string]string
	for _, be := range bes {
		if d := be.Capabilities().Describer; d != nil {
			if notes == nil {
				notes = map[string]string{}
			}
			notes[be.Name()], _ = d.Describe()
		}
	}
	return notes
}

// isolations are what the backends run between them.
func isolations(bes []backend.Backend) []string {
	var isos []string
	for _, be := range bes {
		for _, iso := range backend.Isolations(be) {
			if !slices.Contains(isos, iso) {
				isos = append(isos, iso)
			}
		}
	}
	return isos
}

// memorySuspend is where a suspension keeps a sandbox's memory, as
// backend/isolation pairs.
func memorySuspend(bes []backend.Backend) []string {
	var keeps []string
	for _, be := range bes {
		if sus := be.Capabilities().Suspender; sus != nil {
			for _, iso := range sus.CheckpointIsolations() {
				keeps = append(keeps, be.Name()+"/"+iso)
			}
		}
	}
	return keeps
}

// networks are the network modes each backend serves (see
// playgroundv1alpha1.NetworkMode), by class.
func networks(bes []backend.Backend) map[string][]string {
	modes := make(map[string][]string, len(bes))
	for _, be := range bes {
		modes[be.Name()] = []string{string(playgroundv1alpha1.NetworkNone)}
		if be.Capabilities().Egress {
			modes[be.Name()] = append(modes[be.Name()], string(playgroundv1alpha1.NetworkEgress))
		}
	}
	return modes
}

// backendNames are the classes of backends, as the Lease offers them.
func backendNames(bes []backend.Backend) []string {
	names := make([]string, len(bes))
	for i, be := range bes {
		names[i] = be.Name()
	}
	return names
}
