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

// Package workers forwards a tenant's MCP traffic to its native worker
// (the workers catalog, docs/workers.md): the JSON-RPC bodies pass through
// byte for byte, streamed responses are flushed as they arrive, only the
// MCP protocol and media headers cross, the worker's session IDs are
// sealed into public ones that any replica can open, a request is bounded
// by its mapping's timeout and never retried once it may have reached the
// worker.
package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/internal/tracing"
)

// Kinds of destination, the label of the metrics.
const (
	KindService = "service"
	KindSandbox = "sandbox"
	// kindNone labels requests refused before their destination was known.
	kindNone = "none"
)

// Defaults of Options.
const (
	DefaultMaxInFlightPerTenant = 32
	DefaultSessionMaxAge        = 24 * time.Hour
)

// JSON-RPC error codes of the gateway's own answers, in the range JSON-RPC
// leaves to implementations.
const (
	// CodeUnavailable: the worker cannot be reached now (503 class); the
	// request did not reach it.
	CodeUnavailable = -32001
	// CodeOutcomeUnknown: the request may have reached the worker, whose
	// answer did not come (timeout, broken connection); not retried.
	CodeOutcomeUnknown = -32002
	// CodeRefused: the gateway refused the request (bounds, bad session).
	CodeRefused = -32003
)

// SessionHeader is MCP's session header.
const SessionHeader = "Mcp-Session-Id"

// RequestHeaders are the only headers of a client's request that reach
// the worker (besides Mcp-Session-Id, translated, and the W3C trace
// context, which continues the client's trace from the gateway's span):
// MCP's protocol headers and the media negotiation. Authorization and
// cookies never do.
var RequestHeaders = []string{"Content-Type", "Accept", "Mcp-Protocol-Version", "Last-Event-ID"}

// ResponseHeaders are the only headers of the worker's answer that reach
// the client (besides Mcp-Session-Id, translated).
var ResponseHeaders = []string{"Content-Type", "Cache-Control", "Retry-After", "Allow"}

// Destination is where a tenant's request goes, resolved for the request.
type Destination struct {
	// Mapping is the WorkerMapping, "namespace/name", for messages.
	Mapping string
	// UID is the mapping's UID: sessions are bound to it.
	UID string
	// Kind is KindService or KindSandbox.
	Kind string
	// Timeout bounds a request (not a GET stream).
	Timeout time.Duration
	// Endpoints are the worker's ready endpoints.
	Endpoints []Endpoint
	// Bearer, when set, is presented to the worker as Authorization.
	Bearer string
}

// Endpoint is one way to the worker.
type Endpoint struct {
	// Key names the endpoint in sealed sessions: a worker's session lives
	// on one endpoint and is sent back there.
	Key string
	// URL is the worker's MCP endpoint.
	URL string
	// Transport carries the requests; its errors before a request is
	// sent must be dial errors (*net.OpError with Op "dial") for a request
	// to be tried on another endpoint.
	Transport http.RoundTripper
}

