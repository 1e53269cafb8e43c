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

package connlimit

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The budget's metrics (docs/metrics.md), read when scraped. Listeners are
// labelled by kind, never by sandbox or tenant: their number is bounded.
var (
	budgetDesc = prometheus.NewDesc("playground_connection_budget",
		"The process's budget of accepted connections, each a file descriptor (--connection-budget).", nil, nil)
	inUseDesc = prometheus.NewDesc("playground_connection_budget_in_use",
		"Accepted connections that hold the budget now.", nil, nil)
	peakDesc = prometheus.NewDesc("playground_connection_budget_peak",
		"The most accepted connections held at once since the process started; never above the budget.", nil, nil)
	openDesc = prometheus.NewDesc("playground_connections_open",
		"Accepted connections held now, by kind of listener.", []string{"listener"}, nil)
	refusedDesc = prometheus.NewDesc("playground_connections_refused_total",
		"Connections closed as they were accepted, or to make room for a newer one, by kind of listener and reason: budget (the process's budget was spent), per_source (the source held as many as allowed), unauthenticated (the oldest connection without an authenticated request, closed for a new one).",
		[]string{"listener", "reason"}, nil)
)

func init() { metrics.Registry.MustRegister(collector{process}) }

type collector struct{ b *Budget }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{budgetDesc, inUseDesc, peakDesc, openDesc, refusedDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, float64(b.limit.Load()))
	ch <- prometheus.MustNewConstMetric(inUseDesc, prometheus.GaugeValue, float64(b.used.Load()))
	ch <- prometheus.MustNewConstMetric(peakDesc, prometheus.GaugeValue, float64(b.peak.Load()))
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, s := range b.listeners {
		ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(s.open.Load()), name)
		s.refused.Range(func(reason, n any) bool {
			ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(n.(*atomic.Uint64).Load()), name, reason.(string))
			return true
		})
	}
}
