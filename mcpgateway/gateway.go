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

package mcpgateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/rest"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/internal/httpserve"
	"github.com/playground-dev/playground/internal/keyedlimit"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
	"github.com/playground-dev/playground/mcpgateway/tools"
	"github.com/playground-dev/playground/mcpgateway/workers"
)

// Catalogs a gateway can be restricted to. By default it serves each
// tenant the catalog its Tenant names, never a union.
const (
	CatalogSandbox = "sandbox"
	CatalogWorkers = "workers"
)

// MaxRequestBytes bounds an MCP request body: a 3 MiB file as base64 is
// 4 MiB, plus the JSON around it and room for escaped text.
const MaxRequestBytes = 6 << 20

// Defaults of Options.
const (
	DefaultSessionIdleTimeout = 10 * time.Minute
	DefaultShutdownGrace      = 10 * time.Second
	// DefaultMaxSessionsPerTenant and DefaultMaxSessions bound the MCP
	// transport sessions a stateful gateway keeps in memory.
	DefaultMaxSessionsPerTenant = 32
	DefaultMaxSessions          = 4096
	// DefaultBudgetBytesPerTenant is the output one tenant's synchronous
	// calls may hold in the gateway at once: room for the largest exec
	// result (2 × 4 MiB and their base64, 18.7 MiB) beside the tenant's
	// other admitted calls, so about one large result at a time. Encoding a
	// large result is CPU-bound (go-sdk's JSON, and the client's decoding
	// after it): a tenant's large results held side by side share that CPU
	// and all end late together, where held one after another most end
	// early, for the same throughput and a third of the bytes held
	// (docs/benchmarks.md, "hostile output"). The agent keeps package
	// budget's 64 MiB: it reserves an exec's worst case up front.
	DefaultBudgetBytesPerTenant = 24 << 20
	// DefaultFailedAuthPerSecond and DefaultFailedAuthBurst: a client that
	// mistypes its token is refused for a second after a burst of tries;
	// one that guesses gets ten guesses a second. maxAuthSources bounds the
	// sources whose failures are remembered.
	DefaultFailedAuthPerSecond = 10
	DefaultFailedAuthBurst     = 50
	DefaultFailedAuthDelay     = time.Second
	maxAuthSources             = 16384
	// maxTarpitted bounds the throttled answers held back at once, as many
	// as the default's unauthenticated connections (httpserve.Limits):
	// past it a throttled request gets no answer, its connection is
	// closed.
	maxTarpitted = 512
)

// DefaultHTTPLimits are the gateway's connection limits (see
// httpserve.Limits).
func DefaultHTTPLimits() httpserve.Limits {
	l := httpserve.DefaultLimits()
	l.Name = "gateway"
	return l
}

