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

package hostagent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// The agent's Prometheus metrics (docs/metrics.md). The job counters are
// read from the job manager's Stats at scrape time, so the output path
// counts nothing twice; only exec's latency is observed as it happens.
// No metric carries a tenant, a sandbox or a job: their number is
// unbounded.
var (
	jobsActiveDesc = prometheus.NewDesc("playground_jobs_active",
		"Background jobs running or being cancelled on this agent.", nil, nil)
	jobsRetainedDesc = prometheus.NewDesc("playground_jobs_retained",
		"Background jobs this agent accounts for, active or ended and not yet recycled; bounded by the agent's retained-jobs limit.", nil, nil)
	jobsHeldDesc = prometheus.NewDesc("playground_jobs_held",
		"Retained background jobs that their sandboxes hold (their processes and output are there, and outlive the agent).", nil, nil)
	jobsAdoptedDesc = prometheus.NewDesc("playground_jobs_adopted_total",
		"Background jobs taken over from an earlier agent process, from the sandboxes that hold them.", nil, nil)
	jobsStartedDesc = prometheus.NewDesc("playground_jobs_started_total",
		"Background jobs admitted and started.", nil, nil)
	jobsRefusedDesc = prometheus.NewDesc("playground_jobs_refused_total",
		"Background job starts refused by admission: a bound was reached, or admission is halted.", nil, nil)
	jobsHaltedDesc = prometheus.NewDesc("playground_jobs_halted_sandboxes",
		"Sandboxes in which the agent admits no new job because a kill there could not be proven (each Sandbox's JobsAdmitted condition says why).", nil, nil)
	jobsReclaimedDesc = prometheus.NewDesc("playground_jobs_reclaimed_total",
		"Unread finished jobs recycled to give their slot to a tenant holding fewer (the fair share of the node's retained slots).", nil, nil)
	jobOutputDesc = prometheus.NewDesc("playground_job_output_bytes_total",
		"Bytes of output that background jobs wrote into their rings (a job its sandbox holds counts when it ends).", nil, nil)
	jobDroppedDesc = prometheus.NewDesc("playground_job_dropped_bytes_total",
		"Bytes of background jobs' output evicted from their rings before being read to the end (a poll reports them as a gap).", nil, nil)
	jobEvictionsDesc = prometheus.NewDesc("playground_job_ring_evictions_total",
		"Output chunks evicted from background jobs' rings.", nil, nil)
	poolSizeDesc = prometheus.NewDesc("playground_warm_pool_size",
		"Pooled sandboxes the backend is configured to keep started ahead of demand.", []string{"backend"}, nil)
	poolReadyDesc = prometheus.NewDesc("playground_warm_pool_ready",
		"Pooled sandboxes started and not yet claimed.", []string{"backend"}, nil)
	poolClaimsDesc = prometheus.NewDesc("playground_warm_pool_claims_total",
		"New sandboxes by how they started: claimed from the pool (hit), or not (miss: none ready, or the sandbox's spec does not fit the pool's).", []string{"backend", "result"}, nil)
	poolEmptyDesc = prometheus.NewDesc("playground_warm_pool_empty_total",
		"Misses of sandboxes that fit the pool but found none ready: the pool is too small, or refills too slowly, for the demand.", []string{"backend"}, nil)
	poolImageSizeDesc = prometheus.NewDesc("playground_warm_pool_image_size",
		"Pooled sandboxes of an image the backend keeps started ahead of demand: one series per image pooled now (the images in use, or named by the platform).", []string{"backend", "image"}, nil)
	poolImageReadyDesc = prometheus.NewDesc("playground_warm_pool_image_ready",
		"Pooled sandboxes of an image started and not yet claimed.", []string{"backend", "image"}, nil)
	poolImageClaimsDesc = prometheus.NewDesc("playground_warm_pool_image_claims_total",
		"New sandboxes on a pooled image by how they started: claimed from its pool (hit), or started cold because none was ready (empty), since the image was last pooled.", []string{"backend", "image", "result"}, nil)
	suspendedDesc = prometheus.NewDesc("playground_sandboxes_suspended",
		"Sandboxes of this agent suspended now, by reason: spec (the Sandbox's spec.suspended), idle (its spec.idleSuspend; the next call resumes it) or usage_limit (frozen for a spent CPU limit until its period resets).", []string{"reason"}, nil)
	poolStartsDesc = prometheus.NewDesc("playground_warm_pool_starts_total",
		"Pooled sandboxes started to refill the pool, by result (started, failed).", []string{"backend", "result"}, nil)
	keyWaitingDesc = prometheus.NewDesc("playground_signing_key_waiting_calls",
		"Calls (session openings, worker starts) waiting now for the signing key of a sandbox that serves before its key is in, as a warm claim does; past --signing-key-wait they are refused as unavailable.", nil, nil)

	// Usage per tenant (usage.go): one series per tenant with a sandbox on
	// the node, so their number is bounded by the node's sandboxes.
	tenantCPUDesc = prometheus.NewDesc("playground_tenant_cpu_seconds_total",
		"CPU time the tenant's sandboxes on this node used, from their cgroups' counters, over every restart of a sandbox since the node's agent began keeping its book.", []string{"tenant"}, nil)
	tenantMemoryDesc = prometheus.NewDesc("playground_tenant_memory_bytes",
		"Memory the tenant's sandboxes on this node hold, as last sampled (their cgroups' usage).", []string{"tenant"}, nil)
	tenantMemoryPeakDesc = prometheus.NewDesc("playground_tenant_memory_peak_bytes",
		"The most memory one of the tenant's sandboxes on this node held since it started (its cgroup's peak).", []string{"tenant"}, nil)
	tenantMiBSecondsDesc = prometheus.NewDesc("playground_tenant_memory_mib_seconds_total",
		"Memory the tenant's sandboxes on this node held over time, in MiB-seconds, integrated between samples.", []string{"tenant"}, nil)
	tenantStorageDesc = prometheus.NewDesc("playground_tenant_storage_bytes",
		"Disk the tenant's sandboxes on this node take, by kind: workspace (home, workspace, /tmp) or pile; as last sampled.", []string{"tenant", "kind"}, nil)
	tenantJobSecondsDesc = prometheus.NewDesc("playground_tenant_job_seconds_total",
		"Time the tenant's background jobs on this node ran, summed over jobs: each from its start to its end (or now), less the time its sandbox was suspended or frozen.", []string{"tenant"}, nil)
	tenantPeriodCPUDesc = prometheus.NewDesc("playground_tenant_period_cpu_seconds",
		"CPU time the tenant's sandboxes on this node used in the current period of their usage limits (only sandboxes with limits).", []string{"tenant"}, nil)
	tenantExhaustedDesc = prometheus.NewDesc("playground_tenant_usage_exhausted",
		"1 while a sandbox of the tenant on this node has spent a usage limit (its calls are refused until the period resets).", []string{"tenant"}, nil)
)

