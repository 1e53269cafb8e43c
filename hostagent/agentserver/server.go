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

// Package agentserver serves the host agent's protocol (package agentapi)
// for one execution kernel (package hostagent): it authenticates the
// caller, bounds what a call may hold, and maps between the protocol's
// types and the kernel's, which change with the kernel while the protocol
// changes only by version.
package agentserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/jobs"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/internal/httpserve"
	"github.com/playground-dev/playground/internal/keyedlimit"
)

// Server serves the agent API of one Agent.
type Server struct {
	// egress takes a sandbox's brokered credentials (the agent's).
	egress interface {
		SetEgressCredentials(tenant, sandboxID string, creds []backend.EgressCredential) error
	}
	// workers is the agent's worker service, for the relay; files its
	// file service, sessions its sessions service, execs its exec and
	// jobs service.
	workers  workerDialer
	files    fileService
	sessions sessionService
	execs    execService
	log      logr.Logger
	budget   *budget.Limiter
	limits   httpserve.Limits
	// identities authenticates callers by their Kubernetes identity (nil:
	// shared tokens only) and decides which tenants a user may act as.
	identities IdentityAuth
	// keys takes the manager's signing keys (SetKeyInbox); nil: none.
	keys KeyInbox
	// pullCreds takes the manager's registry credentials
	// (SetPullCredentialInbox); nil: none.
	pullCreds PullCredentialInbox
	// piles lists and removes the node's retained piles (SetPiles); nil:
	// none.
	piles PileKeeper

	mu     sync.RWMutex
	tokens [][sha256.Size]byte // hashes of the accepted shared bearer tokens

	// trail records the calls of users (SetAudit); node names this
	// agent's node in its records.
	trail *audit.Trail
	node  string
	// tracer makes the calls' spans (SetTracer; nil: none).
	tracer trace.Tracer
}

// fileService is what the server asks of the kernel's file service
// (hostagent.Files).
type fileService interface {
	ReadFile(ctx context.Context, tenant, handleID, filePath, cwd string) (hostagent.FileContent, error)
	ReadFileRange(ctx context.Context, tenant, handleID, filePath, cwd string, r hostagent.Range) (hostagent.FileContent, error)
	DigestFile(ctx context.Context, tenant, handleID, filePath, cwd string) (hostagent.FileDigest, error)
	WriteFile(ctx context.Context, tenant, handleID, filePath, cwd string, data []byte) (hostagent.FileInfo, error)
	WriteFileAt(ctx context.Context, tenant, handleID, filePath, cwd string, offset int64, data []byte) (hostagent.FileInfo, error)
	AppendFile(ctx context.Context, tenant, handleID, filePath, cwd string, data []byte) (hostagent.FileInfo, error)
}

// sessionService is what the server asks of the kernel's sessions
// service (hostagent.Sessions).
type sessionService interface {
	Open(ctx context.Context, tenant, sandboxID string) (hostagent.Handle, error)
	Activity(ctx context.Context, tenant, sandboxID string) (hostagent.Activity, error)
	Renew(tenant, handleID string) (hostagent.Handle, error)
	CloseHandle(ctx context.Context, tenant, handleID string) error
}

// execService is what the server asks of the kernel's exec and jobs
// service (hostagent.Execs).
type execService interface {
	Exec(ctx context.Context, tenant, handleID string, req agentapi.ExecRequest) (agentapi.ExecResult, error)
	ExecOutputLimit() int
	StartJob(ctx context.Context, tenant, handleID string, req agentapi.ExecRequest) (jobs.JobInfo, error)
	PollJob(ctx context.Context, tenant, jobID, cursor string, maxBytes int, wait time.Duration) (jobs.PollResult, error)
	JobInput(ctx context.Context, tenant, jobID string, p []byte, end bool) (jobs.JobInfo, error)
	JobResize(ctx context.Context, tenant, jobID string, size jobs.TTYSize) (jobs.JobInfo, error)
	JobScreen(ctx context.Context, tenant, jobID string, scrollback int) (jobs.Screen, jobs.JobInfo, error)
	CancelJob(ctx context.Context, tenant, jobID string) (jobs.JobInfo, error)
}

// IdentityAuth authenticates callers and authorizes their tenants;
// KubeAuth is the one for clusters.
type IdentityAuth interface {
	Authenticator
	TenantAuthorizer
	ResourceAuthorizer
}