// Options configure an HTTP gateway.
type Options struct {
	// Config reaches the API server whose Tenants and Sandboxes the
	// gateway reads (never a tenant's Secret: tokens are authenticated
	// against the hashes the manager publishes in the Tenants' status, and
	// workers' bearers come from the manager's copies in LeaseNamespace).
	Config *rest.Config
	// Namespace limits the gateway to one namespace's tenants; empty is all.
	// With it, the gateway lists and watches Tenants and Sandboxes in that
	// namespace only, so a Role there is all it needs of them.
	Namespace string
	// Catalog, when set, restricts the gateway to the tenants of one
	// catalog (others are refused with 403); empty serves each tenant the
	// catalog its Tenant names.
	Catalog string
	// SessionKeyFile holds the keys that seal the public session IDs of
	// the workers catalog (workers.LoadKeys): replicas that share it serve
	// each other's sessions. Empty, or a file that does not exist: a key
	// generated at start, for one replica.
	SessionKeyFile string
	// WorkerMaxInFlightPerTenant bounds the requests and streams one
	// tenant has open to its worker through this replica
	// (workers.DefaultMaxInFlightPerTenant).
	WorkerMaxInFlightPerTenant int
	// WorkerSessionMaxAge is how long a worker session is accepted after
	// it began (workers.DefaultSessionMaxAge).
	WorkerSessionMaxAge time.Duration
	// WorkerEndpoints is the cluster admin's policy of the addresses a
	// Service destination's endpoints may have (package destpolicy),
	// checked again as each is dialled, whatever a mapping's status says.
	WorkerEndpoints destpolicy.Policy
	// AgentCredentials give the token the gateway presents to the agent
	// of each node: in a cluster its ServiceAccount's, bound to that node
	// (ServiceAccountTokens). AgentToken, if AgentCredentials is nil, is
	// one shared token for every agent (playground-dev).
	AgentCredentials AgentCredentials
	AgentToken       func() (string, error)
	// AgentTLS verifies agents whose endpoint is https:// (nil: the
	// system's roots).
	AgentTLS *tls.Config
	// AgentCleartext lets the gateway reach agents whose endpoint is
	// http:// over cleartext HTTP/2 (h2c): for playground-dev only, whose
	// agent shares its process and loopback. Otherwise such an endpoint is
	// refused, and no token is sent to it.
	AgentCleartext bool
	// AgentCA, when set, verifies https:// agents instead of AgentTLS:
	// against the CA bundle the manager publishes (WatchAgentCA) or a
	// fixed one (StaticAgentCA), and nothing else, with each agent's
	// certificate naming the host of its registered endpoint.
	AgentCA *AgentCA
	// Stateful keeps MCP transport sessions in memory (Mcp-Session-Id),
	// expiring after SessionIdleTimeout. The default, stateless, keeps none:
	// any replica serves any request. See docs/tools.md.
	Stateful           bool
	SessionIdleTimeout time.Duration
	// MaxSessionsPerTenant and MaxSessions bound the stateful sessions
	// kept (defaults DefaultMaxSessionsPerTenant, DefaultMaxSessions); past
	// them an initialize is refused with 429 until one closes or expires.
	MaxSessionsPerTenant int
	MaxSessions          int
	// Budget bounds the synchronous calls (exec, read, write) in flight
	// and the bytes they hold, per tenant and in total (zero fields: the
	// defaults of package budget, but DefaultBudgetBytesPerTenant).
	Budget budget.Limits
	// HTTP bounds connections, streams and the time a peer may take
	// (zero: DefaultHTTPLimits).
	HTTP httpserve.Limits
	// FailedAuthPerSecond and FailedAuthBurst bound the failed
	// authentications of one source address (an IPv6 source by its /64):
	// past them a request without a current credential gets 429 and its
	// connection is closed; a current credential is always served
	// (defaults DefaultFailedAuthPerSecond, DefaultFailedAuthBurst).
	FailedAuthPerSecond float64
	FailedAuthBurst     int
	// FailedAuthDelay holds each throttled answer back this long (at most
	// maxTarpitted at once), so that a flood from one source proceeds at
	// the pace of its connections, not of its CPU (default
	// DefaultFailedAuthDelay).
	FailedAuthDelay time.Duration
	// LeaseNamespace holds the agents' registrations: the gateway presents
	// its agent token only to the endpoint a Sandbox's node registered
	// there; and the manager's copies of the service workers' bearers.
	// Default agentlease.DefaultNamespace.
	LeaseNamespace string
	// StaleAfter bounds how long a broken watch is tolerated before the
	// gateway refuses every request (clusterview.DefaultStaleAfter).
	StaleAfter time.Duration
	// ExecTimeout and ProgressInterval tune the tools (tools.Options).
	ExecTimeout      time.Duration
	ProgressInterval time.Duration
	// Audit records every tool call (nil: none; docs/operations.md).
	Audit *audit.Trail
	// Tracer makes a span of every tool call and worker request, and
	// carries its context to agents and workers (nil: no spans; a
	// client's trace context still reaches native workers).
	Tracer trace.TracerProvider
	// Logger receives the gateway's logs; never tokens or payloads.
	Logger logr.Logger
}

