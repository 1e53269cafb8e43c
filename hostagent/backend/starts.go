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

import "sync"

// StartCount counts, per sandbox, the inits a backend process started: a
// backend's StartCounter. The zero value is ready; it is safe for
// concurrent use.
type StartCount struct {
	mu sync.Mutex
	n  map[string]uint64
}

var _ StartCounter = (*StartCount)(nil)

// Started counts a start of sandbox id's init.
func (c *StartCount) Started(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]uint64{}
	}
	c.n[id]++
}

// Starts implements StartCounter.
func (c *StartCount) Starts(id string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}