// Outcomes of exec, the values of playground_exec_duration_seconds's
// outcome label.
const (
	// ExecExited: the command ran to its end, whatever its exit code or
	// signal.
	ExecExited = "exited"
	// ExecTimedOut: the command's timeout killed it (with proof).
	ExecTimedOut = "timed_out"
	// ExecCancelled: the caller went away before the command ended; it
	// was killed.
	ExecCancelled = "cancelled"
	// ExecFailed: the command could not start, or the agent lost it.
	ExecFailed = "failed"
)

// execBuckets span a builtin's milliseconds to a build's hour.
var execBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

func newExecDuration() *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "playground_exec_duration_seconds",
		Help:    "Wall-clock time of synchronous commands (exec), from their start in the sandbox to their result, by outcome.",
		Buckets: execBuckets,
	}, []string{"outcome"})
	for _, o := range []string{ExecExited, ExecTimedOut, ExecCancelled, ExecFailed} {
		h.WithLabelValues(o) // every outcome is exported from the start, at zero
	}
	return h
}

// duration is exec's latency histogram, for the agent's collector.
func (x *Execs) duration() prometheus.Collector { return x.latency }

// observe records one exec that reached the backend.
func (x *Execs) observe(ctx context.Context, res agentapi.ExecResult, err error, took time.Duration) {
	outcome := ExecExited
	switch {
	case err == nil && res.TimedOut:
		outcome = ExecTimedOut
	case err != nil && ctx.Err() != nil:
		outcome = ExecCancelled
	case err != nil:
		outcome = ExecFailed
	}
	x.latency.WithLabelValues(outcome).Observe(took.Seconds())
}

