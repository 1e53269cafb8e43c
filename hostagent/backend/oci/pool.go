//go:build linux

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

package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// The warm pool (backend.WarmPool). A pooled sandbox is an ordinary
// sandbox of this state directory, made and started as Provision and
// Start make any, under an ID that Options.NewID gave it: the tenant's
// sandbox ID once claimed. Its ID-map slot, its disk images (the default
// storage), its container, its cgroup, its hostname and its /etc were all
// made for that ID, so claiming it changes nothing a tenant could tell
// from a cold start: Provision writes the tenant's login profile into its
// /etc, fixes its record, and sets its limits in its cgroup (runc update)
// when they are not the defaults it started with.
//
// On disk, sandbox.json says "warm" from the moment the pooled sandbox is
// allocated until a Provision makes it a tenant's; the file warmMarker in
// its directory says that it is unclaimed. Claim removes the marker before
// it returns the ID: a restarted agent puts back in its pool only the
// sandboxes that still have it (and that still run), destroys the others
// that have it, and leaves a claimed one for its tenant's Provision when
// the node's records give it an owner. An agent that died between a claim
// and the record of its owner (a few milliseconds, in sandboxids) left one
// sandbox that is neither pooled nor anyone's: the next destroys it.
//
// Pools of images (SetImagePools) sit beside the blank one: a pooled
// sandbox of an image was made and started on it (its spec names it, as a
// tenant's would), and only a Claim whose spec names the same digest takes
// it. Which images are pooled, and how many of each, is the agent's
// choice; the refill serves the blank pool first, then the images in the
// order given, at the one rate. An image left out has its unclaimed
// sandboxes destroyed by RunPool before its Release is called, so that the
// image store keeps its layers while a pooled sandbox mounts them. A
// restarted agent destroys the unclaimed sandboxes of images it finds
// (their pools are set anew, with holds of their own) and keeps its blank
// ones.

// warmMarker is the file of an unclaimed pooled sandbox.
const warmMarker = "warm"

// pool is the backend's warm pool; nil when Options.WarmPool is zero
// and Options.ImagePools false.
type pool struct {
	mu sync.Mutex
	// ready are the IDs of started, unclaimed blank pooled sandboxes,
	// oldest first.
	ready []string
	// wake is signalled when a claim makes room, or the image pools
	// change.
	wake chan struct{}
	// stats are the blank pool's Size and Ready, and the counters of
	// every pool.
	stats backend.PoolStats
	// images are the image pools, in SetImagePools's order.
	images []*imagePool
	// discard are unclaimed pooled sandboxes no pool keeps (their image
	// left the pools, or its pool shrank), which RunPool destroys before
	// it calls releases, the Releases of the images that left.
	discard  []string
	releases []func()
	// fresh are the sandboxes a Provision made a tenant's with their
	// container kept, until the Start that follows: it finds them running
	// without asking the runtime (a `runc state` is a process start).
	fresh map[string]bool
}

// imagePool is the pool of one image.
type imagePool struct {
	backend.ImagePool
	// ready are its started, unclaimed sandboxes, oldest first.
	ready []string
	stats backend.PoolStats
}

// imagePool returns the current pool of digest; nil for none. Called
// with p.mu.
func (p *pool) imagePool(digest string) *imagePool {
	for _, ip := range p.images {
		if ip.Image.Digest == digest {
			return ip
		}
	}
	return nil
}

// takeFresh reports whether id was claimed with its container kept since
// the last Start, and forgets it.
func (p *pool) takeFresh(id string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fresh := p.fresh[id]
	delete(p.fresh, id)
	return fresh
}

var _ backend.WarmPool = (*Backend)(nil)

// fitsPool reports whether spec can run on a pooled sandbox as it is:
// the default isolation and storage, no egress network and no faculties,
// which are all fixed when a container is made. Resources are applied to
// a running one.
func (b *Backend) fitsPool(spec backend.Spec) bool {
	return backend.IsolationOf(spec) == backend.IsolationContainer &&
		len(spec.Egress) == 0 && len(spec.Faculties) == 0 &&
		b.storage(spec.Storage) == b.storage(backend.Storage{}) &&
		validateSpecFields(spec) == nil
}

