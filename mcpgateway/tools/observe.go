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

package tools

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/tracing"
)

// Every tools/call is observed once, by observeCalls: its audit record,
// its span and its metrics are made from one note that the call's handler
// fills in as it learns who and what the call is about, so that nothing is
// parsed twice on the way (a write's base64 is read by its handler alone).

// callNote is what a call's handling learns of it.
type callNote struct {
	mu                         sync.Mutex
	route                      Route
	handle, command, path, job string
	exitCode                   *int
}

type callNoteKey struct{}

func noteOf(ctx context.Context) *callNote {
	n, _ := ctx.Value(callNoteKey{}).(*callNote)
	return n
}

// noteRoute notes where the call goes.
func noteRoute(ctx context.Context, r Route) {
	if n := noteOf(ctx); n != nil {
		n.mu.Lock()
		n.route = r
		n.mu.Unlock()
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("playground.tenant", r.Tenant),
		attribute.String("playground.sandbox", r.SandboxID), attribute.String("playground.node", r.Node))
}

// noteInput notes what a call's arguments name (never what they carry: a
// write's text, a job's input).
func noteInput(ctx context.Context, in any) {
	n := noteOf(ctx)
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch in := in.(type) {
	case CloseSessionInput:
		n.handle = in.Handle
	case ExecInput:
		n.handle, n.command = in.Handle, in.Command
	case JobExecInput:
		n.handle, n.command = in.Handle, in.Command
	case ReadInput:
		n.handle, n.path = in.Handle, in.Path
	case WriteInput:
		n.handle, n.path = in.Handle, in.Path
	case JobPollInput:
		n.job = in.JobID
	case JobCancelInput:
		n.job = in.JobID
	case JobInputInput:
		n.job = in.JobID
	case JobResizeInput:
		n.job = in.JobID
	case JobScreenInput:
		n.job = in.JobID
	}
}

// noteOutput notes what a call's result tells the record (exec's exit
// code).
func noteOutput(ctx context.Context, out any) {
	n := noteOf(ctx)
	if n == nil {
		return
	}
	if o, ok := out.(ExecOutput); ok {
		code := o.ExitCode
		n.mu.Lock()
		n.exitCode = &code
		n.mu.Unlock()
	}
}

// noted is h noting its input and output for the call's observation.
func noted[In, Out any](h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		noteInput(ctx, in)
		res, out, err := h(ctx, req, in)
		if err == nil {
			noteOutput(ctx, out)
		}
		return res, out, err
	}
}

// observeCalls records every tools/call: in trail (by its level: who,
// what, where, how it ended, how long it took, what it named and how
// large its request and result were), as a span of tracer's (its parent
// the client's trace context, from params._meta or the request's
// headers), and in the gateway's call metrics.
func observeCalls(trail *audit.Trail, tracer trace.Tracer) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			tool := toolLabel(call.Params.Name)
			if call.Extra != nil && call.Extra.Header != nil {
				ctx = tracing.Extract(ctx, call.Extra.Header)
			}
			ctx = tracing.ExtractMeta(ctx, call.Params.Meta)
			ctx, span := tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("mcp.method.name", method), attribute.String("gen_ai.tool.name", tool)))
			defer span.End()
			note := &callNote{}
			ctx = context.WithValue(ctx, callNoteKey{}, note)
			start := time.Now()
			res, err := next(ctx, method, req)
			elapsed := time.Since(start)

			rec := audit.Record{Time: start, Tool: call.Params.Name, DurationMS: float64(elapsed.Microseconds()) / 1000,
				BytesIn: int64(len(call.Params.Arguments)), Outcome: "ok"}
			if call.Extra != nil && call.Extra.TokenInfo != nil {
				rec.Identity = "token of tenant " + call.Extra.TokenInfo.UserID
				rec.Tenant = call.Extra.TokenInfo.UserID
			}
			if call.Session != nil {
				rec.Session = call.Session.ID()
			}
			note.mu.Lock()
			if note.route.Tenant != "" {
				rec.Tenant = note.route.Tenant
			}
			rec.Sandbox, rec.Node, rec.ImageDigest = note.route.SandboxID, note.route.Node, note.route.ImageDigest
			rec.Handle, rec.Command, rec.Path, rec.Job = note.handle, note.command, note.path, note.job
			exitCode := note.exitCode
			note.mu.Unlock()
			switch ctr, _ := res.(*mcp.CallToolResult); {
			case err != nil:
				rec.Outcome, rec.Code = "error", codeOfMessage(err.Error())
			case ctr != nil:
				rec.BytesOut = resultSize(ctr)
				if ctr.IsError {
					rec.Outcome = "error"
					if len(ctr.Content) > 0 {
						if tc, ok := ctr.Content[0].(*mcp.TextContent); ok {
							rec.Code = codeOfMessage(tc.Text)
						}
					}
				}
			}
			code := codeLabel(rec.Code)
			callsTotal.WithLabelValues(tool, code, rec.Tenant).Inc()
			callSeconds.WithLabelValues(tool).Observe(elapsed.Seconds())
			if rec.Outcome != "ok" {
				span.SetStatus(codes.Error, code)
				span.SetAttributes(attribute.String("error.type", code))
			}
			if exitCode != nil {
				span.SetAttributes(attribute.Int("process.exit.code", *exitCode))
			}
			if trail.Level() == audit.LevelNone {
				return res, err
			}
			if trail.Level() == audit.LevelRequestResult {
				rec.ExitCode = exitCode
			}
			trail.Record(rec)
			return res, err
		}
	}
}

// codeOfMessage is the error code a tool error's text starts with
// ("not_found: ..."), or internal when it names none.
func codeOfMessage(msg string) string {
	if code, _, ok := strings.Cut(msg, ":"); ok && code != "" && !strings.ContainsAny(code, " \t") {
		return code
	}
	return string(agentapi.CodeInternal)
}

// resultSize is the bytes of a result's content.
func resultSize(r *mcp.CallToolResult) int64 {
	var n int64
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			n += int64(len(c.Text))
		case *mcp.ImageContent:
			n += int64(len(c.Data))
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				n += int64(len(c.Resource.Blob) + len(c.Resource.Text))
			}
		}
	}
	return n
}
