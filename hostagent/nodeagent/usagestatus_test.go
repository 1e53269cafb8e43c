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
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
)

// TestUsageStatusUnits is issue 50's trial that read all zeros: a short
// burn and a short job are in status.usage to the millisecond, memory in
// MiB-seconds. And the write rate stays bounded in those finer units: a
// figure that moves by a step (a CPU- or job-second, a MiB, a MiB-hour)
// is written at most once a minute, one that moves by less (a sandbox
// that only holds its memory, or uses a few milliseconds of CPU) at most
// every ten minutes.
func TestUsageStatusUnits(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	acc := hostagent.UsageAccount{
		CPUSeconds: 0.3127, JobSeconds: 3.2505, MemoryMiBSeconds: 1234.9,
		MemoryPeakBytes: 64 << 20, WorkspaceBytes: 1 << 20, PileBytes: 1 << 20,
		Began: t0, Sampled: t0.Add(time.Minute),
	}
	first, due := usageStatusOf(acc, nil)
	if !due {
		t.Fatal("the first figures, a minute after the account began, are not due")
	}
	if first.CPUMilliseconds != 312 || first.JobMilliseconds != 3250 || first.MemoryMiBSeconds != 1234 || first.StorageBytes != 2<<20 {
		t.Fatalf("status.usage %+v: want 312 ms of CPU, 3250 ms of jobs, 1234 MiB-seconds", first)
	}

	at := func(after time.Duration, change func(*hostagent.UsageAccount)) bool {
		a := acc
		a.Sampled = acc.Sampled.Add(after)
		change(&a)
		_, due := usageStatusOf(a, first)
		return due
	}
	for _, tc := range []struct {
		name   string
		after  time.Duration
		change func(*hostagent.UsageAccount)
		due    bool
	}{
		{"nothing moved, ten minutes on", 10 * time.Minute, func(*hostagent.UsageAccount) {}, false},
		{"a CPU-second, a minute on", time.Minute, func(a *hostagent.UsageAccount) { a.CPUSeconds++ }, true},
		{"a CPU-second, 59 s on", 59 * time.Second, func(a *hostagent.UsageAccount) { a.CPUSeconds++ }, false},
		{"a job-second, a minute on", time.Minute, func(a *hostagent.UsageAccount) { a.JobSeconds++ }, true},
		{"a MiB-hour of memory, a minute on", time.Minute, func(a *hostagent.UsageAccount) { a.MemoryMiBSeconds += 3600 }, true},
		{"memory held, 9 minutes on", 9 * time.Minute, func(a *hostagent.UsageAccount) { a.MemoryMiBSeconds += 540 }, false},
		{"memory held, 10 minutes on", 10 * time.Minute, func(a *hostagent.UsageAccount) { a.MemoryMiBSeconds += 600 }, true},
		{"3 ms of CPU, 9 minutes on", 9 * time.Minute, func(a *hostagent.UsageAccount) { a.CPUSeconds += 0.003 }, false},
		{"3 ms of CPU, 10 minutes on", 10 * time.Minute, func(a *hostagent.UsageAccount) { a.CPUSeconds += 0.003 }, true},
		{"a limit spent, at once", time.Second, func(a *hostagent.UsageAccount) {
			a.Limits = hostagent.UsageLimits{Period: time.Hour, CPUSeconds: 1}
			a.PeriodStart, a.ExhaustedUntil = t0, t0.Add(time.Hour)
		}, true},
	} {
		if got := at(tc.after, tc.change); got != tc.due {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.due)
		}
	}
}