// NewServer returns a server for agent that accepts the given shared
// bearer tokens (several during a rotation) as a trusted gateway's. With
// no token and no SetIdentities it refuses every call: closed by default.
func NewServer(agent *hostagent.Agent, log logr.Logger, tokens ...string) *Server {
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	lim, _ := budget.New(budget.Limits{}) // the defaults are valid
	s := &Server{egress: agent, workers: agent.Workers(), files: agent.Files(), sessions: agent.Sessions(), execs: agent.Execs(), log: log, budget: lim, limits: DefaultHTTPLimits()}
	s.SetTokens(tokens...)
	return s
}

// DefaultHTTPLimits are the agent API's connection limits: its one real
// client, the gateway, multiplexes every call on one HTTP/2 connection per
// replica, so a stream bound far above the synchronous-call budget never
// stops it, while no connection can open streams without end.
func DefaultHTTPLimits() httpserve.Limits {
	l := httpserve.DefaultLimits()
	l.Name = "agent"
	l.MaxConcurrentStreams = 512
	l.IdleTimeout = 5 * time.Minute
	return l
}

// SetBudget replaces the budget of synchronous calls (exec, read, write)
// and of the bytes they hold; call it before serving.
func (s *Server) SetBudget(l *budget.Limiter) { s.budget = l }

// Budget is the server's budget, for metrics and tests.
func (s *Server) Budget() *budget.Limiter { return s.budget }

// SetHTTPLimits replaces the connection limits; call it before serving.
func (s *Server) SetHTTPLimits(l httpserve.Limits) { s.limits = l }

// SetIdentities makes the server accept callers by their Kubernetes
// identity (KubeAuth); call it before serving.
func (s *Server) SetIdentities(a IdentityAuth) { s.identities = a }

// SetTokens replaces the accepted bearer tokens, e.g. after a rotation of
// the Secret they come from. Empty tokens are ignored.
func (s *Server) SetTokens(tokens ...string) {
	hashes := make([][sha256.Size]byte, 0, len(tokens))
	for _, t := range tokens {
		if t != "" {
			hashes = append(hashes, sha256.Sum256([]byte(t)))
		}
	}
	s.mu.Lock()
	s.tokens = hashes
	s.mu.Unlock()
}

// sharedToken compares the presented token's hash with every accepted
// shared one in constant time, so timing tells nothing about the tokens.
func (s *Server) sharedToken(token string) bool {
	h := sha256.Sum256([]byte(token))
	s.mu.RLock()
	defer s.mu.RUnlock()
	match := 0
	for _, t := range s.tokens {
		match |= subtle.ConstantTimeCompare(h[:], t[:])
	}
	return match == 1
}

// errNoCredential is every refusal of a caller's credential.
var errNoCredential = &agentapi.Error{Code: agentapi.CodeUnauth,
	Message: "the agent API accepts only trusted gateways (a token bound to this node) and Kubernetes users allowed to use the tenant: present such a bearer token"}

// authenticate says who presented the request's bearer token.
func (s *Server) authenticate(r *http.Request) (Caller, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return Caller{}, errNoCredential
	}
	if s.sharedToken(token) {
		// The shared token is playground-dev's and the tests': its
		// holder is the gateway and the manager both.
		return Caller{Name: "the shared agent token", Gateway: true, Manager: true}, nil
	}
	if s.identities == nil {
		return Caller{}, errNoCredential
	}
	c, err := s.identities.Authenticate(r.Context(), token, keyedlimit.Source(r.RemoteAddr))
	switch {
	case errors.Is(err, errUnauthenticated):
		return Caller{}, errNoCredential
	case err != nil:
		return Caller{}, &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err,
			Message: "the agent cannot verify callers right now: retry shortly"}
	}
	return c, nil
}

type callerKey struct{}

// mayUse checks that the request's caller may act as tenant: a trusted
// gateway may; a user only as a tenant its RBAC allows it to use.
func (s *Server) mayUse(r *http.Request, tenant string) error {
	c, ok := r.Context().Value(callerKey{}).(Caller)
	if !ok {
		return errNoCredential
	}
	if c.Gateway {
		return nil
	}
	if s.identities == nil {
		return errNoCredential
	}
	return s.identities.MayUse(r.Context(), c, tenant)
}

