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
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs"
	"github.com/playground-dev/playground/internal/atomicfile"
)

// What a sandbox spends is read from its backend's counters
// (backend.UsageMeter) and kept in a book: CPU seconds over every start of
// the sandbox (the backend keeps what each of its containers counted
// before the container goes; a reading lower than the last, from a
// backend that lost that, is taken as a new count and added), memory
// MiB-seconds integrated between samples, each background job's run time
// from its start to its end (charged when it ends, as the job manager
// tells; what the running ones ran so far is added to an account when it
// is read), and the spend of the current period against the sandbox's
// limits, which the limiter (limits.go) keeps. The book is written to
// Options.UsageFile at every sample, so that an agent restart neither
// forgets what was spent nor grants a new period, nor thaws a sandbox
// frozen for its limit.

// UsageLimits bound a sandbox's spend per period (SetUsageLimits).
type UsageLimits struct {
	// Period is the length of a period, aligned to the Unix epoch.
	Period time.Duration `json:"period"`
	// CPUSeconds is the CPU time allowed per period (0: no limit).
	CPUSeconds float64 `json:"cpuSeconds"`
}

// UsageAccount is what a sandbox has spent, as the book has it.
type UsageAccount struct {
	SandboxID, Tenant string
	// CPUSeconds is all its CPU time since the book began, JobSeconds the
	// time its background jobs ran (each from its start to its end, less
	// the time its sandbox was suspended or frozen), MemoryMiBSeconds its
	// memory over time.
	CPUSeconds, JobSeconds, MemoryMiBSeconds float64
	// MemoryBytes is what it holds now, MemoryPeakBytes the most its
	// current incarnation held.
	MemoryBytes, MemoryPeakBytes uint64
	// WorkspaceBytes and PileBytes are its disk, as last read.
	WorkspaceBytes, PileBytes int64
	// PeriodStart is when the current period began, PeriodCPUSeconds
	// what was spent since; ExhaustedUntil, when set, is when a limit it
	// has reached resets.
	PeriodStart      time.Time
	PeriodCPUSeconds float64
	ExhaustedUntil   time.Time
	Limits           UsageLimits
	// Frozen: the agent froze the sandbox for a spent limit (limits.go).
	Frozen bool
	// Began is when the book opened its account, Sampled when it was last
	// sampled (zero: not yet), Read when its counters were last read (by
	// a sample, a call's check of its limits, or the limiter).
	Began, Sampled, Read time.Time
}

// usageRecord is a sandbox's entry in the book (persisted: the counters
// that must outlive the agent).
type usageRecord struct {
	Tenant string `json:"tenant"`
	// Acc is the CPU seconds of its ended incarnations, Last the last
	// read of the current one's counter.
	Acc  float64 `json:"acc"`
	Last float64 `json:"last"`
	// PeriodStart and PeriodBase: the period the limits count, and the
	// CPU total when it began.
	PeriodStart time.Time `json:"periodStart"`
	PeriodBase  float64   `json:"periodBase"`
	MiBSeconds  float64   `json:"mibSeconds"`
	// JobSeconds is the run time of its jobs that ended; Charged, the
	// IDs of the latest of them (as many as a tenant may retain), whose
	// records its sandbox may still hold: an agent that adopts one of
	// them after a restart, ended, does not charge it again.
	JobSeconds float64   `json:"jobSeconds"`
	Charged    []string  `json:"charged,omitempty"`
	Began      time.Time `json:"began"`
	Sampled    time.Time `json:"sampled"`
	// Limits are the sandbox's, as last set; Frozen says that the agent
	// froze it for a spent limit, which a restarted agent keeps.
	Limits UsageLimits `json:"limits"`
	Frozen bool        `json:"frozen,omitempty"`

	// due is when the limiter checks the sandbox next (zero: at once).
	due time.Time
	// read is when the counters were last read.
	read               time.Time
	memory, peak       uint64
	workspace, pileUse int64
	// jobsShown is the most job time an account of it showed: a job's
	// end, as its holder measured it, can come in a little under what
	// its run showed, and what was shown does not go back.
	jobsShown float64
}