// Collector returns the agent's metrics as a Prometheus collector: its jobs
// (read from the job manager when scraped) and exec's latency. Register it
// once per agent; when several agents share a registry, as in tests, wrap
// it with a label that tells them apart (nodeagent adds node=<name>).
func (a *Agent) Collector() prometheus.Collector { return collector{a} }

type collector struct{ a *Agent }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsActiveDesc, jobsRetainedDesc, jobsHeldDesc, jobsAdoptedDesc, jobsStartedDesc, jobsRefusedDesc, jobsHaltedDesc, jobsReclaimedDesc,
		jobOutputDesc, jobDroppedDesc, jobEvictionsDesc, poolSizeDesc, poolReadyDesc, poolClaimsDesc, poolEmptyDesc, poolStartsDesc, poolImageSizeDesc, poolImageReadyDesc, poolImageClaimsDesc, suspendedDesc, keyWaitingDesc,
		tenantCPUDesc, tenantMemoryDesc, tenantMemoryPeakDesc, tenantMiBSecondsDesc, tenantStorageDesc, tenantJobSecondsDesc, tenantPeriodCPUDesc, tenantExhaustedDesc} {
		ch <- d
	}
	c.a.execs.duration().Describe(ch)
	c.a.idle.sleeps.Describe(ch)
	c.a.idle.wakes.Describe(ch)
	c.a.limits.overshoots.Describe(ch)
	c.a.limits.freezeLatency.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.collectUsage(ch)
	s := c.a.jobs.Stats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(jobsActiveDesc, float64(s.Active))
	gauge(jobsRetainedDesc, float64(s.Retained))
	gauge(jobsHeldDesc, float64(s.Held))
	counter(jobsAdoptedDesc, s.Adopted)
	gauge(jobsHaltedDesc, float64(s.HaltedSandboxes))
	counter(jobsStartedDesc, s.Started)
	counter(jobsRefusedDesc, s.Refused)
	counter(jobsReclaimedDesc, s.Reclaimed)
	counter(jobOutputDesc, s.OutputBytes)
	counter(jobDroppedDesc, s.DroppedBytes)
	counter(jobEvictionsDesc, s.Evictions)
	for _, be := range c.a.backends {
		p := be.Capabilities().WarmPool
		if p == nil {
			continue
		}
		ps, name := p.PoolStats(), be.Name()
		ch <- prometheus.MustNewConstMetric(poolSizeDesc, prometheus.GaugeValue, float64(ps.Size), name)
		ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(ps.Ready), name)
		ch <- prometheus.MustNewConstMetric(poolClaimsDesc, prometheus.CounterValue, float64(ps.Hits), name, "hit")
		ch <- prometheus.MustNewConstMetric(poolClaimsDesc, prometheus.CounterValue, float64(ps.Misses), name, "miss")
		ch <- prometheus.MustNewConstMetric(poolEmptyDesc, prometheus.CounterValue, float64(ps.Empty), name)
		ch <- prometheus.MustNewConstMetric(poolStartsDesc, prometheus.CounterValue, float64(ps.Started), name, "started")
		ch <- prometheus.MustNewConstMetric(poolStartsDesc, prometheus.CounterValue, float64(ps.Failed), name, "failed")
		for _, is := range p.ImagePoolStats() {
			ch <- prometheus.MustNewConstMetric(poolImageSizeDesc, prometheus.GaugeValue, float64(is.Size), name, is.Digest)
			ch <- prometheus.MustNewConstMetric(poolImageReadyDesc, prometheus.GaugeValue, float64(is.Ready), name, is.Digest)
			ch <- prometheus.MustNewConstMetric(poolImageClaimsDesc, prometheus.CounterValue, float64(is.Hits), name, is.Digest, "hit")
			ch <- prometheus.MustNewConstMetric(poolImageClaimsDesc, prometheus.CounterValue, float64(is.Empty), name, is.Digest, "empty")
		}
	}
	spec, idle := c.a.suspendedCount(), c.a.idle.asleepCount()
	ch <- prometheus.MustNewConstMetric(suspendedDesc, prometheus.GaugeValue, float64(spec), "spec")
	ch <- prometheus.MustNewConstMetric(suspendedDesc, prometheus.GaugeValue, float64(idle), "idle")
	ch <- prometheus.MustNewConstMetric(suspendedDesc, prometheus.GaugeValue, float64(c.a.limits.frozenCount()), "usage_limit")
	gauge(keyWaitingDesc, float64(c.a.keys.waitingCalls()))
	c.a.execs.duration().Collect(ch)
	c.a.idle.sleeps.Collect(ch)
	c.a.idle.wakes.Collect(ch)
	c.a.limits.overshoots.Collect(ch)
	c.a.limits.freezeLatency.Collect(ch)
}

