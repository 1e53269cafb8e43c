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
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// recentWindow bounds how long a remembered apply is trusted over the
// cache: far beyond the cache's usual lag, short enough that a status
// someone else wrote in between is put right soon.
const recentWindow = 10 * time.Second

// recentApplies remembers, per object, the status a reconciler applied
// last and the status its cache showed before it, for recentWindow. A pass
// whose cache still shows that earlier status and that computes the
// status just applied runs on a cache that has not caught up with the
// apply: applying again would be the same write twice (P5 counted about
// half a Tenant status write per tenant of these). The zero value is
// ready to use; it is safe for concurrent use.
type recentApplies[S any] struct {
	mu sync.Mutex
	m  map[types.UID]recentApply[S]
}

type recentApply[S any] struct {
	from, to S
	at       time.Time
}

// repeats says whether applying want over cached would repeat the last
// apply to uid before the cache has shown it.
func (r *recentApplies[S]) repeats(uid types.UID, cached, want S, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[uid]
	if !ok || now.Sub(e.at) > recentWindow {
		return false
	}
	return equality.Semantic.DeepEqual(e.from, cached) && equality.Semantic.DeepEqual(e.to, want)
}

// applied records that to was applied to uid over from.
func (r *recentApplies[S]) applied(uid types.UID, from, to S, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[types.UID]recentApply[S]{}
	}
	if len(r.m) >= 256 {
		for k, e := range r.m {
			if now.Sub(e.at) > recentWindow {
				delete(r.m, k)
			}
		}
	}
	r.m[uid] = recentApply[S]{from: from, to: to, at: now}
}
