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

package agentapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The worker relay: an agent relays HTTP requests to the MCP worker
// that it supervises in a sandbox, on the sandbox's loopback, so that a
// gateway reaches a worker in a sandbox without network. A request to
//
//	<agent endpoint>/v1/sandboxes/<sandbox ID>/worker<the worker's path>
//
// with TenantHeader naming the tenant (the body is the worker's, passed
// through byte for byte, so the tenant cannot be in it) reaches the worker
// at its path. The agent authenticates and authorizes the caller as for
// every call, checks that the sandbox is the tenant's, and presents the
// worker's internal bearer in place of the caller's Authorization. Its own
// refusals carry AgentErrorHeader with their code and an ErrorResponse
// body; every other answer is the worker's, passed through.
const (
	// TenantHeader names the tenant (namespace/name) of a relayed request.
	TenantHeader = "Playground-Tenant"
	// AgentErrorHeader marks an answer that is the agent's refusal, not
	// the worker's answer; its value is the error code.
	AgentErrorHeader = "Playground-Agent-Error"
	// HeaderPrefix begins every header of the agent protocol: the agent
	// removes such headers from a worker's answer, so that none of it
	// passes for the agent's.
	HeaderPrefix = "Playground-"
)

// WorkerPath is the agent API path that relays to path on the worker of
// sandboxID.
func WorkerPath(sandboxID, path string) string {
	return "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/worker" + path
}

// WorkerTransport returns a RoundTripper that sends each request to the
// worker of the tenant's sandbox through this client's agent: the
// request's URL path is the worker's path (its scheme and host are
// ignored), and its Authorization header is replaced by the client's own
// credential. The caller forwards only the headers the worker may see.
func (c *Client) WorkerTransport(tenant, sandboxID string) http.RoundTripper {
	return &workerTransport{c: c, tenant: tenant, sandboxID: sandboxID}
}

type workerTransport struct {
	c                 *Client
	tenant, sandboxID string
}

func (t *workerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(req.URL.Path, "/") {
		return nil, fmt.Errorf("worker path %q is not absolute", req.URL.Path)
	}
	out := req.Clone(req.Context())
	u := *t.c.base
	// The worker's path goes as the caller escaped it (%2F stays %2F).
	escaped := strings.TrimSuffix(u.EscapedPath(), "/") + WorkerPath(t.sandboxID, req.URL.EscapedPath())
	path, err := url.PathUnescape(escaped)
	if err != nil {
		return nil, fmt.Errorf("worker path %q: %w", req.URL.EscapedPath(), err)
	}
	u.Path, u.RawPath = path, escaped
	u.RawQuery = req.URL.RawQuery
	out.URL, out.Host = &u, u.Host
	out.Header.Set("Authorization", "Bearer "+t.c.token)
	out.Header.Set(TenantHeader, t.tenant)
	out.Header.Set(VersionHeader, Current.String())
	return t.c.http.Transport.RoundTrip(out)
}
