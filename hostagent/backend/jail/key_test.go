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

package jail

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

var (
	testKey1 = strings.Repeat("0123456789abcdef", 4)
	testKey2 = strings.Repeat("fedcba9876543210", 4)
)

// recordChown makes the node's chown(2) a line of the fake's record, so
// that its place among chflags(1) and rename(2) is checked.
func (n *node) recordChown() {
	n.b.chown = func(p string, uid, gid int) error {
		n.fake.mu.Lock()
		defer n.fake.mu.Unlock()
		n.fake.calls = append(n.fake.calls, "chown(2) "+strconv.Itoa(uid)+":"+strconv.Itoa(gid)+" "+p)
		return nil
	}
}

// TestSigningKey: the key is written from the host into the pile
// directory the jail's /pile is a nullfs mount of, given to the tenant,
// renamed over self.key and flagged schg, in that order; a second key
// clears the first one's schg before it is handed over and its rename
// replaces the first (the fake's
// rename refuses to replace a flagged file, as FreeBSD's does). The
// chflags(1) lines are the fake's (fake_test.go); the rename is the
// fake's stand-in for FreeBSD's rename(2) and its EPERM on flagged files.
func TestSigningKey(t *testing.T) {
	n := newNode(t)
	n.up()
	n.recordChown()
	ctx := context.Background()
	pile := n.b.PileDir(testID)
	key, tmp := pile+"/"+guestapi.SigningKeyFile, pile+"/."+guestapi.SigningKeyFile+".new"
	n.fake.take()

	live, err := n.b.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, testID, []byte(testKey1))
	if err != nil || !live {
		t.Fatalf("InstallSigningKey: live %v, %v; want live", live, err)
	}
	want := []string{
		"chown(2) 1000:1000 " + tmp,
		"rename(2) " + tmp + " " + key,
		"chflags schg " + key,
	}
	if got := n.fake.take(); !slices.Equal(got, want) {
		t.Fatalf("installing the first key ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkKey := func(t *testing.T, want string) {
		t.Helper()
		data, err := os.ReadFile(key)
		if err != nil || string(data) != want {
			t.Fatalf("self.key: %v; want the key installed", err)
		}
		if fi, err := os.Lstat(key); err != nil || fi.Mode() != 0o400 {
			t.Fatalf("self.key's mode: %v, %v; want a regular file 0400", fi.Mode(), err)
		}
		if !n.fake.flagged(key, "schg") || n.fake.flagged(key, "sappnd") {
			t.Fatal("self.key is not schg (and schg only)")
		}
		if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
			t.Fatalf("the temporary file is left: %v", err)
		}
	}
	checkKey(t, testKey1)
	// What the jail sees through its nullfs mount of the pile.
	if got := n.fake.resolve(n.fake.jails["playground_"+testID], guestapi.PileDir+"/"+guestapi.SigningKeyFile); got != key {
		t.Fatalf("the jail's %s/%s is %s, not the key's %s", guestapi.PileDir, guestapi.SigningKeyFile, got, key)
	}

	live, err = n.b.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, testID, []byte(testKey2))
	if err != nil || !live {
		t.Fatalf("replacing the key: live %v, %v", live, err)
	}
	want = []string{
		"chflags nosappnd,noschg " + key,
		"chown(2) 1000:1000 " + tmp,
		"rename(2) " + tmp + " " + key,
		"chflags schg " + key,
	}
	if got := n.fake.take(); !slices.Equal(got, want) {
		t.Fatalf("replacing the key ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkKey(t, testKey2)

	// Provisioned again (Reattach after a reboot does it): the pile's
	// sealing touches its own files, not the key.
	if err := n.b.Stop(ctx, testID); err != nil {
		t.Fatal(err)
	}
	if err := n.b.Provision(ctx, spec()); err != nil {
		t.Fatal(err)
	}
	for _, c := range n.fake.take() {
		if strings.Contains(c, guestapi.SigningKeyFile) {
			t.Errorf("provisioning touched the key: %s", c)
		}
	}
	checkKey(t, testKey2)

	// A stopped jail's pile takes a key too: it is there, the sandbox's.
	if live, err := n.b.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, testID, []byte(testKey1)); err != nil || !live {
		t.Fatalf("a key for a stopped jail: live %v, %v", live, err)
	}
	checkKey(t, testKey1)

	// Destroy keeping the pile keeps the key as it is.
	if err := n.b.Destroy(ctx, testID, true); err != nil {
		t.Fatal(err)
	}
	checkKey(t, testKey1)
	// Without it, the key's schg is cleared with the pile's sappnd.
	n.up()
	if err := n.b.Destroy(ctx, testID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(key); !os.IsNotExist(err) || n.fake.flagged(key, "schg") {
		t.Fatalf("the key outlived its pile: %v", err)
	}
}

// TestSigningKeyRefusals: no sandbox, no key; a key that is not exactly
// 64 lowercase hex digits is refused without being quoted, and nothing is
// written.
func TestSigningKeyRefusals(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	if _, err := n.b.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, testID, []byte(testKey1)); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("a key for an unknown sandbox: %v; want ErrNotFound", err)
	}
	if _, err := n.b.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, "../x", []byte(testKey1)); err == nil {
		t.Fatal("a key for an invalid ID was taken")
	}
	n.up()
	n.fake.take()
	backendtest.CheckMalformedKeysRefused(t, n.b.Capabilities().SigningKeyHolder, testID, testKey1)
	if calls := n.fake.take(); len(calls) != 0 {
		t.Errorf("refused keys ran %q", calls)
	}
	if _, err := os.Lstat(filepath.Join(n.b.PileDir(testID), guestapi.SigningKeyFile)); !os.IsNotExist(err) {
		t.Errorf("a refused key was written: %v", err)
	}
	if _, err := New(Options{StateDir: t.TempDir(), PileFiles: []string{"self.pile", guestapi.SigningKeyFile}}); err == nil {
		t.Error("New took the signing key's name for a pile file, which provisioning would make appendable")
	}
}

// TestSigningKeyRenameRefused: when the rename fails, the old key is
// still the key, flagged schg again, and no temporary file is left.
func TestSigningKeyRenameRefused(t *testing.T) {
	n := newNode(t)
	n.up()
	ctx := context.Background()
	if _, err := n.b.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, testID, []byte(testKey1)); err != nil {
		t.Fatal(err)
	}
	pile := n.b.PileDir(testID)
	key := pile + "/" + guestapi.SigningKeyFile
	n.b.rename = func(string, string) error { return &os.LinkError{Op: "rename", Err: os.ErrPermission} }
	_, err := n.b.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, testID, []byte(testKey2))
	if err == nil || strings.Contains(err.Error(), testKey2) {
		t.Fatalf("a failed rename: %v", err)
	}
	if data, _ := os.ReadFile(key); string(data) != testKey1 || !n.fake.flagged(key, "schg") {
		t.Fatal("the old key is not kept, immutable")
	}
	if _, err := os.Lstat(pile + "/." + guestapi.SigningKeyFile + ".new"); !os.IsNotExist(err) {
		t.Fatalf("the temporary file is left: %v", err)
	}
}