// Handler returns the API's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("POST /v1/sandboxes/{sandbox}/handles", s.call(s.open))
	mux.Handle("POST /v1/sandboxes/{sandbox}/activity", s.call(s.activity))
	mux.Handle("POST /v1/sandboxes/{sandbox}/egress-credentials", s.call(s.egressCredentials))
	mux.Handle("POST /v1/signing-keys", s.call(s.signingKey))
	mux.Handle("POST /v1/image-credentials", s.call(s.imageCredentials))
	mux.Handle("POST /v1/piles", s.call(s.retainedPiles))
	mux.Handle("POST /v1/piles/delete", s.call(s.removePile))
	mux.Handle("POST /v1/handles/{handle}/renew", s.call(s.renew))
	mux.Handle("POST /v1/handles/{handle}/close", s.call(s.close))
	mux.Handle("POST /v1/handles/{handle}/exec", s.call(s.exec))
	mux.Handle("POST /v1/handles/{handle}/jobs", s.call(s.startJob))
	mux.Handle("POST /v1/handles/{handle}/read", s.call(s.read))
	mux.Handle("POST /v1/handles/{handle}/write", s.call(s.write))
	mux.Handle("POST /v1/jobs/{job}/poll", s.call(s.poll))
	mux.Handle("POST /v1/jobs/{job}/cancel", s.call(s.cancel))
	mux.Handle("POST /v1/jobs/{job}/input", s.call(s.input))
	mux.Handle("POST /v1/jobs/{job}/resize", s.call(s.resize))
	mux.Handle("POST /v1/jobs/{job}/screen", s.call(s.screen))
	mux.Handle("/v1/sandboxes/{sandbox}/worker/{path...}", s.relay())
	return mux
}

// call authenticates, checks the caller's protocol version, bounds the
// body, and writes the result or error.
func (s *Server) call(fn func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := s.accept(w, r)
		if !ok {
			return
		}
		r, span := s.startSpan(r, r.Pattern)
		defer span.End()
		s.audited(r, func(r *http.Request) error {
			if err := checkIDs(r); err != nil {
				s.fail(w, r, err)
				return err
			}
			r.Body = http.MaxBytesReader(w, r.Body, agentapi.MaxRequestBytes)
			res, err := fn(r)
			if err != nil {
				span.SetStatus(codes.Error, string(codeOf(err)))
				s.fail(w, r, err)
				return err
			}
			switch res := res.(type) {
			case nil:
				w.WriteHeader(http.StatusNoContent)
			case binaryPoll:
				err = res.write(w)
			case binaryExec:
				err = res.write(w)
			case binaryRead:
				err = res.write(w)
			default:
				writeJSON(w, http.StatusOK, res)
			}
			if err != nil {
				s.fail(w, r, err)
			}
			return err
		})
	})
}

// accept authenticates the caller and checks its protocol version; the
// request it returns carries the caller. When it returns false it has
// answered.
func (s *Server) accept(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	w.Header().Set(agentapi.VersionHeader, agentapi.Current.String())
	caller, err := s.authenticate(r)
	if err != nil {
		code := agentapi.CodeOf(err)
		if code == agentapi.CodeUnauth {
			w.Header().Set("WWW-Authenticate", `Bearer realm="playground-agent"`)
		} else {
			s.log.Error(err, "Cannot authenticate a caller")
		}
		writeJSON(w, statusOf(code), agentapi.ErrorResponse{Code: code, Message: err.Error()})
		return nil, false
	}
	httpserve.MarkAuthenticated(r.Context())
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller))
	if err := checkVersion(r); err != nil {
		writeJSON(w, http.StatusBadRequest, agentapi.ErrorResponse{Code: agentapi.CodeInvalid, Message: err.Error()})
		return nil, false
	}
	return r, true
}

// checkIDs refuses a handle or job ID in the path that the agent could not
// have issued, with the kernel's answer for an unknown one, before the call
// reads its body or takes any budget.
func checkIDs(r *http.Request) error {
	if strings.Contains(r.Pattern, "{handle}") && !agentapi.ValidHandle(r.PathValue("handle")) {
		return hostagent.HandleNotFound()
	}
	if strings.Contains(r.Pattern, "{job}") && !agentapi.ValidJobID(r.PathValue("job")) {
		return &jobs.NotFoundError{}
	}
	return nil
}

