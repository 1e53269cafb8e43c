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

package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/internal/tracing"
)

// traceFlags registers the trace flags on fs and returns what makes the
// tracer provider of component (on node, for agents) once they are
// parsed, and what stops it (exporting what is buffered).
func traceFlags(fs *flag.FlagSet) func(component, node string, log logr.Logger) (tracing.Provider, func(), error) {
	endpoint := fs.String("trace-endpoint", "", "OTLP/HTTP receiver the spans of tool calls are exported to (http://collector:4318, its path /v1/traces when none is given; https:// verifies the receiver against the system's roots); empty: no traces")
	ratio := fs.Float64("trace-sample-ratio", tracing.DefaultSampleRatio, "share of traces kept, 0 to 1, decided by the trace ID (give every component one ratio, so that they keep the same traces whole); a caller cannot ask for more")
	headers := fs.String("trace-headers", "", "headers sent with every export, as name=value,name=value (a receiver's credentials)")
	return func(component, node string, log logr.Logger) (tracing.Provider, func(), error) {
		h := map[string]string{}
		for kv := range strings.SplitSeq(*headers, ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return tracing.Provider{}, nil, fmt.Errorf("--trace-headers: %q is not name=value", kv)
			}
			h[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		p, err := tracing.New(component, tracing.Options{Endpoint: *endpoint, SampleRatio: *ratio, Headers: h, Version: buildVersion(), Node: node})
		if err != nil {
			return tracing.Provider{}, nil, fmt.Errorf("--trace-endpoint: %w", err)
		}
		stop := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				log.Error(err, "Exporting the last spans")
			}
		}
		return p, stop, nil
	}
}
