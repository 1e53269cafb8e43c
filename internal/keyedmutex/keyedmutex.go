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

// Package keyedmutex serialises work by key (a sandbox ID): one mutex per
// key, held in a map only while someone holds or waits for it, so that a
// node that has seen a million sandboxes keeps no entry for the ones it
// is not touching.
package keyedmutex

import "sync"

// Mutex is a set of mutual exclusion locks, one per key. The zero value
// is ready to use. It must not be copied after first use.
type Mutex struct {
	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one key's lock and the number of callers that hold it or wait
// for it; the entry leaves the map when that number falls to zero.
type entry struct {
	mu   sync.Mutex
	refs int
}

// Lock locks key, waiting until no other caller holds it, and returns the
// function that unlocks it. Calling that function twice panics, as
// unlocking an unlocked sync.Mutex does.
func (k *Mutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.entries == nil {
		k.entries = map[string]*entry{}
	}
	e, ok := k.entries[key]
	if !ok {
		e = &entry{}
		k.entries[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return k.unlocker(key, e)
}

// TryLock locks key when no other caller holds it, and returns the
// function that unlocks it and true; otherwise nil and false, at once.
func (k *Mutex) TryLock(key string) (unlock func(), ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, held := k.entries[key]; held {
		return nil, false
	}
	if k.entries == nil {
		k.entries = map[string]*entry{}
	}
	e := &entry{refs: 1}
	e.mu.Lock()
	k.entries[key] = e
	return k.unlocker(key, e), true
}

// unlocker is the function that unlocks e, key's entry, once.
func (k *Mutex) unlocker(key string, e *entry) func() {
	var once sync.Once
	return func() {
		unlocked := false
		once.Do(func() {
			unlocked = true
			k.mu.Lock()
			e.refs--
			if e.refs == 0 {
				delete(k.entries, key)
			}
			k.mu.Unlock()
			e.mu.Unlock()
		})
		if !unlocked {
			panic("keyedmutex: unlock of unlocked key " + key)
		}
	}
}

// Len is how many keys are held or waited for now.
func (k *Mutex) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}
