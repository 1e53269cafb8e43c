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
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/playground-dev/playground/internal/tracing"
)

// SetTracer makes a span of every authenticated call with tp, a child of
// the caller's trace context; call it before serving (default: none).
func (s *Server) SetTracer(tp trace.TracerProvider) {
	s.tracer = tp.Tracer("github.com/playground-dev/playground/hostagent/agentserver")
}

// startSpan starts the span of an authenticated call named name: callers
// that prove no identity make none, so that spans are bounded by the
// calls served.
func (s *Server) startSpan(r *http.Request, name string) (*http.Request, trace.Span) {
	tracer := s.tracer
	if tracer == nil {
		tracer = noop.NewTracerProvider().Tracer("")
	}
	c, _ := r.Context().Value(callerKey{}).(Caller)
	kind := "user"
	switch {
	case c.Gateway:
		kind = "gateway"
	case c.Manager:
		kind = "manager"
	}
	ctx, span := tracer.Start(tracing.Extract(r.Context(), r.Header), name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("playground.caller", kind)))
	return r.WithContext(ctx), span
}
