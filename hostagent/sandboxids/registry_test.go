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

package sandboxids

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playground-dev/playground/internal/atomicfile"
)

func open(t *testing.T, dir string) *Registry {
	t.Helper()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// IDs are random, reveal nothing of their owner, and outlive the agent:
// a registry opened again over the same directory gives every owner the
// ID it had.
func TestAssignIsRandomAndKept(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	a, err := r.Assign("team/alice")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte("team/alice")); !Valid(a) || a == Prefix+hex.EncodeToString(sum[:10]) {
		t.Fatalf("ID %q: want a random sbx- ID, not the hash of the owner", a)
	}
	if again, _ := r.Assign("team/alice"); again != a {
		t.Errorf("the same owner got %s, then %s", a, again)
	}
	b, _ := r.Assign("team/bob")
	if b == a {
		t.Fatal("two owners share an ID")
	}
	other := open(t, t.TempDir())
	if elsewhere, _ := other.Assign("team/alice"); elsewhere == a {
		t.Error("another node gave the same owner the same ID: IDs are computable")
	}

	reopened := open(t, dir)
	for owner, want := range map[string]string{"team/alice": a, "team/bob": b} {
		if id, ok, err := reopened.Lookup(owner); err != nil || !ok || id != want {
			t.Errorf("after a restart %s has %q (%v, %v), want %s", owner, id, ok, err, want)
		}
	}
	if owner, _ := reopened.Owner(b); owner != "team/bob" {
		t.Errorf("the owner of %s is %q", b, owner)
	}
}

// Release forgets an owner: the Sandbox re-created under its name gets a
// new ID, and the record is gone from disk.
func TestRelease(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	a, _ := r.Assign("team/alice")
	if err := r.Release("team/alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.Lookup("team/alice"); ok {
		t.Error("a released owner still has an ID")
	}
	if _, err := os.Stat(filepath.Join(dir, a)); !os.IsNotExist(err) {
		t.Errorf("the record of a released ID stays on disk: %v", err)
	}
	if again, _ := r.Assign("team/alice"); again == a {
		t.Error("the re-created owner got its released ID back")
	}
	if err := r.Release("team/nobody"); err != nil {
		t.Errorf("releasing an owner without an ID: %v", err)
	}
}

func TestBadRecords(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, atomicfile.TempPrefix+"123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir)
	if _, err := os.Stat(filepath.Join(dir, atomicfile.TempPrefix+"123")); !os.IsNotExist(err) {
		t.Error("an interrupted write was left behind")
	}
	for _, owner := range []string{"", "noslash", "/x", "x/", "a/b/c"} {
		if _, err := r.Assign(owner); err == nil {
			t.Errorf("owner %q was accepted", owner)
		}
	}
	a, _ := r.Assign("team/alice")
	if err := os.WriteFile(filepath.Join(dir, New()), []byte("team/alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), a) {
		t.Errorf("two records of one owner: %v; want an error naming both", err)
	}
}
