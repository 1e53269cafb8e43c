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
	"strconv"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Suspension with memory (backend.Suspender), for gVisor sandboxes: runsc
// checkpoints the whole sandbox (the sentry's memory, every process, open
// file and socket, the jobs its holders hold) to <sandbox>/checkpoint and
// the sandbox stops; the next start restores it from there instead of
// starting its init, and removes the image. A runc sandbox has no memory
// checkpoint here (CRIU would be needed, and the one Debian ships does not
// run on every kernel): Suspend says so (backend.ErrNoCheckpoint) and the
// agent stops it, keeping its files.
//
// The image takes at most the sandbox's memory limit of the node's disk:
// Suspend refuses (ErrNoCheckpoint) when that would take the node's free
// space below its reserve (Options.StorageReserve).
//
// What the checkpoint cannot save (guest/checkpoint_linux.go): a unix
// socket bound in a directory of the node's. Init closes its own before
// the checkpoint and opens them again after the restore; a tenant's, in
// its home, workspace, /tmp or pile, makes Suspend refuse (ErrNoCheckpoint,
// naming it). A sandbox with an egress list is not checkpointed either: its
// network stack holds the node's end of a veth pair that the restore would
// have to recreate as it was.

// checkpointName is the directory, in the sandbox's, of its checkpoint.
const checkpointName = "checkpoint"

func (b *Backend) checkpointDir(id string) string {
	return filepath.Join(b.sandboxDir(id), checkpointName)
}

// Checkpointed implements backend.Suspender.
func (b *Backend) Checkpointed(id string) bool {
	if backend.ValidateID(id) != nil {
		return false
	}
	return backend.FileExists(filepath.Join(b.checkpointDir(id), "checkpoint.img"))
}

// CheckpointIsolations implements backend.Suspender: gVisor's.
func (b *Backend) CheckpointIsolations() []string {
	return []string{backend.IsolationGVisor}
}

// Suspend implements backend.Suspender.
func (b *Backend) Suspend(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	sb, err := b.loadTenant(id)
	if err != nil {
		return err
	}
	if err := b.checkpointable(sb); errors.Is(err, backend.ErrNoCheckpoint) {
		return fmt.Errorf("%w; its processes are stopped and its files kept", err)
	} else if err != nil {
		return err
	}
	if err := b.checkpointLocked(ctx, sb); err != nil {
		return err
	}
	return b.stopLocked(ctx, id)
}

// checkpointable says why sb's memory cannot be checkpointed now
// (backend.ErrNoCheckpoint), or that its container does not run
// (backend.ErrNotRunning); nil when it can. The caller holds sb's lock.
func (b *Backend) checkpointable(sb *sandbox) error {
	id := sb.spec.ID
	if backend.IsolationOf(sb.spec) != backend.IsolationGVisor || b.gvisor == nil {
		return fmt.Errorf("%w: sandbox %s runs in a container on the node's kernel (runc), which has no memory checkpoint on this node", backend.ErrNoCheckpoint, id)
	}
	if hasEgress(sb) {
		return fmt.Errorf("%w: sandbox %s has an egress list, whose network a restore cannot yet recreate", backend.ErrNoCheckpoint, id)
	}
	if !b.gvisor.exists(containerID(id)) {
		return backend.ErrNotRunning
	}
	// The image is at most the sandbox's memory: the node keeps its
	// reserve of free space with the image written.
	memory := b.resources(sb.spec.Resources).MemoryBytes
	if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve+memory); err != nil {
		return fmt.Errorf("%w: sandbox %s's memory image (up to %s) would take the node's free space below its reserve: %w", backend.ErrNoCheckpoint, id, backend.HumanBytes(memory), err)
	}
	return nil
}

// checkpointLocked checkpoints sb, which checkpointable allows, to its
// checkpoint directory; its sentry exits once its state is saved, the
// container's state staying for the caller's stopLocked. An error leaves
// the sandbox running unless the checkpoint failed half-way, which ends
// it (then stopped here). The caller holds sb's lock.
func (b *Backend) checkpointLocked(ctx context.Context, sb *sandbox) error {
	id := sb.spec.ID
	if err := (guestexec.Control(b.controlConn)).Checkpoint(ctx, id); err != nil {
		return fmt.Errorf("oci: checkpointing sandbox %s: %w", id, err)
	}
	cid := containerID(id)
	image := b.checkpointDir(id)
	tmp := image + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return errors.Join(err, b.resumeInit(ctx, id))
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return errors.Join(err, b.resumeInit(ctx, id))
	}
	if _, err := b.gvisor.output(ctx, "checkpoint", "--image-path", tmp, b.gvisor.name(cid)); err != nil {
		_ = os.RemoveAll(tmp)
		if b.gvisor.exists(cid) && b.Alive(id) {
			// Refused before it saved anything: the sandbox runs on.
			return errors.Join(fmt.Errorf("oci: checkpointing sandbox %s: %w", id, err), b.resumeInit(ctx, id))
		}
		// Failed half-way, which ends the sandbox: what is left goes, as
		// in a Stop.
		return errors.Join(fmt.Errorf("oci: checkpointing sandbox %s, which ended it: %w", id, err), b.stopLocked(ctx, id))
	}
	if err := os.Rename(tmp, image); err != nil {
		return errors.Join(err, b.stopLocked(ctx, id))
	}
	return nil
}

// resumeInit tells the init of a running gVisor sandbox to listen again
// (guestapi.ResumeSignal): after a restore, or a checkpoint given up.
func (b *Backend) resumeInit(ctx context.Context, id string) error {
	if err := b.gvisor.signal(ctx, containerID(id), strconv.Itoa(int(guestapi.ResumeSignal))); err != nil {
		return fmt.Errorf("oci: telling the init of sandbox %s to listen again: %w", id, err)
	}
	return nil
}

// restore starts sb's container from its checkpoint, the image kept until
// the restored init listens; it returns false, having removed the image
// and whatever the attempt left, when the restore failed: the caller starts
// the sandbox afresh, its memory lost.
func (b *Backend) restore(ctx context.Context, sb *sandbox, rt *runc, logPath string, flags []string) (pid int, ok bool, err error) {
	id := sb.spec.ID
	cid := containerID(id)
	image := b.checkpointDir(id)
	pid, rerr := rt.restore(ctx, sb.dir, cid, logPath, image, flags...)
	if rerr == nil {
		if rerr = b.resumeInit(ctx, id); rerr == nil {
			if rerr = b.waitReady(ctx, sb, pid); rerr == nil {
				return pid, true, os.RemoveAll(image)
			}
		}
	}
	if ctx.Err() != nil {
		return 0, false, rerr
	}
	if rt.exists(cid) {
		retired := b.retireCPU(id, rt, cid)
		err := rt.delete(ctx, cid, true)
		retired(err == nil || !rt.exists(cid))
		if err != nil {
			return 0, false, errors.Join(rerr, err)
		}
	}
	// Said in the log the agent keeps of the sandbox's init, and counted
	// as a start by the caller, after which the agent ends the jobs.
	backend.AppendLog(logPath, fmt.Sprintf("restoring the sandbox from its checkpoint failed, so it starts afresh, its memory lost: %v\n", rerr))
	return 0, false, os.RemoveAll(image)
}