// UsageBook is the usage service: the book of what sandboxes spent,
// sampled from their backends' meters and written to Options.UsageFile,
// and the spend of each period against the sandbox's limits. It owns the
// book; the limiter (limits.go) reads and marks it through its methods.
type UsageBook struct {
	clock     jobs.Clock
	log       logr.Logger
	sandboxes usageSandboxes
	// jobs tells what the running jobs of a sandbox ran so far, and
	// limiter is told of a change of a sandbox's limits.
	jobs interface {
		RunTime(sandboxID string) time.Duration
	}
	limiter interface{ checkLimitSoon(id string) }

	mu      sync.Mutex
	file    string
	records map[string]*usageRecord // by sandbox ID
	// keepCharged is how many ended jobs' IDs a record keeps (the
	// retained jobs a tenant may hold).
	keepCharged int
}

// usageSandboxes is what the usage service asks of the sandboxes
// service.
type usageSandboxes interface {
	served(id string) (sandboxView, bool)
	// tenants' are the sandboxes of tenants (not a builder's or the
	// pool's) this agent serves, by ID.
	tenants() map[string]sandboxView
}

// maxSampleGap bounds the time one sample integrates: after a long gap
// (the agent was down) memory over time is not guessed.
const maxSampleGap = 5 * time.Minute

func newUsageBook(file string) (*UsageBook, error) {
	b := &UsageBook{file: file, records: map[string]*usageRecord{}}
	if file == "" {
		return b, nil
	}
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return b, nil
	case err != nil:
		return nil, fmt.Errorf("reading the usage book: %w", err)
	}
	if err := json.Unmarshal(data, &b.records); err != nil {
		return nil, fmt.Errorf("reading the usage book %s: %w (remove the file to start the book again: what the node's sandboxes spent in the current period is then forgotten)", file, err)
	}
	return b, nil
}

// save writes the book; the caller holds mu.
func (b *UsageBook) saveLocked() error {
	if b.file == "" {
		return nil
	}
	data, err := json.Marshal(b.records)
	if err != nil {
		return err
	}
	return atomicfile.Write(b.file, data, 0o600)
}

// periodStart is the start of the period of length p that holds now.
func periodStart(now time.Time, p time.Duration) time.Time {
	if p <= 0 {
		return time.Time{}
	}
	ns := now.UnixNano()
	return time.Unix(0, ns-ns%int64(p)).UTC()
}

// update takes u, read at now, into r: the CPU total over incarnations
// and the period.
func (r *usageRecord) update(u backend.SandboxUsage, now time.Time) {
	if now.Before(r.read) {
		return // read before a reading already taken (a call's check)
	}
	r.read = now
	if u.CPUSeconds < r.Last {
		r.Acc += r.Last // the backend's count started again
	}
	r.Last = u.CPUSeconds
	r.memory = u.MemoryBytes
	if !u.Stopped {
		r.peak = u.MemoryPeakBytes
	}
	if start := periodStart(now, r.Limits.Period); !start.Equal(r.PeriodStart) {
		r.PeriodStart, r.PeriodBase = start, r.total()
	}
}

func (r *usageRecord) total() float64 { return r.Acc + r.Last }

// exhaustedUntil is when r's period ends, if a limit of it is spent.
func (r *usageRecord) exhaustedUntil() (time.Time, bool) {
	if r.Limits.CPUSeconds > 0 && r.total()-r.PeriodBase >= r.Limits.CPUSeconds {
		return r.PeriodStart.Add(r.Limits.Period), true
	}
	return time.Time{}, false
}

// chargeJob charges job e's run time to its sandbox, once: the job
// manager tells of each end (jobs.WithOnEnd), with its lock held. The
// book is written at the next sample.
func (b *UsageBook) chargeJob(e jobs.Ended, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.record(e.SandboxID, e.Tenant, now)
	if slices.Contains(r.Charged, e.ID) {
		return // the agent process before this one saw it end
	}
	r.JobSeconds += e.Ran.Seconds()
	r.Charged = append(r.Charged, e.ID)
	if n := len(r.Charged) - max(b.keepCharged, 1); n > 0 {
		r.Charged = slices.Clone(r.Charged[n:])
	}
}

