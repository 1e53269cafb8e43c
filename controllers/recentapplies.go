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

// recentApplies remembers, per object, the statuses a reconciler applied
// in the last recentWindow and the status its cache showed before the
// first of them. A pass whose cache still shows one of those earlier
// statuses and that computes the status applied last runs on a cache that
// has not caught up with the applies: applying again would be the same
// write twice (P5 counted about half a Tenant status write per tenant of
// these; and, in a burst, a cache a step behind saw the next-to-last apply
// and sent the last one again). The zero value is ready to use; it is safe
// for concurrent use.
type recentApplies[S any] struct {
	mu sync.Mutex
	m  map[types.UID]recentApply[S]
}

// maxBehind bounds the earlier statuses remembered per object.
const maxBehind = 4

type recentApply[S any] struct {
	// behind are the statuses a lagging cache may still show: what it
	// showed before the first apply remembered, and each apply but the
	// last.
	behind []S
	to     S
	at     time.Time
}

// repeats says whether applying want over cached would repeat the last
// apply to uid before the cache has shown it.
func (r *recentApplies[S]) repeats(uid types.UID, cached, want S, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[uid]
	if !ok || now.Sub(e.at) > recentWindow || !equality.Semantic.DeepEqual(e.to, want) {
		return false
	}
	for _, b := range e.behind {
		if equality.Semantic.DeepEqual(b, cached) {
			return true
		}
	}
	return false
}

// last is the status last applied to uid, if within recentWindow: what
// the cache shows once it has caught up.
func (r *recentApplies[S]) last(uid types.UID, now time.Time) (S, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[uid]
	if !ok || now.Sub(e.at) > recentWindow {
		var zero S
		return zero, false
	}
	return e.to, true
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
	behind := []S{from}
	if e, ok := r.m[uid]; ok && now.Sub(e.at) <= recentWindow {
		// A chain of this reconciler's applies: the cache may show any
		// link of it until it catches up with the last.
		behind = append(e.behind, e.to)
		if len(behind) > maxBehind {
			behind = behind[len(behind)-maxBehind:]
		}
	}
	r.m[uid] = recentApply[S]{behind: behind, to: to, at: now}
}
