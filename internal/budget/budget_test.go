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

package budget

import (
	"context"
	"errors"
	"testing"
	"time"
)

func mustAcquire(t *testing.T, l *Limiter, tenant string, need int64) func() {
	t.Helper()
	rel, err := l.Acquire(context.Background(), tenant, need)
	if err != nil {
		t.Fatalf("acquire %s %d: %v", tenant, need, err)
	}
	return rel
}

func refusedBy(t *testing.T, err error, scope Scope) *ExhaustedError {
	t.Helper()
	var e *ExhaustedError
	if !errors.As(err, &e) || e.Scope != scope {
		t.Fatalf("want a refusal by the %s bound, got %v", scope, err)
	}
	return e
}

func TestLimits(t *testing.T) {
	// Wait < 0 refuses at once: nothing here waits for luck.
	l, err := New(Limits{CallsPerTenant: 2, Calls: 3, BytesPerTenant: 100, Bytes: 150, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	a1 := mustAcquire(t, l, "a", 10)
	a2 := mustAcquire(t, l, "a", 10)
	_, err = l.Acquire(context.Background(), "a", 10)
	e := refusedBy(t, err, ScopeTenant)
	if e.TooLarge || e.RetryAfter <= 0 {
		t.Fatalf("a full tenant is retryable: %+v", e)
	}
	b1 := mustAcquire(t, l, "b", 10)
	_, err = l.Acquire(context.Background(), "c", 10)
	_ = refusedBy(t, err, ScopeTotal)
	a1()
	a1() // a second release changes nothing
	c1 := mustAcquire(t, l, "c", 100)
	_, err = l.Acquire(context.Background(), "b", 1)
	_ = refusedBy(t, err, ScopeTotal) // 3 calls
	a2()
	_, err = l.Acquire(context.Background(), "b", 50)
	_ = refusedBy(t, err, ScopeTotal) // 110 + 50 bytes > 150
	_, err = l.Acquire(context.Background(), "a", 101)
	if e := refusedBy(t, err, ScopeTenant); !e.TooLarge {
		t.Fatalf("a call larger than the tenant's budget can never run: %+v", e)
	}
	b1()
	c1()
	s := l.Stats()
	if s.Calls != 0 || s.Bytes != 0 || s.PeakCalls != 3 || s.PeakBytes != 120 || s.Refused[ScopeTenant] != 2 || s.Refused[ScopeTotal] != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestWaitThenAdmit(t *testing.T) {
	l, err := New(Limits{CallsPerTenant: 1, Calls: 1, Wait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rel := mustAcquire(t, l, "a", 1)
	got := make(chan error, 1)
	go func() {
		r, err := l.Acquire(context.Background(), "a", 1)
		if err == nil {
			r()
		}
		got <- err
	}()
	// The waiter is admitted when, and only when, room is freed.
	if l.Stats().Admitted != 1 {
		t.Fatal("admitted twice")
	}
	rel()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestWaitBounded(t *testing.T) {
	l, err := New(Limits{CallsPerTenant: 1, Calls: 1, Wait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer mustAcquire(t, l, "a", 1)()
	_, err = l.Acquire(context.Background(), "a", 1)
	if e := refusedBy(t, err, ScopeTenant); e.Waited < 20*time.Millisecond {
		t.Fatalf("refused before the wait ended: %+v", e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l2, _ := New(Limits{CallsPerTenant: 1, Calls: 1, Wait: time.Hour})
	defer mustAcquire(t, l2, "a", 1)()
	if _, err := l2.Acquire(ctx, "a", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled caller stops waiting: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, l := range []Limits{
		{CallsPerTenant: 9, Calls: 8},
		{BytesPerTenant: 2, Bytes: 1},
		{Calls: -1},
	} {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v: want an error", l)
		}
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestGrow: a call admitted small grows once its size is known, waiting
// for room rather than being refused, and gives the bytes back.
func TestGrow(t *testing.T) {
	l, err := New(Limits{CallsPerTenant: 2, Calls: 2, BytesPerTenant: 100, Bytes: 100, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	a := mustAcquire(t, l, "a", 10)
	b := mustAcquire(t, l, "a", 10)
	g1, err := l.Grow(context.Background(), "a", 70)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		g2, err := l.Grow(context.Background(), "a", 50) // waits: 90 + 50 > 100
		if err == nil {
			g2()
		}
		got <- err
	}()
	g1()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := l.Grow(context.Background(), "a", 101); err == nil {
		t.Fatal("a growth larger than the budget was accepted")
	}
	a()
	b()
	if s := l.Stats(); s.Bytes != 0 || s.Calls != 0 || s.PeakBytes > 100 {
		t.Fatalf("stats %+v", s)
	}
}