// Refusal is an error of a Resolver that the tenant may read.
type Refusal struct {
	// Kind labels it in playground_gateway_worker_errors_total.
	Kind string
	// Status is the HTTP status (default 503).
	Status  int
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Resolver returns the destination of a tenant's ("namespace/name")
// requests, or a *Refusal.
type Resolver func(ctx context.Context, tenant string) (*Destination, error)

// Options configure a Forwarder.
type Options struct {
	Resolve Resolver
	// Keys seal the public session IDs.
	Keys *Keys
	// MaxInFlightPerTenant bounds the requests and GET streams one tenant
	// has open through this replica (default DefaultMaxInFlightPerTenant).
	MaxInFlightPerTenant int
	// SessionMaxAge is how long a public session is accepted after it
	// began (default DefaultSessionMaxAge); within it, a session lives as
	// long as the worker keeps it.
	SessionMaxAge time.Duration
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64
	Logger          logr.Logger
	// Tracer makes a span of each request (nil: none; the client's trace
	// context still reaches the worker).
	Tracer trace.TracerProvider
	// Audit records each tools/call a tenant sends its worker, as the
	// sandbox tools' calls are recorded (nil: none).
	Audit *audit.Trail
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Forwarder serves the workers catalog.
type Forwarder struct {
	opts   Options
	log    logr.Logger
	tracer trace.Tracer
	next   atomic.Uint64 // spreads sessionless requests over the endpoints

	mu       sync.Mutex
	inFlight map[string]int
}

// New returns a Forwarder.
func New(opts Options) (*Forwarder, error) {
	if opts.Resolve == nil || opts.Keys == nil {
		return nil, errors.New("workers: a resolver and session keys are required")
	}
	if opts.MaxInFlightPerTenant <= 0 {
		opts.MaxInFlightPerTenant = DefaultMaxInFlightPerTenant
	}
	if opts.SessionMaxAge <= 0 {
		opts.SessionMaxAge = DefaultSessionMaxAge
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 6 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tracer == nil {
		opts.Tracer = noop.NewTracerProvider()
	}
	return &Forwarder{opts: opts, log: opts.Logger, tracer: opts.Tracer.Tracer("github.com/playground-dev/playground/mcpgateway/workers"),
		inFlight: map[string]int{}}, nil
}

// call is one request being forwarded.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	tenant string
	kind   string // destination kind, for metrics
	id     json.RawMessage
	// request: the body is a JSON-RPC request (it has a method and an id),
	// whose timeout is answered with a JSON-RPC error.
	request bool
	// calls are the tools/call requests of the body, for the audit trail;
	// failed is the kind of the gateway's failure of the request, status
	// the worker's answer's.
	calls  []toolCall
	failed string
	status int
}

// Serve forwards one HTTP request of the authenticated tenant
// ("namespace/name") to its worker.
func (f *Forwarder) Serve(w http.ResponseWriter, r *http.Request, tenant string) {
	c := &call{w: w, r: r, tenant: tenant, kind: kindNone}
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		c.fail(http.StatusMethodNotAllowed, "bad_request", CodeRefused, "the MCP endpoint takes POST, GET and DELETE")
		return
	}
	if !f.reserve(tenant) {
		w.Header().Set("Retry-After", "1")
		c.fail(http.StatusTooManyRequests, "limited", CodeRefused, fmt.Sprintf(
			"your tenant has %d requests and streams open to its worker through this gateway replica (the limit): wait for some to end, or close streams and sessions you no longer use", f.opts.MaxInFlightPerTenant))
		return
	}
	defer f.release(tenant)

	var body []byte
	if r.Method == http.MethodPost {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, f.opts.MaxRequestBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				c.fail(http.StatusRequestEntityTooLarge, "bad_request", CodeRefused, fmt.Sprintf("the request body is over %d bytes", f.opts.MaxRequestBytes))
			}
			return // the client went away
		}
		c.id, c.request = requestID(body)
		if c.calls = toolCalls(body); len(c.calls) > 0 {
			defer f.record(c, time.Now())
		}
	}

	dest, err := f.opts.Resolve(r.Context(), tenant)
	if err != nil {
		var ref *Refusal
		if !errors.As(err, &ref) {
			ref = &Refusal{Kind: "internal", Message: "the gateway could not resolve your worker: retry, and tell the operator if it persists"}
			f.log.Error(err, "Resolving a worker", "tenant", tenant)
		}
		status := ref.Status
		if status == 0 {
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "5")
		}
		c.fail(status, ref.Kind, CodeUnavailable, ref.Message)
		return
	}
	c.kind = dest.Kind
	requests.WithLabelValues(dest.Kind).Inc()
	f.forward(c, dest, body)
}

// toolCall is a tools/call of a request's body: the tool's name and the
// size of its arguments.
type toolCall struct {
	name string
	args int64
}

