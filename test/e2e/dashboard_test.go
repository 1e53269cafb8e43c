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

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/internal/agentlease"
)

// dashboardFile is the Grafana dashboard the chart ships
// (dashboard.configMap.enabled).
const dashboardFile = "../../charts/playground/dashboards/playground.json"

// grafanaDashboard is what the test reads of the dashboard's JSON.
type grafanaDashboard struct {
	UID           string         `json:"uid"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID         int                `json:"id"`
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		RefID      string             `json:"refId"`
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	// Panels are a collapsed row's; an open row's follow it.
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaVariable struct {
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	Datasource *grafanaDatasource `json:"datasource"`
	// Query is a string (a datasource variable's plugin, older query
	// variables) or, as Grafana now saves a Prometheus query variable, an
	// object holding it.
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
}

// queryText is the variable's query, whichever form it is saved in.
func (v grafanaVariable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// metricName finds the metric names in PromQL: every name of ours starts
// with playground_.
var metricName = regexp.MustCompile(`\bplayground_[a-z0-9_]+`)

// TestDashboard: the chart's Grafana dashboard parses, takes its
// Prometheus from a datasource variable (so that it works in any Grafana,
// whatever its data sources are called), filters by a tenant variable,
// numbers its panels uniquely (Grafana keys panel state by id), and queries
// only metrics that the components register: with the manager, an agent
// (with the egress-DNS hub `playground agent` always has) and a gateway
// running in this process, every metric name in every panel's and
// variable's query is registered on controller-runtime's registry, which
// each component serves at /metrics. A metric renamed or removed in the
// code fails here instead of leaving an empty panel.
func TestDashboard(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(dashboardFile)
	g.Expect(err).NotTo(HaveOccurred())
	var d grafanaDashboard
	g.Expect(json.Unmarshal(raw, &d)).To(Succeed(), "the dashboard is not JSON")
	g.Expect(d.UID).To(Equal("playground"), "a fixed uid keeps the dashboard's links and stars across reloads")
	g.Expect(d.SchemaVersion).To(BeNumerically(">=", 36), "datasource references as objects need schema 36 or later")

	// uses lists, by metric, where the dashboard queries it.
	uses := map[string][]string{}
	use := func(where, query string) {
		for _, m := range metricName.FindAllString(query, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				m = strings.TrimSuffix(m, suffix) // a histogram's series are named after it
			}
			if !slices.Contains(uses[m], where) {
				uses[m] = append(uses[m], where)
			}
		}
	}

	vars := map[string]grafanaVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
		use("variable "+v.Name, v.queryText())
		use("variable "+v.Name, v.Definition)
	}
	ds, ok := vars["datasource"]
	g.Expect(ok).To(BeTrue(), "no datasource variable")
	g.Expect(ds.Type).To(Equal("datasource"))
	g.Expect(ds.queryText()).To(Equal("prometheus"), "the datasource variable offers Prometheus data sources")
	tenant, ok := vars["tenant"]
	g.Expect(ok).To(BeTrue(), "no tenant variable")
	g.Expect(tenant.Type).To(Equal("query"))
	g.Expect(tenant.queryText()).To(MatchRegexp(`^label_values\(playground_[a-z0-9_]+, *tenant\)$`))
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			g.Expect(v.Datasource).To(Equal(&grafanaDatasource{Type: "prometheus", UID: "${datasource}"}), "variable %s", v.Name)
		}
	}

	ids := map[int]string{}
	var panels []grafanaPanel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}
	queried := 0
	for _, p := range panels {
		g.Expect(p.ID).NotTo(BeZero(), "panel %q has no id", p.Title)
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		g.Expect(p.Title).NotTo(BeEmpty(), "panel %d has no title", p.ID)
		g.Expect(p.Targets).NotTo(BeEmpty(), "panel %q queries nothing", p.Title)
		g.Expect(p.Datasource).To(Equal(&grafanaDatasource{Type: "prometheus", UID: "${datasource}"}), "panel %q", p.Title)
		for _, tg := range p.Targets {
			g.Expect(tg.Datasource).To(Equal(&grafanaDatasource{Type: "prometheus", UID: "${datasource}"}), "panel %q query %s", p.Title, tg.RefID)
			g.Expect(metricName.MatchString(tg.Expr)).To(BeTrue(), "panel %q query %s names no metric of ours: %s", p.Title, tg.RefID, tg.Expr)
			use(fmt.Sprintf("panel %q", p.Title), tg.Expr)
			queried++
		}
	}
	g.Expect(queried).To(BeNumerically(">", 20))

	// Every component registers its metrics by the time it serves: the
	// manager in NewManager, the gateway's in init, the agent before it
	// registers its node's Lease.
	startManager(t)
	n := &node{name: "dashboard-1", labels: pool("dashboard"), egressDNS: &egressdns.Hub{}}
	startNode(t, n)
	startGateway(t)
	g.Eventually(func() error {
		return k8sClient.Get(context.Background(), client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(n.name)}, &coordinationv1.Lease{})
	}, settle, 100*time.Millisecond).Should(Succeed(), "the agent did not register its node")

	// The probe tells a name that no collector has from one that one has.
	g.Expect(registered(t, "playground_dashboard_test_no_such_metric")).To(BeFalse())
	g.Expect(registered(t, "playground_gateway_auth_failures_total")).To(BeTrue())

	names := make([]string, 0, len(uses))
	for m := range uses {
		names = append(names, m)
	}
	slices.Sort(names)
	var missing []string
	for _, m := range names {
		if !registered(t, m) {
			missing = append(missing, m)
			t.Errorf("%s is queried by %s, and no component registers it", m, strings.Join(uses[m], ", "))
		}
	}
	if len(missing) > 0 {
		t.Logf("metrics the dashboard queries that are not registered: %s", strings.Join(missing, " "))
	}
	t.Logf("%d metrics checked", len(names))
}

// errProbeEnd is the probe's last descriptor's error.
var errProbeEnd = errors.New("the end of a registration probe")

// probe describes a metric name, then an invalid descriptor: the registry
// never takes it.
type probe struct{ name string }

func (p probe) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc(p.name, "A probe of whether "+p.name+" is registered.", nil, nil)
	ch <- prometheus.NewInvalidDesc(errProbeEnd)
}

func (probe) Collect(chan<- prometheus.Metric) {}

// registered tells whether a collector of metric name is registered on
// controller-runtime's registry, even one that has no series yet (a Vec
// before its first labels; Gather would not show it). Register checks a
// collector's descriptors in turn and refuses one whose name is registered
// with other labels or help (the probe's help is its own), before it
// reaches the probe's invalid descriptor: its error says which it met
// first. Either way nothing is registered, not even the name's labels and
// help, which the registry would otherwise keep for the process's life
// (Unregister leaves them) and so refuse the real metric registered later
// in this process by another test.
func registered(t *testing.T, name string) bool {
	t.Helper()
	err := metrics.Registry.Register(probe{name})
	switch {
	case err == nil:
		metrics.Registry.Unregister(probe{name})
		t.Fatalf("the registry took a probe with an invalid descriptor (%s): this client_golang checks descriptors otherwise, fix registered()", name)
	case errors.Is(err, errProbeEnd):
		return false
	}
	return true
}
