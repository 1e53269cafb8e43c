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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// TestUsageBook: CPU seconds add up over a sandbox's restarts (its
// cgroup's counter starting again), a period's spend is counted from its
// start and starts again with the next period, and the book read again
// after an agent restart keeps both the totals and the period's spend.
func TestUsageBook(t *testing.T) {
	file := filepath.Join(t.TempDir(), "usage.json")
	b, err := newUsageBook(file)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 5, 0, time.UTC)
	r := b.record("s1", "ns/alice", t0)
	r.Limits = UsageLimits{Period: time.Minute, CPUSeconds: 10}
	r.update(backend.SandboxUsage{CPUSeconds: 4}, t0)
	if !r.PeriodStart.Equal(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("period starts %s, want aligned to the minute", r.PeriodStart)
	}
	r.update(backend.SandboxUsage{CPUSeconds: 9}, t0.Add(10*time.Second))
	r.update(backend.SandboxUsage{CPUSeconds: 6}, t0.Add(20*time.Second)) // restarted: 9 + 6
	if got := r.total(); got != 15 {
		t.Fatalf("total %v over a restart, want 15", got)
	}
	// A reading taken before the last one (the sampler's, overtaken by a
	// call's check) is no restart.
	r.update(backend.SandboxUsage{CPUSeconds: 2}, t0.Add(15*time.Second))
	if got := r.total(); got != 15 {
		t.Fatalf("total %v after a stale reading, want 15", got)
	}
	until, spent := r.exhaustedUntil()
	if !spent || !until.Equal(time.Date(2026, 12, 3, 10, 1, 0, 0, time.UTC)) {
		t.Fatalf("exhausted %v until %s, want until the next minute (11 of 10 spent)", spent, until)
	}
	again := reopened(t, b)
	r2 := again.record("s1", "ns/alice", t0)
	r2.Limits = r.Limits // the reconciler sets them again
	r2.update(backend.SandboxUsage{CPUSeconds: 6}, t0.Add(30*time.Second))
	if _, spent := r2.exhaustedUntil(); !spent || r2.total() != 15 {
		t.Fatalf("after an agent restart: total %v, spent %v; want the book kept", r2.total(), spent)
	}
	r2.update(backend.SandboxUsage{CPUSeconds: 7}, t0.Add(60*time.Second))
	if _, spent := r2.exhaustedUntil(); spent {
		t.Fatal("a new period starts with nothing spent")
	}
	if got := r2.account("s1").PeriodCPUSeconds; got != 0 {
		t.Fatalf("spent %v at the new period's start, want 0", got)
	}
}

// TestUsageBookJobs: a job's run time is charged to its sandbox when it
// ends, to the millisecond, and once: a job that an agent adopts, ended,
// after a restart (its sandbox holds it until it is recycled) is not
// charged again. The IDs the book keeps for that are bounded.
func TestUsageBookJobs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "usage.json")
	b, err := newUsageBook(file)
	if err != nil {
		t.Fatal(err)
	}
	b.keepCharged = 2
	t0 := time.Date(2026, 12, 3, 10, 0, 5, 0, time.UTC)
	short := jobs.Ended{ID: "j1", Tenant: "ns/alice", SandboxID: "s1", Ran: 3250 * time.Millisecond}
	b.chargeJob(short, t0)
	b.chargeJob(short, t0) // told twice: charged once
	if got := b.records["s1"].account("s1").JobSeconds; got != 3.25 {
		t.Fatalf("a 3.25 s job charged %v s", got)
	}
	again := reopened(t, b)
	again.keepCharged = 2
	again.chargeJob(short, t0) // adopted ended by the next agent
	if got := again.records["s1"].account("s1").JobSeconds; got != 3.25 {
		t.Fatalf("after an agent restart that adopted the ended job: %v s, want 3.25", got)
	}
	for _, id := range []string{"j2", "j3", "j4"} {
		again.chargeJob(jobs.Ended{ID: id, Tenant: "ns/alice", SandboxID: "s1", Ran: time.Millisecond}, t0)
	}
	r := again.records["s1"]
	if got := r.account("s1").JobSeconds; got < 3.2529 || got > 3.2531 {
		t.Fatalf("three 1 ms jobs after it: %v s, want 3.253", got)
	}
	if !slices.Equal(r.Charged, []string{"j3", "j4"}) {
		t.Fatalf("the book keeps the IDs %v, want the last two", r.Charged)
	}
}

// TestUsageBookUnreadable: a book that cannot be read stops the agent
// with what to do, rather than granting every sandbox a new period.
func TestUsageBookUnreadable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "usage.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newUsageBook(file); err == nil {
		t.Fatal("an unreadable book was taken")
	}
}

// TestUsageLimitOvershootBound: an overshoot below the least the limiter
// keeps is refused, saying the least; zero takes the default.
func TestUsageLimitOvershootBound(t *testing.T) {
	be := backendtest.New("oci", backendtest.Writes())
	if _, err := New(Options{Backends: []backend.Backend{be}, UsageLimitOvershoot: 0.05}); err == nil || !strings.Contains(err.Error(), "at least 0.1") {
		t.Fatalf("an overshoot of 0.05 CPU-seconds: %v", err)
	}
	a, err := New(Options{Backends: []backend.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	if a.opts.UsageLimitOvershoot != DefaultUsageLimitOvershoot {
		t.Fatalf("the default overshoot is %g", a.opts.UsageLimitOvershoot)
	}
}

// meteredOnly is a backend that reads its sandboxes' usage (the vm
// backend's QEMU cgroup) but cannot freeze them.
type meteredOnly struct{ *backendtest.Fake }

func (meteredOnly) SandboxUsage(string, bool) (backend.SandboxUsage, bool) {
	return backend.SandboxUsage{CPUSeconds: 1}, true
}

// Capabilities says it meters, as the vm backend's do, and offers no
// Pauser.
func (m meteredOnly) Capabilities() backend.Capabilities {
	c := m.Fake.Capabilities()
	c.UsageMeter, c.Pauser = m, nil
	return c
}

// TestUsageLimitNeedsAFreezer: a backend whose usage is read but which
// cannot freeze a sandbox refuses the calls of a tenant with usage
// limits, as one that cannot read it does: its jobs would run on past
// the limit. Without limits the tenant is served.
func TestUsageLimitNeedsAFreezer(t *testing.T) {
	be := meteredOnly{backendtest.New("vm", backendtest.Writes())}
	a, err := New(Options{Backends: []backend.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	spec := backend.Spec{ID: "sbx-limited", Tenant: "ns/limited", Backend: "vm"}
	h := EnsureOpen(ctx, t, a, spec)
	if _, err := a.Execs().Exec(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "true"}); err != nil {
		t.Fatalf("exec without limits: %v", err)
	}
	a.Usage().SetUsageLimits(spec.ID, UsageLimits{CPUSeconds: 100, Period: time.Hour})
	_, err = a.Execs().Exec(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "true"})
	if CodeOf(err) != agentapi.CodeUnavailable || !strings.Contains(err.Error(), "cannot freeze") {
		t.Fatalf("exec with limits on a backend that cannot freeze: %v, want unavailable saying so", err)
	}
}

// reopened saves b to its file and opens the book again from it, as the
// next agent does.
func reopened(t *testing.T, b *UsageBook) *UsageBook {
	t.Helper()
	if err := b.saveLocked(); err != nil {
		t.Fatal(err)
	}
	again, err := newUsageBook(b.file)
	if err != nil {
		t.Fatal(err)
	}
	return again
}
