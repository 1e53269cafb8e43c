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
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// UseVerb is the custom RBAC verb on tenants that lets a Kubernetes user
// act as the tenant in stdio mode.
const UseVerb = playgroundv1alpha1.UseVerb

// DefaultReauthorizeEvery is how long a stdio gateway trusts an access
// review before it asks again, so that revoked RBAC takes effect within it.
const DefaultReauthorizeEvery = 30 * time.Second

// StdioOptions configure a gateway serving one tenant over stdio.
type StdioOptions struct {
	// Config is the caller's own client configuration (its kubeconfig):
	// it decides whether the caller may use the tenant, and reads the
	// Tenant and its Sandbox.
	Config *rest.Config
	// Tenant is the tenant to serve.
	Tenant clusterview.Identity
	// Catalog is CatalogSandbox (or empty): stdio serves the sandbox tools
	// only; a tenant of the workers catalog connects over HTTP.
	Catalog string
	// AgentToken is the token presented to the agents: the caller's own
	// (its kubeconfig's bearer token), which each agent checks with a
	// SubjectAccessReview for every request, or a shared one (dev).
	// AgentTLS and AgentCA verify them, as in Options.
	AgentToken func() (string, error)
	AgentTLS   *tls.Config
	AgentCA    *AgentCA
	// AgentCleartext allows http:// agents, as in Options: for playground
	// dev only (the caller's token would otherwise cross the network in
	// clear).
	AgentCleartext bool
	// StaleAfter, ExecTimeout, ProgressInterval, Budget, Audit and Tracer as in
	// Options.
	StaleAfter       time.Duration
	ExecTimeout      time.Duration
	ProgressInterval time.Duration
	Budget           budget.Limits
	Audit            *audit.Trail
	Tracer           trace.TracerProvider
	// SyncTimeout bounds the wait for the first view of the tenant
	// (default 30 s).
	SyncTimeout time.Duration
	// ReauthorizeEvery is how long an access review is trusted before it is
	// repeated on the next call (default 30 s).
	ReauthorizeEvery time.Duration
	Logger           logr.Logger
}

// ParseTenant parses "namespace/name".
func ParseTenant(s string) (clusterview.Identity, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return clusterview.Identity{}, fmt.Errorf("tenant %q is not NAMESPACE/NAME", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return clusterview.Identity{}, fmt.Errorf("tenant namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return clusterview.Identity{}, fmt.Errorf("tenant name %q: %s", name, strings.Join(errs, "; "))
	}
	return clusterview.Identity{Namespace: ns, Name: name}, nil
}

// DeniedError says the caller's Kubernetes identity may not use the tenant.
type DeniedError struct {
	Tenant clusterview.Identity
	Reason string
}

func (e *DeniedError) Error() string {
	msg := fmt.Sprintf("your kubeconfig's user may not use tenant %s: it needs RBAC verb %q on tenants.playground.dev %q in namespace %s",
		e.Tenant, UseVerb, e.Tenant.Name, e.Tenant.Namespace)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

// Authorize asks the API server, as the caller, whether the caller may use
// the tenant: the custom verb "use" on the Tenant. Any other answer,
// including a failed review, refuses. (Reading the tenant's credential
// Secret does not count: identities that read Secrets cluster-wide, such
// as the gateway's and the manager's, are no tenant's.)
func Authorize(ctx context.Context, cfg *rest.Config, id clusterview.Identity) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	attrs := playgroundv1alpha1.TenantUseAttributes(id.Namespace, id.Name)
	res, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("asking the API server whether you may use tenant %s: %w", id, err)
	}
	if res.Status.Allowed && !res.Status.Denied {
		return nil
	}
	return &DeniedError{Tenant: id, Reason: res.Status.Reason}
}

