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

package chunkstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// An upload racing a prune: a prune deletes the chunks no manifest names,
// and an upload's chunks are named by no manifest until its last step,
// while it also counts on chunks it found already stored. So each writes a
// lock object of the tenant's (locks/upload-* or locks/prune-*) and then
// lists the locks: the bucket being strongly consistent, of two that run
// at once at least one sees the other's. An upload that sees a prune's
// waits for it to end; a prune that sees an upload's leaves the chunks
// alone (the manifest it was asked to delete is gone all the same; the
// next prune sweeps). A lock not refreshed for LockStale (its holder died)
// is ignored and removed; its age is measured by the server's clock
// against the lock just written, never the node's. An upload refreshes
// its lock every quarter of LockStale and, when it could not for half of
// it, fails rather than write a manifest whose chunks a prune may have
// taken: called again, it sends what is missing.

const noFollow = syscall.O_NOFOLLOW

// uploadLock is an upload's lock, refreshed until released.
type uploadLock struct {
	s    *Store
	obj  string
	stop context.CancelFunc
	done chan struct{}

	mu        sync.Mutex
	refreshed time.Time // when the last write that succeeded began
	lapsed    bool      // a gap between writes was too long: for good
}

func randomName() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockBody is what a lock holds: its object's time is what counts (some
// servers refuse an empty PUT).
var lockBody = []byte("lock\n")

func (s *Store) writeLock(ctx context.Context, obj string) error {
	_, err := s.client.PutObject(ctx, s.cfg.Bucket, obj, bytes.NewReader(lockBody), int64(len(lockBody)), minio.PutObjectOptions{})
	return err
}

// putLock writes lock obj and returns its time by the server's clock.
func (s *Store) putLock(ctx context.Context, obj string) (time.Time, error) {
	if err := s.writeLock(ctx, obj); err != nil {
		return time.Time{}, fmt.Errorf("writing lock %s: %w", obj, err)
	}
	info, err := s.client.StatObject(ctx, s.cfg.Bucket, obj, minio.StatObjectOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading lock %s: %w", obj, err)
	}
	return info.LastModified, nil
}

// otherLocks is the tenant's locks but obj, of kind ("upload-" or
// "prune-"), refreshed within LockStale of now (the server's time), and
// the stale ones.
func (s *Store) otherLocks(ctx context.Context, k *keys, obj, kind string, now time.Time) (live, stale []string, err error) {
	prefix := s.tenantDir(k) + "/locks/"
	for o := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix + kind, Recursive: true}) {
		if o.Err != nil {
			return nil, nil, fmt.Errorf("listing locks: %w", o.Err)
		}
		if o.Key == obj {
			continue
		}
		if now.Sub(o.LastModified) > s.cfg.LockStale {
			stale = append(stale, o.Key)
		} else {
			live = append(live, o.Key)
		}
	}
	return live, stale, nil
}

// lockUpload takes an upload's lock on tenant k, waiting while a prune
// runs.
func (s *Store) lockUpload(ctx context.Context, k *keys) (*uploadLock, error) {
	obj := s.tenantDir(k) + "/locks/upload-" + randomName()
	for {
		now, err := s.putLock(ctx, obj)
		if err != nil {
			return nil, err
		}
		held := time.Now()
		prunes, _, err := s.otherLocks(ctx, k, obj, "prune-", now)
		if err != nil {
			s.removeLock(obj)
			return nil, err
		}
		if len(prunes) == 0 {
			rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
			l := &uploadLock{s: s, obj: obj, stop: stop, done: make(chan struct{}), refreshed: held}
			go l.refresh(rctx)
			return l, nil
		}
		select {
		case <-ctx.Done():
			s.removeLock(obj)
			return nil, fmt.Errorf("waiting for a prune of the tenant's snapshots (%s) to end: %w", strings.Join(prunes, ", "), ctx.Err())
		case <-time.After(s.cfg.LockPoll):
		}
	}
}

// refresh writes the lock again every quarter of LockStale until released.
func (l *uploadLock) refresh(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.s.cfg.LockStale / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		if err := l.s.writeLock(ctx, l.obj); err == nil {
			l.mu.Lock()
			// A write after a gap does not undo it: a prune may have
			// found the lock stale in the gap and swept.
			if start.Sub(l.refreshed) > l.s.cfg.LockStale/2 {
				l.lapsed = true
			}
			l.refreshed = start
			l.mu.Unlock()
		}
	}
}

