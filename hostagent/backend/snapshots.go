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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/playground-dev/playground/internal/atomicfile"
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
	data, err := os.ReadFile(filepath.Join(s.Path(id), snapshotRecord))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, record); err != nil {
		return fmt.Errorf("snapshot %s: %w", id, err)
	}
	return nil
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
