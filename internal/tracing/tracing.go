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

// Package tracing gives each component its OpenTelemetry tracer provider
// (off unless an OTLP endpoint is configured) and carries W3C trace
// context over the protocols between them: HTTP headers (the agent API,
// the worker relay) and MCP's params._meta.
//
// Every component samples the same way: a trace begun by a caller outside
// the cluster (an MCP client, a user of the agent API) is kept by the
// ratio of its trace ID, never because the caller asked; the ratio
// decides by the trace ID alone, so components configured with one ratio
// keep the same traces whole.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultSampleRatio is the share of traces kept when none is configured.
const DefaultSampleRatio = 0.1

// Options configure a component's traces.
type Options struct {
	// Endpoint is the OTLP/HTTP traces URL ("http://collector:4318", its
	// path /v1/traces when it has none); empty turns traces off.
	Endpoint string
	// SampleRatio is the share of traces kept, 0 to 1.
	SampleRatio float64
	// Headers are sent with every export (a collector's credentials).
	Headers map[string]string
	// Version is the component's, and Node the node it runs on (agents),
	// in its spans' resource.
	Version, Node string
}

// Provider is a component's tracer provider and how to stop it.
type Provider struct {
	trace.TracerProvider
	// Shutdown exports what is buffered and stops; a no-op when off.
	Shutdown func(context.Context) error
}

// Off is the provider of a component without traces.
func Off() Provider {
	return Provider{TracerProvider: noop.NewTracerProvider(), Shutdown: func(context.Context) error { return nil }}
}

// New returns the tracer provider of component ("gateway", "agent",
// "manager") by o: spans batched to the OTLP endpoint, or Off when o names
// none.
func New(component string, o Options) (Provider, error) {
	if o.Endpoint == "" {
		return Off(), nil
	}
	if o.SampleRatio < 0 || o.SampleRatio > 1 {
		return Provider{}, fmt.Errorf("the trace sample ratio %v is not between 0 and 1", o.SampleRatio)
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Provider{}, fmt.Errorf("the trace endpoint %q is not an http(s) URL of an OTLP/HTTP receiver", o.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String()), otlptracehttp.WithTimeout(10 * time.Second)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if len(o.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(o.Headers))
	}
	// The exporter's client needs no context to be made; it connects on
	// its first export.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return Provider{}, fmt.Errorf("the trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "playground-"+component), attribute.String("service.version", o.Version)}
	if o.Node != "" {
		attrs = append(attrs, attribute.String("k8s.node.name", o.Node))
	}
	res := resource.NewSchemaless(attrs...)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(Sampler(o.SampleRatio)),
	)
	return Provider{TracerProvider: tp, Shutdown: tp.Shutdown}, nil
}

// Sampler keeps a trace begun here, or by a caller, by the ratio of its
// trace ID; a trace a caller did not keep is not kept; within a
// component, a span follows its parent.
func Sampler(ratio float64) sdktrace.Sampler {
	byID := sdktrace.TraceIDRatioBased(ratio)
	return sdktrace.ParentBased(byID,
		sdktrace.WithRemoteParentSampled(byID),
		sdktrace.WithRemoteParentNotSampled(sdktrace.NeverSample()))
}

// propagator is W3C trace context; baggage is not carried (a caller's
// baggage is not the cluster's to pass on).
var propagator = propagation.TraceContext{}

// Extract returns ctx with the trace context h carries, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject sets h's trace context headers to ctx's span (removing a
// caller's when ctx has none).
func Inject(ctx context.Context, h http.Header) {
	for _, k := range propagator.Fields() {
		h.Del(k)
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Fields are the headers trace context travels in.
func Fields() []string { return propagator.Fields() }

// ExtractMeta returns ctx with the trace context of an MCP request's
// params._meta ("traceparent", "tracestate"), if it carries one.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	c := propagation.MapCarrier{}
	for _, k := range propagator.Fields() {
		if v, ok := meta[k].(string); ok {
			c[k] = v
		}
	}
	return propagator.Extract(ctx, c)
}