// SetUsageLimits sets the limits of sandbox id (zero: none). A change is
// checked at once: a sandbox frozen for a limit raised or removed thaws.
func (b *UsageBook) SetUsageLimits(id string, l UsageLimits) {
	sbx, ok := b.sandboxes.served(id)
	if !ok {
		return
	}
	b.mu.Lock()
	r := b.record(id, sbx.spec.Tenant, b.clock.Now())
	// A period already under way (kept in the book across a restart of
	// the agent) goes on; a new period length starts a new one at the
	// next read.
	changed := r.Limits != l
	r.Limits = l
	b.mu.Unlock()
	if changed {
		b.limiter.checkLimitSoon(id)
	}
}

// record is the book's record of sandbox id, made at now when missing;
// the caller holds mu.
func (b *UsageBook) record(id, tenant string, now time.Time) *usageRecord {
	r, ok := b.records[id]
	if !ok || r.Tenant != tenant {
		r = &usageRecord{Tenant: tenant, Began: now}
		b.records[id] = r
	}
	return r
}

// admit refuses a call that would run something in sandbox spec, frozen
// for its usage limit or not, when it has spent a limit of its period
// (and has the limiter freeze it now, if it has not yet).
func (b *UsageBook) admit(spec backend.Spec, be backend.Backend, frozen bool) error {
	b.mu.Lock()
	r, ok := b.records[spec.ID]
	if !ok || (r.Limits.CPUSeconds <= 0 && !frozen) {
		b.mu.Unlock()
		return nil
	}
	m := be.Capabilities().UsageMeter
	if m == nil {
		b.mu.Unlock()
		// A limit that cannot be kept is not ignored.
		return errorf(agentapi.CodeUnavailable, "the %s backend cannot read a sandbox's CPU time, so the usage limits of tenant %s cannot be kept and its calls are refused: remove spec.sandbox.usageLimits from the Tenant, or run it on the oci backend", be.Name(), spec.Tenant)
	}
	if r.Limits.CPUSeconds > 0 && be.Capabilities().Pauser == nil {
		b.mu.Unlock()
		// Read but not frozen, its jobs would run on past the limit.
		return errorf(agentapi.CodeUnavailable, "the %s backend reads a sandbox's CPU time but cannot freeze the sandbox once it spends its limit, so the usage limits of tenant %s cannot be kept and its calls are refused: remove spec.sandbox.usageLimits from the Tenant, or run it on the oci backend", be.Name(), spec.Tenant)
	}
	if u, ok := m.SandboxUsage(spec.ID, false); ok {
		r.update(u, b.clock.Now())
	}
	err := r.refusal(spec.Tenant, frozen, be.Capabilities().Pauser != nil)
	b.mu.Unlock()
	if err != nil && !frozen {
		b.limiter.checkLimitSoon(spec.ID)
	}
	return err
}

// refusal is the answer to a call of tenant's that would run something
// in the sandbox of r, or reach it, when r has spent a limit (or the
// sandbox is frozen for one; freezes: its backend freezes it, now or in
// a moment), else nil. The caller holds the book's lock.
func (r *usageRecord) refusal(tenant string, frozen, freezes bool) error {
	until, spent := r.exhaustedUntil()
	if !spent && !frozen {
		return nil
	}
	if !spent {
		// Frozen, its period over or its limit raised: the limiter thaws
		// it within moments.
		return errorf(agentapi.CodeUnavailable, "tenant %s's sandbox is being thawed: its usage limit is no longer spent; retry in a moment", tenant)
	}
	what := "calls that run something in its sandbox are refused"
	if frozen || freezes {
		what = "its sandbox is frozen, with its processes and background jobs (kept: they go on then), and calls that run something in it or reach it are refused"
	}
	return errorf(agentapi.CodeExhausted, "tenant %s has used its %g CPU-seconds per %s (%.1f s since %s): %s until %s, when the period starts again; raising or removing the Tenant's spec.sandbox.usageLimits lifts this at once",
		tenant, r.Limits.CPUSeconds, r.Limits.Period, r.total()-r.PeriodBase, r.PeriodStart.Format(time.RFC3339), what, until.Format(time.RFC3339))
}

