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
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Snapshots and forks (backend.Snapshotter). A snapshot is a directory of
// the node's, <state>/snapshots/<id>, root's and nobody else's, holding:
//
//   - the sandbox's writable layer (home, workspace, /tmp): its image,
//     copied with `cp --reflink=auto --sparse=always`, so that on a
//     filesystem with reflinks (XFS, Btrfs) the copy shares the source's
//     blocks until either writes, and elsewhere (ext4) takes only the
//     blocks the sandbox used;
//   - for a gVisor sandbox that can be checkpointed (checkpoint.go), its
//     memory: the sandbox is checkpointed, its layer copied while nothing
//     runs, and restored at once, so that files and memory are of the same
//     moment (the sandbox is away for the checkpoint, the copies and the
//     restore: a fraction of a second for a small one);
//   - snapshot.json: what the snapshot is and the host IDs its files are
//     owned by.
//
// Otherwise (runc, or a gVisor sandbox that cannot be checkpointed) the
// snapshot holds the files only: a running sandbox is paused (the cgroup
// freezer) while its layer is synced and copied, so that they are of one
// moment too.
//
// A fork is a sandbox provisioned with Spec.FromSnapshot: its layer is a
// copy of the snapshot's (as above), its files moved to its own host ID
// range, and where the snapshot holds memory its first start restores the
// snapshot's processes instead of starting init. Its pile is its own.

// snapshotFile is a snapshot's record, in its snapshot.json.
type snapshotFile struct {
	backend.SnapshotRecord
	// RootUID is the host ID of the source's root: its files are owned by
	// IDs from there, which a fork moves to its own range.
	RootUID int `json:"rootUID"`
}

// snapshots is the backend's Snapshotter.
func (b *Backend) snapshots() backend.Snapshots[snapshotFile] {
	return backend.NewSnapshots(b.opts.StateDir, &b.locks, b.takeSnapshot)
}

// takeSnapshot copies sandbox id, its layer and where it can its memory,
// into dir (backend.Snapshots.Take).
func (b *Backend) takeSnapshot(ctx context.Context, id, dir string) (snapshotFile, error) {
	sb, err := b.loadTenant(id)
	if err != nil {
		return snapshotFile{}, err
	}
	// The layer's copy takes at most what the layer uses: the node keeps
	// its reserve with it written.
	if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve+b.layerUsed(sb)); err != nil {
		return snapshotFile{}, fmt.Errorf("oci: snapshot of sandbox %s would take the node's free space below its reserve: %w", id, err)
	}
	root, _ := b.hostIDs(sb)
	f := snapshotFile{RootUID: root, SnapshotRecord: backend.SnapshotRecord{
		Source:  id,
		Storage: b.storage(sb.spec.Storage),
		Info: backend.SnapshotInfo{
			Isolation:  backend.IsolationOf(sb.spec),
			LayerBytes: b.storage(sb.spec.Storage).LayerBytes,
		},
	}}
	switch cerr := b.checkpointable(sb); {
	case cerr == nil:
		f.Info.Memory = true
		err = b.snapshotWithMemory(ctx, sb, dir)
	case errors.Is(cerr, backend.ErrNotRunning) && b.Checkpointed(id):
		// Suspended with its memory: the checkpoint and the layer are
		// still already.
		f.Info.Memory = true
		err = backend.CopyPreserving(ctx, b.checkpointDir(id), filepath.Join(dir, checkpointName))
		if err == nil {
			err = b.copyLayer(ctx, sb, dir)
		}
	case errors.Is(cerr, backend.ErrNoCheckpoint), errors.Is(cerr, backend.ErrNotRunning):
		f.Info.Note = cerr.Error()
		if errors.Is(cerr, backend.ErrNotRunning) {
			f.Info.Note = fmt.Sprintf("sandbox %s was not running: its files only", id)
		}
		err = b.snapshotFiles(ctx, sb, dir)
	default:
		err = cerr
	}
	f.Info.Bytes = backend.DiskUsage(dir)
	return f, err
}

// snapshotWithMemory checkpoints sb, copies its checkpoint and layer to
// dir, and restores it. The caller holds sb's lock.
func (b *Backend) snapshotWithMemory(ctx context.Context, sb *sandbox, dir string) error {
	id := sb.spec.ID
	if err := b.checkpointLocked(ctx, sb); err != nil {
		return err
	}
	// Stopped, its memory in the checkpoint and its layer unmounted: both
	// are still, and copied as they are.
	err := b.stopLocked(ctx, id)
	if err == nil {
		err = backend.CopyPreserving(ctx, b.checkpointDir(id), filepath.Join(dir, checkpointName))
	}
	if err == nil {
		err = b.copyLayer(ctx, sb, dir)
	}
	// Whatever the copies did, the sandbox goes on from its checkpoint.
	if serr := b.start(ctx, sb); serr != nil {
		return errors.Join(err, fmt.Errorf("oci: restoring sandbox %s after its snapshot: %w", id, serr))
	}
	return err
}

