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

package hostagent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/playground-dev/playground/hostagent/backend"
)

// sandboxSpans makes the spans of the calls' time in sandboxes, from
// Options.Tracer (nil: none).
type sandboxSpans struct{ tp trace.TracerProvider }

// start starts the span of name ("sandbox exec", "sandbox job start",
// "sandbox file") in sandbox id of be: the part of a call spent in the
// sandbox, from the command's start to its end.
func (sp sandboxSpans) start(ctx context.Context, name, id string, be backend.Backend) (context.Context, trace.Span) {
	tp := sp.tp
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/playground-dev/playground/hostagent").Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("playground.sandbox", id), attribute.String("playground.backend", be.Name())))
}

// endSpan ends span with err's code, if any.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, string(CodeOf(err)))
	}
	span.End()
}
