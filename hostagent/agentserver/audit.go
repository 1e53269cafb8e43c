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
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/audit"
)

// The agent records the calls of callers that reach it directly (a stdio
// gateway acting as its user, `kubectl playground exec`), which no
// gateway's trail holds; a trusted gateway's calls are the gateway's to
// record, and the manager's delivery of credentials carries nothing a
// tenant did.

// SetAudit records the calls of users in trail; call it before serving.
func (s *Server) SetAudit(trail *audit.Trail, node string) { s.trail, s.node = trail, node }

// auditNote is what a call's handler learns of it for its record.
type auditNote struct {
	tenant, command, path string
}

type auditNoteKey struct{}

// noteRequest notes, for the call's record, the tenant and what the
// request named (never what it carries).
func noteRequest(ctx context.Context, tenant string, v any) {
	n, ok := ctx.Value(auditNoteKey{}).(*auditNote)
	if !ok {
		return
	}
	n.tenant = tenant
	switch req := v.(type) {
	case *agentapi.ExecRequest:
		n.command = req.Command
	case *agentapi.ReadRequest:
		n.path = req.Path
	case *agentapi.WriteRequest:
		n.path = req.Path
	}
}

// audited wraps a call's handling with its record, when its caller is a
// user (not a trusted gateway or the manager).
func (s *Server) audited(r *http.Request, handle func(*http.Request) error) {
	c, _ := r.Context().Value(callerKey{}).(Caller)
	if s.trail.Level() == audit.LevelNone || c.Gateway || c.Manager {
		_ = handle(r)
		return
	}
	note := &auditNote{}
	r = r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note))
	start := time.Now()
	err := handle(r)
	rec := audit.Record{Time: start, Identity: c.Name, Tenant: note.tenant, Tool: callName(r),
		Command: note.command, Path: note.path, Outcome: "ok", DurationMS: float64(time.Since(start).Microseconds()) / 1000,
		BytesIn: r.ContentLength, Node: s.node, Sandbox: r.PathValue("sandbox"), Handle: r.PathValue("handle"), Job: r.PathValue("job")}
	if err != nil {
		rec.Outcome, rec.Code = "error", string(codeOf(err))
	}
	s.trail.Record(rec)
}

// callName is the call a request makes, named by its path: exec, read,
// jobs (a job's start), poll, handles (open), ...
func callName(r *http.Request) string {
	return path.Base(strings.TrimSuffix(r.URL.Path, "/"))
}
