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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// The manager's metrics (docs/metrics.md). Reconcile errors need none of
// ours: controller-runtime exports controller_runtime_reconcile_errors_total
// and controller_runtime_reconcile_total per controller ("tenant",
// "sandbox") on the same registry.

// PhaseUnknown labels Sandboxes that have no phase yet (created, not yet
// summarised by the manager).
const PhaseUnknown = "Unknown"

var sandboxesDesc = prometheus.NewDesc("playground_sandboxes",
	"Sandboxes by status.phase (Pending, Provisioning, Ready, Detached, Failed, Terminating, or Unknown before the first summary; Provisioning when only the agent has reported a first start under way), counted in the manager's cache when scraped. Every manager replica reports it: aggregate with max, not sum.",
	[]string{"phase"}, nil)

// sandboxPhases are exported even when no Sandbox is in them, so that a
// phase emptying reads 0 rather than vanishing.
var sandboxPhases = []string{
	string(playgroundv1alpha1.SandboxPending), string(playgroundv1alpha1.SandboxProvisioning),
	string(playgroundv1alpha1.SandboxReady), string(playgroundv1alpha1.SandboxDetached),
	string(playgroundv1alpha1.SandboxFailed), string(playgroundv1alpha1.SandboxTerminating), PhaseUnknown,
}

// scrapeTimeout bounds the wait for the cache within one scrape.
const scrapeTimeout = 5 * time.Second

// sandboxCollector counts Sandboxes by phase from a manager's cache at
// scrape time: nothing to keep in step with the reconciler, and deleted
// Sandboxes stop counting when the cache drops them. One collector serves
// the process; Setup points it at its manager's cache (a process that
// restarts its manager, as tests do, counts from the newest).
type sandboxCollector struct {
	mu     sync.Mutex
	reader client.Reader
}

// policyChecks counts the Tenant reconciler's checks of Tenants against
// the TenantPolicies of their namespaces: each is one dry-run create at
// the API server, the cost of reporting Tenants over a tightened ceiling.
var policyChecksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "playground_tenant_policy_checks_total",
	Help: "Checks of a Tenant against the TenantPolicies that select its namespace, each a dry-run create at the API server, by result (within, exceeded, failed).",
}, []string{"result"})

// The results of policyChecksTotal.
const (
	policyCheckWithin   = "within"
	policyCheckExceeded = "exceeded"
	policyCheckFailed   = "failed"
)

var (
	sandboxMetrics = &sandboxCollector{}
	registerOnce   sync.Once
	registerErr    error
)

// registerMetrics registers the manager's metrics on controller-runtime's
// registry, which the manager's metrics server serves, once per process.
func registerMetrics(mgr ctrl.Manager) error {
	registerOnce.Do(func() {
		registerErr = errors.Join(metrics.Registry.Register(sandboxMetrics), metrics.Registry.Register(policyChecksTotal))
		for _, r := range []string{policyCheckWithin, policyCheckExceeded, policyCheckFailed} {
			policyChecksTotal.WithLabelValues(r)
		}
	})
	if registerErr != nil {
		return fmt.Errorf("registering the manager's metrics: %w", registerErr)
	}
	reader := mgr.GetCache()
	sandboxMetrics.set(nil, reader)
	// Once this manager stops, its cache is no longer kept current.
	return mgr.Add(releaseOnStop(func() { sandboxMetrics.set(reader, nil) }))
}

// set replaces the reader: only if it is old, unless old is nil.
func (c *sandboxCollector) set(old, reader client.Reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old == nil || c.reader == old {
		c.reader = reader
	}
}

func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxesDesc }

func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	reader := c.reader
	c.mu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var list playgroundv1alpha1.SandboxList
	// The items are the cache's own: read, never modified.
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		// Before the cache has started there is nothing to count yet; a
		// partial count would be wrong, so the metric is left out.
		ctrl.Log.WithName("metrics").V(1).Info("Not counting Sandboxes in this scrape", "err", err.Error())
		return
	}
	counts := make(map[string]int, len(sandboxPhases))
	for _, p := range sandboxPhases {
		counts[p] = 0
	}
	for i := range list.Items {
		p := string(list.Items[i].Status.Phase)
		if p == "" {
			// Before the manager's first summary; a slow first start has
			// only its agent's report (see firstReportGrace).
			p = PhaseUnknown
			if agentStarting(meta.FindStatusCondition(list.Items[i].Status.Conditions, playgroundv1alpha1.ProvisionedCondition)) {
				p = string(playgroundv1alpha1.SandboxProvisioning)
			}
		}
		counts[p]++
	}
	for p, n := range counts {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), p)
	}
}

// releaseOnStop runs f when the manager stops, on every replica (leader or
// not: every replica's cache runs).
type releaseOnStop func()

func (f releaseOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	f()
	return nil
}

func (releaseOnStop) NeedLeaderElection() bool { return false }
