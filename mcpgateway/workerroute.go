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
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
	"github.com/playground-dev/playground/mcpgateway/workers"
)

// DefaultWorkerTimeout bounds a forwarded request whose mapping names no
// timeout (the CRD defaults it to the same).
const DefaultWorkerTimeout = 60 * time.Second

// bearerTTL is how long a worker's internal bearer, read from its Secret,
// is used before it is read again: a rotated bearer takes effect within it.
const bearerTTL = 30 * time.Second

// workerRoutes resolves a tenant of the workers catalog to its worker:
// the one Ready WorkerMapping naming it, and either the ready endpoints of
// its Service (with the internal bearer of its Secret) or the worker in
// its sandbox, through the agent of the sandbox's node.
type workerRoutes struct {
	view    *clusterview.View
	router  *router // reaches the agents, for sandbox destinations
	secrets *bearerSecrets
	// service carries the requests to Service endpoints.
	service http.RoundTripper
}

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
			if dest.Bearer, err = wr.secrets.get(ctx, m.Namespace, ref.Name, orDefault(ref.Key, "token"), name); err != nil {
				return nil, err
			}
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

// bearerSecrets reads the internal bearers of service destinations: only
// the Secret a mapping names, with a direct GET (the gateway may get
// Secrets but neither list nor watch them), kept briefly.
type bearerSecrets struct {
	cs  kubernetes.Interface
	now func() time.Time

	mu    sync.Mutex
	cache map[string]cachedBearer
}

type cachedBearer struct {
	token string
	read  time.Time
}

// maxCachedBearers bounds the cache: one entry per mapping in use.
const maxCachedBearers = 4096

func (s *bearerSecrets) get(ctx context.Context, namespace, name, key, mapping string) (string, error) {
	ck := namespace + "/" + name + "/" + key
	s.mu.Lock()
	c, ok := s.cache[ck]
	s.mu.Unlock()
	if ok && s.now().Sub(c.read) < bearerTTL {
		return c.token, nil
	}
	refuse := func(format string, args ...any) error {
		return &workers.Refusal{Kind: "bearer_secret", Message: fmt.Sprintf("the gateway cannot present your worker's internal bearer: "+format+"; ask the operator to fix spec.bearerSecretRef of WorkerMapping "+mapping, args...)}
	}
	secret, err := s.cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", refuse("the Secret %s/%s does not exist", namespace, name)
	case apierrors.IsForbidden(err):
		return "", refuse("the gateway may not read the Secret %s/%s (it needs get on secrets there)", namespace, name)
	case err != nil:
		return "", fmt.Errorf("reading the bearer Secret %s/%s: %w", namespace, name, err)
	}
	if secret.Type != playgroundv1alpha1.WorkerBearerSecretType {
		return "", refuse("the Secret %s/%s is of type %q, and the gateway presents only Secrets of type %s", namespace, name, secret.Type, playgroundv1alpha1.WorkerBearerSecretType)
	}
	token := strings.TrimSpace(string(secret.Data[key]))
	if token == "" {
		return "", refuse("the Secret %s/%s has no key %q, or it is empty", namespace, name, key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) >= maxCachedBearers {
		clear(s.cache)
	}
	s.cache[ck] = cachedBearer{token: token, read: s.now()}
	return token, nil
}

// catalogOf is the catalog the gateway serves an authenticated tenant.
func catalogOf(t *playgroundv1alpha1.Tenant) playgroundv1alpha1.Catalog {
	return clusterview.CatalogOf(t)
}
