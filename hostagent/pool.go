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
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Pools is the warm-pool service: it claims started sandboxes from the
// pools of the backends that keep one (backend.WarmPool), runs those
// pools, and owns the claimed sandboxes no Ensure has taken yet.
type Pools struct {
	sandboxes poolSandboxes

	mu sync.Mutex
	// blank are the sandboxes ClaimWarm handed out that no Ensure has
	// taken yet, by ID: they hold no job to adopt.
	blank map[string]bool
}

// poolSandboxes is what the warm-pool service asks of the sandboxes
// service.
type poolSandboxes interface {
	Backends() []backend.Backend
	backendFor(spec backend.Spec) (backend.Backend, error)
}

func newPools(sandboxes poolSandboxes) *Pools {
	return &Pools{sandboxes: sandboxes, blank: map[string]bool{}}
}

// ClaimWarm takes, from the warm pool of the backend that runs spec, a
// started sandbox that fits it, and returns its ID: the caller records
// it as the tenant's sandbox ID, and the Ensure that follows finds it
// running. ok is false when the backend has no pool, none is ready, or
// spec does not fit one.
func (p *Pools) ClaimWarm(spec backend.Spec) (id string, ok bool) {
	be, err := p.sandboxes.backendFor(spec)
	if err != nil {
		return "", false
	}
	if pool := be.Capabilities().WarmPool; pool != nil {
		if id, ok = pool.Claim(spec); ok {
			// Blank until its tenant's first call: it holds no job, and
			// its first Ensure has none to adopt.
			p.mu.Lock()
			p.blank[id] = true
			p.mu.Unlock()
		}
		return id, ok
	}
	return "", false
}

// UnclaimWarm gives back a sandbox that ClaimWarm returned and that was
// not recorded as a tenant's.
func (p *Pools) UnclaimWarm(spec backend.Spec, id string) {
	p.takeBlank(id)
	if be, err := p.sandboxes.backendFor(spec); err == nil {
		if pool := be.Capabilities().WarmPool; pool != nil {
			pool.Unclaim(id)
		}
	}
}

// SetImagePools sets the images the warm pools of the backends that run
// images keep sandboxes of (backend.WarmPool.SetImagePools). Each Release
// is called once, when no backend keeps a pooled sandbox of its image any
// more.
func (p *Pools) SetImagePools(pools []backend.ImagePool) {
	var set []backend.WarmPool
	for _, be := range p.sandboxes.Backends() {
		if c := be.Capabilities(); c.Images && c.WarmPool != nil {
			set = append(set, c.WarmPool)
		}
	}
	each := make([][]backend.ImagePool, len(set))
	for _, want := range pools {
		release := want.Release
		if release != nil {
			if len(set) == 0 {
				release()
				continue
			}
			// Called by the last backend to let the image go.
			var left atomic.Int32
			left.Store(int32(len(set)))
			want.Release = func() {
				if left.Add(-1) == 0 {
					release()
				}
			}
		}
		for i := range set {
			each[i] = append(each[i], want)
		}
	}
	for i, pool := range set {
		pool.SetImagePools(each[i])
	}
}

// takeBlank says whether sandbox id was claimed and not yet taken by an
// Ensure, and forgets it: the first Ensure of a claimed sandbox has no job
// to adopt, and a removed one is forgotten.
func (p *Pools) takeBlank(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	blank := p.blank[id]
	delete(p.blank, id)
	return blank
}

// RunPools fills and refills the warm pools of the backends that have
// one until ctx ends; owned says which sandbox IDs the node's records
// give an owner (backend.WarmPool.RunPool). Then, the agent stopping
// gracefully, it destroys the pools' unclaimed sandboxes within grace
// (backend.WarmPool.DrainPool): what it cannot destroy, the next agent
// adopts.
func (p *Pools) RunPools(ctx context.Context, owned func(id string) bool, grace time.Duration) error {
	var pools []backend.WarmPool
	for _, be := range p.sandboxes.Backends() {
		if pool := be.Capabilities().WarmPool; pool != nil {
			pools = append(pools, pool)
		}
	}
	var wg sync.WaitGroup
	for _, pool := range pools {
		wg.Go(func() { pool.RunPool(ctx, owned) })
	}
	<-ctx.Done()
	wg.Wait()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	for _, pool := range pools {
		if err := pool.DrainPool(dctx); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Destroying the warm pool's sandboxes at shutdown; the next agent adopts the rest")
		}
	}
	return nil
}
