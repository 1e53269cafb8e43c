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
	"errors"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/playground-dev/playground/cmd/internal/cmdflags"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/internal/connlimit"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/internal/httpserve"
)

// budgetFlags registers the flags of a budget of synchronous calls, the
// same for the agent and the gateway, with defaults d (docs/operations.md
// sizes them).
func budgetFlags(fs *flag.FlagSet, l *budget.Limits, d budget.Limits) {
	d = d.WithDefaults()
	fs.IntVar(&l.CallsPerTenant, "budget-calls-per-tenant", d.CallsPerTenant, "synchronous calls (exec, read, write) of one tenant served at once; more wait --budget-wait, then are refused (retryable)")
	fs.IntVar(&l.Calls, "budget-calls", d.Calls, "synchronous calls of all tenants served at once")
	l.BytesPerTenant, l.Bytes = d.BytesPerTenant, d.Bytes
	fs.Var(bytesFlag{&l.BytesPerTenant}, "budget-bytes-per-tenant", "bytes one tenant's synchronous calls may hold at once (a quantity: 24Mi); an exec holds its stdin and its output (the agent reserves 2 × 4 MiB up front, the gateway the output's size and encoding once known)")
	fs.Var(bytesFlag{&l.Bytes}, "budget-bytes", "bytes all tenants' synchronous calls may hold at once (a quantity: 256Mi)")
	fs.DurationVar(&l.Wait, "budget-wait", d.Wait, "how long a call waits for room in a full budget before it is refused")
}

// httpFlags registers the flags of a server's HTTP limits, with defaults d.
func httpFlags(fs *flag.FlagSet, l *httpserve.Limits, d httpserve.Limits) {
	fs.DurationVar(&l.ReadHeaderTimeout, "http-read-header-timeout", d.ReadHeaderTimeout, "time a client has to send a request's headers; idle new connections are closed after it")
	fs.DurationVar(&l.BodyTimeout, "http-body-timeout", d.BodyTimeout, "time a client has to send a request's body (responses, which stream, have no overall deadline)")
	fs.DurationVar(&l.WriteTimeout, "http-write-timeout", d.WriteTimeout, "time each write of a response may take: a client that stops reading is cut off after it")
	fs.DurationVar(&l.IdleTimeout, "http-idle-timeout", d.IdleTimeout, "close a keep-alive connection without a request in flight after this long")
	fs.IntVar(&l.MaxConcurrentStreams, "http-max-streams-per-connection", d.MaxConcurrentStreams, "HTTP/2 requests one connection may have in flight")
	fs.IntVar(&l.MaxConns, "http-max-connections", d.MaxConns, "connections served at once; further ones wait to be accepted")
	fs.DurationVar(&l.UnauthenticatedTimeout, "http-unauthenticated-timeout", d.UnauthenticatedTimeout, "close a connection that has carried no authenticated request this long after it was accepted")
	fs.IntVar(&l.MaxConnsPerSource, "http-max-connections-per-source", d.MaxConnsPerSource, "connections one source (an IPv4 address, an IPv6 /64) holds at once; further ones are closed as they are accepted (0: no bound; behind a proxy, which is every client's source, raise it or give 0 and bound clients at the proxy)")
	fs.IntVar(&l.MaxUnauthenticated, "http-max-unauthenticated-connections", d.MaxUnauthenticated, "connections held at once that have carried no authenticated request; past it the oldest of them is closed for a new one")
	fs.IntVar(&l.MaxUnauthenticatedPerSource, "http-max-unauthenticated-connections-per-source", d.MaxUnauthenticatedPerSource, "connections without an authenticated request one source holds at once; past it the source's oldest is closed for its new one (0: no bound)")
	l.MaxHeaderBytes, l.Name = d.MaxHeaderBytes, d.Name
}

// connectionBudgetFlag registers --connection-budget, the process's budget
// of accepted connections (package connlimit), applied once flags are
// parsed by the returned function.
func connectionBudgetFlag(fs *flag.FlagSet) func() error {
	n := fs.Int("connection-budget", connlimit.DefaultBudget(), "connections this process accepts at once over all its listeners (the agent API, the gateway, the sandboxes' resolvers and gates), each a file descriptor; past it a new one is closed as it is accepted (default: half the process's open-file limit)")
	return func() error {
		if *n <= 0 {
			return fmt.Errorf("--connection-budget must be positive, not %d", *n)
		}
		connlimit.Process().SetLimit(*n)
		return nil
	}
}

// bytesFlag is a byte count given as a Kubernetes quantity (64Mi, 1Gi,
// 1048576).
type bytesFlag struct{ v *int64 }

func (b bytesFlag) String() string {
	if b.v == nil {
		return ""
	}
	return resource.NewQuantity(*b.v, resource.BinarySI).String()
}

func (b bytesFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a byte count such as 64Mi or 1Gi: %w", err)
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return fmt.Errorf("want a positive whole number of bytes, not %s", s)
	}
	*b.v = v
	return nil
}

// workerEndpointFlags registers the flags of the policy of where the
// gateway may forward a workers tenant, the same for the manager (which
// publishes a mapping's endpoints) and the gateway (which dials them); the
// returned function parses them once the flags are.
func workerEndpointFlags(fs *flag.FlagSet) func() (destpolicy.Policy, error) {
	var allow, deny []string
	fs.Var(cmdflags.StringList(&allow), "worker-endpoint-allow-cidr", "a range (CIDR) a worker's Service endpoints may be in, repeatable or comma-separated: when any is given, every other address is refused, and these pass whatever else they are (a grant: give your pod network); default none: any address but loopback, link-local (cloud metadata), multicast, reserved ranges, the nodes' and the control plane's")
	fs.Var(cmdflags.StringList(&deny), "worker-endpoint-deny-cidr", "a range (CIDR) no worker endpoint may be in, repeatable or comma-separated (your service network, say); it overrides --worker-endpoint-allow-cidr")
	return func() (destpolicy.Policy, error) {
		var p destpolicy.Policy
		var err1, err2 error
		p.Allow, err1 = destpolicy.Parse("--worker-endpoint-allow-cidr", allow)
		p.Deny, err2 = destpolicy.Parse("--worker-endpoint-deny-cidr", deny)
		return p, errors.Join(err1, err2)
	}
}