// Claim implements backend.WarmPool. A spec on an image takes a sandbox
// of its image's pool, and fits none when its image has no pool.
func (b *Backend) Claim(spec backend.Spec) (string, bool) {
	p := b.pool
	if p == nil {
		return "", false
	}
	digest := imageOf(spec)
	fits := b.fitsPool(spec) && (digest != "" || b.opts.WarmPool > 0)
	var ip *imagePool
	for fits {
		p.mu.Lock()
		ready := &p.ready
		if digest != "" {
			if ip = p.imagePool(digest); ip == nil {
				p.mu.Unlock()
				fits = false
				break
			}
			ready = &ip.ready
		}
		if len(*ready) == 0 {
			p.mu.Unlock()
			break
		}
		id := (*ready)[0]
		*ready = (*ready)[1:]
		p.mu.Unlock()
		p.signal()
		// Removing the marker is the claim; a sandbox whose init died
		// since it was started is not handed out (the refill replaces it).
		if !b.Alive(id) {
			go b.discardPooled(id)
			continue
		}
		if err := os.Remove(filepath.Join(b.sandboxDir(id), warmMarker)); err != nil {
			continue
		}
		p.mu.Lock()
		p.stats.Hits++
		if ip != nil {
			ip.stats.Hits++
		}
		p.mu.Unlock()
		return id, true
	}
	p.mu.Lock()
	p.stats.Misses++
	if fits {
		p.stats.Empty++
		if ip != nil {
			ip.stats.Misses++
			ip.stats.Empty++
		}
	}
	p.mu.Unlock()
	return "", false
}

// Unclaim implements backend.WarmPool.
func (b *Backend) Unclaim(id string) {
	if b.pool == nil || backend.ValidateID(id) != nil {
		return
	}
	defer b.locks.Lock(id)()
	sb, err := b.load(id)
	if err != nil || !sb.warm {
		return // provisioned (or gone) in the meantime: not the pool's
	}
	p := b.pool
	p.mu.Lock()
	ready := &p.ready
	if d := imageOf(sb.spec); d != "" {
		ip := p.imagePool(d)
		if ip == nil {
			// Its image left the pools meanwhile: it goes.
			p.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), b.opts.StartTimeout)
			defer cancel()
			_ = b.destroyLocked(ctx, id, false)
			return
		}
		ready = &ip.ready
	}
	p.mu.Unlock()
	if ensureFile(filepath.Join(sb.dir, warmMarker), 0o600) != nil {
		return
	}
	p.mu.Lock()
	*ready = append(*ready, id)
	p.mu.Unlock()
}

