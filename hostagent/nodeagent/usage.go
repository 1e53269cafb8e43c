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
	"time"

	"github.com/go-logr/logr"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
)

// sampleUsage reads the sandboxes' use of the node into the agent's
// usage book every interval (their disk every fourth time: a walk of
// their files) until ctx ends.
func sampleUsage(ctx context.Context, agent *hostagent.Agent, interval time.Duration, log logr.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 0; ; n++ {
		if err := agent.SampleUsage(n%4 == 0); err != nil {
			log.Error(err, "Writing the usage book")
		}
		select {
		case <-ctx.Done():
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