// ServeStdio serves the sandbox tools of one tenant on transport (an
// mcp.StdioTransport for `playground gateway --stdio`) until the client
// disconnects or ctx ends. It refuses to start unless the caller's
// kubeconfig may use the tenant, and re-checks that every ReauthorizeEvery of use.
func ServeStdio(ctx context.Context, opts StdioOptions, transport mcp.Transport) error {
	if opts.Catalog != "" && opts.Catalog != CatalogSandbox {
		return fmt.Errorf("--stdio serves the sandbox catalog only, not %q: a tenant of the workers catalog connects to its worker through the HTTP gateway", opts.Catalog)
	}
	creds, err := agentCredentials(nil, opts.AgentToken)
	if err != nil {
		return err
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	if opts.ReauthorizeEvery <= 0 {
		opts.ReauthorizeEvery = DefaultReauthorizeEvery
	}
	lim, err := newBudget(opts.Budget)
	if err != nil {
		return err
	}
	id := opts.Tenant
	if err := Authorize(ctx, opts.Config, id); err != nil {
		return err
	}
	// Read the objects once directly, for a clear error when the caller
	// may use the tenant but not read it.
	view, err := clusterview.New(opts.Config, clusterview.Options{
		Namespace: id.Namespace, Name: id.Name, Catalog: playgroundv1alpha1.CatalogSandbox, StaleAfter: opts.StaleAfter, Logger: opts.Logger,
	})
	if err != nil {
		return err
	}
	if err := checkReadable(ctx, opts.Config, id); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	view.Start(ctx)
	syncCtx, cancelSync := context.WithTimeout(ctx, opts.SyncTimeout)
	synced := view.WaitForSync(syncCtx)
	cancelSync()
	if !synced {
		return fmt.Errorf("could not list and watch tenant %s and its sandbox within %s: check that your kubeconfig may list and watch them", id, opts.SyncTimeout)
	}
	t, err := view.Tenant(id)
	if err != nil {
		return fmt.Errorf("tenant %s cannot be served: %w", id, err)
	}
	authz := &reauthorizer{check: func(ctx context.Context) error { return Authorize(ctx, opts.Config, id) }, every: opts.ReauthorizeEvery, last: time.Now()}
	r := &router{view: view, agents: newAgentPool(creds, opts.AgentTLS, opts.AgentCA, opts.AgentCleartext), log: opts.Logger, fixed: &id, authorize: authz.authorize}
	server := newServer(r, tools.Options{ExecTimeout: opts.ExecTimeout, ProgressInterval: opts.ProgressInterval, Logger: opts.Logger, Budget: lim, Audit: opts.Audit, Tracer: opts.Tracer,
		Extended: clusterview.ToolsOf(t) == playgroundv1alpha1.ToolSetExtended})
	opts.Logger.Info("Serving MCP on stdio", "tenant", id.String())
	return server.Run(ctx, transport)
}

// checkReadable gets the Tenant and its Sandbox as the caller.
func checkReadable(ctx context.Context, cfg *rest.Config, id clusterview.Identity) error {
	scheme := runtime.NewScheme()
	if err := playgroundv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: id.Namespace, Name: id.Name}
	for _, obj := range []client.Object{&playgroundv1alpha1.Tenant{}, &playgroundv1alpha1.Sandbox{}} {
		err := cl.Get(ctx, key, obj)
		_, isTenant := obj.(*playgroundv1alpha1.Tenant)
		what := "Sandbox"
		if isTenant {
			what = "Tenant"
		}
		switch {
		case err == nil:
		case apierrors.IsNotFound(err) && isTenant:
			return fmt.Errorf("tenant %s does not exist", id)
		case apierrors.IsNotFound(err):
			// The sandbox may still be on its way; the tools say so.
		case apierrors.IsForbidden(err):
			return fmt.Errorf("your kubeconfig's user may use tenant %s but not read its %s: it needs get, list and watch on it (resource name %q)", id, what, id.Name)
		default:
			return fmt.Errorf("reading the %s %s: %w", what, id, err)
		}
	}
	return nil
}

// reauthorizer repeats the access review when the last one is older than
// every; a failed review refuses (fail closed).
type reauthorizer struct {
	check func(context.Context) error
	every time.Duration

	mu   sync.Mutex
	last time.Time
}

func (a *reauthorizer) authorize(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if time.Since(a.last) < a.every {
		return nil
	}
	if err := a.check(ctx); err != nil {
		return err
	}
	a.last = time.Now()
	return nil
}