// SetImagePools implements backend.WarmPool. Every Release given is
// called once: at once for an image already pooled (the pool keeps the
// hold it has), for one it cannot pool, or when the backend keeps no image
// pools; else once the image has left the pools and its sandboxes are
// gone.
func (b *Backend) SetImagePools(pools []backend.ImagePool) {
	p := b.pool
	var now []func()
	defer func() {
		for _, r := range now {
			r()
		}
	}()
	if p == nil || !b.opts.ImagePools {
		for _, ip := range pools {
			if ip.Release != nil {
				now = append(now, ip.Release)
			}
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make([]*imagePool, 0, len(pools))
	for _, want := range pools {
		if want.Image == nil || want.Size <= 0 || validateImage(want.Image) != nil ||
			slices.ContainsFunc(next, func(ip *imagePool) bool { return ip.Image.Digest == want.Image.Digest }) {
			if want.Release != nil {
				now = append(now, want.Release)
			}
			continue
		}
		ip := p.imagePool(want.Image.Digest)
		if ip == nil {
			ip = &imagePool{ImagePool: want}
		} else {
			ip.Size = want.Size
			if want.Release != nil {
				now = append(now, want.Release)
			}
		}
		if len(ip.ready) > ip.Size {
			p.discard = append(p.discard, ip.ready[ip.Size:]...)
			ip.ready = slices.Clone(ip.ready[:ip.Size])
		}
		next = append(next, ip)
	}
	for _, ip := range p.images {
		if !slices.Contains(next, ip) {
			p.discard = append(p.discard, ip.ready...)
			if ip.Release != nil {
				p.releases = append(p.releases, ip.Release)
			}
		}
	}
	p.images = next
	p.signal()
}

// ImagePoolStats implements backend.WarmPool.
func (b *Backend) ImagePoolStats() []backend.ImagePoolStats {
	if b.pool == nil {
		return nil
	}
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	out := make([]backend.ImagePoolStats, 0, len(b.pool.images))
	for _, ip := range b.pool.images {
		s := ip.stats
		s.Size, s.Ready = ip.Size, len(ip.ready)
		out = append(out, backend.ImagePoolStats{Digest: ip.Image.Digest, PoolStats: s})
	}
	return out
}

// PoolStats implements backend.WarmPool.
func (b *Backend) PoolStats() backend.PoolStats {
	if b.pool == nil {
		return backend.PoolStats{}
	}
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	s := b.pool.stats
	s.Size, s.Ready = b.opts.WarmPool, len(b.pool.ready)
	return s
}

// signal wakes the refill without blocking.
func (p *pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// forget drops id from the ready lists: Provision or Destroy took it.
func (p *pool) forget(id string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lists := []*[]string{&p.ready, &p.discard}
	for _, ip := range p.images {
		lists = append(lists, &ip.ready)
	}
	for _, l := range lists {
		if i := slices.Index(*l, id); i >= 0 {
			*l = slices.Delete(*l, i, i+1)
			p.signal()
		}
	}
}

// short returns a pool that has fewer sandboxes ready than its size:
// the blank one (nil) first, then the images in order.
func (p *pool) short(blank int) (ip *imagePool, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) < blank {
		return nil, true
	}
	for _, ip := range p.images {
		if len(ip.ready) < ip.Size {
			return ip, true
		}
	}
	return nil, false
}

// drainDiscarded destroys the sandboxes no pool keeps, then calls the
// Releases of the images that left the pools: none of their unclaimed
// sandboxes mounts them any more. What could not be destroyed is tried
// again on the next pass, the Releases with it.
func (b *Backend) drainDiscarded(ctx context.Context, log logr.Logger) {
	p := b.pool
	p.mu.Lock()
	ids, releases := p.discard, p.releases
	p.discard, p.releases = nil, nil
	p.mu.Unlock()
	var failed []string
	for _, id := range ids {
		if err := b.discardPooledCtx(ctx, id); err != nil {
			log.Error(err, "Removing a pooled sandbox no pool keeps", "id", id)
			failed = append(failed, id)
		}
	}
	if len(failed) > 0 {
		p.mu.Lock()
		p.discard, p.releases = append(p.discard, failed...), append(p.releases, releases...)
		p.mu.Unlock()
		return
	}
	for _, r := range releases {
		r()
	}
}

// RunPool implements backend.WarmPool: it adopts the pooled sandboxes an
// earlier agent left, then starts one whenever the pool is short, no
// faster than Options.WarmPoolRate, backing off after failures.
func (b *Backend) RunPool(ctx context.Context, owned func(id string) bool) {
	p := b.pool
	if p == nil {
		return
	}
	log := logr.FromContextOrDiscard(ctx).WithName("warm-pool")
	b.adoptPooled(ctx, log, owned)
	interval := time.Duration(float64(time.Second) / b.opts.WarmPoolRate)
	failures := 0
	for ctx.Err() == nil {
		b.drainDiscarded(ctx, log)
		ip, short := p.short(b.opts.WarmPool)
		if !short {
			select {
			case <-ctx.Done():
			case <-p.wake:
			}
			continue
		}
		wait := interval
		if err := b.startPooled(ctx, ip); err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait = min(interval<<min(failures, 6), time.Minute)
			log.Error(err, "Starting a pooled sandbox", "image", imageOf(backend.Spec{Image: imageOfPool(ip)}), "retryIn", wait.String())
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// imageOfPool is the image of an image pool; nil for the blank pool.
func imageOfPool(ip *imagePool) *backend.Image {
	if ip == nil {
		return nil
	}
	return ip.Image
}

// startPooled makes and starts one pooled sandbox, blank or of ip's image,
// and adds it to its ready list; to the discarded ones if ip left the
// pools (or shrank) meanwhile.
func (b *Backend) startPooled(ctx context.Context, ip *imagePool) (err error) {
	spec := backend.Spec{ID: b.opts.NewID(), Backend: b.Name(), Image: imageOfPool(ip)}
	if err := backend.ValidateID(spec.ID); err != nil {
		return err
	}
	defer func() {
		p := b.pool
		p.mu.Lock()
		defer p.mu.Unlock()
		stats := []*backend.PoolStats{&p.stats}
		if ip != nil {
			stats = append(stats, &ip.stats)
		}
		for _, s := range stats {
			if err == nil {
				s.Started++
			} else {
				s.Failed++
			}
		}
		switch {
		case err != nil:
		case ip == nil:
			p.ready = append(p.ready, spec.ID)
		case slices.Contains(p.images, ip) && len(ip.ready) < ip.Size:
			ip.ready = append(ip.ready, spec.ID)
		default:
			p.discard = append(p.discard, spec.ID)
		}
	}()
	unlock := b.locks.Lock(spec.ID)
	defer unlock()
	if _, err := b.load(spec.ID); !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("oci: a pooled sandbox's new ID %s is taken", spec.ID)
	}
	if err := b.checkReserve(); err != nil {
		return err
	}
	spec.Storage = b.storage(spec.Storage)
	sb, err := b.allocate(spec, false, true)
	if err == nil {
		if err = b.prepare(ctx, sb); err == nil {
			err = b.start(ctx, sb)
		}
	}
	if err != nil {
		// Whatever was made goes; the ID is never handed out.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.StartTimeout)
		defer cancel()
		return errors.Join(err, b.destroyLocked(cctx, spec.ID, false))
	}
	return nil
}

// adoptPooled takes into the ready list the unclaimed pooled sandboxes of
// the state directory that still run, up to the pool's size, and destroys
// the other unclaimed ones, and the claimed ones not provisioned that have
// no owner.
func (b *Backend) adoptPooled(ctx context.Context, log logr.Logger, owned func(id string) bool) {
	entries, _ := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	for _, e := range entries {
		id := e.Name()
		if backend.ValidateID(id) != nil {
			continue
		}
		if !backend.FileExists(filepath.Join(b.sandboxDir(id), warmMarker)) {
			if owned != nil && !owned(id) {
				if err := b.discardUnowned(ctx, id, owned); err != nil {
					log.Error(err, "Removing a claimed sandbox that has no owner", "id", id)
				}
			}
			continue
		}
		// A pooled sandbox of an image goes: its image's pool, and the
		// store's hold of the image, are the agent's to set anew.
		blank := false
		if sb, err := b.load(id); err == nil {
			blank = sb.spec.Image == nil
		}
		b.pool.mu.Lock()
		room := blank && len(b.pool.ready) < b.opts.WarmPool && !slices.Contains(b.pool.ready, id)
		b.pool.mu.Unlock()
		if room && b.Alive(id) {
			b.pool.mu.Lock()
			b.pool.ready = append(b.pool.ready, id)
			b.pool.mu.Unlock()
			continue
		}
		if err := b.discardPooledCtx(ctx, id); err != nil {
			log.Error(err, "Removing a pooled sandbox", "id", id)
		}
	}
}

// DrainPool implements backend.WarmPool: the images' sandboxes go with
// the blank ones; their pools stay set, and their holds with them.
func (b *Backend) DrainPool(ctx context.Context) error {
	p := b.pool
	if p == nil {
		return nil
	}
	p.mu.Lock()
	ids := slices.Concat(p.ready, p.discard)
	for _, ip := range p.images {
		ids = append(ids, ip.ready...)
	}
	releases := p.releases
	p.releases = nil
	p.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := b.discardPooledCtx(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("destroying pooled sandbox %s: %w", id, err))
		}
	}
	for _, r := range releases {
		r()
	}
	return errors.Join(errs...)
}

// discardPooled destroys an unclaimed pooled sandbox that cannot be
// handed out (its init died).
func (b *Backend) discardPooled(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.StartTimeout)
	defer cancel()
	_ = b.discardPooledCtx(ctx, id)
}

