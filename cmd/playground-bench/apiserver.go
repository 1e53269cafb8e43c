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
// largest first, and returns their total. Token and access reviews are
// questions the API server answers without storing anything, and are left
// out; resources of less than one write per ten tenants (the components'
// own Leases, an odd Event) are summed as "other", and counted.
func perTenant(before, after map[string]float64, tenants int) (string, float64) {
	diff := map[string]float64{}
	total, other := 0.0, 0.0
	for res, n := range after {
		if strings.HasSuffix(res, "reviews") {
			continue
		}
		d := (n - before[res]) / float64(tenants)
		total += d
		if d >= 0.1 {
			diff[res] = d
		} else {
			other += d
		}
	}
	keys := slices.SortedFunc(maps.Keys(diff), func(a, b string) int {
		return cmp.Or(cmp.Compare(diff[b], diff[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, diff[k]))
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("other %.2f", other))
	}
	return strings.Join(parts, ", "), total
}
