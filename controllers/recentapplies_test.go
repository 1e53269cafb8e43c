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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestRecentApplies: a pass is a repeat only while the cache still shows
// what it showed before the apply and the pass computes what was applied,
// within the window; a status someone else wrote in between, or a new
// computation, is applied.
func TestRecentApplies(t *testing.T) {
	var r recentApplies[string]
	t0 := time.Now()
	r.applied(types.UID("u1"), "pending", "ready", t0)
	for _, c := range []struct {
		uid          string
		cached, want string
		at           time.Duration
		repeats      bool
	}{
		{"u1", "pending", "ready", time.Second, true},
		{"u1", "ready", "ready", time.Second, false},        // caught up: the caller's own comparison decides
		{"u1", "edited", "ready", time.Second, false},       // written by someone else in between
		{"u1", "pending", "failed", time.Second, false},     // a new computation
		{"u1", "pending", "ready", recentWindow + 1, false}, // too old to trust over the cache
		{"u2", "pending", "ready", time.Second, false},
	} {
		if got := r.repeats(types.UID(c.uid), c.cached, c.want, t0.Add(c.at)); got != c.repeats {
			t.Errorf("repeats(%s, cached %q, want %q, after %v) = %v, want %v", c.uid, c.cached, c.want, c.at, got, c.repeats)
		}
	}

	// A chain of applies: "" → pending (over a cache showing nothing),
	// then pending → ready over a cache that already lagged: a pass whose
	// cache shows either earlier link and computes ready is a repeat.
	r.applied(types.UID("u3"), "", "pending", t0)
	r.applied(types.UID("u3"), "", "ready", t0.Add(time.Second))
	for _, cached := range []string{"", "pending"} {
		if !r.repeats(types.UID("u3"), cached, "ready", t0.Add(2*time.Second)) {
			t.Errorf("a cache showing %q, an earlier apply of the chain, computing the last: not a repeat", cached)
		}
	}
	if r.repeats(types.UID("u3"), "pending", "failed", t0.Add(2*time.Second)) {
		t.Error("a new computation over a lagging cache counted as a repeat")
	}
}
