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

package e2e

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/internal/tracing"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// receivedSpan is a span an OTLP receiver got, with its service.
type receivedSpan struct {
	service string
	*tracepb.Span
}

// otlpReceiver is a test OTLP/HTTP receiver of traces on loopback.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, receivedSpan{service: service, Span: s})
			}
		}
	}
	o.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// traces are the spans received, by trace ID.
func (o *otlpReceiver) traces() map[string][]receivedSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]receivedSpan{}
	for _, s := range o.spans {
		id := hex.EncodeToString(s.TraceId)
		out[id] = append(out[id], s)
	}
	return out
}

// TestTraces: with traces on, a test OTLP receiver gets one trace per tool
// call, from the gateway's span of the call through the agent's span of
// its API call to the span of the command in the sandbox; a client's trace
// context (params._meta) is the parent of the gateway's span, and a trace
// the client did not keep is not kept either.
func TestTraces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	providers := map[string]tracing.Provider{}
	for _, c := range []string{"gateway", "agent"} {
		p, err := tracing.New(c, tracing.Options{Endpoint: srv.URL, SampleRatio: 1, Node: "traces-1"})
		g.Expect(err).NotTo(HaveOccurred())
		providers[c] = p
		defer func() { _ = p.Shutdown(ctx) }()
	}
	startManager(t)
	n := &node{name: "traces-1", labels: pool("traces"), tracer: providers["agent"]}
	startNode(t, n)
	cfg, err := rbactest.Grant(ctx, k8sClient, cp.Config, "gateway", rbactest.ServiceAccountUser("gateway"), rbactest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	url := serveGateway(t, mcpgateway.Options{Config: cfg, Tracer: providers["gateway"]})
	ns := newNamespace(t)
	applyTenant(t, ns, "alice", inPool("traces"))
	waitReady(t, ns, "alice")
	c := connectTenant(t, url, ns, "alice")
	cs := c.cs
	var res *mcp.CallToolResult

	var open tools.OpenSessionOutput
	c.must("open_session", map[string]any{}, &open)
	c.must("exec", map[string]any{"handle": open.Handle, "command": "echo hi"}, nil)
	c.must("write", map[string]any{"handle": open.Handle, "path": "/workspace/t.txt", "base64": "aGk="}, nil)
	c.must("read", map[string]any{"handle": open.Handle, "path": "/workspace/t.txt"}, nil)
	// A client that traces: its span is the parent of the gateway's.
	const clientTrace, clientSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": open.Handle, "command": "true"},
		Meta: mcp.Meta{"traceparent": "00-" + clientTrace + "-" + clientSpan + "-01"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeFalse())
	// A client's trace it did not keep: no span of it is kept.
	const droppedTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": open.Handle, "command": "true"},
		Meta: mcp.Meta{"traceparent": "00-" + droppedTrace + "-00f067aa0ba902b7-00"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeFalse())
	c.must("close_session", map[string]any{"handle": open.Handle}, nil)
	for _, p := range providers {
		g.Expect(p.Shutdown(ctx)).To(Succeed()) // exports what is buffered
	}

	traces := recv.traces()
	g.Expect(traces).NotTo(HaveKey(droppedTrace))
	var calls []string
	for id, spans := range traces {
		if len(spans) == 1 && spans[0].Name == "POST /v1/signing-keys" {
			// The manager's delivery of the tenant's signing key: a call of
			// its own, traced by the agent alone (no tool call's).
			continue
		}
		byID := map[string]receivedSpan{}
		var root receivedSpan
		for _, s := range spans {
			byID[hex.EncodeToString(s.SpanId)] = s
			if s.service == "playground-gateway" {
				g.Expect(root.Span).To(BeNil(), "one gateway span per trace: %v", spans)
				root = s
			}
		}
		g.Expect(root.Span).NotTo(BeNil(), "trace %s has no gateway span: %v", id, spans)
		calls = append(calls, root.Name)
		if id == clientTrace {
			g.Expect(hex.EncodeToString(root.ParentSpanId)).To(Equal(clientSpan))
		} else {
			g.Expect(root.ParentSpanId).To(BeEmpty())
		}
		var agent, sandbox int
		for _, s := range spans {
			parent := byID[hex.EncodeToString(s.ParentSpanId)]
			switch {
			case s.service == "playground-agent" && (s.Name == "sandbox exec" || s.Name == "sandbox file"):
				g.Expect(parent.service).To(Equal("playground-agent"), "the sandbox's span is the agent call's child")
				sandbox++
			case s.service == "playground-agent":
				g.Expect(parent.Span).To(Equal(root.Span), "the agent's span is the gateway's child")
				agent++
			}
		}
		g.Expect(agent).To(BeNumerically(">=", 1), "trace of %s reaches the agent: %v", root.Name, spans)
		switch root.Name {
		case "tools/call exec", "tools/call read", "tools/call write":
			g.Expect(sandbox).To(Equal(1), "trace of %s reaches the sandbox: %v", root.Name, spans)
		}
	}
	g.Expect(calls).To(ConsistOf("tools/call open_session", "tools/call exec", "tools/call write", "tools/call read",
		"tools/call exec", "tools/call close_session"), "one trace per call")
}
