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

package faculty

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a build, the values of the outcome label.
const (
	outcomeSucceeded = "succeeded"
	outcomeFailed    = "failed"
	// outcomeCancelled: the agent stopped, or every caller went away.
	outcomeCancelled = "cancelled"
)

// metrics are the cache's: builds by outcome and their duration. Cache
// hits are not builds and are not counted.
type metrics struct {
	builds   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "playground_faculty_builds_total",
			Help: "Faculty bundle builds run on this node, by outcome (succeeded, failed, cancelled).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "playground_faculty_build_duration_seconds",
			Help:    "Wall-clock time of faculty bundle builds on this node, from the source written to the build stamped or failed, by outcome.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"outcome"}),
	}
	for _, o := range []string{outcomeSucceeded, outcomeFailed, outcomeCancelled} {
		m.builds.WithLabelValues(o)
		m.duration.WithLabelValues(o)
	}
	return m
}

func (m *metrics) observe(outcome string, d time.Duration) {
	m.builds.WithLabelValues(outcome).Inc()
	m.duration.WithLabelValues(outcome).Observe(d.Seconds())
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.builds.Describe(ch)
	m.duration.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.builds.Collect(ch)
	m.duration.Collect(ch)
}

// Collector exports the cache's metrics, for the agent to register.
func (c *Cache) Collector() prometheus.Collector { return c.metrics }
