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
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/internal/keyedlimit"
)

// The record of egress by name: each query a sandbox's resolver answers
// is counted (by tenant and result), logged as a structured record, and,
// when a name is denied or an answer refused, an Event on the Sandbox
// (merged into a series when it repeats), which `kubectl playground
// status` shows: a team sees why its `pip install` failed.
var (
	egressQueries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_egress_dns_queries_total",
		Help: "Queries the resolvers of sandboxes with egress by name answered, by tenant and result (allowed, denied, throttled, failed).",
	}, []string{"tenant", "result"})
	egressRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_egress_dns_refused_addresses_total",
		Help: "Addresses an allowed name answered that a deny rule covers (rebinding), taken out of the answer and not opened, by tenant.",
	}, []string{"tenant"})
	egressOpened = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_egress_dns_opened_addresses_total",
		Help: "Addresses opened for sandboxes by the answers of their resolvers, by tenant.",
	}, []string{"tenant"})
	egressFlowRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_egress_flows_total",
		Help: "Connections of sandboxes on record, by tenant and result: allowed when they ended, denied for each refused destination and poll.",
	}, []string{"tenant", "result"})
	egressBrokered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_egress_brokered_requests_total",
		Help: "HTTPS requests of sandboxes to hosts whose credential the node adds, by tenant and result (allowed: forwarded; denied: answered by the broker).",
	}, []string{"tenant", "result"})
	egressUnlogged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playground_egress_records_unlogged_total",
		Help: "Records of flows and brokered requests counted but not logged, past the bound of log lines per tenant, by tenant.",
	}, []string{"tenant"})
	registerEgressOnce sync.Once
)

// Log lines of flows and brokered requests, per tenant: a sandbox that
// opens connections without end does not flood the agent's log.
const (
	egressLogsPerSecond = 20
	egressLogBurst      = 200
)

// egressCollector exports the egress counts of the node's sandboxes
// (backend.EgressMeter), read when scraped.
type egressCollector struct {
	backends []backend.Backend
	log      logr.Logger
}

var (
	egressBytesDesc = prometheus.NewDesc("playground_egress_bytes_total",
		"Bytes egress sandboxes sent (direction out) and received (in) on the flows their rules let out, by tenant; counted since the sandbox's rules were last applied.",
		[]string{"tenant", "direction"}, nil)
	egressFlowsDesc = prometheus.NewDesc("playground_egress_connections_total",
		"Flows egress sandboxes opened that their rules let out, by tenant; since the rules were last applied.",
		[]string{"tenant"}, nil)
	egressDeniedDesc = prometheus.NewDesc("playground_egress_denied_packets_total",
		"Packets from egress sandboxes that their rules dropped (a refused connection attempt is a few), by tenant; since the rules were last applied.",
		[]string{"tenant"}, nil)
)

func (c egressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- egressBytesDesc
	ch <- egressFlowsDesc
	ch <- egressDeniedDesc
}

func (c egressCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, be := range c.backends {
		m := be.Capabilities().EgressMeter
		if m == nil {
			continue
		}
		usage, err := m.EgressUsage(ctx)
		if err != nil {
			c.log.Error(err, "Reading the egress counters", "backend", be.Name())
			continue
		}
		for _, u := range usage {
			ch <- prometheus.MustNewConstMetric(egressBytesDesc, prometheus.CounterValue, float64(u.BytesOut), u.Tenant, "out")
			ch <- prometheus.MustNewConstMetric(egressBytesDesc, prometheus.CounterValue, float64(u.BytesIn), u.Tenant, "in")
			ch <- prometheus.MustNewConstMetric(egressFlowsDesc, prometheus.CounterValue, float64(u.Allowed), u.Tenant)
			ch <- prometheus.MustNewConstMetric(egressDeniedDesc, prometheus.CounterValue, float64(u.Denied), u.Tenant)
		}
	}
}

// registerEgressMetrics exports the egress counts of backends, labelled
// with the node, until the returned unregistration.
func registerEgressMetrics(backends []backend.Backend, node string, log logr.Logger) (unregister func()) {
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"node": node}, metrics.Registry)
	c := egressCollector{backends: backends, log: log.WithName("egress")}
	if err := reg.Register(c); err != nil {
		log.Error(err, "Not exporting the egress counters")
		return func() {}
	}
	return func() { reg.Unregister(c) }
}

