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

package backend

import (
	"hash/fnv"
	"sync"
)

// Slots is a node's table of numbered slots, each held by one sandbox at
// the most: oci's ranges of IDs, vm's QEMU users. Which sandbox holds
// which is read once from their records on disk (Load), then kept here,
// so that a provision does not read every other sandbox's record. Safe
// for concurrent use.
type Slots struct {
	// First and N: the slots are First to First+N-1.
	First, N int
	// Load reads the slot each sandbox on disk holds; the first Claim
	// calls it. Slots out of range are ignored.
	Load func() (map[int]string, error)

	mu   sync.Mutex
	held map[int]string
}

// Claim gives sandbox id a slot and holds it for id until Release: want,
// when it is one of the table's and no other sandbox holds it; else the
// first slot free (or id's already) from a hash of id on, so that agents
// with state directories of their own on one host rarely pick the same.
// ok is false when every slot is held.
func (t *Slots) Claim(id string, want int) (slot int, ok bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		held, err := t.Load()
		if err != nil {
			return 0, false, err
		}
		t.held = make(map[int]string, len(held))
		for s, holder := range held {
			if t.in(s) {
				t.held[s] = holder
			}
		}
	}
	free := func(s int) bool { return t.held[s] == "" || t.held[s] == id }
	if t.in(want) && free(want) {
		t.held[want] = id
		return want, true, nil
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	start := int(h.Sum32() % uint32(t.N))
	for i := range t.N {
		if s := t.First + (start+i)%t.N; free(s) {
			t.held[s] = id
			return s, true, nil
		}
	}
	return 0, false, nil
}

// Holds says which slot id holds, if the table has been read and id
// holds one.
func (t *Slots) Holds(id string) (slot int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, holder := range t.held {
		if holder == id {
			return s, true
		}
	}
	return 0, false
}

func (t *Slots) in(s int) bool { return s >= t.First && s < t.First+t.N }

// Release frees the slot id holds, if any: once its record is gone, or
// a provision that claimed it failed before writing it.
func (t *Slots) Release(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, holder := range t.held {
		if holder == id {
			delete(t.held, s)
		}
	}
}