// fail answers an error. An internal one is logged with its detail under a
// fresh ID, and the caller gets the ID and a generic text: the detail (a
// backend's error) may name the node's paths, and the caller relays the
// message to a tenant.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := codeOf(err)
	msg := err.Error()
	if code == agentapi.CodeInternal {
		id := agentapi.NewErrorID()
		s.log.Error(err, "Agent API call failed", "errorID", id, "path", r.URL.Path)
		msg = agentapi.InternalErrorMessage(id)
	}
	writeJSON(w, statusOf(code), agentapi.ErrorResponse{Code: code, Message: msg})
}

// checkVersion refuses a caller that names no version of the protocol,
// or another major one.
func checkVersion(r *http.Request) error {
	return agentapi.Check(r.Header.Get(agentapi.VersionHeader))
}

// codeOf is the protocol's code of an error: the kernel's errors are the
// protocol's (agentapi.Error is agentapi.Error), and the job engine's
// sentinels are classified by the kernel.
func codeOf(err error) agentapi.Code { return hostagent.CodeOf(err) }

func statusOf(c agentapi.Code) int {
	switch c {
	case agentapi.CodeInvalid:
		return http.StatusBadRequest
	case agentapi.CodeNotFound:
		return http.StatusNotFound
	case agentapi.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case agentapi.CodeExhausted:
		return http.StatusTooManyRequests
	case agentapi.CodeUnavailable:
		return http.StatusServiceUnavailable
	case agentapi.CodeUnauth:
		return http.StatusUnauthorized
	case agentapi.CodeForbidden:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) //nolint:errchkjson // the status is sent; the answers are the agent API's types, which encode
}

// decode reads a JSON body; every call must name its tenant, one the
// caller may act as. A request that checks itself (a Validate method) is
// checked here, once the caller is known to be allowed.
func (s *Server) decode(r *http.Request, v any, tenant func() string) error {
	if err := decodeBody(r, v); err != nil {
		return err
	}
	if tenant() == "" {
		return &agentapi.Error{Code: agentapi.CodeInvalid, Message: "the request names no tenant"}
	}
	noteRequest(r.Context(), tenant(), v)
	if err := s.mayUse(r, tenant()); err != nil {
		return err
	}
	if c, ok := v.(interface{ Validate() error }); ok {
		return c.Validate()
	}
	return nil
}

// decodeBody reads a JSON body, refusing fields the call does not have.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &agentapi.Error{Code: agentapi.CodeTooLarge, Err: err,
				Message: fmt.Sprintf("the request body is over %d bytes", agentapi.MaxRequestBytes)}
		}
		return &agentapi.Error{Code: agentapi.CodeInvalid, Err: err, Message: "malformed request body: " + err.Error()}
	}
	return nil
}

// egressCredentials takes a sandbox's brokered credentials: from the
// manager only (a gateway serves tenants' calls, and has no business
// setting what goes out in their name).
func (s *Server) egressCredentials(r *http.Request) (any, error) {
	if c, _ := r.Context().Value(callerKey{}).(Caller); !c.Manager {
		return nil, &agentapi.Error{Code: agentapi.CodeForbidden, Message: "only the manager delivers brokered egress credentials: present the manager's token bound to this node"}
	}
	var req agentapi.EgressCredentialsRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if req.Tenant == "" {
		return nil, &agentapi.Error{Code: agentapi.CodeInvalid, Message: "the request names no tenant"}
	}
	creds := make([]backend.EgressCredential, len(req.Credentials))
	for i, c := range req.Credentials {
		creds[i] = backend.EgressCredential{Host: c.Host, Header: c.Header, Value: c.Value}
	}
	return nil, s.egress.SetEgressCredentials(req.Tenant, r.PathValue("sandbox"), creds)
}

// signingKey hands a Sandbox's signing key to the node's key inbox: from
// the manager only, as egress credentials are.
func (s *Server) signingKey(r *http.Request) (any, error) {
	if c, _ := r.Context().Value(callerKey{}).(Caller); !c.Manager {
		return nil, &agentapi.Error{Code: agentapi.CodeForbidden, Message: "only the manager installs signing keys: present the manager's token bound to this node"}
	}
	var req agentapi.SigningKeyRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if s.keys == nil {
		return nil, &agentapi.Error{Code: agentapi.CodeUnavailable, Message: "this agent takes no signing keys (it runs without its Kubernetes side)"}
	}
	return s.keys.DeliverSigningKey(r.Context(), req)
}