// recordEgress subscribes the agent's record of egress decisions to hub.
func recordEgress(ctx context.Context, hub *egressdns.Hub, rec *sandboxReconciler, log logr.Logger) (cancel func()) {
	if hub == nil {
		return func() {}
	}
	registerEgressOnce.Do(func() {
		for _, c := range []prometheus.Collector{egressQueries, egressRefused, egressOpened, egressFlowRecords, egressBrokered, egressUnlogged} {
			if err := metrics.Registry.Register(c); err != nil {
				log.Error(err, "Not exporting the egress metrics")
			}
		}
	})
	log = log.WithName("egress")
	lines := keyedlimit.New(egressLogsPerSecond, egressLogBurst, 4096)
	return hub.Subscribe(func(d egressdns.Decision) {
		switch d.Type {
		case egressdns.TypeFlow, egressdns.TypeBrokered:
			recordConnection(ctx, d, rec, log, lines)
			return
		}
		egressQueries.WithLabelValues(d.Tenant, string(d.Result)).Inc()
		egressRefused.WithLabelValues(d.Tenant).Add(float64(len(d.Refused)))
		egressOpened.WithLabelValues(d.Tenant).Add(float64(len(d.Opened)))
		kv := []any{"tenant", d.Tenant, "sandbox", d.Sandbox, "name", d.Name, "type", d.Type, "result", string(d.Result)}
		if len(d.Opened) > 0 {
			kv = append(kv, "opened", d.Opened)
		}
		if len(d.Refused) > 0 {
			kv = append(kv, "refused", d.Refused)
		}
		if len(d.OffChain) > 0 {
			kv = append(kv, "offChain", d.OffChain)
		}
		if d.Error != "" {
			kv = append(kv, "error", d.Error)
		}
		var note string
		switch {
		case d.Result == egressdns.Denied && d.Type == egressdns.TypeServerName:
			note = d.Error
		case d.Result == egressdns.Denied:
			note = fmt.Sprintf("%s: no egress rule allows this name: the sandbox's resolver answered NXDOMAIN (add a rule with host %s to the Tenant's spec.sandbox.network.egress)", d.Name, d.Name)
		case len(d.Refused) > 0:
			note = fmt.Sprintf("%s answered %v, which egress never opens (the node, loopback, link-local and cloud metadata, private networks or the deny list): those addresses were left out of the answer", d.Name, d.Refused)
		case len(d.OffChain) > 0:
			off := strings.Join(d.OffChain[:min(len(d.OffChain), 4)], ", ")
			if len(d.OffChain) > 4 {
				off += fmt.Sprintf(" and %d more", len(d.OffChain)-4)
			}
			note = fmt.Sprintf("the answer for %s held %s, off the name's CNAME chain, which egress never opens: left out of the answer", d.Name, off)
		}
		if note == "" {
			log.V(1).Info("Egress name resolved", kv...)
			return
		}
		log.Info("Egress refused", kv...)
		rec.egressEvent(ctx, d, note)
	})
}

// recordConnection counts and logs a flow or a brokered request, and
// reports a refusal on the Sandbox.
func recordConnection(ctx context.Context, d egressdns.Decision, rec *sandboxReconciler, log logr.Logger, lines *keyedlimit.Limiter) {
	kv := []any{"tenant", d.Tenant, "sandbox", d.Sandbox, "result", string(d.Result), "destination", d.Dst.String()}
	var msg, note string
	if d.Type == egressdns.TypeFlow {
		egressFlowRecords.WithLabelValues(d.Tenant, string(d.Result)).Inc()
		kv = append(kv, "protocol", d.Proto)
		if d.Result == egressdns.Denied {
			msg = "Egress connection refused"
			kv = append(kv, "packets", d.Packets)
			note = fmt.Sprintf("connections to %s/%s refused: no egress rule allows this address and port (add a rule with its host, or cidr, and port to the Tenant's spec.sandbox.network.egress)", d.Dst, d.Proto)
		} else {
			msg = "Egress connection"
			kv = append(kv, "rule", d.Rule, "bytesOut", d.BytesOut, "bytesIn", d.BytesIn, "duration", d.Duration.String())
		}
	} else {
		egressBrokered.WithLabelValues(d.Tenant, string(d.Result)).Inc()
		msg = "Egress brokered request"
		kv = append(kv, "host", d.Name, "method", d.Method, "path", d.Path, "status", d.Status, "bytesOut", d.BytesOut, "bytesIn", d.BytesIn)
		if d.Result == egressdns.Denied {
			kv = append(kv, "error", d.Error)
			note = fmt.Sprintf("a request to %s was answered by the node's broker: %s", d.Name, d.Error)
		}
	}
	if lines.Allow(d.Tenant) {
		log.Info(msg, kv...)
	} else {
		egressUnlogged.WithLabelValues(d.Tenant).Inc()
	}
	if note != "" {
		rec.egressEvent(ctx, d, note)
	}
}

// egressEvent records note on the Sandbox of d's tenant, if it is the one
// that holds d's sandbox.
func (r *sandboxReconciler) egressEvent(ctx context.Context, d egressdns.Decision, note string) {
	// Events of one action merge into a series: a name, a connection and
	// a brokered request each have their own.
	action := "Resolve"
	switch d.Type {
	case egressdns.TypeFlow, egressdns.TypeServerName:
		action = "Connect"
	case egressdns.TypeBrokered:
		action = "Broker"
	}
	ns, name, ok := strings.Cut(d.Tenant, "/")
	if !ok {
		return
	}
	var list playgroundv1alpha1.SandboxList
	if err := r.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return
	}
	for i := range list.Items {
		sbx := &list.Items[i]
		if sbx.Spec.TenantRef.Name == name && sbx.Status.SandboxID == d.Sandbox {
			r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonEgressDenied, action, "%s", note)
			return
		}
	}
}