// Gateway serves the MCP tools over Streamable HTTP.
type Gateway struct {
	opts     Options
	view     *clusterview.View
	router   *router
	handler  http.Handler
	log      logr.Logger
	budget   *budget.Limiter
	sessions *sessionLimit
	// workers forwards the tenants of the workers catalog (nil when the
	// gateway is restricted to the sandbox catalog).
	workers      *workers.Forwarder
	workerRoutes *workerRoutes
	// lastRefusalLog rate-limits the log of fail-closed refusals.
	lastRefusalLog atomic.Int64
	// authFailures limits the failed authentications of each source;
	// tarpit holds a slot for each throttled answer held back.
	authFailures *keyedlimit.Limiter
	tarpit       chan struct{}
}

// CheckCatalog refuses catalogs the gateway cannot be restricted to.
func CheckCatalog(c string) error {
	switch c {
	case "", CatalogSandbox, CatalogWorkers:
		return nil
	}
	return fmt.Errorf("unknown catalog %q: want sandbox or workers, or none to serve each tenant its own", c)
}

// The gateway reads, with informers, and never writes: Tenants (their
// status carries the token hashes), Sandboxes, WorkerMappings, and the
// agents' registrations (one that the cache saw lapse is read again with a
// GET). Of Secrets it reads only the manager's copies of the service
// workers' bearers, by name (workerroute.go): none of a tenant's.
// +kubebuilder:rbac:groups=playground.dev,resources=tenants;sandboxes,verbs=list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=workermappings,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=playground-system,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=playground-system,resources=serviceaccounts/token,verbs=create,resourceNames=playground-gateway

