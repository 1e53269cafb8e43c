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
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/connlimit"
	"github.com/playground-dev/playground/internal/httpserve"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
)

// Reasons of playground_gateway_auth_failures_total: why a request to /mcp
// was refused before reaching the tools. The tenant is never a label: a
// label per tenant (or, worse, per token) would grow without bound and
// name who is being refused.
const (
	// AuthMissing: no Authorization header.
	AuthMissing = "missing"
	// AuthMalformed: an Authorization header that is not "Bearer <token>".
	AuthMalformed = "malformed"
	// AuthUnknownToken: the token is no current credential (401).
	AuthUnknownToken = "unknown_token"
	// AuthSuspended: the token's tenant is suspended (403).
	AuthSuspended = "suspended"
	// AuthWrongCatalog: the tenant is configured for another catalog (403).
	AuthWrongCatalog = "wrong_catalog"
	// AuthNotReady: the gateway's view of credentials is not current, so it
	// could not check the token (503, fail closed).
	AuthNotReady = "not_ready"
	// AuthThrottled: no current credential, from a source that has failed
	// to authenticate too often (429, and the connection closes).
	AuthThrottled = "throttled"
)

// authFailures counts refused requests by reason, for every gateway of the
// process, on controller-runtime's registry.
var authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "playground_gateway_auth_failures_total",
	Help: "Requests to the MCP endpoint refused by authentication, by reason: missing, malformed, unknown_token, suspended, wrong_catalog, not_ready, throttled.",
}, []string{"reason"})

// protocolRefusals counts calls refused because the sandbox's agent
// speaks a major protocol version this gateway does not (a rollout that
// mixes releases it should not).
var protocolRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "playground_gateway_agent_protocol_refusals_total",
	Help: "Tool calls refused because the sandbox's agent advertises an agent protocol version this gateway cannot speak, by its major version (MAJOR.x, or invalid: none or unreadable).",
}, []string{"agent_protocol"})

// protocolRefused counts a refusal of an agent (err from agentVersion);
// the label is the major version, so that it stays bounded
// whatever agents write in their Leases.
func protocolRefused(err error) {
	label := "invalid"
	var mm *agentapi.MajorMismatchError
	if errors.As(err, &mm) {
		label = strconv.Itoa(mm.Peer.Major) + ".x"
	}
	protocolRefusals.WithLabelValues(label).Inc()
}

func init() {
	metrics.Registry.MustRegister(authFailures, protocolRefusals, audit.RecordsTotal)
	for _, r := range []string{AuthMissing, AuthMalformed, AuthUnknownToken, AuthSuspended, AuthWrongCatalog, AuthNotReady, AuthThrottled} {
		authFailures.WithLabelValues(r) // every reason is exported from the start, at zero
	}
}

func authFailed(reason string) { authFailures.WithLabelValues(reason).Inc() }

// MetricsHandler serves controller-runtime's registry (the gateway's
// metrics, Go's and the process's) in the Prometheus exposition format.
func MetricsHandler() http.Handler {
	return promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}

// ServeMetrics serves MetricsHandler at /metrics on ln until ctx ends.
func ServeMetrics(ctx context.Context, ln net.Listener, log logr.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", MetricsHandler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          httpserve.ErrorLog(log),
	}
	log.Info("Serving metrics", "address", ln.Addr().String(), "path", "/metrics")
	// A scraper holds a connection or two: a few dozen at once is plenty,
	// and a flood of them is bounded like any other client's.
	ln = connlimit.Listen(ln, connlimit.Options{Name: "metrics", Max: 64, PerSource: 16})
	return httpserve.Serve(ctx, srv, ln, DefaultShutdownGrace)
}

// missingOrMalformed is the reason of a request without a bearer token.
func missingOrMalformed(r *http.Request) string {
	if r.Header.Get("Authorization") == "" {
		return AuthMissing
	}
	return AuthMalformed
}

// refusal is the reason of a tenant refused by policy.
func refusal(susp *clusterview.SuspendedError) string {
	if susp != nil {
		return AuthSuspended
	}
	return AuthWrongCatalog
}
