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

package workers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The forwarding metrics. No label names a tenant or a mapping (one
// mapping per tenant: its name would name the tenant; docs/metrics.md);
// the logs name the mapping of each error.
var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_gateway_worker_requests_total",
		Help: "Requests forwarded to native workers (their destination resolved), by destination kind: service or sandbox.",
	}, []string{"destination"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_gateway_worker_errors_total",
		Help: "Requests of the workers catalog answered with an error, by destination kind (none when unresolved) and kind of error.",
	}, []string{"destination", "kind"})
	timeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_gateway_worker_timeouts_total",
		Help: "Requests to native workers that outlived their mapping's timeout: their outcome is unknown; never retried.",
	}, []string{"destination"})
	upstreamSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "playground_gateway_worker_upstream_duration_seconds",
		Help:    "Time of a forwarded request at the worker, from sending it to the end of the worker's answer (streams included), by destination kind.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
	}, []string{"destination"})
	inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "playground_gateway_worker_in_flight",
		Help: "Requests and GET streams open to native workers through this gateway.",
	})
)

func init() {
	metrics.Registry.MustRegister(requests, errorsTotal, timeouts, upstreamSeconds, inFlight)
}