// New returns a gateway; Run (or Start and Handler) serves it.
func New(opts Options) (*Gateway, error) {
	if err := CheckCatalog(opts.Catalog); err != nil {
		return nil, err
	}
	if opts.Config == nil {
		return nil, errors.New("mcpgateway: a client configuration is required")
	}
	creds, err := agentCredentials(opts.AgentCredentials, opts.AgentToken)
	if err != nil {
		return nil, err
	}
	if opts.SessionIdleTimeout <= 0 {
		opts.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = agentlease.DefaultNamespace
	}
	if opts.MaxSessionsPerTenant <= 0 {
		opts.MaxSessionsPerTenant = DefaultMaxSessionsPerTenant
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.HTTP == (httpserve.Limits{}) {
		opts.HTTP = DefaultHTTPLimits()
	}
	if opts.FailedAuthPerSecond <= 0 {
		opts.FailedAuthPerSecond = DefaultFailedAuthPerSecond
	}
	if opts.FailedAuthBurst <= 0 {
		opts.FailedAuthBurst = DefaultFailedAuthBurst
	}
	if opts.FailedAuthDelay <= 0 {
		opts.FailedAuthDelay = DefaultFailedAuthDelay
	}
	if err := opts.HTTP.Validate(); err != nil {
		return nil, fmt.Errorf("mcpgateway: %w", err)
	}
	lim, err := newBudget(opts.Budget)
	if err != nil {
		return nil, err
	}
	view, err := clusterview.New(opts.Config, clusterview.Options{
		Namespace:      opts.Namespace,
		Credentials:    true,
		Catalog:        playgroundv1alpha1.Catalog(opts.Catalog),
		WorkerMappings: opts.Catalog != CatalogSandbox,
		WorkerBearers:  opts.Catalog != CatalogSandbox,
		LeaseNamespace: opts.LeaseNamespace,
		StaleAfter:     opts.StaleAfter,
		Logger:         opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	g := &Gateway{opts: opts, view: view, log: opts.Logger, budget: lim,
		authFailures: keyedlimit.New(opts.FailedAuthPerSecond, opts.FailedAuthBurst, maxAuthSources), tarpit: make(chan struct{}, maxTarpitted),
		router: &router{view: view, agents: newAgentPool(creds, opts.AgentTLS, opts.AgentCA, opts.AgentCleartext), log: opts.Logger, trustRegistrations: true}}
	if opts.Catalog != CatalogSandbox {
		if err := g.newWorkers(); err != nil {
			return nil, err
		}
	}
	holds := &callHolds{calls: map[string]*carried{}}
	topts := tools.Options{ExecTimeout: opts.ExecTimeout, ProgressInterval: opts.ProgressInterval, Logger: opts.Logger, Budget: lim, Hold: holds.hold, Carrier: holds.carrier, Audit: opts.Audit, Tracer: opts.Tracer}
	standard := newServer(g.router, topts)
	topts.Extended = true
	extended := newServer(g.router, topts)
	registerBudget(lim, opts.Logger)
	// Each tenant is served the tool set its Tenant names when its
	// session begins (stateless: at each request); the tools check it
	// again at every call.
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		id, _ := r.Context().Value(tenantKey{}).(clusterview.Identity)
		if t, err := view.Tenant(id); err == nil && clusterview.ToolsOf(t) == playgroundv1alpha1.ToolSetExtended {
			return extended
		}
		return standard
	}, streamableOptions(opts))
	// The SDK's bearer middleware carries the tenant, authenticated by
	// ours, into each tool call (and, when stateful, binds the session to
	// the tenant so no other tenant can use it).
	carry := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := ctx.Value(tenantKey{}).(clusterview.Identity)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id.String(), Extra: map[string]any{tokenInfoTenant: id}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})

	serveMCP := carry(mcpHandler)
	if opts.Stateful {
		g.sessions = &sessionLimit{servers: []*mcp.Server{standard, extended}, perTenant: opts.MaxSessionsPerTenant, total: opts.MaxSessions,
			idle: opts.SessionIdleTimeout, byTenant: map[string]map[string]struct{}{}, pending: map[string]int{}}
		serveMCP = g.sessions.middleware(serveMCP)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.authenticate(g.dispatch(holds.middleware(serveMCP))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := view.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	g.handler = mux
	return g, nil
}

// newWorkers sets up the forwarding of the workers catalog.
func (g *Gateway) newWorkers() error {
	keys, err := workers.LoadKeys(g.opts.SessionKeyFile, g.log)
	if err != nil {
		return fmt.Errorf("mcpgateway: %w", err)
	}
	g.workerRoutes = &workerRoutes{view: g.view, router: g.router, service: newServiceTransport(g.opts.WorkerEndpoints)}
	g.workers, err = workers.New(workers.Options{
		Resolve: g.workerRoutes.resolve, Keys: keys,
		MaxInFlightPerTenant: g.opts.WorkerMaxInFlightPerTenant, SessionMaxAge: g.opts.WorkerSessionMaxAge,
		MaxRequestBytes: MaxRequestBytes, Logger: g.log, Tracer: g.opts.Tracer, Audit: g.opts.Audit,
	})
	return err
}

// dispatch serves each authenticated tenant the catalog its Tenant names:
// the sandbox tools (sandbox), or its worker's own (workers).
func (g *Gateway) dispatch(sandbox http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := r.Context().Value(tenantKey{}).(clusterview.Identity)
		t, err := g.view.Tenant(id)
		if err != nil {
			// Refused between authentication and here: let the
			// sandbox tools answer, which re-check at every call.
			sandbox.ServeHTTP(w, r)
			return
		}
		if catalogOf(t) == playgroundv1alpha1.CatalogWorkers && g.workers != nil {
			g.workers.Serve(w, r, id.String())
			return
		}
		sandbox.ServeHTTP(w, r)
	})
}

// streamableOptions are the Streamable HTTP transport's options for opts.
func streamableOptions(opts Options) *mcp.StreamableHTTPOptions {
	so := &mcp.StreamableHTTPOptions{
		Stateless:           !opts.Stateful,
		MaxRequestBodyBytes: MaxRequestBytes,
		Logger:              sdkLogger(opts.Logger),
		// A call ends with its HTTP request (protocol 2026-07-28): a client
		// that gives up on an exec kills its command.
		PropagateRequestCancellation: true,
	}
	if opts.Stateful {
		so.SessionTimeout = opts.SessionIdleTimeout
	}
	return so
}