// collectUsage exports the usage book, summed per tenant.
func (c collector) collectUsage(ch chan<- prometheus.Metric) {
	type sums struct {
		cpu, mem, peak, mibs, workspace, pile, jobs, period float64
		limited, exhausted                                  bool
	}
	by := map[string]*sums{}
	for _, u := range c.a.usage.Usage() {
		s := by[u.Tenant]
		if s == nil {
			s = &sums{}
			by[u.Tenant] = s
		}
		s.cpu += u.CPUSeconds
		s.mem += float64(u.MemoryBytes)
		s.peak = max(s.peak, float64(u.MemoryPeakBytes))
		s.mibs += u.MemoryMiBSeconds
		s.workspace += float64(u.WorkspaceBytes)
		s.pile += float64(u.PileBytes)
		s.jobs += u.JobSeconds
		if u.Limits.CPUSeconds > 0 {
			s.limited = true
			s.period += u.PeriodCPUSeconds
		}
		s.exhausted = s.exhausted || !u.ExhaustedUntil.IsZero()
	}
	for tenant, s := range by {
		ch <- prometheus.MustNewConstMetric(tenantCPUDesc, prometheus.CounterValue, s.cpu, tenant)
		ch <- prometheus.MustNewConstMetric(tenantMemoryDesc, prometheus.GaugeValue, s.mem, tenant)
		ch <- prometheus.MustNewConstMetric(tenantMemoryPeakDesc, prometheus.GaugeValue, s.peak, tenant)
		ch <- prometheus.MustNewConstMetric(tenantMiBSecondsDesc, prometheus.CounterValue, s.mibs, tenant)
		ch <- prometheus.MustNewConstMetric(tenantStorageDesc, prometheus.GaugeValue, s.workspace, tenant, "workspace")
		ch <- prometheus.MustNewConstMetric(tenantStorageDesc, prometheus.GaugeValue, s.pile, tenant, "pile")
		ch <- prometheus.MustNewConstMetric(tenantJobSecondsDesc, prometheus.CounterValue, s.jobs, tenant)
		if s.limited {
			ch <- prometheus.MustNewConstMetric(tenantPeriodCPUDesc, prometheus.GaugeValue, s.period, tenant)
		}
		exhausted := 0.0
		if s.exhausted {
			exhausted = 1
		}
		ch <- prometheus.MustNewConstMetric(tenantExhaustedDesc, prometheus.GaugeValue, exhausted, tenant)
	}
}
