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

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/backend"
)

// ClaimWarm takes, from the warm pool of the backend that runs spec, a
// started sandbox that fits it, and returns its ID: the caller records
// it as the tenant's sandbox ID, and the Ensure that follows finds it
// running. ok is false when the backend has no pool, none is ready, or
// spec does not fit one.
func (a *Agent) ClaimWarm(spec backend.Spec) (id string, ok bool) {
	be, err := a.backendFor(spec)
	if err != nil {
		return "", false
	}
	if p := be.Capabilities().WarmPool; p != nil {
		if id, ok = p.Claim(spec); ok {
			// Blank until its tenant's first call: it holds no job, and
			// its first Ensure has none to adopt.
			a.mu.Lock()
			if a.blank == nil {
				a.blank = map[string]bool{}
			}
			a.blank[id] = true
			a.mu.Unlock()
		}
		return id, ok
	}
	return "", false
}

// UnclaimWarm gives back a sandbox that ClaimWarm returned and that was
// not recorded as a tenant's.
func (a *Agent) UnclaimWarm(spec backend.Spec, id string) {
	a.mu.Lock()
	delete(a.blank, id)
	a.mu.Unlock()
	if be, err := a.backendFor(spec); err == nil {
		if p := be.Capabilities().WarmPool; p != nil {
			p.Unclaim(id)
		}
	}
}

// RunPools fills and refills the warm pools of the backends that have
// one until ctx ends; owned says which sandbox IDs the node's records
// give an owner (backend.WarmPool.RunPool). Then, the agent stopping
// gracefully, it destroys the pools' unclaimed sandboxes within grace
// (backend.WarmPool.DrainPool): what it cannot destroy, the next agent
// adopts.
func (a *Agent) RunPools(ctx context.Context, owned func(id string) bool, grace time.Duration) error {
	var pools []backend.WarmPool
	for _, be := range a.backends {
		if p := be.Capabilities().WarmPool; p != nil {
			pools = append(pools, p)
		}
	}
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Go(func() { p.RunPool(ctx, owned) })
	}
	<-ctx.Done()
	wg.Wait()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	for _, p := range pools {
		if err := p.DrainPool(dctx); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Destroying the warm pool's sandboxes at shutdown; the next agent adopts the rest")
		}
	}
	return nil
}
