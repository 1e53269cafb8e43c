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

package nodeagent

import (
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/internal/budget"
)

// registerMetrics adds the agent's metrics to controller-runtime's
// registry, which the manager's metrics server (Options.MetricsBindAddress)
// serves, labelled node=<node> so that several agents in one process (tests,
// or an operator running a few) stay apart. It returns the unregistration,
// so that an agent restarted in the same process registers again. A failure
// to register is logged, never fatal: metrics are not worth a node.
func registerMetrics(agent *hostagent.Agent, lim *budget.Limiter, node string, log logr.Logger) (unregister func()) {
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"node": node}, metrics.Registry)
	c := agent.Collector()
	if err := reg.Register(c); err != nil {
		log.Error(err, "Not exporting the agent's metrics: registering them failed (is another agent of this node running in this process?)")
		return func() {}
	}
	breg := prometheus.WrapRegistererWith(prometheus.Labels{"component": "agent"}, reg)
	bc := lim.Collector()
	if err := breg.Register(bc); err != nil {
		log.Error(err, "Not exporting the agent's budget metrics")
		return func() { reg.Unregister(c) }
	}
	return func() { reg.Unregister(c); breg.Unregister(bc) }
}
