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

package tracing

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestSampler: a caller's trace context links the spans but never decides
// that they are kept: a trace the ratio would drop stays dropped when the
// caller says it keeps it, and one the caller dropped is dropped whatever
// the ratio.
func TestSampler(t *testing.T) {
	kept := func(ratio float64, traceparent string) bool {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(Sampler(ratio)))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		ctx := context.Background()
		if traceparent != "" {
			ctx = Extract(ctx, http.Header{"Traceparent": {traceparent}})
		}
		_, span := tp.Tracer("t").Start(ctx, "call")
		defer span.End()
		return span.SpanContext().IsSampled()
	}
	const sampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	const dropped = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	for _, c := range []struct {
		ratio       float64
		traceparent string
		want        bool
	}{
		{1, "", true},
		{0, "", false},
		{1, sampled, true},
		{0, sampled, false},
		{1, dropped, false},
	} {
		if got := kept(c.ratio, c.traceparent); got != c.want {
			t.Errorf("ratio %v, caller %q: kept %v, want %v", c.ratio, c.traceparent, got, c.want)
		}
	}
}

// TestInjectReplaces: what an agent or worker receives is the caller's
// span, not a trace context the request arrived with.
func TestInjectReplaces(t *testing.T) {
	h := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "Tracestate": {"planted=1"}}
	Inject(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("without a span, the request keeps %v", h)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	h = http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	Inject(ctx, h)
	if got := h.Get("Traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent %q", got)
	}
}

// TestNewRefuses: a bad endpoint or ratio is refused at start, and none
// turns traces off.
func TestNewRefuses(t *testing.T) {
	for _, o := range []Options{{Endpoint: "collector:4318", SampleRatio: 1}, {Endpoint: "ftp://c", SampleRatio: 1}, {Endpoint: "http://c:4318", SampleRatio: 1.5}} {
		if _, err := New("gateway", o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	p, err := New("gateway", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, span := p.Tracer("t").Start(context.Background(), "x"); span.IsRecording() {
		t.Error("traces are on without an endpoint")
	}
}
