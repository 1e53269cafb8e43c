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

package manifests

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestHelmDashboard: the Grafana dashboard is off by default (a cluster
// without Grafana's sidecar has no use for it); enabled, it is one
// ConfigMap holding charts/playground/dashboards/playground.json as it is,
// with the label the sidecar selects by, the labels and annotations given,
// in the namespace given (Grafana's, when its sidecar watches only its
// own) or else the release's. The e2e test TestDashboard checks that
// every metric the dashboard queries exists.
func TestHelmDashboard(t *testing.T) {
	for name, r := range renderings(t) {
		for _, o := range r.objs {
			if o.GetKind() == "ConfigMap" {
				t.Errorf("%s renders %s by default", name, key(o))
			}
		}
	}

	want, err := os.ReadFile(filepath.Join(repoRoot(t), "charts", "playground", "dashboards", "playground.json"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, r rendering, ns string, labels, annotations map[string]string) {
		t.Helper()
		cm := workload[corev1.ConfigMap](t, find(t, r, "ConfigMap", "playground-dashboard"))
		if cm.Namespace != ns {
			t.Errorf("%s: the dashboard's ConfigMap is in %q, want %q", name, cm.Namespace, ns)
		}
		for k, v := range labels {
			if got, ok := cm.Labels[k]; !ok || got != v {
				t.Errorf("%s: label %s=%q, want %q (labels %v)", name, k, got, v, cm.Labels)
			}
		}
		for k, v := range annotations {
			if got := cm.Annotations[k]; got != v {
				t.Errorf("%s: annotation %s=%q, want %q", name, k, got, v)
			}
		}
		if keys := slices.Sorted(maps.Keys(cm.Data)); !slices.Equal(keys, []string{"playground.json"}) {
			t.Fatalf("%s: the ConfigMap holds %v, want playground.json", name, keys)
		}
		got := cm.Data["playground.json"]
		// The block scalar drops the file's final newline; nothing else
		// may differ.
		if !bytes.Equal(bytes.TrimSpace([]byte(got)), bytes.TrimSpace(want)) {
			t.Errorf("%s: the ConfigMap's playground.json differs from dashboards/playground.json", name)
		}
		var d struct {
			UID string `json:"uid"`
		}
		if err := json.Unmarshal([]byte(got), &d); err != nil || d.UID != "playground" {
			t.Errorf("%s: the ConfigMap's dashboard does not parse as the Playground dashboard (uid %q): %v", name, d.UID, err)
		}
	}
	check("helm with custom values", renderHelmCustom(t), "playground-apps", map[string]string{"grafana_dashboard": "1"}, nil)
	check("helm with the dashboard elsewhere", renderHelm(t, "helm (dashboard in monitoring)",
		"--set", "dashboard.configMap.enabled=true",
		"--set", "dashboard.configMap.namespace=monitoring",
		"--set", "dashboard.configMap.labels.team=platform",
		"--set", "dashboard.configMap.annotations.grafana_folder=Playground"),
		"monitoring", map[string]string{"grafana_dashboard": "1", "team": "platform", "app.kubernetes.io/component": "dashboard"},
		map[string]string{"grafana_folder": "Playground"})
}
