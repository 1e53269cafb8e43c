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

package backend

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/keyedmutex"
)

// SnapshotStore is where a backend keeps its snapshots (Snapshotter): a
// directory per snapshot under Dir, the node's and readable by no
// sandbox, written as <id>.tmp and renamed to <id> once whole, with the
// backend's record of it in snapshot.json. Callers hold the snapshot's
// lock (SnapshotLockKey) around each use.
type SnapshotStore struct {
	Dir string
}

// snapshotRecord is the file, in a snapshot's directory, of its record.
const snapshotRecord = "snapshot.json"

// SnapshotLockKey is a snapshot's key among a backend's per-sandbox locks
// (sandbox IDs never contain a slash).
func SnapshotLockKey(id string) string { return "snapshot/" + id }

// Path is snapshot id's directory.
func (s SnapshotStore) Path(id string) string { return filepath.Join(s.Dir, id) }

// Read reads a whole snapshot's record into record; ErrNotFound when
// there is none.
func (s SnapshotStore) Read(id string, record any) error {
	return ReadRecord(filepath.Join(s.Path(id), snapshotRecord), "snapshot "+id, record)
}

// Begin makes snapshot id's temporary directory, empty, and returns it:
// the backend copies into it, then Commit makes it the snapshot.
func (s SnapshotStore) Begin(id string) (string, error) {
	tmp := s.Path(id) + ".tmp"
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	return tmp, os.Mkdir(tmp, 0o700)
}

// Commit writes record into tmp (from Begin) and makes it snapshot id;
// on an error tmp goes.
func (s SnapshotStore) Commit(id, tmp string, record any) error {
	data, err := json.MarshalIndent(record, "", "  ")
	if err == nil {
		err = atomicfile.Write(filepath.Join(tmp, snapshotRecord), data, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, s.Path(id))
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
	}
	return err
}

// Delete removes snapshot id, whole or half-made; one that does not exist
// is deleted already.
func (s SnapshotStore) Delete(id string) error {
	if err := os.RemoveAll(s.Path(id) + ".tmp"); err != nil {
		return err
	}
	return os.RemoveAll(s.Path(id))
}

// List lists the whole snapshots.
func (s SnapshotStore) List() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
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

// SnapshotRecord is what a backend keeps of a snapshot in its store (its
// snapshot.json); a backend that needs more to fork it embeds it in a
// record of its own.
type SnapshotRecord struct {
	Info SnapshotInfo `json:"info"`
	// Source is the ID of the sandbox it was taken of.
	Source string `json:"source"`
	// Storage is the source's disk limits, which its copy has.
	Storage Storage `json:"storage"`
}

// SnapshotInfo implements Recorded.
func (r SnapshotRecord) SnapshotInfo() SnapshotInfo { return r.Info }

// Recorded is a backend's record of a snapshot: a SnapshotRecord, or a
// record of its own that embeds one.
type Recorded interface {
	SnapshotInfo() SnapshotInfo
}

// Snapshots is the Snapshotter of a backend that keeps its snapshots in a
// SnapshotStore (oci, vm): each backend gives it only its record's type R
// and how to copy a sandbox (Take). A backend puts it in its Capabilities.
type Snapshots[R Recorded] struct {
	Store SnapshotStore
	// Locks are the backend's per-sandbox locks: a snapshot is taken with
	// its sandbox's held, and every use of a snapshot holds its own
	// (SnapshotLockKey).
	Locks *keyedmutex.Mutex
	// Take copies sandbox id into dir, a new empty directory of the store,
	// and returns the record to keep (its Info's Bytes the disk dir takes);
	// the sandbox's lock and the snapshot's are held. ErrNotFound when
	// there is no such sandbox. On an error dir goes.
	Take func(ctx context.Context, id, dir string) (R, error)
}

// NewSnapshots is the Snapshotter of a backend whose state directory is
// stateDir: its snapshots under stateDir/snapshots.
func NewSnapshots[R Recorded](stateDir string, locks *keyedmutex.Mutex, take func(ctx context.Context, id, dir string) (R, error)) Snapshots[R] {
	return Snapshots[R]{Store: SnapshotStore{Dir: filepath.Join(stateDir, "snapshots")}, Locks: locks, Take: take}
}

// Snapshot implements Snapshotter.
func (s Snapshots[R]) Snapshot(ctx context.Context, id, snapID string) (SnapshotInfo, error) {
	if err := ValidateID(id); err != nil {
		return SnapshotInfo{}, err
	}
	if err := ValidateID(snapID); err != nil {
		return SnapshotInfo{}, err
	}
	defer s.Locks.Lock(id)()
	defer s.Locks.Lock(SnapshotLockKey(snapID))()
	var r R
	if err := s.Store.Read(snapID, &r); err == nil {
		return r.SnapshotInfo(), nil
	}
	tmp, err := s.Store.Begin(snapID)
	if err != nil {
		return SnapshotInfo{}, err
	}
	r, err = s.Take(ctx, id, tmp)
	if err == nil {
		err = s.Store.Commit(snapID, tmp, r)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return SnapshotInfo{}, err
	}
	return r.SnapshotInfo(), nil
}

// Open holds snapshot snapID, for a fork to copy it, until unlock; its
// record, and its directory in the store. ErrNotFound when there is none.
func (s Snapshots[R]) Open(snapID string) (r R, dir string, unlock func(), err error) {
	unlock = s.Locks.Lock(SnapshotLockKey(snapID))
	if err := s.Store.Read(snapID, &r); err != nil {
		unlock()
		return r, "", nil, err
	}
	return r, s.Store.Path(snapID), unlock, nil
}

// DeleteSnapshot implements Snapshotter.
func (s Snapshots[R]) DeleteSnapshot(_ context.Context, snapID string) error {
	if err := ValidateID(snapID); err != nil {
		return err
	}
	defer s.Locks.Lock(SnapshotLockKey(snapID))()
	return s.Store.Delete(snapID)
}

// Snapshots implements Snapshotter.
func (s Snapshots[R]) Snapshots() ([]string, error) { return s.Store.List() }
