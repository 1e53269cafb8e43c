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
	"context"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/jobs"
)

// callTracker keeps the calls in progress in each sandbox and when its
// last call ended: what keeps a sandbox awake (idle.go), and what a
// freeze for its usage limit cancels (limits.go). It owns that state; the
// limiter (admitCall) begins each call, whose done ends it.
type callTracker struct {
	clock jobs.Clock

	mu sync.Mutex
	// next numbers the calls.
	next      uint64
	bySandbox map[string]*sandboxCalls
}

// sandboxCalls are a sandbox's calls in progress, by number, each with
// what cancels it, and when the last one ended.
type sandboxCalls struct {
	inflight map[uint64]context.CancelCauseFunc
	last     time.Time
}

func newCallTracker(clock jobs.Clock) *callTracker {
	return &callTracker{clock: clock, bySandbox: map[string]*sandboxCalls{}}
}

// ofLocked is sandbox id's calls, made when missing. The caller holds t.mu.
func (t *callTracker) ofLocked(id string) *sandboxCalls {
	c, ok := t.bySandbox[id]
	if !ok {
		c = &sandboxCalls{inflight: map[uint64]context.CancelCauseFunc{}}
		t.bySandbox[id] = c
	}
	return c
}

// begin counts a call to sandbox id in progress, which cancel ends, until
// end.
func (t *callTracker) begin(id string, cancel context.CancelCauseFunc) (end func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.ofLocked(id)
	c.last = t.clock.Now()
	t.next++
	key := t.next
	c.inflight[key] = cancel
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if c, ok := t.bySandbox[id]; ok {
			c.last = t.clock.Now()
			delete(c.inflight, key)
		}
	}
}

// touch counts now as sandbox id's last call's end; if only when it has
// had none.
func (t *callTracker) touch(id string, ifNone bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.ofLocked(id)
	if !ifNone || c.last.IsZero() {
		c.last = t.clock.Now()
	}
}

// quietFor says whether sandbox id has had no call in progress for at
// least d.
func (t *callTracker) quietFor(id string, d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.bySandbox[id]
	return !ok || (len(c.inflight) == 0 && t.clock.Now().Sub(c.last) >= d)
}

// cancelAll cancels the calls in progress in sandbox id, with cause.
func (t *callTracker) cancelAll(id string, cause error) {
	t.mu.Lock()
	var cancels []context.CancelCauseFunc
	if c, ok := t.bySandbox[id]; ok {
		for _, cancel := range c.inflight {
			cancels = append(cancels, cancel)
		}
	}
	t.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
}

// forget drops sandbox id's calls, removed: a call that ends after is
// not counted.
func (t *callTracker) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.bySandbox, id)
}