func (b *Backend) discardPooledCtx(ctx context.Context, id string) error {
	defer b.locks.Lock(id)()
	sb, err := b.load(id)
	if err != nil || !sb.warm || !backend.FileExists(filepath.Join(sb.dir, warmMarker)) {
		return nil // claimed meanwhile: its tenant's now
	}
	b.pool.forget(id)
	return b.destroyLocked(ctx, id, false)
}

// discardUnowned destroys id if it is a pooled sandbox claimed but never
// provisioned (its record still says warm) that owned does not know.
func (b *Backend) discardUnowned(ctx context.Context, id string, owned func(id string) bool) error {
	defer b.locks.Lock(id)()
	sb, err := b.load(id)
	if err != nil || !sb.warm || backend.FileExists(filepath.Join(sb.dir, warmMarker)) || owned(id) {
		return nil
	}
	return b.destroyLocked(ctx, id, false)
}

// claimed makes the pooled sandbox sb, claimed for spec, the tenant's:
// its record and /etc are spec's (Provision's prepare writes them), and
// its limits are set in place. A spec that does not fit the pooled
// sandbox (its faculties or egress, known only now) gets its container
// made anew at the Start that follows, as a cold start would; storage
// that differs cannot be changed, so the sandbox is destroyed and made
// again. It reports whether sb is still there. The caller holds sb's lock.
func (b *Backend) claimed(ctx context.Context, sb *sandbox, spec backend.Spec) (kept bool, err error) {
	b.pool.forget(sb.spec.ID)
	_ = os.Remove(filepath.Join(sb.dir, warmMarker))
	if b.storage(spec.Storage) != sb.spec.Storage {
		return false, b.destroyLocked(ctx, sb.spec.ID, false)
	}
	if !b.fitsPool(spec) || imageOf(spec) != imageOf(sb.spec) {
		// So is a system other than the one it runs (Claim never hands
		// out one, but Provision may find one claimed for another spec).
		return true, b.removeContainer(ctx, sb.spec.ID)
	}
	if !b.runc.exists(containerID(sb.spec.ID)) {
		return true, nil
	}
	b.wakeInit(sb.spec.ID)
	if have, want := b.resources(sb.spec.Resources), b.resources(spec.Resources); have != want {
		if err := b.runc.update(ctx, containerID(sb.spec.ID), want, b.swapLimit); err != nil {
			// Made anew at the next Start, with the tenant's limits.
			return true, errors.Join(err, b.removeContainer(ctx, sb.spec.ID))
		}
	}
	b.pool.mu.Lock()
	b.pool.fresh[sb.spec.ID] = true
	b.pool.mu.Unlock()
	return true, nil
}