// SampleUsage reads every sandbox's counters into the book (storage too,
// when asked: a walk of its files) and writes the book.
func (b *UsageBook) SampleUsage(storage bool) error {
	live := b.sandboxes.tenants()
	// The counters are read (the disk walked) before the book is locked:
	// a call's check of its limits never waits for a walk.
	type reading struct {
		u  backend.SandboxUsage
		ok bool
		at time.Time
	}
	readings := map[string]reading{}
	for id, s := range live {
		m := s.be.Capabilities().UsageMeter
		if m == nil {
			continue
		}
		var rd reading
		rd.u, rd.ok = m.SandboxUsage(id, storage)
		rd.at = b.clock.Now()
		readings[id] = rd
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.records {
		if _, ok := live[id]; !ok {
			delete(b.records, id) // destroyed: its counters end
		}
	}
	for id, s := range live {
		r := b.record(id, s.spec.Tenant, now)
		rd, metered := readings[id]
		switch {
		case !metered:
			continue
		case !rd.ok:
			r.memory = 0 // not running: holds no memory
			r.Sampled = now
			continue
		}
		r.update(rd.u, rd.at)
		if storage {
			r.workspace, r.pileUse = rd.u.WorkspaceBytes, rd.u.PileBytes
		}
		if !r.Sampled.IsZero() {
			if dt := min(now.Sub(r.Sampled), maxSampleGap); dt > 0 {
				r.MiBSeconds += float64(rd.u.MemoryBytes) / (1 << 20) * dt.Seconds()
			}
		}
		r.Sampled = now
	}
	return b.saveLocked()
}

// SaveUsage writes the book as it is (the charges of the jobs that ended
// since the last sample with it), for an agent that stops.
func (b *UsageBook) SaveUsage() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.saveLocked()
}

// Usage is the book's accounts of every sandbox.
func (b *UsageBook) Usage() []UsageAccount {
	b.mu.Lock()
	recs := make([]*usageRecord, 0, len(b.records))
	out := make([]UsageAccount, 0, len(b.records))
	for id, r := range b.records {
		recs = append(recs, r)
		out = append(out, r.account(id))
	}
	b.mu.Unlock()
	for i := range out {
		b.addRunningJobs(recs[i], &out[i])
	}
	return out
}

// UsageOf is the book's account of sandbox id, if it has one.
func (b *UsageBook) UsageOf(id string) (UsageAccount, bool) {
	b.mu.Lock()
	r, ok := b.records[id]
	var acc UsageAccount
	if ok {
		acc = r.account(id)
	}
	b.mu.Unlock()
	if !ok {
		return UsageAccount{}, false
	}
	b.addRunningJobs(r, &acc)
	return acc, true
}

// addRunningJobs adds to acc, read from r, what the sandbox's jobs that
// have not ended ran so far. They are read after the book (whose jobs
// ended before): a job that ends in between is missed by this account,
// never counted twice, and what an account showed does not go back.
func (b *UsageBook) addRunningJobs(r *usageRecord, acc *UsageAccount) {
	running := b.jobs.RunTime(acc.SandboxID).Seconds()
	b.mu.Lock()
	defer b.mu.Unlock()
	r.jobsShown = max(r.jobsShown, acc.JobSeconds+running)
	acc.JobSeconds = r.jobsShown
}

// account is r's account of sandbox id.
func (r *usageRecord) account(id string) UsageAccount {
	acc := UsageAccount{SandboxID: id, Tenant: r.Tenant, CPUSeconds: r.total(), JobSeconds: r.JobSeconds, MemoryMiBSeconds: r.MiBSeconds,
		MemoryBytes: r.memory, MemoryPeakBytes: r.peak, WorkspaceBytes: r.workspace, PileBytes: r.pileUse,
		PeriodStart: r.PeriodStart, PeriodCPUSeconds: math.Max(0, r.total()-r.PeriodBase), Limits: r.Limits, Frozen: r.Frozen, Began: r.Began, Sampled: r.Sampled, Read: r.read}
	if until, spent := r.exhaustedUntil(); spent {
		acc.ExhaustedUntil = until
	}
	return acc
}
