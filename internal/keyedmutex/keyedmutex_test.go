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

package keyedmutex

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLockExcludesOnOneKey(t *testing.T) {
	var k Mutex
	var inside atomic.Int32
	var wg sync.WaitGroup
	count := 0 // guarded by k's lock of "a" alone; -race reports a lapse
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				unlock := k.Lock("a")
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d callers hold key a at once", n)
				}
				count++
				inside.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	if count != 16*200 {
		t.Errorf("count %d, want %d", count, 16*200)
	}
	if n := k.Len(); n != 0 {
		t.Errorf("Len %d after every caller unlocked, want 0", n)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	var k Mutex
	unlockA := k.Lock("a")
	defer unlockA()
	done := make(chan struct{})
	go func() {
		k.Lock("b")()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("locking key b waited for key a")
	}
}

func TestMapShrinks(t *testing.T) {
	var k Mutex
	for i := range 1000 {
		k.Lock(fmt.Sprint("sandbox-", i))()
	}
	if n := k.Len(); n != 0 {
		t.Fatalf("Len %d after 1000 keys locked and unlocked, want 0", n)
	}

	// A waiter keeps the entry until it is done too.
	unlock := k.Lock("a")
	acquired := make(chan func())
	go func() { acquired <- k.Lock("a") }()
	waitFor(t, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.entries["a"].refs == 2
	})
	unlock()
	if n := k.Len(); n != 1 {
		t.Errorf("Len %d while a waiter takes key a, want 1", n)
	}
	(<-acquired)()
	if n := k.Len(); n != 0 {
		t.Errorf("Len %d after the waiter unlocked, want 0", n)
	}
}

func TestUnlockTwicePanics(t *testing.T) {
	var k Mutex
	unlock := k.Lock("a")
	unlock()
	unlockB := k.Lock("a") // a second holder's lock must stay held
	defer unlockB()
	defer func() {
		if recover() == nil {
			t.Error("a second unlock did not panic")
		}
		if n := k.Len(); n != 1 {
			t.Errorf("Len %d after the refused unlock, want 1 (the second holder's)", n)
		}
	}()
	unlock()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TryLock takes a free key at once, refuses a held one without waiting,
// and excludes Lock as Lock does.
func TestTryLock(t *testing.T) {
	var k Mutex
	unlock, ok := k.TryLock("a")
	if !ok {
		t.Fatal("TryLock refused a free key")
	}
	if _, ok := k.TryLock("a"); ok {
		t.Fatal("TryLock took a held key")
	}
	if u, ok := k.TryLock("b"); !ok {
		t.Fatal("TryLock refused key b while a was held")
	} else {
		u()
	}
	got := make(chan struct{})
	go func() {
		k.Lock("a")()
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("Lock took a key TryLock held")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	<-got
	if n := k.Len(); n != 0 {
		t.Errorf("Len %d after every caller unlocked, want 0", n)
	}
	unlock, ok = k.TryLock("a")
	if !ok {
		t.Fatal("TryLock refused a key released by Lock")
	}
	unlock()
}
