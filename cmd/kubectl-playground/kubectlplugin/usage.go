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

package kubectlplugin

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// usageOf is what the tenant's sandbox spent, and its limits: the
// Sandbox's status.usage, as its agent wrote it, or the Tenant's copy
// when there is no Sandbox.
func usageOf(t *playgroundv1alpha1.Tenant, s *playgroundv1alpha1.Sandbox) (*playgroundv1alpha1.UsageStatus, *playgroundv1alpha1.UsageLimits) {
	if s != nil && s.Status.Usage != nil {
		return s.Status.Usage, s.Spec.UsageLimits
	}
	return t.Status.Usage, t.Spec.Sandbox.UsageLimits
}

// printUsage prints u (of a sandbox with limits l, or nil) as status
// shows it: the figures in the units they are charged in.
func printUsage(out io.Writer, u *playgroundv1alpha1.UsageStatus, l *playgroundv1alpha1.UsageLimits, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "USAGE\tSPENT")
	fmt.Fprintf(w, "cpu\t%s CPU-seconds\n", seconds(u.CPUMilliseconds))
	fmt.Fprintf(w, "jobs\t%s s of background jobs' run time\n", seconds(u.JobMilliseconds))
	fmt.Fprintf(w, "memory\t%d MiB-seconds (peak %s)\n", u.MemoryMiBSeconds, resource.NewQuantity(u.MemoryPeakBytes, resource.BinarySI))
	fmt.Fprintf(w, "storage\t%s\n", resource.NewQuantity(u.StorageBytes, resource.BinarySI))
	if l != nil && l.CPUSeconds != nil && u.PeriodStart != nil {
		limit := fmt.Sprintf("%s of %d CPU-seconds per %s, since %s", seconds(u.PeriodCPUMilliseconds), *l.CPUSeconds, l.Period.Duration, u.PeriodStart.UTC().Format(time.RFC3339))
		if u.ExhaustedUntil != nil {
			limit += "; spent: frozen until " + u.ExhaustedUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "limit\t%s\n", limit)
	}
	fmt.Fprintf(w, "sampled\t%s (%s ago)\n", u.SampleTime.UTC().Format(time.RFC3339), now.Sub(u.SampleTime.Time).Truncate(time.Second))
	return w.Flush()
}

// seconds is ms milliseconds as seconds, to the millisecond.
func seconds(ms int64) string {
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}
