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

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/playground-dev/playground/hostagent/backend"
)

// ImagePoolOptions configure the warm pools of images (docs/images.md):
// beside the blank sandboxes of --warm-pool, sandboxes started on the
// images the node's sandboxes run and on the images the platform names,
// so that a new Sandbox on one of them is claimed, not started. A claim
// is made only once the node's image store has let the Sandbox's tenant
// have the image, as for a cold start: a pooled sandbox of a private image
// is never handed to a tenant the registry has not said may pull it.
type ImagePoolOptions struct {
	// InUse is how many of the distinct images the node's sandboxes
	// started most recently are pooled; 0 pools none of them.
	InUse int
	// Named are images by digest (registry/repo@sha256:…) the platform
	// pools as long as the agent runs, pulled anonymously when it starts:
	// a private one cannot be (no tenant's credentials are the node's to
	// use for it), and is refused, saying so in the agent's log.
	Named []string
	// Size is how many sandboxes of each pooled image are kept started.
	Size int
	// Max bounds the pooled sandboxes of every image together: the named
	// images are served first, in their order, then the images in use,
	// the most recently started first; an image past the bound is not
	// pooled.
	Max int
}

// enabled says whether any image is pooled.
func (o ImagePoolOptions) enabled() bool {
	return o.Size > 0 && o.Max > 0 && (o.InUse > 0 || len(o.Named) > 0)
}

// Defaults of the image pools' bounds.
const (
	DefaultImagePoolSize = 1
	DefaultImagePoolMax  = 8
)

// namedPullBackoff bounds the wait between pulls of a named image that
// failed for a reason that may pass (the registry unreachable).
const namedPullBackoff = 5 * time.Minute

// imagePools chooses the images the node's warm pools keep sandboxes of,
// and holds each in the store while a pool of it exists (the backend
// releases the hold once the pool's sandboxes are gone).
type imagePools struct {
	opts  ImagePoolOptions
	store ImageStore
	set   func([]backend.ImagePool)

	// applyMu orders the plans given to set.
	applyMu sync.Mutex
	applied []plannedPool

	mu     sync.Mutex
	named  []*backend.Image // pulled, in the order of opts.Named
	recent []*backend.Image // most recently started first, at most opts.InUse
}

type plannedPool struct {
	digest string
	size   int
}

// newImagePools returns the node's image pools; nil when none is
// configured or the node has no image store.
func newImagePools(opts ImagePoolOptions, store ImageStore, set func([]backend.ImagePool)) *imagePools {
	if !opts.enabled() || store == nil {
		return nil
	}
	return &imagePools{opts: opts, store: store, set: set}
}

// started records that a sandbox of the node started on img (nil: the
// node's system): img is in use, the most recently started.
func (p *imagePools) started(img *backend.Image) {
	if p == nil || img == nil || p.opts.InUse == 0 {
		return
	}
	p.mu.Lock()
	p.recent = slices.DeleteFunc(p.recent, func(i *backend.Image) bool { return i.Digest == img.Digest })
	p.recent = slices.Insert(p.recent, 0, img)
	if len(p.recent) > p.opts.InUse {
		p.recent = p.recent[:p.opts.InUse]
	}
	p.mu.Unlock()
	p.apply()
}

// plan is the pools wanted now: the named images, then the ones in use,
// each of opts.Size sandboxes while opts.Max allows.
func (p *imagePools) plan() []plannedPool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []plannedPool
	left := p.opts.Max
	for _, img := range slices.Concat(p.named, p.recent) {
		if left <= 0 {
			break
		}
		if slices.ContainsFunc(out, func(pp plannedPool) bool { return pp.digest == img.Digest }) {
			continue
		}
		n := min(p.opts.Size, left)
		left -= n
		out = append(out, plannedPool{digest: img.Digest, size: n})
	}
	return out
}

// apply gives the backends the pools planned, when they changed, each
// image held in the store for its pool.
func (p *imagePools) apply() {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	plan := p.plan()
	if slices.Equal(plan, p.applied) {
		return
	}
	pools := make([]backend.ImagePool, 0, len(plan))
	kept := plan[:0:0]
	for _, pp := range plan {
		img, release, err := p.store.Hold(pp.digest)
		if err != nil {
			continue // gone from the store: no sandbox runs it, nor pools it
		}
		pools = append(pools, backend.ImagePool{Image: img, Size: pp.size, Release: release})
		kept = append(kept, pp)
	}
	p.set(pools)
	p.applied = kept
}

// pullNamed pulls the images the platform named, anonymously, and pools
// each once it is in the store; one the registry refuses anonymously
// (private) is refused for good, saying so; one that fails otherwise is
// tried again, backing off. It returns when ctx ends.
func (p *imagePools) pullNamed(ctx context.Context, log logr.Logger) error {
	defer func() { <-ctx.Done() }()
	if p == nil || len(p.opts.Named) == 0 {
		return nil
	}
	log.Info("Pooling images", "pools", p.opts.String())
	todo := slices.Clone(p.opts.Named)
	got := make(map[string]*backend.Image, len(todo))
	wait := time.Second
	for len(todo) > 0 && ctx.Err() == nil {
		var again []string
		for _, ref := range todo {
			img, release, err := p.store.Pull(ctx, ref, "", nil, nil)
			switch {
			case err == nil:
				got[ref] = img
				p.setNamed(got)
				release() // the pool's own hold was taken by apply
			case ctx.Err() != nil:
				return nil
			case private(err):
				log.Error(err, "Not pooling an image named for the warm pools: the registry refused an anonymous pull, or the node refuses the image. A private image cannot be pooled (the pull is anonymous: no tenant's credentials are the node's to pool it with); remove it from --warm-pool-image. A Sandbox on it still starts, cold, with its tenant's pull Secret", "image", ref)
			default:
				log.Error(err, "Pulling an image named for the warm pools; trying again", "image", ref, "retryIn", wait.String())
				again = append(again, ref)
			}
		}
		if todo = again; len(todo) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, namedPullBackoff)
		}
	}
	return nil
}

// setNamed records the named images pulled so far, in the flag's order,
// and applies the plan.
func (p *imagePools) setNamed(got map[string]*backend.Image) {
	p.mu.Lock()
	p.named = p.named[:0]
	for _, ref := range p.opts.Named {
		if img, ok := got[ref]; ok {
			p.named = append(p.named, img)
		}
	}
	p.mu.Unlock()
	p.apply()
}

// private says whether a pull failed because the registry wants
// credentials: the image is private (or gone, which no retry mends).
func private(err error) bool {
	var ie *ImageError
	if errors.As(err, &ie) {
		return true // refused, or denied to an anonymous tenant
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return true
		}
	}
	return false
}

// String says what is pooled, for the agent's log.
func (o ImagePoolOptions) String() string {
	return fmt.Sprintf("%d images in use and %d named, %d sandboxes each, %d in all", o.InUse, len(o.Named), o.Size, o.Max)
}
