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

package vm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Snapshots (backend.Snapshotter) of a VM hold its disk (home, workspace,
// /tmp), copied while the guest is stopped after a sync, under
// <state>/snapshots/<id>, the agent's alone. Not its memory: the guest's
// kernel holds its pile's filesystem mounted, and a fork has a pile of its
// own, which a restored kernel would take for the one it had mounted. A
// fork's disk is a copy of the snapshot's (sharing blocks where the
// filesystem has reflinks) and it boots afresh over it.

// snapshots is the backend's Snapshotter.
func (b *Backend) snapshots() backend.Snapshots[backend.SnapshotRecord] {
	return backend.NewSnapshots(b.opts.StateDir, &b.locks, b.takeSnapshot)
}

// takeSnapshot copies sandbox id's disk into dir (backend.Snapshots.Take).
func (b *Backend) takeSnapshot(ctx context.Context, id, dir string) (backend.SnapshotRecord, error) {
	rec, err := b.load(id)
	if err != nil {
		return backend.SnapshotRecord{}, err
	}
	disk := filepath.Join(b.sandboxDir(id), diskImage)
	if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve+backend.DiskUsage(disk)); err != nil {
		return backend.SnapshotRecord{}, fmt.Errorf("vm: snapshot of sandbox %s would take the node's free space below its reserve: %w", id, err)
	}
	if err := b.copyDisk(ctx, rec, disk, filepath.Join(dir, diskImage)); err != nil {
		return backend.SnapshotRecord{}, err
	}
	return backend.SnapshotRecord{Source: id, Storage: rec.Storage, Info: backend.SnapshotInfo{
		Isolation:  backend.IsolationOf(rec.Spec),
		LayerBytes: rec.Storage.LayerBytes,
		Bytes:      backend.DiskUsage(dir),
		Note:       "a VM's snapshot keeps its disk, not its memory: its kernel holds its pile mounted, and each fork has a pile of its own",
	}}, nil
}

// copyDisk copies the sandbox's disk to dst: a running guest syncs its
// file systems and is stopped (QEMU's stop: no instruction runs) while it
// is copied, and goes on after. The caller holds the sandbox's lock.
func (b *Backend) copyDisk(ctx context.Context, rec *record, disk, dst string) error {
	v, err := b.running(ctx, rec, false)
	if errors.Is(err, backend.ErrNotRunning) {
		return backend.CopyPreserving(ctx, disk, dst)
	}
	if err != nil {
		return err
	}
	b.sync(ctx, v)
	q, err := v.dialQMP(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	if _, err := q.execute("stop", nil); err != nil {
		return err
	}
	err = backend.CopyPreserving(ctx, disk, dst)
	if _, cerr := q.execute("cont", nil); cerr != nil {
		return errors.Join(err, fmt.Errorf("vm: sandbox %s stays stopped after its snapshot: %w", rec.Spec.ID, cerr))
	}
	return err
}

// forkDisk gives a sandbox provisioned anew from snapshot snapID the
// snapshot's disk, at dst, and returns its limits. The caller holds the
// sandbox's lock.
func (b *Backend) forkDisk(ctx context.Context, spec backend.Spec, dst string) (backend.Storage, error) {
	snap, dir, unlock, err := b.snapshots().Open(spec.FromSnapshot)
	if err != nil {
		return backend.Storage{}, err
	}
	defer unlock()
	if got, want := backend.IsolationOf(spec), snap.Info.Isolation; got != want {
		return backend.Storage{}, fmt.Errorf("vm: sandbox %s asks for isolation %s, but snapshot %s is of one with %s", spec.ID, got, spec.FromSnapshot, want)
	}
	return snap.Storage, backend.CopyPreserving(ctx, filepath.Join(dir, diskImage), dst)
}