// snapshotFiles copies sb's layer to dir, sb's processes frozen
// meanwhile if it runs. The caller holds sb's lock.
func (b *Backend) snapshotFiles(ctx context.Context, sb *sandbox, dir string) error {
	id := sb.spec.ID
	rt := b.runtimeOf(id)
	cid := containerID(id)
	running := false
	if rt.exists(cid) {
		st, err := rt.state(ctx, cid)
		if err != nil {
			return fmt.Errorf("oci: snapshot of sandbox %s: %w", id, err)
		}
		switch st.Status {
		case "running":
			if err := rt.pause(ctx, cid); err != nil {
				return fmt.Errorf("oci: snapshot of sandbox %s: pausing it: %w", id, err)
			}
			defer func() { _ = rt.resume(context.WithoutCancel(ctx), cid) }()
			running = true
		case "paused":
			running = true
		}
	}
	layer := filepath.Join(sb.dir, layerName)
	if running && !b.opts.UnboundedStorage {
		// The node's mount of the layer shares the running container's
		// filesystem (disk.go): what the sandbox wrote reaches the image.
		if err := b.mountVolume(ctx, sb, b.volumes(sb)[0]); err != nil {
			return err
		}
		defer b.releaseVolumes(sb)
	}
	if mounted, _ := isMountPoint(layer); mounted {
		if err := syncDir(layer); err != nil {
			return fmt.Errorf("oci: snapshot of sandbox %s: syncing its layer: %w", id, err)
		}
	}
	return b.copyLayer(ctx, sb, dir)
}

// copyLayer copies sb's layer (its image, or its directory without disk
// limits) into dir.
func (b *Backend) copyLayer(ctx context.Context, sb *sandbox, dir string) error {
	name := layerName + imageSuffix
	if b.opts.UnboundedStorage {
		name = layerName
	}
	return backend.CopyPreserving(ctx, filepath.Join(sb.dir, name), filepath.Join(dir, name))
}

// layerUsed is the disk sb's layer takes on the node.
func (b *Backend) layerUsed(sb *sandbox) int64 {
	if b.opts.UnboundedStorage {
		return backend.DiskUsage(filepath.Join(sb.dir, layerName))
	}
	return backend.DiskUsage(filepath.Join(sb.dir, layerName+imageSuffix))
}

// fork makes sb, allocated for a spec with FromSnapshot and not yet
// prepared, a copy of the snapshot's layer; finishFork completes it once
// prepared. The caller holds sb's lock.
func (b *Backend) fork(ctx context.Context, sb *sandbox, snap snapshotFile, snapDir string) error {
	if got, want := backend.IsolationOf(sb.spec), snap.Info.Isolation; got != want {
		return fmt.Errorf("oci: sandbox %s asks for isolation %s, but snapshot %s is of a sandbox with isolation %s: a fork runs with its snapshot's", sb.spec.ID, got, sb.spec.FromSnapshot, want)
	}
	name := layerName + imageSuffix
	if b.opts.UnboundedStorage {
		name = layerName
	}
	src := filepath.Join(snapDir, name)
	if !backend.FileExists(src) {
		return fmt.Errorf("oci: snapshot %s holds no %s: it was taken by an agent with other disk limits", sb.spec.FromSnapshot, name)
	}
	return backend.CopyPreserving(ctx, src, filepath.Join(sb.dir, name))
}

// finishFork moves the files of sb's layer, mounted by prepare, to sb's
// host IDs, and gives sb the snapshot's memory to restore, if it has any.
func (b *Backend) finishFork(ctx context.Context, sb *sandbox, snap snapshotFile, snapDir string) error {
	root, _ := b.hostIDs(sb)
	if err := shiftOwners(filepath.Join(sb.dir, layerName), snap.RootUID, root); err != nil {
		return fmt.Errorf("oci: giving fork %s its files: %w", sb.spec.ID, err)
	}
	if !snap.Info.Memory || b.gvisor == nil {
		return nil
	}
	image := b.checkpointDir(sb.spec.ID)
	if err := os.RemoveAll(image); err != nil {
		return err
	}
	if err := backend.CopyPreserving(ctx, filepath.Join(snapDir, checkpointName), image); err != nil {
		return err
	}
	return ensureFile(filepath.Join(image, forkMarker), 0o600)
}

// forkMarker, in a sandbox's checkpoint, says the checkpoint is another
// sandbox's (a fork's first start): runsc's restore is told to let the
// spec differ where a fork's must (its host ID range, its mounts' node
// paths), and checks it still (forkRestoreFlags).
const forkMarker = "playground-fork"

// forkRestoreFlags: runsc compares the spec a checkpoint was taken with to
// the restore's, field by field; a fork's differs in its host ID mappings,
// which the sentry does not keep (it sees container IDs only). runsc logs
// the differences, in the fork's init.log, instead of refusing them.
var forkRestoreFlags = []string{"--restore-spec-validation=warning"}

// shiftOwners moves every file under dir owned by an ID of the range
// [from, from+idMapSize) to the same offset from to.
func shiftOwners(dir string, from, to int) error {
	if from == to {
		return nil
	}
	shift := func(id uint32) int {
		if int(id) >= from && int(id) < from+idMapSize {
			return int(id) - from + to
		}
		return int(id)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	// The files are the tenant's: walked and changed within dir only,
	// never through a symlink.
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner to read", p)
		}
		uid, gid := shift(st.Uid), shift(st.Gid)
		if uid == int(st.Uid) && gid == int(st.Gid) {
			return nil
		}
		if err := root.Lchown(p, uid, gid); err != nil {
			return err
		}
		// chown clears the setuid and setgid bits: they are the file's.
		if m := fi.Mode(); m&os.ModeSymlink == 0 && m&(os.ModeSetuid|os.ModeSetgid) != 0 {
			return root.Chmod(p, m&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky))
		}
		return nil
	})
}

// syncDir writes the filesystem holding dir to its device.
func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}