// sdkLogger is l as the MCP SDK takes a logger, an slog.Logger: the one
// place where the gateway's logs, logr's as all of Playground's, meet it.
// The SDK's information is about sessions ("server session connected",
// several per request of a stateless gateway, naming no tenant): it is
// logged at V(SDKInfoVerbosity), so that a log at the default level holds
// what the gateway says of calls and tenants, and the SDK's warnings and
// errors.
func sdkLogger(l logr.Logger) *slog.Logger {
	return slog.New(quietInfo{logr.ToSlogHandler(l)})
}

// SDKInfoVerbosity is the verbosity of the MCP SDK's information in the
// gateway's log (--zap-log-level=1 shows it).
const SDKInfoVerbosity = 1

// quietInfo lowers records below slog's warnings to SDKInfoVerbosity
// (logr's V(n) is slog's level -n).
type quietInfo struct{ slog.Handler }

func quiet(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return min(l, -SDKInfoVerbosity)
	}
	return l
}

func (h quietInfo) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, quiet(l))
}

func (h quietInfo) Handle(ctx context.Context, r slog.Record) error {
	r.Level = quiet(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h quietInfo) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietInfo{h.Handler.WithAttrs(attrs)}
}

func (h quietInfo) WithGroup(name string) slog.Handler { return quietInfo{h.Handler.WithGroup(name)} }

// newServer is the MCP server of the sandbox catalog; opts.Router is r.
func newServer(r tools.Router, opts tools.Options) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "playground", Title: "Playground sandboxes", Version: "v1alpha1"},
		&mcp.ServerOptions{Instructions: tools.Instructions, Logger: sdkLogger(opts.Logger)})
	opts.Router = r
	tools.Register(server, opts)
	return server
}

// Budget is the gateway's budget of synchronous calls, for tests and
// metrics.
func (g *Gateway) Budget() *budget.Limiter { return g.budget }

// Handler serves /mcp (Streamable HTTP), /healthz and /readyz.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Start runs the gateway's informers until ctx ends; until they have synced
// every MCP request is refused with 503.
func (g *Gateway) Start(ctx context.Context) { g.view.Start(ctx) }

// Ready returns nil when the gateway trusts its view of credentials.
func (g *Gateway) Ready() error { return g.view.Ready() }

// Serves returns nil when a tool call made now with token would reach its
// tenant's sandbox: the view is current, token is a current credential, and
// the tenant's Sandbox, as this gateway sees it, is served by the agent its
// node registered. Otherwise the error says which of these does not hold
// yet. The view trails the API server, so whoever announces the gateway to
// clients (as `playground-dev` does) waits for this, not for the objects.
func (g *Gateway) Serves(token string) error {
	if err := g.view.Ready(); err != nil {
		return err
	}
	id, err := g.view.Authenticate(token)
	if err != nil {
		return err
	}
	t, err := g.view.Tenant(id)
	if err != nil {
		return err
	}
	if catalogOf(t) == playgroundv1alpha1.CatalogWorkers && g.workerRoutes != nil {
		_, err = g.workerRoutes.resolve(context.Background(), id.String())
		return err
	}
	_, err = g.router.routeTenant(context.Background(), id)
	return err
}

// Run starts the informers and serves on ln until ctx ends, then shuts down
// within DefaultShutdownGrace. Calls still running then are cancelled (an
// exec's command is killed; jobs live on in the agents).
func (g *Gateway) Run(ctx context.Context, ln net.Listener) error {
	g.Start(ctx)
	g.log.Info("Serving MCP", "address", ln.Addr().String(), "path", "/mcp", "stateless", !g.opts.Stateful)
	return g.Serve(ctx, ln)
}

// Serve serves the gateway on ln until ctx ends, within its HTTP limits;
// Start must have been called.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	return httpserve.Serve(ctx, g.HTTPServer(), g.opts.HTTP.Listen(ln), DefaultShutdownGrace)
}

