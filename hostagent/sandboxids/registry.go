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

// Package sandboxids assigns the IDs of a node's sandboxes and records, for
// each, the Sandbox that owns it.
//
// An ID is "sbx-" and 80 random bits: it says nothing of its tenant, and
// nobody can compute another tenant's. Which Sandbox (namespace/name) owns
// an ID is recorded on the node, one file per sandbox beside the sandboxes'
// state, written before the sandbox is provisioned and removed only when it
// is destroyed with its pile. The agent rebuilds its map from these files
// when it starts, so a restart, or a backup of the cluster restored without
// status, finds every sandbox's files again; the loss of one record orphans
// that sandbox only. A Sandbox re-created under the same name finds its
// retained pile through its record.
package sandboxids

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/playground-dev/playground/internal/atomicfile"
)

// Prefix starts every sandbox ID.
const Prefix = "sbx-"

// New returns a fresh random sandbox ID: Prefix and 20 hex digits.
func New() string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail; it crashes the program instead
	return Prefix + hex.EncodeToString(b[:])
}

// Valid reports whether s has the shape of a sandbox ID.
func Valid(s string) bool {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(rest) != 20 {
		return false
	}
	for i := range len(rest) {
		if c := rest[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Registry is the node's record of which Sandbox owns which ID. It is safe
// for concurrent use.
type Registry struct {
	dir string

	mu      sync.Mutex
	byOwner map[string]string
	owners  map[string]string // by ID
}

// Open reads the records in dir, creating it if need be.
func Open(dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox IDs: %w", err)
	}
	r := &Registry{dir: dir, byOwner: map[string]string{}, owners: map[string]string{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox IDs: reading the records: %w", err)
	}
	for _, e := range entries {
		id := e.Name()
		if !Valid(id) {
			if atomicfile.IsTemp(id) {
				_ = os.Remove(filepath.Join(dir, id)) // a write that a crash interrupted
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, id))
		if err != nil {
			return nil, fmt.Errorf("sandbox IDs: reading the record of %s: %w", id, err)
		}
		owner := strings.TrimSpace(string(data))
		if err := checkOwner(owner); err != nil {
			return nil, fmt.Errorf("sandbox IDs: the record of %s in %s: %w; move it away to orphan that sandbox", id, dir, err)
		}
		if other, dup := r.byOwner[owner]; dup {
			return nil, fmt.Errorf("sandbox IDs: %s owns both %s and %s in %s; remove the record of the one whose files are not its (look in their piles)", owner, other, id, dir)
		}
		r.byOwner[owner], r.owners[id] = id, owner
	}
	return r, nil
}

// checkOwner accepts namespace/name.
func checkOwner(owner string) error {
	ns, name, ok := strings.Cut(owner, "/")
	if !ok || ns == "" || name == "" || strings.ContainsAny(name, "/\n\x00") || strings.ContainsAny(ns, "\n\x00") {
		return fmt.Errorf("owner %q is not namespace/name", owner)
	}
	return nil
}

// Lookup returns the ID of owner's sandbox on this node; ok is false when
// there is none.
func (r *Registry) Lookup(owner string) (id string, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookupLocked(owner)
}

func (r *Registry) lookupLocked(owner string) (string, bool, error) {
	if err := checkOwner(owner); err != nil {
		return "", false, err
	}
	if id, ok := r.byOwner[owner]; ok {
		return id, true, nil
	}
	return "", false, nil
}

// Assign returns the ID of owner's sandbox, choosing and recording a new
// random one when it has none. The record is on disk when Assign returns.
func (r *Registry) Assign(owner string) (string, error) {
	id, _, err := r.AssignFrom(owner, nil)
	return id, err
}

// AssignFrom is Assign, with the new ID proposed by propose when owner has
// none (a warm sandbox's, say): used when it has the format of a random
// ID and no owner; a new random one otherwise. used says whether the
// proposal is owner's ID now: a caller that reserved it for owner takes it
// back when it is not. propose is not called when owner has an ID.
func (r *Registry) AssignFrom(owner string, propose func() string) (id string, used bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok, err := r.lookupLocked(owner); ok || err != nil {
		return id, false, err
	}
	if propose != nil {
		if p := propose(); Valid(p) && r.owners[p] == "" {
			id, used = p, true
		}
	}
	for id == "" || !used && r.owners[id] != "" {
		id = New()
	}
	if err := r.recordLocked(owner, id); err != nil {
		return "", false, err
	}
	return id, used, nil
}

// Owner returns the owner recorded for id.
func (r *Registry) Owner(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	owner, ok := r.owners[id]
	return owner, ok
}

// Record is one sandbox's record: its ID and the Sandbox that owns it.
type Record struct {
	ID, Owner string
}

// Records returns every record, ordered by owner.
func (r *Registry) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Record, 0, len(r.owners))
	for id, owner := range r.owners {
		out = append(out, Record{ID: id, Owner: owner})
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Owner, b.Owner) })
	return out
}

// Release forgets owner's sandbox: its ID will not be handed out again on
// this node, and a Sandbox of the same name gets a new one. Call it once
// the sandbox's files are gone.
func (r *Registry) Release(owner string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.byOwner[owner]
	if !ok {
		return nil
	}
	if err := os.Remove(filepath.Join(r.dir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox IDs: removing the record of %s: %w", id, err)
	}
	delete(r.byOwner, owner)
	delete(r.owners, id)
	return nil
}

// recordLocked writes owner's record for id durably.
func (r *Registry) recordLocked(owner, id string) error {
	if err := atomicfile.Write(filepath.Join(r.dir, id), []byte(owner+"\n"), 0o600); err != nil {
		return fmt.Errorf("sandbox IDs: recording %s as %s's: %w", id, owner, err)
	}
	r.byOwner[owner], r.owners[id] = id, owner
	return nil
}
