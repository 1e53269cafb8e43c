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
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
	"github.com/playground-dev/playground/mcpgateway/workers"
)

// DefaultWorkerTimeout bounds a forwarded request whose mapping names no
// timeout (the CRD defaults it to the same).
const DefaultWorkerTimeout = 60 * time.Second

// workerRoutes resolves a tenant of the workers catalog to its worker:
// the one Ready WorkerMapping naming it, and either the ready endpoints of
// its Service (with the internal bearer the manager copied from its
// Secret) or the worker in its sandbox, through the agent of the sandbox's
// node.
type workerRoutes struct {
	view   *clusterview.View
	router *router // reaches the agents, for sandbox destinations
	// service carries the requests to Service endpoints.
	service http.RoundTripper
}

// The copies of the service workers' bearers, which the manager makes
// into Secrets of the lease namespace (package bearermirror): the only
// Secrets the gateway may read, by name. It has no right on any other
// Secret, a team's or the installation's. The names are
// bearermirror.SecretNames(), which TestGatewayReadsNoTenantSecret checks
// against these.
// +kubebuilder:rbac:groups="",namespace=playground-system,resources=secrets,verbs=get;list;watch,resourceNames=playground-worker-bearers-00;playground-worker-bearers-01;playground-worker-bearers-02;playground-worker-bearers-03;playground-worker-bearers-04;playground-worker-bearers-05;playground-worker-bearers-06;playground-worker-bearers-07;playground-worker-bearers-08;playground-worker-bearers-09;playground-worker-bearers-10;playground-worker-bearers-11;playground-worker-bearers-12;playground-worker-bearers-13;playground-worker-bearers-14;playground-worker-bearers-15;playground-worker-bearers-16;playground-worker-bearers-17;playground-worker-bearers-18;playground-worker-bearers-19;playground-worker-bearers-20;playground-worker-bearers-21;playground-worker-bearers-22;playground-worker-bearers-23;playground-worker-bearers-24;playground-worker-bearers-25;playground-worker-bearers-26;playground-worker-bearers-27;playground-worker-bearers-28;playground-worker-bearers-29;playground-worker-bearers-30;playground-worker-bearers-31;playground-worker-bearers-32;playground-worker-bearers-33;playground-worker-bearers-34;playground-worker-bearers-35;playground-worker-bearers-36;playground-worker-bearers-37;playground-worker-bearers-38;playground-worker-bearers-39;playground-worker-bearers-40;playground-worker-bearers-41;playground-worker-bearers-42;playground-worker-bearers-43;playground-worker-bearers-44;playground-worker-bearers-45;playground-worker-bearers-46;playground-worker-bearers-47;playground-worker-bearers-48;playground-worker-bearers-49;playground-worker-bearers-50;playground-worker-bearers-51;playground-worker-bearers-52;playground-worker-bearers-53;playground-worker-bearers-54;playground-worker-bearers-55;playground-worker-bearers-56;playground-worker-bearers-57;playground-worker-bearers-58;playground-worker-bearers-59;playground-worker-bearers-60;playground-worker-bearers-61;playground-worker-bearers-62;playground-worker-bearers-63

// newServiceTransport carries requests to Service endpoints, dialling only
// the addresses policy permits: the check is of the address connected to,
// so nothing a mapping's status says, and no name, reaches past it.
func newServiceTransport(policy destpolicy.Policy) *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if err := policy.CheckHost(host, nil); err != nil {
				return fmt.Errorf("the gateway forwards no worker traffic there: %w", err)
			}
			return nil
		}}
	return &http.Transport{
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		// The bytes as the worker sent them, flushed as they arrive.
		DisableCompression: true,
	}
}