// KeyInbox takes the signing keys the manager delivers (the node agent's,
// which knows the Sandbox objects of its node).
type KeyInbox interface {
	DeliverSigningKey(ctx context.Context, req agentapi.SigningKeyRequest) (agentapi.SigningKeyResult, error)
}

// SetKeyInbox makes the server hand signing keys to k; call it before
// serving.
func (s *Server) SetKeyInbox(k KeyInbox) { s.keys = k }

// imageCredentials hands a Sandbox's registry credentials to the node's
// inbox: from the manager only, as signing keys are, within the
// protocol's bounds.
func (s *Server) imageCredentials(r *http.Request) (any, error) {
	if c, _ := r.Context().Value(callerKey{}).(Caller); !c.Manager {
		return nil, &agentapi.Error{Code: agentapi.CodeForbidden, Message: "only the manager delivers registry credentials: present the manager's token bound to this node"}
	}
	var req agentapi.ImageCredentialsRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if s.pullCreds == nil {
		return nil, &agentapi.Error{Code: agentapi.CodeUnavailable, Message: "this agent takes no registry credentials (it runs without its Kubernetes side)"}
	}
	return nil, s.pullCreds.DeliverImageCredentials(r.Context(), req)
}

// PullCredentialInbox takes the registry credentials the manager
// delivers (the node agent's, which knows the Sandbox objects of its
// node).
type PullCredentialInbox interface {
	DeliverImageCredentials(ctx context.Context, req agentapi.ImageCredentialsRequest) error
}

// SetPullCredentialInbox makes the server hand registry credentials to
// in; call it before serving.
func (s *Server) SetPullCredentialInbox(in PullCredentialInbox) { s.pullCreds = in }

func (s *Server) open(r *http.Request) (any, error) {
	var req agentapi.TenantRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	h, err := s.sessions.Open(r.Context(), req.Tenant, r.PathValue("sandbox"))
	return wireHandle(h), err
}

func (s *Server) activity(r *http.Request) (any, error) {
	var req agentapi.TenantRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	act, err := s.sessions.Activity(r.Context(), req.Tenant, r.PathValue("sandbox"))
	return wireActivity(act), err
}

func (s *Server) renew(r *http.Request) (any, error) {
	var req agentapi.TenantRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	h, err := s.sessions.Renew(req.Tenant, r.PathValue("handle"))
	return wireHandle(h), err
}

func (s *Server) close(r *http.Request) (any, error) {
	var req agentapi.TenantRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	return nil, s.sessions.CloseHandle(r.Context(), req.Tenant, r.PathValue("handle"))
}

func (s *Server) exec(r *http.Request) (any, error) {
	var req agentapi.ExecRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	release, err := s.admit(r, req.Tenant, int64(len(req.Stdin))+2*int64(s.execs.ExecOutputLimit()))
	if err != nil {
		return nil, err
	}
	res, err := s.execs.Exec(r.Context(), req.Tenant, r.PathValue("handle"), req)
	if err != nil {
		release()
		return nil, err
	}
	if accepts(r, agentapi.ExecMediaType) {
		return binaryExec{res, release}, nil
	}
	defer release()
	return res, nil
}

// admit reserves a synchronous call and the bytes it may hold in the
// budget, waiting a bounded time; past it the call is refused as busy
// (retryable) before anything runs.
func (s *Server) admit(r *http.Request, tenant string, need int64) (release func(), err error) {
	release, err = s.budget.Acquire(r.Context(), tenant, need)
	var ex *budget.ExhaustedError
	switch {
	case errors.As(err, &ex) && ex.TooLarge:
		return nil, &agentapi.Error{Code: agentapi.CodeTooLarge, Err: err, Message: "the agent refused the call: " + err.Error()}
	case errors.As(err, &ex):
		return nil, &agentapi.Error{Code: agentapi.CodeExhausted, Err: err, Message: "the sandbox's node is busy: " + err.Error()}
	case err != nil:
		return nil, err
	}
	return release, nil
}

func (s *Server) startJob(r *http.Request) (any, error) {
	var req agentapi.ExecRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	info, err := s.execs.StartJob(r.Context(), req.Tenant, r.PathValue("handle"), req)
	return wireJob(info), err
}

