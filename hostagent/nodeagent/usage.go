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
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
)

// usageSampler is what the node agent's sampling asks of the kernel's
// usage service (hostagent.UsageBook).
type usageSampler interface {
	SampleUsage(storage bool) error
	SaveUsage() error
}

// usageBook is what the reconciler asks of the kernel's usage service
// (hostagent.UsageBook).
type usageBook interface {
	SetUsageLimits(id string, l hostagent.UsageLimits)
	UsageOf(id string) (hostagent.UsageAccount, bool)
}

// sampleUsage reads the sandboxes' use of the node into the agent's
// usage book every interval (their disk every fourth time: a walk of
// their files) until ctx ends, and writes the book then: the jobs that
// ended since the last sample are charged for the next agent.
func sampleUsage(ctx context.Context, book usageSampler, interval time.Duration, log logr.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 0; ; n++ {
		if err := book.SampleUsage(n%4 == 0); err != nil {
			log.Error(err, "Writing the usage book")
		}
		select {
		case <-ctx.Done():
			if err := book.SaveUsage(); err != nil {
				log.Error(err, "Writing the usage book")
			}
			return nil
		case <-t.C:
		}
	}
}

// usageLimits is the Sandbox's spec.usageLimits as the agent takes it.
func usageLimits(sbx *playgroundv1alpha1.Sandbox) hostagent.UsageLimits {
	l := sbx.Spec.UsageLimits
	if l == nil || l.CPUSeconds == nil {
		return hostagent.UsageLimits{}
	}
	period := l.Period.Duration
	if period <= 0 {
		period = 24 * time.Hour
	}
	return hostagent.UsageLimits{Period: period, CPUSeconds: float64(*l.CPUSeconds)}
}

// usageStatusEvery is how often, at most, a sandbox's status.usage is
// written while its figures change by a step (usageSteps); a limit
// reached or reset is written at once. usageStatusRefresh is how often,
// at most, figures that moved by less are: a sandbox that only holds its
// memory costs a write every ten minutes, not every minute.
const (
	usageStatusEvery   = time.Minute
	usageStatusRefresh = 10 * time.Minute
)

// usageSteps are the steps of the figures (CPU, peak memory, memory over
// time, storage, jobs, CPU in the period) that make a change worth a
// write each minute: a CPU- or job-second, a MiB, a MiB-hour.
var usageSteps = [6]int64{1000, 1 << 20, 3600, 1 << 20, 1000, 1000}

// usageStatus is the status.usage to write for sandbox id, and whether it
// is due (usageDueFor).
func (r *sandboxReconciler) usageStatus(id string, have *playgroundv1alpha1.UsageStatus) (*playgroundv1alpha1.UsageStatus, bool) {
	acc, ok := r.usage.UsageOf(id)
	if !ok {
		return have, false
	}
	return usageStatusOf(acc, have)
}

// usageStatusOf is the status.usage of account acc, and whether it is due
// over have: the first figures (a minute after the account began, or at
// once with limits), a limit reached or reset, a new period, figures that
// changed by a step over a minute after the last, or that changed at all
// over ten minutes after.
func usageStatusOf(acc hostagent.UsageAccount, have *playgroundv1alpha1.UsageStatus) (*playgroundv1alpha1.UsageStatus, bool) {
	// A sandbox with limits has its CPU read more often than sampled.
	sampled := acc.Sampled
	if acc.Limits.CPUSeconds > 0 && acc.Read.After(sampled) {
		sampled = acc.Read
	}
	if sampled.IsZero() {
		return have, false
	}
	want := &playgroundv1alpha1.UsageStatus{
		CPUMilliseconds:  millis(acc.CPUSeconds),
		MemoryPeakBytes:  int64(acc.MemoryPeakBytes),
		MemoryMiBSeconds: int64(acc.MemoryMiBSeconds),
		StorageBytes:     acc.WorkspaceBytes + acc.PileBytes,
		JobMilliseconds:  millis(acc.JobSeconds),
		SampleTime:       metav1.NewTime(sampled.Truncate(time.Second)),
	}
	if acc.Limits.CPUSeconds > 0 {
		want.PeriodStart = ptrTime(acc.PeriodStart)
		want.PeriodCPUMilliseconds = millis(acc.PeriodCPUSeconds)
	}
	if !acc.ExhaustedUntil.IsZero() {
		want.ExhaustedUntil = ptrTime(acc.ExhaustedUntil)
	}
	if have == nil {
		// A sandbox's first figures wait a minute, unless it has limits:
		// provisioning is not slowed by writes of figures near zero.
		if acc.Limits.CPUSeconds > 0 || sampled.Sub(acc.Began) >= usageStatusEvery {
			return want, true
		}
		return nil, false
	}
	sameTime := func(a, b *metav1.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(b)) }
	if !sameTime(have.ExhaustedUntil, want.ExhaustedUntil) || !sameTime(have.PeriodStart, want.PeriodStart) {
		return want, true
	}
	figures := func(u *playgroundv1alpha1.UsageStatus) [6]int64 {
		return [6]int64{u.CPUMilliseconds, u.MemoryPeakBytes, u.MemoryMiBSeconds, u.StorageBytes, u.JobMilliseconds, u.PeriodCPUMilliseconds}
	}
	h, w := figures(have), figures(want)
	if h == w {
		return have, false
	}
	since := want.SampleTime.Sub(have.SampleTime.Time)
	for i := range h {
		if h[i]/usageSteps[i] != w[i]/usageSteps[i] && since >= usageStatusEvery {
			return want, true
		}
	}
	if since >= usageStatusRefresh {
		return want, true
	}
	return have, false
}

