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

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestSandboxRetriesWaitAMinuteAtMost: however often a Sandbox's passes
// fail, the next is at most a minute away (controller-runtime's default
// grows to 16 minutes, which a failing sandbox's deletion then waited).
func TestSandboxRetriesWaitAMinuteAtMost(t *testing.T) {
	rl := sandboxRateLimiter()
	item := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "failing"}}
	var last time.Duration
	for range 50 {
		last = rl.When(item)
	}
	if last > time.Minute || last < 30*time.Second {
		t.Fatalf("after 50 failures the next pass waits %s, want the minute's bound", last)
	}
	rl.Forget(item)
	if d := rl.When(item); d > time.Second {
		t.Fatalf("after a success the next failure waits %s", d)
	}
}
