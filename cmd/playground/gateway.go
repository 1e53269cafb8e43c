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
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/client-go/kubernetes"

	"github.com/playground-dev/playground/cmd/internal/cmdflags"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/internal/httpserve"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
	"github.com/playground-dev/playground/mcpgateway/workers"
)

// runGateway runs the MCP gateway: Streamable HTTP for every tenant, or
// stdio for one tenant authorised by the caller's kubeconfig.
func runGateway(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("playground gateway", flag.ContinueOnError)
	var (
		listen      = fs.String("listen", ":8080", "address of the MCP endpoint (served at /mcp; /healthz and /readyz beside it)")
		catalog     = fs.String("catalog", "", "restrict the gateway to the tenants of one catalog, sandbox (the eight sandbox tools) or workers (forwarding to each tenant's native worker), refusing others with 403; default: serve each tenant the catalog its Tenant names")
		sessionKey  = fs.String("session-key-file", "", "file of the keys that seal worker session IDs (one base64 key of 32 bytes a line, the sealing key first, re-read on change), mounted from a Secret that every replica shares; absent: a key generated at start, for a single replica (docs/workers.md)")
		workerMax   = fs.Int("worker-max-in-flight-per-tenant", workers.DefaultMaxInFlightPerTenant, "requests and streams one tenant may have open to its worker through this replica")
		workerAge   = fs.Duration("worker-session-max-age", workers.DefaultSessionMaxAge, "refuse a worker session this long after it began (within it, it lives as long as the worker keeps it)")
		tokenFile   = fs.String("agent-token-file", "", "file holding a shared bearer token to present to every host agent, re-read on change (playground-dev); default: the gateway's ServiceAccount's token bound to each node, or with --stdio your kubeconfig's token")
		tlsCA       = fs.String("agent-tls-ca", "", "PEM file of the CA that signs the agents' TLS certificates (another issuer, such as cert-manager); default: the bundle the manager publishes in the ConfigMap playground-agent-ca of the lease namespace, watched. Only that CA is trusted for https:// agents")
		cleartext   = fs.Bool("agent-cleartext", false, "reach agents whose endpoint is http:// over cleartext HTTP/2, as playground-dev's; without it such an endpoint is refused, and the node's token (or, with --stdio, yours) never crosses the network in clear")
		namespace   = fs.String("namespace", "", "serve only the tenants of this namespace, watching Tenants and Sandboxes there only, so that a Role there is all the RBAC they need (default: all namespaces)")
		leaseNS     = fs.String("lease-namespace", agentlease.DefaultNamespace, "namespace of the agents' registration Leases (the agent token goes only to endpoints registered there) and of the manager's copies of workers' bearers (the manager's --lease-namespace)")
		stdio       = fs.Bool("stdio", false, "serve one tenant over stdin/stdout instead of HTTP, authorised by your kubeconfig (needs --tenant)")
		tenant      = fs.String("tenant", "", "with --stdio: the tenant to serve, as NAMESPACE/NAME")
		kubeconfig  = fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
		sessions    = fs.String("sessions", "stateless", "MCP transport sessions: stateless (any replica serves any request) or stateful (kept in memory; needs sticky routing with several replicas)")
		idleTimeout = fs.Duration("session-idle-timeout", mcpgateway.DefaultSessionIdleTimeout, "with --sessions stateful: close a transport session unused this long")
		staleAfter  = fs.Duration("watch-stale-after", clusterview.DefaultStaleAfter, "refuse every request once a watch of tenants (and their token hashes), sandboxes or agent registrations has been broken this long")
		execTimeout = fs.Duration("exec-timeout", 10*time.Minute, "exec's timeout when the caller names none")
		metricsAddr = fs.String("metrics-bind-address", ":9090", `address of the Prometheus metrics endpoint (served at /metrics; not with --stdio); "0" disables it`)
	)
	var (
		lim               budget.Limits
		httpLim           httpserve.Limits
		sessionsPerTenant = fs.Int("max-sessions-per-tenant", mcpgateway.DefaultMaxSessionsPerTenant, "with --sessions stateful: MCP sessions one tenant may keep open on this replica")
		sessionsTotal     = fs.Int("max-sessions", mcpgateway.DefaultMaxSessions, "with --sessions stateful: MCP sessions this replica keeps open")
		failedAuthRate    = fs.Float64("failed-auth-per-second", mcpgateway.DefaultFailedAuthPerSecond, "failed authentications one source address (an IPv6 one by its /64) may make a second; past them, and the burst, a request without a current credential gets 429 and its connection closes")
		failedAuthBurst   = fs.Int("failed-auth-burst", mcpgateway.DefaultFailedAuthBurst, "the burst of failed authentications one source address may make")
		failedAuthDelay   = fs.Duration("failed-auth-delay", mcpgateway.DefaultFailedAuthDelay, "how long a throttled answer (429) is held back, so that a flood proceeds at the pace of its connections")
	)
	workerEndpoints := workerEndpointFlags(fs)
	auditTrail := auditFlags(fs)
	tracerOf := traceFlags(fs)
	budgetFlags(fs, &lim, budget.Limits{BytesPerTenant: mcpgateway.DefaultBudgetBytesPerTenant})
	httpFlags(fs, &httpLim, mcpgateway.DefaultHTTPLimits())
	connBudget := connectionBudgetFlag(fs)
	logOpts := cmdflags.LogFlags(fs, "json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := connBudget(); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("--budget-*: %w", err)
	}
	if err := httpLim.Validate(); err != nil {
		return fmt.Errorf("--http-*: %w", err)
	}
	if *sessionsPerTenant <= 0 || *sessionsTotal < *sessionsPerTenant {
		return fmt.Errorf("--max-sessions-per-tenant %d, --max-sessions %d: want both positive, the total at least the per-tenant bound", *sessionsPerTenant, *sessionsTotal)
	}
	if err := mcpgateway.CheckCatalog(*catalog); err != nil {
		return fmt.Errorf("--catalog: %w", err)
	}
	if *failedAuthRate <= 0 || *failedAuthBurst <= 0 || *failedAuthDelay <= 0 {
		return errors.New("--failed-auth-per-second, --failed-auth-burst and --failed-auth-delay must be positive")
	}
	if *workerMax <= 0 || *workerAge <= 0 {
		return errors.New("--worker-max-in-flight-per-tenant and --worker-session-max-age must be positive")
	}
	endpoints, err := workerEndpoints()
	if err != nil {
		return err
	}
	// Logs go to stderr: in stdio mode stdout carries the protocol.
	log := logOpts.SetLogger()
	trail, err := auditTrail("gateway", !*stdio)
	if err != nil {
		return err
	}
	defer func() {
		if err := trail.Close(); err != nil {
			log.Error(err, "Closing the audit trail")
		}
	}()
	tracer, stopTracer, err := tracerOf("gateway", "", log)
	if err != nil {
		return err
	}
	defer stopTracer()
	var agentToken func() (string, error)
	if *tokenFile != "" {
		agentToken = mcpgateway.FileToken(*tokenFile, log)
		if _, err := agentToken(); err != nil {
			return fmt.Errorf("--agent-token-file: %w", err)
		}
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	var agentCA *mcpgateway.AgentCA
	if *tlsCA != "" {
		pem, err := os.ReadFile(*tlsCA)
		if err != nil {
			return fmt.Errorf("--agent-tls-ca: %w", err)
		}
		if agentCA, err = mcpgateway.StaticAgentCA(pem); err != nil {
			return fmt.Errorf("--agent-tls-ca: %s: %w", *tlsCA, err)
		}
	} else {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		agentCA = mcpgateway.WatchAgentCA(ctx, cs, *leaseNS, log)
	}

	if *stdio {
		if *tenant == "" {
			return errors.New("--stdio needs --tenant NAMESPACE/NAME")
		}
		id, err := mcpgateway.ParseTenant(*tenant)
		if err != nil {
			return fmt.Errorf("--tenant: %w", err)
		}
		if agentToken == nil {
			// The agents check the caller's own identity: its RBAC decides.
			if agentToken, err = mcpgateway.KubeconfigToken(cfg); err != nil {
				return err
			}
		}
		return mcpgateway.ServeStdio(ctx, mcpgateway.StdioOptions{
			Config: cfg, Tenant: id, Catalog: *catalog,
			AgentToken: agentToken, AgentCA: agentCA, AgentCleartext: *cleartext,
			StaleAfter: *staleAfter, ExecTimeout: *execTimeout, Budget: lim, Audit: trail, Tracer: tracer, Logger: log,
		}, &mcp.StdioTransport{})
	}
	if *tenant != "" {
		return errors.New("--tenant is for --stdio; over HTTP the tenant comes from each client's token")
	}
	var stateful bool
	switch *sessions {
	case "stateless":
	case "stateful":
		stateful = true
	default:
		return fmt.Errorf("--sessions: want stateless or stateful, not %q", *sessions)
	}
	var agentCreds mcpgateway.AgentCredentials
	if agentToken == nil {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		sa, err := mcpgateway.NewServiceAccountTokens(ctx, cs, 0)
		if err != nil {
			return fmt.Errorf("%w (or give --agent-token-file)", err)
		}
		log.Info("Presenting the ServiceAccount's tokens, bound to each node, to the agents", "identity", sa.Identity())
		agentCreds = sa
	}
	gw, err := mcpgateway.New(mcpgateway.Options{
		Config: cfg, Namespace: *namespace, Catalog: *catalog, LeaseNamespace: *leaseNS,
		SessionKeyFile: *sessionKey, WorkerMaxInFlightPerTenant: *workerMax, WorkerSessionMaxAge: *workerAge, WorkerEndpoints: endpoints,
		AgentCredentials: agentCreds, AgentToken: agentToken, AgentCA: agentCA, AgentCleartext: *cleartext,
		Stateful: stateful, SessionIdleTimeout: *idleTimeout,
		MaxSessionsPerTenant: *sessionsPerTenant, MaxSessions: *sessionsTotal,
		Budget: lim, HTTP: httpLim, FailedAuthPerSecond: *failedAuthRate, FailedAuthBurst: *failedAuthBurst, FailedAuthDelay: *failedAuthDelay,
		StaleAfter: *staleAfter, ExecTimeout: *execTimeout, Audit: trail, Tracer: tracer, Logger: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if *metricsAddr == "" || *metricsAddr == "0" {
		return gw.Run(ctx, ln)
	}
	mln, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("--metrics-bind-address: %w", err)
	}
	// The gateway and its metrics endpoint stop together: when ctx ends, or
	// when either fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	merr := make(chan error, 1)
	go func() {
		err := mcpgateway.ServeMetrics(ctx, mln, log)
		if err != nil {
			err = fmt.Errorf("metrics endpoint: %w", err)
		}
		merr <- err
		cancel()
	}()
	err = gw.Run(ctx, ln)
	cancel()
	return errors.Join(err, <-merr)
}
