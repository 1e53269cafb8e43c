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
	"fmt"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Snapshot records the sandbox of spec as snapshot snapID on its backend
// (backend.Snapshotter); taken already, it returns what was taken. A
// snapshot is a call to the sandbox: one asleep for idleness is woken
// first, and its held jobs are parked while a checkpoint takes it away for
// a moment, to go on after (their polls wait meanwhile).
func (a *Agent) Snapshot(ctx context.Context, spec backend.Spec, snapID string) (backend.SnapshotInfo, error) {
	be, err := a.backendFor(spec)
	if err != nil {
		return backend.SnapshotInfo{}, err
	}
	snap := be.Capabilities().Snapshotter
	if snap == nil {
		return backend.SnapshotInfo{}, errorf(CodeInvalid, "the %s backend of this node takes no snapshots", be.Name())
	}
	// A sandbox frozen for its usage limit (or asleep with it spent) is
	// not woken: its files are copied as they are, frozen; its memory,
	// which a checkpoint takes from a running sandbox, waits for its thaw.
	a.mu.Lock()
	var limit error
	if s, ok := a.sandboxes[spec.ID]; ok {
		limit = a.limitRefusalLocked(s)
		if limit != nil && s.limited && checkpoints(be, spec) {
			a.mu.Unlock()
			return backend.SnapshotInfo{}, fmt.Errorf("a snapshot with its memory needs the sandbox to run, and it is frozen: %w", limit)
		}
	}
	a.mu.Unlock()
	if limit == nil {
		_, done, err := a.awaken(ctx, spec.ID)
		if err != nil {
			return backend.SnapshotInfo{}, err
		}
		defer done()
	}
	// While its checkpoint takes it away, the sandbox is not dead: an
	// Ensure meanwhile does not end its jobs or report a restart (it waits
	// for the backend's lock, and finds it restored).
	a.mu.Lock()
	if s, ok := a.sandboxes[spec.ID]; ok {
		s.snapshots++
		defer func() {
			a.mu.Lock()
			s.snapshots--
			a.mu.Unlock()
		}()
	}
	a.mu.Unlock()
	defer a.jobs.ParkSandboxBriefly(spec.ID)()
	info, err := snap.Snapshot(ctx, spec.ID, snapID)
	if err != nil {
		return info, fmt.Errorf("snapshot %s of sandbox %s: %w", snapID, spec.ID, err)
	}
	a.opts.Logger.Info("Took a snapshot", "sandbox", spec.ID, "snapshot", snapID, "memory", info.Memory, "bytes", info.Bytes)
	return info, nil
}

// DeleteSnapshot frees snapshot snapID's disk on the backend of class;
// one that does not exist is deleted already.
func (a *Agent) DeleteSnapshot(ctx context.Context, class, snapID string) error {
	be, err := a.backendFor(backend.Spec{Backend: class})
	if err != nil {
		return err
	}
	snap := be.Capabilities().Snapshotter
	if snap == nil {
		return nil // it took none
	}
	return snap.DeleteSnapshot(ctx, snapID)
}

// Snapshots lists the snapshots kept on this node, by backend class.
func (a *Agent) Snapshots() (map[string][]string, error) {
	out := map[string][]string{}
	for _, be := range a.backends {
		if snap := be.Capabilities().Snapshotter; snap != nil {
			ids, err := snap.Snapshots()
			if err != nil {
				return nil, fmt.Errorf("listing the snapshots of backend %s: %w", be.Name(), err)
			}
			out[be.Name()] = ids
		}
	}
	return out, nil
}
