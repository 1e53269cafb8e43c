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

package budget

import "github.com/prometheus/client_golang/prometheus"

// The limiter's metrics (docs/metrics.md), read from Stats when scraped.
// No metric carries a tenant: their number is unbounded.
var (
	callsDesc = prometheus.NewDesc("playground_budget_calls_in_flight",
		"Synchronous calls (exec, read, write) admitted and not yet finished.", nil, nil)
	bytesDesc = prometheus.NewDesc("playground_budget_bytes_in_flight",
		"Bytes reserved by the synchronous calls in flight (their worst case: output they may collect, payload they carry).", nil, nil)
	peakBytesDesc = prometheus.NewDesc("playground_budget_bytes_in_flight_peak",
		"The most bytes ever reserved at once since the process started; never above the configured total.", nil, nil)
	admittedDesc = prometheus.NewDesc("playground_budget_admitted_total",
		"Synchronous calls admitted by the budget.", nil, nil)
	refusedDesc = prometheus.NewDesc("playground_budget_refused_total",
		"Synchronous calls refused because a budget stayed full for the whole wait, by the bound that refused them: tenant or total.", []string{"scope"}, nil)
)

// Collector returns the limiter's metrics. Register it once per limiter;
// a process with several (a gateway and an agent in one test) wraps each
// with a label that tells them apart.
func (l *Limiter) Collector() prometheus.Collector { return collector{l} }

type collector struct{ l *Limiter }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{callsDesc, bytesDesc, peakBytesDesc, admittedDesc, refusedDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.GaugeValue, float64(s.Calls))
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(peakBytesDesc, prometheus.GaugeValue, float64(s.PeakBytes))
	ch <- prometheus.MustNewConstMetric(admittedDesc, prometheus.CounterValue, float64(s.Admitted))
	for _, sc := range []Scope{ScopeTenant, ScopeTotal} {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(s.Refused[sc]), string(sc))
	}
}
