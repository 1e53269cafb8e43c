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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/internal/atomicfile"
)

// Snapshots (backend.Snapshotter) of a VM hold its disk (home, workspace,
// /tmp), copied while the guest is stopped after a sync, under
// <state>/snapshots/<id>, the agent's alone. Not its memory: the guest's
// kernel holds its pile's filesystem mounted, and a fork has a pile of its
// own, which a restored kernel would take for the one it had mounted. A
// fork's disk is a copy of the snapshot's (sharing blocks where the
// filesystem has reflinks) and it boots afresh over it.

const (
	snapshotsDir     = "snapshots"
	snapshotMetaName = "snapshot.json"
)

// snapshotFile is a snapshot's snapshot.json.
type snapshotFile struct {
	Info backend.SnapshotInfo `json:"info"`
	// Source is the ID of the sandbox it is of.
	Source string `json:"source"`
	// Storage is the source's disk limits, which its image has.
	Storage backend.Storage `json:"storage"`
}

var _ backend.Snapshotter = (*Backend)(nil)

func (b *Backend) snapshotDir(snapID string) string {
	return filepath.Join(b.opts.StateDir, snapshotsDir, snapID)
}

func snapshotLock(snapID string) string { return "snapshot/" + snapID }

func (b *Backend) readSnapshot(snapID string) (snapshotFile, error) {
	var f snapshotFile
	data, err := os.ReadFile(filepath.Join(b.snapshotDir(snapID), snapshotMetaName))
	if errors.Is(err, os.ErrNotExist) {
		return f, fmt.Errorf("vm: snapshot %s: %w", snapID, backend.ErrNotFound)
	}
	if err != nil {
		return f, err
	}
	return f, json.Unmarshal(data, &f)
}

// Snapshot implements backend.Snapshotter.
func (b *Backend) Snapshot(ctx context.Context, id, snapID string) (backend.SnapshotInfo, error) {
	if err := backend.ValidateID(id); err != nil {
		return backend.SnapshotInfo{}, err
	}
	if err := backend.ValidateID(snapID); err != nil {
		return backend.SnapshotInfo{}, err
	}
	defer b.locks.Lock(id)()
	defer b.locks.Lock(snapshotLock(snapID))()
	if f, err := b.readSnapshot(snapID); err == nil {
		return f.Info, nil
	}
	rec, err := b.load(id)
	if err != nil {
		return backend.SnapshotInfo{}, err
	}
	disk := filepath.Join(b.sandboxDir(id), diskImage)
	if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve+backend.DiskUsage(disk)); err != nil {
		return backend.SnapshotInfo{}, fmt.Errorf("vm: snapshot of sandbox %s would take the node's free space below its reserve: %w", id, err)
	}
	dir := b.snapshotDir(snapID)
	tmp := dir + ".tmp"
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return backend.SnapshotInfo{}, err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return backend.SnapshotInfo{}, err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return backend.SnapshotInfo{}, err
	}
	if err := b.copyDisk(ctx, rec, disk, filepath.Join(tmp, diskImage)); err != nil {
		_ = os.RemoveAll(tmp)
		return backend.SnapshotInfo{}, err
	}
	f := snapshotFile{Source: id, Storage: rec.Storage, Info: backend.SnapshotInfo{
		Isolation:  backend.IsolationOf(rec.Spec),
		LayerBytes: rec.Storage.LayerBytes,
		Bytes:      backend.DiskUsage(tmp),
		Note:       "a VM's snapshot keeps its disk, not its memory: its kernel holds its pile mounted, and each fork has a pile of its own",
	}}
	data, err := json.MarshalIndent(f, "", "  ")
	if err == nil {
		err = atomicfile.Write(filepath.Join(tmp, snapshotMetaName), data, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return backend.SnapshotInfo{}, err
	}
	return f.Info, nil
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

// DeleteSnapshot implements backend.Snapshotter.
func (b *Backend) DeleteSnapshot(_ context.Context, snapID string) error {
	if err := backend.ValidateID(snapID); err != nil {
		return err
	}
	defer b.locks.Lock(snapshotLock(snapID))()
	dir := b.snapshotDir(snapID)
	if err := os.RemoveAll(dir + ".tmp"); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// Snapshots implements backend.Snapshotter.
func (b *Backend) Snapshots() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, snapshotsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// forkDisk gives a sandbox provisioned anew from snapshot snapID the
// snapshot's disk, at dst, and returns its limits. The caller holds the
// sandbox's lock.
func (b *Backend) forkDisk(ctx context.Context, spec backend.Spec, dst string) (backend.Storage, error) {
	defer b.locks.Lock(snapshotLock(spec.FromSnapshot))()
	snap, err := b.readSnapshot(spec.FromSnapshot)
	if err != nil {
		return backend.Storage{}, err
	}
	if got, want := backend.IsolationOf(spec), snap.Info.Isolation; got != want {
		return backend.Storage{}, fmt.Errorf("vm: sandbox %s asks for isolation %s, but snapshot %s is of one with %s", spec.ID, got, spec.FromSnapshot, want)
	}
	return snap.Storage, backend.CopyPreserving(ctx, filepath.Join(b.snapshotDir(spec.FromSnapshot), diskImage), dst)
}
