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

// Package budget bounds the synchronous calls a component serves at once
// (exec, read, write) and the bytes they may hold, per tenant and in total,
// so that memory is bounded by configuration whatever callers do. A call
// reserves its worst case up front (the output it may collect, the payload
// it carries); past a bound it waits up to a bounded time for earlier
// calls to finish, then is refused with an error that says to retry.
//
// Reserving the worst case before the call runs is deliberate: a refusal
// must come before a command has had any effect, never after (a command
// that ran and was then refused could not be retried safely).
package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of Limits: the seeds bound synchronous calls as they bound jobs
// (8 per tenant, 32 per component), and the bytes to as many full exec
// results (two streams of 4 MiB each).
const (
	DefaultCallsPerTenant = 8
	DefaultCalls          = 32
	DefaultBytesPerTenant = 64 << 20
	DefaultBytes          = 256 << 20
	DefaultWait           = 30 * time.Second
)

// Limits configure a Limiter. Zero fields take the defaults.
type Limits struct {
	// CallsPerTenant and Calls bound the calls in flight.
	CallsPerTenant int
	Calls          int
	// BytesPerTenant and Bytes bound the bytes the calls in flight have
	// reserved.
	BytesPerTenant int64
	Bytes          int64
	// Wait is how long a call waits for room before it is refused; a
	// negative Wait refuses at once.
	Wait time.Duration
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.CallsPerTenant == 0 {
		l.CallsPerTenant = DefaultCallsPerTenant
	}
	if l.Calls == 0 {
		l.Calls = DefaultCalls
	}
	if l.BytesPerTenant == 0 {
		l.BytesPerTenant = DefaultBytesPerTenant
	}
	if l.Bytes == 0 {
		l.Bytes = DefaultBytes
	}
	if l.Wait == 0 {
		l.Wait = DefaultWait
	}
	return l
}

// Validate refuses limits that could never admit a call, or that
// contradict each other.
func (l Limits) Validate() error {
	l = l.WithDefaults()
	switch {
	case l.CallsPerTenant < 0 || l.Calls < 0 || l.BytesPerTenant < 0 || l.Bytes < 0:
		return errors.New("budget limits must be positive")
	case l.CallsPerTenant > l.Calls:
		return fmt.Errorf("calls per tenant (%d) is more than the total (%d)", l.CallsPerTenant, l.Calls)
	case l.BytesPerTenant > l.Bytes:
		return fmt.Errorf("bytes per tenant (%d) is more than the total (%d)", l.BytesPerTenant, l.Bytes)
	}
	return nil
}

// Scope says which bound refused a call.
type Scope string

// The scopes: one tenant's bound, or the component's in total.
const (
	ScopeTenant Scope = "tenant"
	ScopeTotal  Scope = "total"
)

// ExhaustedError is a refusal: the call did not run. Retrying after
// RetryAfter is expected to succeed once earlier calls end.
type ExhaustedError struct {
	Scope Scope
	// Calls and Bytes are the bounds of Scope; Waited is how long the call
	// waited for room.
	Calls      int
	Bytes      int64
	Waited     time.Duration
	RetryAfter time.Duration
	// TooLarge is set when the call alone needs more bytes than the bound:
	// retrying cannot help.
	TooLarge bool
	Need     int64
}

func (e *ExhaustedError) Error() string {
	who := "your tenant"
	if e.Scope == ScopeTotal {
		who = "this server (all tenants together)"
	}
	if e.TooLarge {
		return fmt.Sprintf("this call needs %s of buffer, more than %s may hold (%s): ask the operator to raise the budget", size(e.Need), who, size(e.Bytes))
	}
	return fmt.Sprintf("%s already runs %d synchronous calls or holds %s of their output (its budget); this call waited %s for room and did not run: retry in %d seconds, or use job_exec for long or large output",
		who, e.Calls, size(e.Bytes), e.Waited.Round(time.Millisecond), int((e.RetryAfter+time.Second-1)/time.Second))
}

func size(b int64) string {
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%d bytes", b)
}

// Stats are a Limiter's counters, for metrics.
type Stats struct {
	Calls, Bytes         int64 // in flight now
	PeakCalls, PeakBytes int64 // the most ever in flight at once
	Admitted             uint64
	Refused              map[Scope]uint64
}

// Limiter admits calls within Limits. It is safe for concurrent use.
type Limiter struct {
	lim Limits

	mu        sync.Mutex
	calls     int
	bytes     int64
	tenants   map[string]*usage
	changed   chan struct{} // closed and replaced whenever room is freed
	peakCalls int
	peakBytes int64
	admitted  uint64
	refused   map[Scope]uint64
}

type usage struct {
	calls int
	bytes int64
}

// New returns a Limiter; its limits must be valid.
func New(l Limits) (*Limiter, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{lim: l.WithDefaults(), tenants: map[string]*usage{}, changed: make(chan struct{}), refused: map[Scope]uint64{}}, nil
}

// Limits returns the limiter's limits, defaults applied.
func (l *Limiter) Limits() Limits { return l.lim }

