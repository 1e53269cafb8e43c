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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
)

// callHeader ties a tool call to the HTTP request that carries it: the
// gateway sets it on every request (overwriting whatever a client sent),
// and the SDK hands the request's headers to the tool.
const callHeader = "X-Playground-Call"

// callHolds ties a tool call to the HTTP request that carried it. It
// keeps the budget the call reserved until that request has ended, that
// is until its result has been encoded and written (or the client has
// gone): the SDK makes several copies of a result after the tool's
// handler returns, and a slow client holds them, so giving the budget back
// at the handler's return would let memory grow past it. And it hands the
// call the request's context (carrier), so that a call whose client has
// gone ends: the SDK itself ends a call with its request only in protocol
// 2026-07-28 and later, and a client of an earlier one that leaves in the
// middle of a long call left it running to its end.
type callHolds struct {
	seq   atomic.Uint64
	mu    sync.Mutex
	calls map[string]*carried
}

// carried is what callHolds knows of one HTTP request.
type carried struct {
	ctx      context.Context
	releases []func()
}

func (h *callHolds) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strconv.FormatUint(h.seq.Add(1), 36)
		r.Header.Set(callHeader, id)
		c := &carried{ctx: r.Context()}
		h.mu.Lock()
		h.calls[id] = c
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			delete(h.calls, id)
			h.mu.Unlock()
			for _, release := range c.releases {
				release()
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// carrier is the context of the HTTP request that carries req, nil when
// the call came another way.
func (h *callHolds) carrier(req *mcp.CallToolRequest) context.Context {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.calls[req.Extra.Header.Get(callHeader)]; ok {
		return c.ctx
	}
	return nil
}

// hold adds release to the releases of the call's HTTP request; false
// when the call came another way.
func (h *callHolds) hold(req *mcp.CallToolRequest, release func()) bool {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return false
	}
	id := req.Extra.Header.Get(callHeader)
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.calls[id]
	if !ok {
		return false
	}
	c.releases = append(c.releases, release)
	return true
}

// sessionLimit bounds the stateful MCP sessions per tenant and in total.
// The SDK keeps each until it is deleted or idles out; the gateway
// records which tenant opened which, and counts those the SDK still has.
type sessionLimit struct {
	servers          []*mcp.Server
	perTenant, total int
	idle             time.Duration

	mu       sync.Mutex
	byTenant map[string]map[string]struct{} // tenant → session IDs
	pending  map[string]int                 // initializes in flight, by tenant
}

func (l *sessionLimit) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || !opensSession(r) {
			next.ServeHTTP(w, r) // a request of an existing session, or of none
			return
		}
		id, _ := r.Context().Value(tenantKey{}).(clusterview.Identity)
		tenant := id.String()
		if msg := l.reserve(tenant); msg != "" {
			sessionsRefused.Inc()
			w.Header().Set("Retry-After", strconv.Itoa(int(max(l.idle/time.Second, 1))))
			http.Error(w, "Too Many Requests: "+msg, http.StatusTooManyRequests)
			return
		}
		defer l.settle(tenant, w)
		next.ServeHTTP(w, r)
	})
}

// maxPeek bounds what opensSession reads of a body to find its method.
const maxPeek = 64 << 10

// opensSession says whether a POST without a session is an initialize,
// which opens one: go-sdk clients first send server/discover without a
// session, concurrently with their initialize, and counting it would
// refuse a tenant below its bound. The body is read up to maxPeek and
// given back whole to the handler; a body that cannot be read as one
// JSON-RPC message within it counts as an initialize (closed by default).
func opensSession(r *http.Request) bool {
	head, err := io.ReadAll(io.LimitReader(r.Body, maxPeek))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil {
		return true
	}
	var msg struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(head, &msg) != nil {
		return true
	}
	return msg.Method == "initialize"
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// reserve counts an initialize in flight, or says why it is refused.
func (l *sessionLimit) reserve(tenant string) string {
	live := map[string]bool{}
	for _, s := range l.servers {
		for ss := range s.Sessions() {
			live[ss.ID()] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for t, ids := range l.byTenant {
		for id := range ids {
			if !live[id] {
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(l.byTenant, t)
		}
		total += len(ids)
	}
	for _, n := range l.pending {
		total += n
	}
	switch {
	case len(l.byTenant[tenant])+l.pending[tenant] >= l.perTenant:
		return fmt.Sprintf("your tenant has %d open MCP sessions on this gateway (limit %d): close the ones you no longer use (HTTP DELETE with their Mcp-Session-Id), or wait until they have been idle for %s",
			len(l.byTenant[tenant])+l.pending[tenant], l.perTenant, l.idle)
	case total >= l.total:
		return fmt.Sprintf("this gateway holds %d MCP sessions (limit %d): retry in a minute, or use another replica", total, l.total)
	}
	l.pending[tenant]++
	return ""
}

// settle records the session an initialize opened, if any.
func (l *sessionLimit) settle(tenant string, w http.ResponseWriter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[tenant]--
	if l.pending[tenant] <= 0 {
		delete(l.pending, tenant)
	}
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		if l.byTenant[tenant] == nil {
			l.byTenant[tenant] = map[string]struct{}{}
		}
		l.byTenant[tenant][id] = struct{}{}
	}
}

// sessionsRefused counts initializes refused by the session bounds.
var sessionsRefused = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "playground_gateway_sessions_refused_total",
	Help: "Stateful MCP sessions refused because the tenant, or the gateway, held as many as allowed.",
})

func init() { metrics.Registry.MustRegister(sessionsRefused) }

// registerBudget exports the budget's metrics as component="gateway", with
// an empty node label so that they share their families with the agents'
// when one process runs both (playground-dev). A process runs one
// gateway; when tests run several, the first keeps the metrics.
func registerBudget(l *budget.Limiter, log logr.Logger) {
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"component": "gateway", "node": ""}, metrics.Registry)
	if err := reg.Register(l.Collector()); err != nil {
		log.V(1).Info("Not exporting a second gateway's budget metrics", "err", err)
	}
}

// newBudget is the gateway's budget of synchronous calls, over either
// transport: l's zero fields take package budget's defaults, but
// DefaultBudgetBytesPerTenant.
func newBudget(l budget.Limits) (*budget.Limiter, error) {
	if l.BytesPerTenant == 0 {
		l.BytesPerTenant = DefaultBudgetBytesPerTenant
	}
	lim, err := budget.New(l)
	if err != nil {
		return nil, fmt.Errorf("mcpgateway: budget: %w", err)
	}
	return lim, nil
}
