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
	"sync"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// Snapshots is the snapshot service: it takes and deletes the snapshots
// of sandboxes on their backends (backend.Snapshotter) and owns the count
// of snapshots in progress per sandbox, which the sandboxes and limits
// services ask (taking) before they take a sandbox for dead or freeze it.
type Snapshots struct {
	sandboxes snapshotSandboxes
	calls     snapshotCalls
	log       logr.Logger

	mu sync.Mutex
	// inProgress counts the snapshots in progress, by sandbox ID: a
	// checkpoint takes the sandbox away for a moment, which is not its
	// end.
	inProgress map[string]int
}

// snapshotSandboxes is what the snapshot service asks of the sandboxes
// service.
type snapshotSandboxes interface {
	Backends() []backend.Backend
	backendFor(spec backend.Spec) (backend.Backend, error)
	served(id string) (sandboxView, bool)
	parkBriefly(id string) (unpark func())
}

// snapshotCalls is what the snapshot service asks of the services that
// admit a call to a sandbox: its usage limit (the limiter) and its wake
// (the idle service).
type snapshotCalls interface {
	// limitRefusal is the answer to a call reaching sandbox id while its
	// usage limit is spent (nil: none), and whether it is frozen.
	limitRefusal(id string) (frozen bool, refusal error)
	awaken(ctx context.Context, id string) (context.Context, func(), error)
}

func newSnapshots(sandboxes snapshotSandboxes, calls snapshotCalls, log logr.Logger) *Snapshots {
	return &Snapshots{sandboxes: sandboxes, calls: calls, log: log, inProgress: map[string]int{}}
}

// taking says whether a snapshot of sandbox id is in progress.
func (sn *Snapshots) taking(id string) bool {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.inProgress[id] > 0
}

// begin counts a snapshot of sandbox id in progress, until its end.
func (sn *Snapshots) begin(id string) (end func()) {
	sn.mu.Lock()
	sn.inProgress[id]++
	sn.mu.Unlock()
	return func() {
		sn.mu.Lock()
		defer sn.mu.Unlock()
		sn.inProgress[id]--
		if sn.inProgress[id] <= 0 {
			delete(sn.inProgress, id)
		}
	}
}

// Snapshot records the sandbox of spec as snapshot snapID on its backend
// (backend.Snapshotter); taken already, it returns what was taken. A
// snapshot is a call to the sandbox: one asleep for idleness is woken
// first, and its held jobs are parked while a checkpoint takes it away for
// a moment, to go on after (their polls wait meanwhile).
func (sn *Snapshots) Snapshot(ctx context.Context, spec backend.Spec, snapID string) (backend.SnapshotInfo, error) {
	be, err := sn.sandboxes.backendFor(spec)
	if err != nil {
		return backend.SnapshotInfo{}, err
	}
	snap := be.Capabilities().Snapshotter
	if snap == nil {
		return backend.SnapshotInfo{}, errorf(agentapi.CodeInvalid, "the %s backend of this node takes no snapshots", be.Name())
	}
	// A sandbox frozen for its usage limit (or asleep with it spent) is
	// not woken: its files are copied as they are, frozen; its memory,
	// which a checkpoint takes from a running sandbox, waits for its thaw.
	frozen, limit := sn.calls.limitRefusal(spec.ID)
	if limit != nil && frozen && checkpoints(be, spec) {
		return backend.SnapshotInfo{}, fmt.Errorf("a snapshot with its memory needs the sandbox to run, and it is frozen: %w", limit)
	}
	if limit == nil {
		_, done, err := sn.calls.awaken(ctx, spec.ID)
		if err != nil {
			return backend.SnapshotInfo{}, err
		}
		defer done()
	}
	// While its checkpoint takes it away, the sandbox is not dead: an
	// Ensure meanwhile does not end its jobs or report a restart (it waits
	// for the backend's lock, and finds it restored).
	if _, ok := sn.sandboxes.served(spec.ID); ok {
		defer sn.begin(spec.ID)()
	}
	defer sn.sandboxes.parkBriefly(spec.ID)()
	info, err := snap.Snapshot(ctx, spec.ID, snapID)
	if err != nil {
		return info, fmt.Errorf("snapshot %s of sandbox %s: %w", snapID, spec.ID, err)
	}
	sn.log.Info("Took a snapshot", "sandbox", spec.ID, "snapshot", snapID, "memory", info.Memory, "bytes", info.Bytes)
	return info, nil
}

// DeleteSnapshot frees snapshot snapID's disk on the backend of class;
// one that does not exist is deleted already.
func (sn *Snapshots) DeleteSnapshot(ctx context.Context, class, snapID string) error {
	be, err := sn.sandboxes.backendFor(backend.Spec{Backend: class})
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
func (sn *Snapshots) Snapshots() (map[string][]string, error) {
	out := map[string][]string{}
	for _, be := range sn.sandboxes.Backends() {
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