func (s *Server) poll(r *http.Request) (any, error) {
	var req agentapi.PollRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	res, err := s.execs.PollJob(r.Context(), req.Tenant, r.PathValue("job"), req.Cursor, req.MaxBytes, req.Wait)
	if err != nil {
		return nil, err
	}
	if accepts(r, agentapi.PollMediaType) {
		return binaryPoll(res), nil
	}
	chunks := make([]agentapi.Chunk, len(res.Chunks))
	for i, c := range res.Chunks {
		chunks[i] = agentapi.EncodeChunk(c.Stream.String(), c.Seq, c.Offset, c.Data)
	}
	return agentapi.PollResponse{
		Job:           wireJob(res.Job),
		Chunks:        chunks,
		NextCursor:    res.NextCursor,
		Gap:           wireGap(res.Gap),
		DroppedBytes:  res.DroppedBytes,
		DroppedChunks: res.DroppedChunks,
		Done:          res.Done,
	}, nil
}

// accepts reports whether the request's Accept header names mediaType.
func accepts(r *http.Request, mediaType string) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), mediaType) {
				return true
			}
		}
	}
	return false
}

// binaryPoll is a page answered as PollMediaType.
type binaryPoll jobs.PollResult

// write writes the page; it fails, having written nothing, only if the
// header cannot be encoded.
func (p binaryPoll) write(w http.ResponseWriter) error {
	h := agentapi.PollHeader{
		Job:           wireJob(p.Job),
		Chunks:        make([]agentapi.ChunkHeader, len(p.Chunks)),
		NextCursor:    p.NextCursor,
		Gap:           wireGap(p.Gap),
		DroppedBytes:  p.DroppedBytes,
		DroppedChunks: p.DroppedChunks,
		Done:          p.Done,
	}
	size := 0
	for i, c := range p.Chunks {
		h.Chunks[i] = agentapi.ChunkHeader{Stream: c.Stream.String(), Seq: c.Seq, Offset: c.Offset, Size: len(c.Data)}
		size += len(c.Data)
	}
	head, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding the page: %w", err)
	}
	// JSON from Marshal has no raw newline: the header is the first line.
	w.Header().Set("Content-Type", agentapi.PollMediaType)
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+1+size))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(head, '\n'))
	for _, c := range p.Chunks {
		if _, err := w.Write(c.Data); err != nil {
			return nil //nolint:nilerr // the client went away: nothing to answer
		}
	}
	return nil
}

// binaryExec is an exec result answered as ExecMediaType; release gives
// its bytes back to the budget once they are written.
type binaryExec struct {
	res     agentapi.ExecResult
	release func()
}

// write writes the result; it fails, having written nothing, only if the
// header cannot be encoded.
func (b binaryExec) write(w http.ResponseWriter) error {
	defer b.release()
	r := b.res
	head, err := json.Marshal(r.Header())
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	w.Header().Set("Content-Type", agentapi.ExecMediaType)
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+1+len(r.Stdout)+len(r.Stderr)))
	w.WriteHeader(http.StatusOK)
	for _, p := range [][]byte{append(head, '\n'), r.Stdout, r.Stderr} {
		if _, err := w.Write(p); err != nil {
			break // the client went away: no one to tell
		}
	}
	return nil
}

func (s *Server) cancel(r *http.Request) (any, error) {
	var req agentapi.TenantRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	info, err := s.execs.CancelJob(r.Context(), req.Tenant, r.PathValue("job"))
	return wireJob(info), err
}

func (s *Server) input(r *http.Request) (any, error) {
	var req agentapi.InputRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	if len(req.Data) > bounds.MaxInputBytes {
		return nil, &agentapi.Error{Code: agentapi.CodeTooLarge, Message: fmt.Sprintf("input of %d bytes, over the %d-byte bound of one call: send it in parts", len(req.Data), bounds.MaxInputBytes)}
	}
	release, err := s.admit(r, req.Tenant, int64(len(req.Data)))
	if err != nil {
		return nil, err
	}
	defer release()
	info, err := s.execs.JobInput(r.Context(), req.Tenant, r.PathValue("job"), req.Data, req.End)
	return wireJob(info), err
}