// HTTPServer is the gateway's http.Server: its handler within its HTTP
// limits (timeouts per phase, streams per connection; see
// httpserve.Limits). Serve also bounds its connections.
func (g *Gateway) HTTPServer() *http.Server {
	return g.opts.HTTP.Server(g.handler, httpserve.ErrorLog(g.log))
}

type tenantKey struct{}

// authenticate admits a request only with a current tenant credential, and
// only while the gateway trusts its view of credentials (fail closed).
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			if g.throttled(w, r) {
				return
			}
			authFailed(missingOrMalformed(r))
			w.Header().Set("WWW-Authenticate", `Bearer realm="playground"`)
			http.Error(w, "Unauthorized: present your tenant's token as Authorization: Bearer <token> (it is in the tenant's credential Secret, key \"token\")", http.StatusUnauthorized)
			return
		}
		if err := g.view.Ready(); err != nil {
			authFailed(AuthNotReady)
			if now := time.Now().UnixNano(); now-g.lastRefusalLog.Load() > int64(10*time.Second) {
				g.lastRefusalLog.Store(now)
				g.log.Info("Refusing requests: the credential view is not current", "err", err)
			}
			w.Header().Set("Retry-After", "5")
			http.Error(w, "Service Unavailable: the gateway cannot verify credentials right now (its view of the cluster is not current); retry shortly", http.StatusServiceUnavailable)
			return
		}
		id, err := g.view.Authenticate(token)
		var susp *clusterview.SuspendedError
		var cat *clusterview.WrongCatalogError
		switch {
		case err == nil:
		case errors.Is(err, clusterview.ErrNotReady):
			authFailed(AuthNotReady)
			w.Header().Set("Retry-After", "5")
			http.Error(w, "Service Unavailable: the gateway cannot verify credentials right now; retry shortly", http.StatusServiceUnavailable)
			return
		case errors.As(err, &susp), errors.As(err, &cat):
			authFailed(refusal(susp))
			g.log.Info("Refused a tenant", "tenant", tenantOf(susp, cat), "reason", err.Error())
			http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			return
		default:
			if g.throttled(w, r) {
				return
			}
			authFailed(AuthUnknownToken)
			g.log.V(1).Info("Refused an unknown token", "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="playground", error="invalid_token", error_description="the token is not a current tenant credential"`)
			http.Error(w, "Unauthorized: "+clusterview.ErrUnknownToken.Error(), http.StatusUnauthorized)
			return
		}
		httpserve.MarkAuthenticated(r.Context())
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, id)))
	})
}

// throttled counts a failed authentication against the request's source
// and, past the source's bound, answers 429, held back FailedAuthDelay, on
// a connection that then closes (HTTP/1.1): a flood of junk credentials
// proceeds at the pace of its connections, which are few
// (httpserve.Limits.MaxUnauthenticated), and costs its sender a handshake
// per request. A current credential is never throttled, whatever its
// source has sent (a proxy in front of the gateway is many clients'
// source).
func (g *Gateway) throttled(w http.ResponseWriter, r *http.Request) bool {
	if g.authFailures.Allow(keyedlimit.Source(r.RemoteAddr)) {
		return false
	}
	authFailed(AuthThrottled)
	select {
	case g.tarpit <- struct{}{}:
		t := time.NewTimer(g.opts.FailedAuthDelay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		<-g.tarpit
	default:
		// Enough are held back already: no answer, and the connection
		// goes (the server recovers this panic and closes it).
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	http.Error(w, "Too Many Requests: too many failed authentications from your address; retry in a second with your tenant's token", http.StatusTooManyRequests)
	return true
}

func tenantOf(s *clusterview.SuspendedError, c *clusterview.WrongCatalogError) string {
	if s != nil {
		return s.Tenant.String()
	}
	if c != nil {
		return c.Tenant.String()
	}
	return ""
}

// bearerToken returns the request's bearer token, if it has one.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != "" && !strings.ContainsAny(token, " \t")
}