// errLockLapsed is an upload that could not keep its lock.
var errLockLapsed = errors.New("the upload could not refresh its lock in time, so a prune may have removed chunks it counts on: put it again (it sends only what is missing)")

// check says whether the lock has been held throughout.
func (l *uploadLock) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lapsed || time.Since(l.refreshed) > l.s.cfg.LockStale/2 {
		return errLockLapsed
	}
	return nil
}

func (l *uploadLock) release() {
	l.stop()
	<-l.done
	l.s.removeLock(l.obj)
}

// removeLock removes a lock, whatever the caller's context: a lock left
// behind holds prunes off until it is stale.
func (s *Store) removeLock(obj string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.client.RemoveObject(ctx, s.cfg.Bucket, obj, minio.RemoveObjectOptions{})
}

// PruneStats says what a prune did.
type PruneStats struct {
	// Deferred is set when an upload was under way: no chunk was removed
	// (the next prune removes them).
	Deferred bool
	// Kept is how many chunks the remaining manifests name; Removed how
	// many chunks were removed.
	Kept, Removed int
}

// Delete removes snapshot id of tenant t from the store, then prunes the
// tenant's chunks. A snapshot already gone is not an error.
func (s *Store) Delete(ctx context.Context, t Tenant, id string) (PruneStats, error) {
	k, err := deriveKeys(t)
	if err != nil {
		return PruneStats{}, err
	}
	if err := checkSnapshotID(id); err != nil {
		return PruneStats{}, err
	}
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.manifestObject(k, id), minio.RemoveObjectOptions{}); err != nil &&
		minio.ToErrorResponse(err).StatusCode != http.StatusNotFound {
		return PruneStats{}, fmt.Errorf("chunkstore: deleting snapshot %s: %w", id, err)
	}
	return s.prune(ctx, k)
}

// Prune removes tenant t's chunks that no manifest of its names (a mark
// and sweep).
func (s *Store) Prune(ctx context.Context, t Tenant) (PruneStats, error) {
	k, err := deriveKeys(t)
	if err != nil {
		return PruneStats{}, err
	}
	return s.prune(ctx, k)
}

func (s *Store) prune(ctx context.Context, k *keys) (PruneStats, error) {
	var st PruneStats
	obj := s.tenantDir(k) + "/locks/prune-" + randomName()
	now, err := s.putLock(ctx, obj)
	if err != nil {
		return st, fmt.Errorf("chunkstore: pruning: %w", err)
	}
	defer s.removeLock(obj)
	uploads, stale, err := s.otherLocks(ctx, k, obj, "upload-", now)
	if err != nil {
		return st, fmt.Errorf("chunkstore: pruning: %w", err)
	}
	for _, o := range stale {
		s.removeLock(o)
	}
	if len(uploads) > 0 {
		st.Deferred = true
		return st, nil
	}
	// Mark: every chunk a manifest names. A manifest that cannot be read
	// stops the prune: nothing is removed on a doubt.
	ids, err := s.list(ctx, s.tenantDir(k)+"/manifests/")
	if err != nil {
		return st, err
	}
	keep := map[string]bool{}
	for _, id := range ids {
		m, err := s.manifest(ctx, k, id)
		if err != nil {
			return st, fmt.Errorf("chunkstore: pruning: nothing removed: %w", err)
		}
		for _, f := range m.Files {
			for _, e := range f.Extents {
				for _, c := range e.Chunks {
					keep[c.Name] = true
				}
			}
		}
	}
	st.Kept = len(keep)
	// Sweep.
	prefix := s.tenantDir(k) + "/chunks/"
	names, err := s.list(ctx, prefix)
	if err != nil {
		return st, err
	}
	for _, name := range names {
		if keep[name] {
			continue
		}
		if err := s.client.RemoveObject(ctx, s.cfg.Bucket, prefix+name, minio.RemoveObjectOptions{}); err != nil {
			return st, fmt.Errorf("chunkstore: pruning: removing chunk %s: %w", name, err)
		}
		st.Removed++
	}
	return st, nil
}