// toolCalls are the tools/call requests of body: one message, or each of
// a batch. Anything else in it, or a body that is no JSON, has none.
func toolCalls(body []byte) []toolCall {
	type message struct {
		Method string `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	var msgs []message
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(body, &msgs) != nil {
			return nil
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return nil
		}
		msgs = []message{m}
	}
	var calls []toolCall
	for _, m := range msgs {
		if m.Method == "tools/call" {
			calls = append(calls, toolCall{name: m.Params.Name, args: int64(len(m.Params.Arguments))})
		}
	}
	return calls
}

// record puts c's tool calls in the audit trail, as the gateway's tools
// record theirs: the outcome is the forwarding's (the gateway's refusal,
// a timeout, the worker's HTTP status), not what the worker's result
// says inside its answer.
func (f *Forwarder) record(c *call, start time.Time) {
	if f.opts.Audit.Level() == audit.LevelNone {
		return
	}
	elapsed := time.Since(start)
	outcome, code := "ok", ""
	switch {
	case c.failed != "":
		outcome, code = "error", c.failed
	case c.status >= http.StatusBadRequest:
		outcome, code = "error", "worker_status_"+strconv.Itoa(c.status)
	case c.status == 0:
		outcome, code = "error", "cancelled" // the client went away first
	}
	for _, tc := range c.calls {
		f.opts.Audit.Record(audit.Record{Time: start, Identity: "token of tenant " + c.tenant, Tenant: c.tenant,
			Session: c.r.Header.Get(SessionHeader), Tool: tc.name, Outcome: outcome, Code: code,
			DurationMS: float64(elapsed.Microseconds()) / 1000, BytesIn: tc.args})
	}
}

func (f *Forwarder) reserve(tenant string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight[tenant] >= f.opts.MaxInFlightPerTenant {
		return false
	}
	f.inFlight[tenant]++
	inFlight.Inc()
	return true
}

func (f *Forwarder) release(tenant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight[tenant]--
	if f.inFlight[tenant] <= 0 {
		delete(f.inFlight, tenant)
	}
	inFlight.Dec()
}

// requestID returns the id of a JSON-RPC request (a message with a method
// and a non-null id), for the error that answers it when the worker does
// not; ok is false for notifications, responses and anything else.
func requestID(body []byte) (id json.RawMessage, ok bool) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &head) != nil || head.Method == "" || len(head.ID) == 0 || string(head.ID) == "null" {
		return nil, false
	}
	return head.ID, true
}

// errTimedOut is the cause of a request's context past the mapping's
// timeout.
var errTimedOut = errors.New("the worker did not answer within the mapping's timeout")

func (f *Forwarder) forward(c *call, dest *Destination, body []byte) {
	r := c.r
	// The session: the worker's, sealed for this tenant and this mapping.
	var (
		sess    Session
		public  = r.Header.Get(SessionHeader)
		targets []Endpoint
	)
	if public != "" {
		var err error
		sess, err = f.opts.Keys.Open(c.tenant, dest.UID, public)
		if err != nil {
			c.fail(http.StatusNotFound, "session_unknown", CodeRefused,
				"unknown session: it is not a session of your tenant's current worker mapping; initialize a new session")
			return
		}
		if f.opts.Now().Sub(sess.Issued) > f.opts.SessionMaxAge {
			c.fail(http.StatusNotFound, "session_expired", CodeRefused, fmt.Sprintf(
				"the session began over %s ago, the longest a worker session is kept: initialize a new session", f.opts.SessionMaxAge))
			return
		}
		for _, e := range dest.Endpoints {
			if e.Key == sess.Endpoint {
				targets = []Endpoint{e}
			}
		}
		if targets == nil {
			c.fail(http.StatusNotFound, "session_ended", CodeRefused,
				"the worker instance that held this session is no longer a ready endpoint of your worker: initialize a new session")
			return
		}
	} else {
		if len(dest.Endpoints) == 0 {
			w := c.w
			w.Header().Set("Retry-After", "5")
			c.fail(http.StatusServiceUnavailable, "no_endpoint", CodeUnavailable, fmt.Sprintf(
				"your worker (WorkerMapping %s) has no ready endpoint: it is down or restarting; retry shortly, and if it persists ask the operator to check the worker", dest.Mapping))
			return
		}
		start := int(f.next.Add(1) % uint64(len(dest.Endpoints)))
		targets = append(append(targets, dest.Endpoints[start:]...), dest.Endpoints[:start]...)
	}

	// The request's span: a child of the client's trace context (from its
	// headers), which the worker receives in turn.
	ctx, span := f.tracer.Start(tracing.Extract(r.Context(), r.Header), "worker "+r.Method,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.String("playground.tenant", c.tenant),
			attribute.String("playground.worker_mapping", dest.Mapping), attribute.String("playground.worker_kind", dest.Kind)))
	defer span.End()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.Method != http.MethodGet && dest.Timeout > 0 {
		// A GET is a stream of the worker's own messages, not a request.
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeoutCause(ctx, dest.Timeout, errTimedOut)
		defer cancelT()
	}
	began := time.Now()
	defer func() { upstreamSeconds.WithLabelValues(dest.Kind).Observe(time.Since(began).Seconds()) }()

	var (
		resp *http.Response
		used Endpoint
		err  error
	)
	for _, e := range targets {
		used = e
		resp, err = e.Transport.RoundTrip(upstreamRequest(ctx, r, e, dest, sess, body))
		if err == nil || !notSent(err) || ctx.Err() != nil {
			break
		}
		f.log.Info("A worker endpoint refused the connection; trying the next", "mapping", dest.Mapping, "endpoint", e.Key, "err", err)
	}
	if err != nil {
		f.roundTripFailed(ctx, c, dest, err)
		return
	}
	defer resp.Body.Close()

	if code := resp.Header.Get(agentapi.AgentErrorHeader); code != "" {
		var e agentapi.ErrorResponse
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		f.log.Info("The agent refused to relay to a worker", "mapping", dest.Mapping, "code", code, "message", e.Message)
		c.w.Header().Set("Retry-After", "5")
		c.fail(http.StatusServiceUnavailable, "agent_refused", CodeUnavailable, fmt.Sprintf(
			"the agent of your sandbox's node answered for your worker (WorkerMapping %s): %s (%s); the request was not retried; if the worker is restarting retry shortly, otherwise ask the operator to check the mapping's status.worker (kubectl playground logs)", dest.Mapping, e.Message, code))
		return
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		f.log.Info("A worker refused the gateway's internal bearer", "mapping", dest.Mapping, "status", resp.StatusCode)
		c.fail(http.StatusBadGateway, "worker_auth", CodeUnavailable, fmt.Sprintf(
			"your worker refused the gateway's credentials (HTTP %d): ask the operator to check the bearer Secret of WorkerMapping %s against the worker's configuration", resp.StatusCode, dest.Mapping))
		return
	}
	if resp.StatusCode == http.StatusNotFound && public != "" {
		errorsTotal.WithLabelValues(c.kind, "session_ended").Inc()
	}

	h := c.w.Header()
	for _, k := range ResponseHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	if up := resp.Header.Get(SessionHeader); up != "" {
		switch {
		case public != "" && up == sess.Upstream:
			h.Set(SessionHeader, public)
		default:
			sealed, err := f.opts.Keys.Seal(c.tenant, dest.UID, Session{Upstream: up, Endpoint: used.Key, Issued: f.opts.Now()})
			if err != nil {
				f.log.Info("Cannot seal a worker's session ID", "mapping", dest.Mapping, "err", err)
				c.fail(http.StatusBadGateway, "worker_protocol", CodeUnavailable, fmt.Sprintf(
					"your worker (WorkerMapping %s) answered with a session ID the gateway cannot carry: %v; ask the worker's maintainers", dest.Mapping, err))
				return
			}
			h.Set(SessionHeader, sealed)
		}
	}
	c.status = resp.StatusCode
	c.w.WriteHeader(resp.StatusCode)
	f.copyBody(ctx, c, dest, resp)
}

// upstreamRequest is the request to the worker at e: the body as it came,
// the allowed headers, the worker's session and the internal bearer.
func upstreamRequest(ctx context.Context, r *http.Request, e Endpoint, dest *Destination, sess Session, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, e.URL, rd)
	if err != nil {
		// e.URL was built by the resolver; a bad one is a bug there.
		panic(fmt.Sprintf("workers: endpoint URL %q: %v", e.URL, err))
	}
	for _, k := range RequestHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			out.Header[k] = v
		}
	}
	if sess.Upstream != "" {
		out.Header.Set(SessionHeader, sess.Upstream)
	}
	if dest.Bearer != "" {
		out.Header.Set("Authorization", "Bearer "+dest.Bearer)
	}
	tracing.Inject(ctx, out.Header)
	// Bytes as the worker sent them: no transparent decompression, which
	// would also hold back a compressed stream's events.
	out.Header.Set("Accept-Encoding", "identity")
	return out
}

// notSent reports whether a round trip failed before the request could
// have reached the worker: only then may another endpoint be tried.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (f *Forwarder) roundTripFailed(ctx context.Context, c *call, dest *Destination, err error) {
	var agentErr *agentapi.Error
	var refused *destpolicy.Refusal
	switch {
	case c.r.Context().Err() != nil:
		return // the client went away
	case errors.Is(context.Cause(ctx), errTimedOut):
		f.timedOut(c, dest, false)
	case errors.As(err, &agentErr):
		c.w.Header().Set("Retry-After", "5")
		c.fail(http.StatusServiceUnavailable, "agent_refused", CodeUnavailable, fmt.Sprintf(
			"your worker (WorkerMapping %s) cannot be reached through your sandbox's agent: %s", dest.Mapping, agentErr.Message))
	case errors.As(err, &refused):
		f.log.Info("The address policy refuses a worker's endpoint", "mapping", dest.Mapping, "err", err)
		c.fail(http.StatusServiceUnavailable, "endpoint_refused", CodeUnavailable, fmt.Sprintf(
			"the gateway does not forward to your worker's endpoint (WorkerMapping %s): %s; a worker's endpoints must be its pods' addresses: ask the operator to check the mapping's Service", dest.Mapping, refused.Error()))
	case notSent(err):
		f.log.Info("No endpoint of a worker accepts connections", "mapping", dest.Mapping, "err", err)
		c.w.Header().Set("Retry-After", "5")
		what := "your worker"
		if dest.Kind == KindSandbox {
			what = "the agent of your sandbox's node, which relays to your worker,"
		}
		c.fail(http.StatusServiceUnavailable, "unreachable", CodeUnavailable, fmt.Sprintf(
			"%s (WorkerMapping %s) does not accept connections: it is down or restarting; the request did not reach it; retry shortly, and if it persists ask the operator to check it", what, dest.Mapping))
	default:
		f.log.Info("A request to a worker failed after it was sent", "mapping", dest.Mapping, "err", err)
		c.fail(http.StatusBadGateway, "broken", CodeOutcomeUnknown, fmt.Sprintf(
			"the connection to your worker (WorkerMapping %s) failed after the request was sent: the execution outcome is unknown and the request was not retried", dest.Mapping))
	}
}

// timedOut answers a request past its timeout: a JSON-RPC error for a
// request with an id (as an event of the stream when one has begun), 504
// otherwise.
func (f *Forwarder) timedOut(c *call, dest *Destination, streaming bool) {
	c.failed = "timeout"
	timeouts.WithLabelValues(c.kind).Inc()
	errorsTotal.WithLabelValues(c.kind, "timeout").Inc()
	msg := fmt.Sprintf("the worker did not answer within %s (spec.timeout of WorkerMapping %s): the execution outcome is unknown (the request may or may not have taken effect) and the request was not retried", dest.Timeout, dest.Mapping)
	f.log.Info("A worker request timed out", "mapping", dest.Mapping, "timeout", dest.Timeout)
	if streaming {
		if c.request {
			_, _ = c.w.Write([]byte("event: message\ndata: " + string(rpcError(c.id, CodeOutcomeUnknown, msg)) + "\n\n"))
		}
		return
	}
	if !c.request {
		c.write(http.StatusGatewayTimeout, c.id, CodeOutcomeUnknown, msg)
		return
	}
	c.write(http.StatusOK, c.id, CodeOutcomeUnknown, msg)
}

// copyBody streams the worker's answer to the client, flushing what
// arrives as it arrives.
func (f *Forwarder) copyBody(ctx context.Context, c *call, dest *Destination, resp *http.Response) {
	rc := http.NewResponseController(c.w)
	sse := isEventStream(resp.Header.Get("Content-Type"))
	buf := make([]byte, 32<<10)
	var tail [2]byte // the last bytes written, to end a cut event
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := c.w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
			if n >= 2 {
				tail = [2]byte{buf[n-2], buf[n-1]} //nolint:gosec // G602: 2 <= n <= len(buf)
			} else {
				tail = [2]byte{tail[1], buf[0]}
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			if errors.Is(context.Cause(ctx), errTimedOut) && c.r.Context().Err() == nil {
				if !sse {
					// A JSON answer cut short: nothing can be added to it.
					c.failed = "timeout"
					timeouts.WithLabelValues(c.kind).Inc()
					errorsTotal.WithLabelValues(c.kind, "timeout").Inc()
					f.log.Info("A worker's answer timed out midway", "mapping", dest.Mapping, "timeout", dest.Timeout)
					return
				}
				if tail != [2]byte{'\n', '\n'} {
					_, _ = c.w.Write([]byte("\n\n")) // end the event the worker had begun
				}
				f.timedOut(c, dest, true)
				_ = rc.Flush()
			} else if c.r.Context().Err() == nil {
				c.failed = "broken"
				errorsTotal.WithLabelValues(c.kind, "broken").Inc()
				f.log.Info("A worker's answer broke off", "mapping", dest.Mapping, "err", err)
			}
			return
		}
	}
}

func isEventStream(ct string) bool {
	return len(ct) >= len("text/event-stream") && ct[:len("text/event-stream")] == "text/event-stream"
}

// fail answers with the gateway's own JSON-RPC error and counts it.
func (c *call) fail(status int, kind string, code int, msg string) {
	c.failed = kind
	errorsTotal.WithLabelValues(c.kind, kind).Inc()
	c.write(status, c.id, code, msg)
}

func (c *call) write(status int, id json.RawMessage, code int, msg string) {
	body := rpcError(id, code, msg)
	c.w.Header().Set("Content-Type", "application/json")
	c.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	c.w.WriteHeader(status)
	_, _ = c.w.Write(body)
}

// rpcError is a JSON-RPC error response.
func rpcError(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	if err != nil {
		// An id that is not JSON (the request's was parsed, so never):
		// the error without it.
		return rpcError(json.RawMessage("null"), code, msg)
	}
	return b
}