func (s *Server) resize(r *http.Request) (any, error) {
	var req agentapi.ResizeRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	if err := agentapi.CheckTTY(agentapi.TTYSize{Rows: req.Rows, Cols: req.Cols}); err != nil {
		return nil, &agentapi.Error{Code: agentapi.CodeInvalid, Message: err.Error()}
	}
	info, err := s.execs.JobResize(r.Context(), req.Tenant, r.PathValue("job"), jobs.TTYSize{Rows: req.Rows, Cols: req.Cols})
	return wireJob(info), err
}

func (s *Server) screen(r *http.Request) (any, error) {
	var req agentapi.ScreenRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	if req.Scrollback < 0 || req.Scrollback > bounds.MaxScrollback {
		return nil, &agentapi.Error{Code: agentapi.CodeInvalid, Message: fmt.Sprintf("scrollback %d is out of range: give 0 to %d lines", req.Scrollback, bounds.MaxScrollback)}
	}
	scr, info, err := s.execs.JobScreen(r.Context(), req.Tenant, r.PathValue("job"), req.Scrollback)
	if err != nil {
		return nil, err
	}
	return wireScreen(scr, info), nil
}

func (s *Server) read(r *http.Request) (any, error) {
	var req agentapi.ReadRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	// A read runs a command whose output buffers are exec's.
	release, err := s.admit(r, req.Tenant, 2*int64(s.execs.ExecOutputLimit()))
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, handle := r.Context(), r.PathValue("handle")
	if req.Digest {
		d, err := s.files.DigestFile(ctx, req.Tenant, handle, req.Path, req.Cwd)
		return wireDigest(d), err
	}
	var f hostagent.FileContent
	if req.Ranged() {
		f, err = s.files.ReadFileRange(ctx, req.Tenant, handle, req.Path, req.Cwd, kernelRange(req))
	} else {
		f, err = s.files.ReadFile(ctx, req.Tenant, handle, req.Path, req.Cwd)
	}
	if err == nil && accepts(r, agentapi.ReadMediaType) {
		return binaryRead{wireFileContent(f)}, nil
	}
	return wireFileContent(f), err
}

// binaryRead is a file's content answered as ReadMediaType.
type binaryRead struct{ f agentapi.FileContent }

// write writes the content; it fails, having written nothing, only if the
// header cannot be encoded.
func (b binaryRead) write(w http.ResponseWriter) error {
	data := b.f.Data
	b.f.Data = nil
	head, err := json.Marshal(b.f)
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	w.Header().Set("Content-Type", agentapi.ReadMediaType)
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+1+len(data)))
	w.WriteHeader(http.StatusOK)
	// A failed write is a client gone away: no one to tell.
	if _, werr := w.Write(append(head, '\n')); werr == nil {
		_, _ = w.Write(data)
	}
	return nil
}

func (s *Server) write(r *http.Request) (any, error) {
	var req agentapi.WriteRequest
	if err := s.decode(r, &req, func() string { return req.Tenant }); err != nil {
		return nil, err
	}
	release, err := s.admit(r, req.Tenant, int64(len(req.Data)))
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, handle := r.Context(), r.PathValue("handle")
	var f hostagent.FileInfo
	switch {
	case req.Append:
		f, err = s.files.AppendFile(ctx, req.Tenant, handle, req.Path, req.Cwd, req.Data)
	case req.Offset != nil:
		f, err = s.files.WriteFileAt(ctx, req.Tenant, handle, req.Path, req.Cwd, *req.Offset, req.Data)
	default:
		f, err = s.files.WriteFile(ctx, req.Tenant, handle, req.Path, req.Cwd, req.Data)
	}
	return wireFileInfo(f), err
}

// HTTPServer returns an http.Server for the API that speaks HTTP/2 over TLS
// when tlsConfig is set, else HTTP/1.1 and cleartext HTTP/2 (h2c).
//
// Its timeouts are httpserve's (see httpserve.Limits): headers and request
// bodies have a deadline, idle connections are closed, and each write must
// make progress, but no deadline covers a whole response, since a long exec
// or a long poll answers only when it ends.
func (s *Server) HTTPServer(tlsConfig *tls.Config) *http.Server {
	srv := s.limits.Server(s.Handler(), httpserve.ErrorLog(s.log))
	srv.TLSConfig = tlsConfig
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	if tlsConfig == nil {
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	return srv
}

// Serve serves the API on ln until ctx ends, then shuts down gracefully
// within grace.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config, grace time.Duration) error {
	return httpserve.Serve(ctx, s.HTTPServer(tlsConfig), s.limits.Listen(ln), grace)
}
