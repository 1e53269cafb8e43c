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
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/audit"
)

// callNote is where a call's route is noted for its audit record.
type callNote struct {
	mu    sync.Mutex
	route Route
}

type callNoteKey struct{}

// noteRoute notes r for the call's audit record, if it keeps one.
func noteRoute(ctx context.Context, r Route) {
	if n, ok := ctx.Value(callNoteKey{}).(*callNote); ok {
		n.mu.Lock()
		n.route = r
		n.mu.Unlock()
	}
}

// auditArgs are the arguments a record keeps (at LevelRequest): what the
// call named, never what it carries (a write's text, a job's input).
type auditArgs struct {
	Handle  string `json:"handle"`
	Command string `json:"command"`
	Path    string `json:"path"`
	JobID   string `json:"job_id"`
}

// auditCalls records every tools/call in trail: who, what, where, how it
// ended, how long it took and, by the trail's level, what it named and
// how large its request and result were.
func auditCalls(trail *audit.Trail) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || call.Params == nil || trail.Level() == audit.LevelNone {
				return next(ctx, method, req)
			}
			note := &callNote{}
			ctx = context.WithValue(ctx, callNoteKey{}, note)
			start := time.Now()
			res, err := next(ctx, method, req)
			rec := audit.Record{Time: start, Tool: call.Params.Name, DurationMS: float64(time.Since(start).Microseconds()) / 1000,
				BytesIn: int64(len(call.Params.Arguments)), Outcome: "ok"}
			if call.Extra != nil && call.Extra.TokenInfo != nil {
				rec.Identity = "token of tenant " + call.Extra.TokenInfo.UserID
			}
			if call.Session != nil {
				rec.Session = call.Session.ID()
			}
			note.mu.Lock()
			rec.Tenant, rec.Sandbox, rec.Node = note.route.Tenant, note.route.SandboxID, note.route.Node
			note.mu.Unlock()
			if rec.Tenant == "" && call.Extra != nil && call.Extra.TokenInfo != nil {
				rec.Tenant = call.Extra.TokenInfo.UserID
			}
			var args auditArgs
			_ = json.Unmarshal(call.Params.Arguments, &args)
			rec.Handle, rec.Command, rec.Path, rec.Job = args.Handle, args.Command, args.Path, args.JobID
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
				if !ctr.IsError && call.Params.Name == "exec" && trail.Level() == audit.LevelRequestResult {
					rec.ExitCode = exitCodeOf(ctr.StructuredContent)
				}
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

// exitCodeOf is the exit code of exec's structured result.
func exitCodeOf(structured any) *int {
	switch out := structured.(type) {
	case ExecOutput:
		return &out.ExitCode
	case *ExecOutput:
		return &out.ExitCode
	}
	raw, ok := structured.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(structured); err != nil {
			return nil
		}
	}
	var out struct {
		ExitCode *int `json:"exit_code"`
	}
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out.ExitCode
}
