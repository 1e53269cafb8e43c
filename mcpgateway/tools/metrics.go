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

package tools

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// The call metrics carry the tenant: one series per tenant, tool and
// code, so their number is bounded by the Tenants that exist (a caller
// reaches the tools only with a Tenant's token), the tools registered and
// the error codes; names a caller makes up become "other".

var callsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "playground_gateway_tool_calls_total",
	Help: "Tool calls by tool, outcome code (ok, or the error code: invalid_argument, not_found, too_large, resource_exhausted, unavailable, internal, permission_denied, other) and tenant.",
}, []string{"tool", "code", "tenant"})

var callSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "playground_gateway_tool_call_duration_seconds",
	Help:    "Time from a tool call's arrival to its answer, by tool.",
	Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
}, []string{"tool"})

func init() { metrics.Registry.MustRegister(callsTotal, callSeconds) }

// known are the names of the tools registered in this process.
var known sync.Map

// toolLabel is name, or "other" for a name no tool has.
func toolLabel(name string) string {
	if _, ok := known.Load(name); ok {
		return name
	}
	return "other"
}

// apiCodes are the error codes a call's label may carry.
var apiCodes = map[string]bool{"ok": true}

func init() {
	for _, c := range []agentapi.Code{agentapi.CodeInvalid, agentapi.CodeNotFound, agentapi.CodeTooLarge, agentapi.CodeExhausted,
		agentapi.CodeUnavailable, agentapi.CodeInternal, agentapi.CodeUnauth, agentapi.CodeForbidden} {
		apiCodes[string(c)] = true
	}
}

// codeLabel is a record's code as a label: ok for none, other for a code
// that is not one of the API's.
func codeLabel(code string) string {
	switch {
	case code == "":
		return "ok"
	case apiCodes[code]:
		return code
	}
	return "other"
}