// millis is seconds s in whole milliseconds.
func millis(s float64) int64 { return int64(s * 1000) }

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

// usageDue says whether sandbox id's status.usage is due to be written.
func (r *sandboxReconciler) usageDue(id string, have *playgroundv1alpha1.UsageStatus) bool {
	_, due := r.usageStatus(id, have)
	return due
}

// usageLimited is the UsageLimited condition of sandbox id, for a sandbox
// with usage limits (or frozen for one): True while a limit is spent,
// saying until when; nil for a sandbox without limits. Its message holds
// no figure that moves while the condition holds: a status write each.
func (r *sandboxReconciler) usageLimited(id string) *metav1.Condition {
	acc, ok := r.usage.UsageOf(id)
	if !ok || (acc.Limits.CPUSeconds <= 0 && !acc.Frozen) {
		return nil
	}
	c := &metav1.Condition{Type: playgroundv1alpha1.UsageLimitedCondition}
	if acc.ExhaustedUntil.IsZero() && acc.Frozen {
		// The limit is lifted (raised, removed, or a new period) but the
		// limiter has not thawed the sandbox yet: it still is what the
		// condition said, and the thaw brings it back here (a state
		// change), so that WithinLimits is said only of a sandbox that runs.
		c.Status, c.Reason = metav1.ConditionTrue, playgroundv1alpha1.ReasonCPULimitReached
		c.Message = "Its usage limit is no longer spent: its processes and background jobs are being thawed, within moments; calls that run something in it are refused until then"
		return c
	}
	if acc.ExhaustedUntil.IsZero() {
		c.Status, c.Reason = metav1.ConditionFalse, playgroundv1alpha1.ReasonWithinLimits
		c.Message = fmt.Sprintf("Within its usage limit of %g CPU-seconds per %s", acc.Limits.CPUSeconds, acc.Limits.Period)
		return c
	}
	how := "its processes and background jobs are frozen (kept, using no CPU)"
	if !acc.Frozen {
		how = "it is not woken"
	}
	c.Status, c.Reason = metav1.ConditionTrue, playgroundv1alpha1.ReasonCPULimitReached
	c.Message = fmt.Sprintf("Spent its %g CPU-seconds per %s in the period that began %s: %s, and the calls that run something in it or reach it are refused, until %s, when the period starts again. Raise or remove spec.usageLimits to lift this now",
		acc.Limits.CPUSeconds, acc.Limits.Period, acc.PeriodStart.UTC().Format(time.RFC3339), how, acc.ExhaustedUntil.UTC().Format(time.RFC3339))
	return c
}

// usageLimitedDrifted says whether sbx's status does not hold want (nil:
// no UsageLimited condition).
func usageLimitedDrifted(sbx *playgroundv1alpha1.Sandbox, want *metav1.Condition) bool {
	have := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.UsageLimitedCondition)
	if want == nil || have == nil {
		return (want == nil) != (have == nil)
	}
	return have.Status != want.Status || have.Reason != want.Reason || have.Message != want.Message
}