func (wr *workerRoutes) resolve(ctx context.Context, tenant string) (*workers.Destination, error) {
	id, err := ParseTenant(tenant)
	if err != nil {
		return nil, err
	}
	if _, err := wr.view.Tenant(id); err != nil {
		return nil, &workers.Refusal{Kind: "tenant", Message: tenantError(err).Error()}
	}
	m, err := wr.view.WorkerMapping(id)
	if err != nil {
		var me *clusterview.MappingError
		if errors.As(err, &me) {
			return nil, &workers.Refusal{Kind: "mapping_" + me.Reason, Message: me.Message}
		}
		return nil, err
	}
	name := m.Namespace + "/" + m.Name
	dest := &workers.Destination{Mapping: name, UID: string(m.UID), Timeout: DefaultWorkerTimeout}
	if m.Spec.Timeout != nil && m.Spec.Timeout.Duration > 0 {
		dest.Timeout = m.Spec.Timeout.Duration
	}
	switch d := m.Spec.Destination; {
	case d.Service != nil:
		dest.Kind = workers.KindService
		for _, raw := range m.Status.ReadyEndpoints {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				wr.router.log.Info("Ignoring a ready endpoint that is no http(s) URL", "mapping", name, "endpoint", raw)
				continue
			}
			if u.Path == "" || u.Path == "/" {
				u.Path = orDefault(d.Service.Path, "/mcp")
			}
			dest.Endpoints = append(dest.Endpoints, workers.Endpoint{Key: u.String(), URL: u.String(), Transport: wr.service})
		}
		if ref := m.Spec.BearerSecretRef; ref != nil {
			bearer, ok := wr.view.WorkerBearer(m.Namespace, m.Name)
			if !ok {
				return nil, &workers.Refusal{Kind: "bearer_secret", Message: fmt.Sprintf("the gateway cannot present your worker's internal bearer: it presents only the copy the manager makes of the Secret %s/%s (key %q), which it makes once that Secret exists, is of type %s and holds the bearer under that key, and there is none; ask the operator to fix spec.bearerSecretRef of WorkerMapping %s (kubectl describe workermapping -n %s %s says what is wrong)",
					m.Namespace, ref.Name, orDefault(ref.Key, "token"), playgroundv1alpha1.WorkerBearerSecretType, name, m.Namespace, m.Name)}
			}
			dest.Bearer = bearer
		}
	case d.Sandbox != nil:
		dest.Kind = workers.KindSandbox
		// The agent's report trails the worker (it is read every resync):
		// only a worker that cannot start at all is refused here; one
		// restarting or just started is tried, and the agent's relay says
		// at once whether it accepts.
		if w := m.Status.Worker; w != nil && !w.Running && w.Error != "" {
			msg := fmt.Sprintf("your worker (WorkerMapping %s) is not running in your sandbox", name)
			switch {
			case w.Error != "":
				msg += fmt.Sprintf(" (it does not start: %s)", w.Error)
			case w.LastExit != "":
				msg += fmt.Sprintf(" (it last ended: %s; restarts: %d)", w.LastExit, w.Restarts)
			}
			return nil, &workers.Refusal{Kind: "worker_down", Message: msg + ": it is restarted with backoff; retry shortly, and if it persists ask the operator to check the mapping's status and the worker's logs (kubectl playground logs)"}
		}
		sandboxID, agent, err := wr.router.agentFor(ctx, id)
		if err != nil {
			return nil, &workers.Refusal{Kind: "sandbox_unavailable", Message: strings.TrimPrefix(err.Error(), "unavailable: ")}
		}
		// The agent's transport ignores the URL's scheme and host.
		dest.Endpoints = []workers.Endpoint{{
			Key:       "sandbox://" + sandboxID,
			URL:       "http://worker" + orDefault(d.Sandbox.Path, "/mcp"),
			Transport: agent.WorkerTransport(tenant, sandboxID),
		}}
	default:
		return nil, &workers.Refusal{Kind: "mapping_not_ready", Message: fmt.Sprintf("your WorkerMapping %s names no destination: ask the operator to fix it", name)}
	}
	return dest, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// catalogOf is the catalog the gateway serves an authenticated tenant.
func catalogOf(t *playgroundv1alpha1.Tenant) playgroundv1alpha1.Catalog {
	return clusterview.CatalogOf(t)
}
