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
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiWrites counts the API server's mutating requests by resource (and
// subresource), from its own apiserver_request_total: what a burst of
// tenants costs the control plane, which on a small machine is the bound.
func apiWrites(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	writes := map[string]float64{}
	f := fams["apiserver_request_total"]
	if f == nil {
		return nil, fmt.Errorf("the API server's metrics have no apiserver_request_total")
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		default:
			continue
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		writes[res] += m.GetCounter().GetValue()
	}
	return writes, nil
}

// perTenant formats the writes between two readings, per tenant, the
// largest first.
func perTenant(before, after map[string]float64, tenants int) (string, float64) {
	diff := map[string]float64{}
	total := 0.0
	for res, n := range after {
		if d := n - before[res]; d >= float64(tenants)/10 {
			diff[res] = d / float64(tenants)
			total += d / float64(tenants)
		}
	}
	keys := slices.SortedFunc(maps.Keys(diff), func(a, b string) int { return cmp.Compare(diff[b], diff[a]) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, diff[k]))
	}
	return strings.Join(parts, ", "), total
}