// wakeInit tells the init of a claimed pooled sandbox, which keeps no
// spare shepherd while it waits in the pool (started lazy, with
// guestapi.LazyInitEnv: one process instead of two, P6), to start its spares now, so that they are ready by
// its tenant's first call. A signal (guestapi.ResumeSignal, which an init
// that keeps its spares ignores), not a process start: the claim does not
// wait for the spare. Should it fail, the first call wakes init itself,
// paying for one shepherd's start.
func (b *Backend) wakeInit(id string) {
	_ = b.signalInit(id, guestapi.ResumeSignal, "waking the init of claimed sandbox %s")
}

// update sets a running container's limits: memory (and memory+swap when
// swap is limited), CPU quota and PIDs: its pids cgroup's and its
// tenant's RLIMIT_NPROC (hostPIDs), which every process of the container
// holds and passes on; a pooled container runs no tenant process yet,
// only init and its spare shepherds.
func (r *runc) update(ctx context.Context, id string, res backend.Resources, swap bool) error {
	args := []string{"update", "--memory", strconv.FormatInt(res.MemoryBytes, 10), "--pids-limit", strconv.FormatInt(hostPIDs(res.PIDs), 10)}
	if swap {
		args = append(args, "--memory-swap", strconv.FormatInt(res.MemoryBytes, 10))
	}
	if res.CPUMillis > 0 {
		args = append(args, "--cpu-period", strconv.Itoa(cpuPeriod), "--cpu-quota", strconv.FormatInt(res.CPUMillis*cpuPeriod/1000, 10))
	}
	if _, err := r.output(ctx, append(args, r.name(id))...); err != nil {
		return err
	}
	st, err := r.state(ctx, id)
	if err != nil {
		return err
	}
	lim := &unix.Rlimit{Cur: uint64(res.PIDs), Max: uint64(res.PIDs)}
	// Init first: what it starts from now on inherits the new limit, and
	// what it started before is in the list read after.
	if err := unix.Prlimit(st.Pid, unix.RLIMIT_NPROC, lim, nil); err != nil {
		return fmt.Errorf("setting the process limit of %s's init: %w", id, err)
	}
	pids, err := r.processes(id)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, lim, nil); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("setting the process limit of %s's process %d: %w", id, pid, err)
		}
	}
	return nil
}