// Acquire reserves one call and need bytes for tenant, waiting up to the
// limits' Wait (or until ctx ends) for room. The returned release gives
// them back; it must be called exactly once. A refusal is an
// *ExhaustedError; ctx's end returns ctx's error.
func (l *Limiter) Acquire(ctx context.Context, tenant string, need int64) (release func(), err error) {
	if need < 0 {
		need = 0
	}
	if need > l.lim.BytesPerTenant || need > l.lim.Bytes {
		scope, bound := ScopeTenant, l.lim.BytesPerTenant
		if need > l.lim.Bytes {
			scope, bound = ScopeTotal, l.lim.Bytes
		}
		l.mu.Lock()
		l.refused[scope]++
		l.mu.Unlock()
		return nil, &ExhaustedError{Scope: scope, Bytes: bound, TooLarge: true, Need: need}
	}
	start := time.Now()
	var timer <-chan time.Time
	if l.lim.Wait > 0 {
		t := time.NewTimer(l.lim.Wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		l.mu.Lock()
		scope, ok := l.fitsLocked(tenant, need)
		if ok {
			u := l.tenants[tenant]
			if u == nil {
				u = &usage{}
				l.tenants[tenant] = u
			}
			u.calls++
			u.bytes += need
			l.calls++
			l.bytes += need
			l.peakCalls = max(l.peakCalls, l.calls)
			l.peakBytes = max(l.peakBytes, l.bytes)
			l.admitted++
			l.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { l.release(tenant, need) }) }, nil
		}
		changed := l.changed
		l.mu.Unlock()
		refuse := func() error {
			l.mu.Lock()
			l.refused[scope]++
			l.mu.Unlock()
			e := &ExhaustedError{Scope: scope, Calls: l.lim.CallsPerTenant, Bytes: l.lim.BytesPerTenant, Waited: time.Since(start), RetryAfter: retryAfter(l.lim.Wait)}
			if scope == ScopeTotal {
				e.Calls, e.Bytes = l.lim.Calls, l.lim.Bytes
			}
			return e
		}
		if l.lim.Wait < 0 {
			return nil, refuse()
		}
		select {
		case <-changed:
		case <-timer:
			return nil, refuse()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Grow reserves need more bytes for tenant, for a call already admitted
// whose size is now known (the gateway learns an exec's output size from
// the agent's answer, after the command ran). It waits for room as long
// as ctx lasts, never refusing: the call has had its effects, and its
// result must not be lost. It cannot deadlock as long as the admitted
// calls' own reservations leave room for one result (docs/operations.md
// sizes the budgets so). A need larger than a whole budget is an
// *ExhaustedError with TooLarge.
func (l *Limiter) Grow(ctx context.Context, tenant string, need int64) (release func(), err error) {
	if need <= 0 {
		return func() {}, nil
	}
	if need > l.lim.BytesPerTenant || need > l.lim.Bytes {
		return nil, &ExhaustedError{Scope: ScopeTenant, Bytes: l.lim.BytesPerTenant, TooLarge: true, Need: need}
	}
	for {
		l.mu.Lock()
		u := l.tenants[tenant]
		if u != nil && u.bytes+need <= l.lim.BytesPerTenant && l.bytes+need <= l.lim.Bytes {
			u.bytes += need
			l.bytes += need
			l.peakBytes = max(l.peakBytes, l.bytes)
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					if u := l.tenants[tenant]; u != nil {
						u.bytes -= need
					}
					l.bytes -= need
					close(l.changed)
					l.changed = make(chan struct{})
					l.mu.Unlock()
				})
			}, nil
		}
		if u == nil {
			l.mu.Unlock()
			return nil, errors.New("budget: Grow without an admitted call")
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// retryAfter suggests when to retry: after about the wait, the time in
// which the calls ahead did not end.
func retryAfter(wait time.Duration) time.Duration {
	return min(max(wait, 5*time.Second), time.Minute)
}

// fitsLocked says whether a call of need bytes fits now, or which bound it
// does not fit.
func (l *Limiter) fitsLocked(tenant string, need int64) (Scope, bool) {
	var u usage
	if p := l.tenants[tenant]; p != nil {
		u = *p
	}
	if u.calls+1 > l.lim.CallsPerTenant || u.bytes+need > l.lim.BytesPerTenant {
		return ScopeTenant, false
	}
	if l.calls+1 > l.lim.Calls || l.bytes+need > l.lim.Bytes {
		return ScopeTotal, false
	}
	return "", true
}

func (l *Limiter) release(tenant string, need int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.tenants[tenant]; u != nil {
		u.calls--
		u.bytes -= need
		if u.calls == 0 {
			delete(l.tenants, tenant)
		}
	}
	l.calls--
	l.bytes -= need
	close(l.changed)
	l.changed = make(chan struct{})
}

// Stats returns the limiter's counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Calls: int64(l.calls), Bytes: l.bytes, PeakCalls: int64(l.peakCalls), PeakBytes: l.peakBytes, Admitted: l.admitted, Refused: map[Scope]uint64{}}
	for k, v := range l.refused {
		s.Refused[k] = v
	}
	return s
}
