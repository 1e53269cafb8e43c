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

package agentserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/httpserve"
	"github.com/playground-dev/playground/internal/tracing"
)

// workerDialer is what the relay asks of the kernel's worker service
// (hostagent.Workers).
type workerDialer interface {
	DialWorker(ctx context.Context, tenant, sandboxID string) (net.Conn, string, error)
}

// relayBytes is what a relayed request holds in the agent while it
// streams: the proxy's buffers each way (the bodies pass through).
const relayBytes = 64 << 10

// relayTarget is one relayed request's connection to its worker.
type relayTarget struct {
	conn  net.Conn
	once  *sync.Once
	token string
	path  string
}

type relayKey struct{}

// relay serves the worker relay (agentapi.WorkerPath): the caller is
// authenticated and authorized for the tenant that TenantHeader names, as
// for every call; the request then goes, byte for byte, to the worker of
// that tenant's sandbox over a connection the sandbox's init opens to the
// worker's loopback port, with the worker's internal bearer in place of
// the caller's credential. Every relayed request has a
// connection of its own: a worker's streamed answer (SSE) holds it, and
// nothing else waits behind it.
func (s *Server) relay() http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(relayKey{}).(relayTarget)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "worker"
			pr.Out.URL.Path, _ = url.PathUnescape(t.path)
			pr.Out.URL.RawPath = t.path
			pr.Out.Host = "localhost"
			pr.Out.Header.Del(agentapi.TenantHeader)
			pr.Out.Header.Del(agentapi.VersionHeader)
			pr.Out.Header.Set("Authorization", "Bearer "+t.token)
			tracing.Inject(pr.In.Context(), pr.Out.Header)
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				t, ok := ctx.Value(relayKey{}).(relayTarget)
				if !ok {
					return nil, errors.New("relay: no connection to the worker")
				}
				var c net.Conn
				t.once.Do(func() { c = t.conn })
				if c == nil {
					return nil, errors.New("relay: the worker's connection was used")
				}
				return c, nil
			},
			DisableKeepAlives:  true,
			DisableCompression: true,
		},
		// The worker's answer never carries the agent's own headers: a
		// worker that set AgentErrorHeader would pass for the agent.
		ModifyResponse: func(resp *http.Response) error {
			for k := range resp.Header {
				if strings.HasPrefix(k, agentapi.HeaderPrefix) {
					delete(resp.Header, k)
				}
			}
			for k := range resp.Trailer {
				if strings.HasPrefix(k, agentapi.HeaderPrefix) {
					delete(resp.Trailer, k)
				}
			}
			return nil
		},
		FlushInterval: -1, // streamed answers reach the caller as the worker writes them
		// A worker that dies mid-answer is the worker's business: logged
		// at debug level, not as the agent's error.
		ErrorLog: httpserve.ErrorLog(s.log.V(1)),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the caller went away
			}
			s.relayFail(w, r, &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err,
				Message: "the worker closed the connection or answered no valid HTTP: it may have crashed; retry shortly"})
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := s.accept(w, r)
		if !ok {
			return
		}
		r, span := s.startSpan(r, "relay to worker")
		defer span.End()
		tenant := r.Header.Get(agentapi.TenantHeader)
		if tenant == "" {
			s.relayFail(w, r, &agentapi.Error{Code: agentapi.CodeInvalid, Message: "a relayed request names its tenant in the " + agentapi.TenantHeader + " header"})
			return
		}
		if err := s.mayUse(r, tenant); err != nil {
			s.relayFail(w, r, err)
			return
		}
		// The worker's path, as the caller escaped it.
		prefix := strings.TrimSuffix(agentapi.WorkerPath(r.PathValue("sandbox"), "/"), "/")
		path, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
		if !ok || path == "" {
			path = "/"
		}
		// A relayed request is one of the tenant's calls: it counts in the
		// budget as an exec does, holding the proxy's buffers.
		release, err := s.admit(r, tenant, relayBytes)
		if err != nil {
			s.relayFail(w, r, err)
			return
		}
		defer release()
		conn, token, err := s.workers.DialWorker(r.Context(), tenant, r.PathValue("sandbox"))
		if err != nil {
			s.relayFail(w, r, err)
			return
		}
		defer conn.Close() // the transport closes it too; once is enough for either
		r.Body = http.MaxBytesReader(w, r.Body, agentapi.MaxRequestBytes)
		t := relayTarget{conn: conn, once: new(sync.Once), token: token, path: path}
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), relayKey{}, t)))
	})
}

// relayFail answers the agent's own refusal of a relayed request, marked
// so that the caller does not take it for the worker's answer.
func (s *Server) relayFail(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set(agentapi.AgentErrorHeader, string(codeOf(err)))
	s.fail(w, r, err)
}
