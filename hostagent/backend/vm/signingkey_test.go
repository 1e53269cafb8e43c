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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// TestSigningKeyInImage installs keys into a provisioned sandbox whose VM
// never ran, without QEMU: the confined writer puts self.key into the
// pile's image (the tenant's, 0400), replaces a key the guest had made
// immutable, leaves the image as it found it and its file system sound,
// and a key kept for the next boot goes in the same way. As root, the
// writer runs as the sandbox's VM user, as the agent's does.
func TestSigningKeyInImage(t *testing.T) {
	for _, tool := range []string{"debugfs", "mkfs.ext4", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install e2fsprogs)", tool)
		}
	}
	debugfs, _ := exec.LookPath("debugfs")
	dir := newStateDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "sandboxes"), 0o700); err != nil {
		t.Fatal(err)
	}
	be := &Backend{
		opts: Options{
			StateDir: dir, GuestBinary: guestBinary(t), UIDBase: DefaultUIDBase,
			PileFiles: []string{"self.pile"}, StartTimeout: time.Minute,
		},
		debugfs: debugfs, dropped: os.Geteuid() == 0,
		vms: map[string]*VM{},
	}
	be.slots = be.newSlots()
	ctx := context.Background()
	spec := backend.Spec{ID: "keyed", Tenant: "t/keyed"}
	if err := be.Provision(ctx, spec); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(be.PileDir(spec.ID), pileImage)
	before, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	key1, key2 := strings.Repeat("0123456789abcdef", 4), strings.Repeat("fedcba9876543210", 4)

	if _, err := be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, "no-such-sandbox", []byte(key1)); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a key for an unknown sandbox: %v, want ErrNotFound", err)
	}
	backendtest.CheckMalformedKeysRefused(t, be.Capabilities().SigningKeyHolder, spec.ID, key1)

	type inode struct {
		mode     string
		uid, gid int
		flags    uint64
	}
	stat := func() inode {
		t.Helper()
		out, err := exec.Command(debugfs, "-R", "stat /"+guestapi.SigningKeyFile, img).CombinedOutput()
		if err != nil {
			t.Fatalf("debugfs stat: %v: %s", err, out)
		}
		m := regexp.MustCompile(`Mode:\s+(\d+)\s+Flags:\s+0x([0-9a-f]+)[\s\S]*User:\s+(\d+)\s+Group:\s+(\d+)`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("debugfs stat: %s", out)
		}
		in := inode{mode: m[1]}
		in.flags, _ = strconv.ParseUint(m[2], 16, 32)
		in.uid, _ = strconv.Atoi(m[3])
		in.gid, _ = strconv.Atoi(m[4])
		return in
	}
	check := func(want string) {
		t.Helper()
		if got, err := be.PileFile(spec.ID, guestapi.SigningKeyFile); err != nil || string(got) != want {
			t.Fatalf("self.key in the image: %q, %v; want %q", got, err, want)
		}
		if in := stat(); in.mode != "0400" || in.uid != guestapi.TenantUID || in.gid != guestapi.TenantGID {
			t.Errorf("self.key: mode %s, owner %d:%d; want 0400, the tenant's", in.mode, in.uid, in.gid)
		}
		after, err := os.Stat(img)
		if err != nil {
			t.Fatal(err)
		}
		if after.Mode() != before.Mode() {
			t.Errorf("the image's mode: %v, was %v", after.Mode(), before.Mode())
		}
		if out, err := exec.Command("e2fsck", "-fn", img).CombinedOutput(); err != nil {
			t.Errorf("e2fsck -fn: %v\n%s", err, out)
		}
	}

	live, err := be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, spec.ID, []byte(key1))
	if err != nil || !live {
		t.Fatalf("InstallSigningKey on a sandbox that never ran: %v, %v; want live", live, err)
	}
	check(key1)

	// As the guest seals it: immutable (the extents flag kept).
	if out, err := exec.Command(debugfs, "-w", "-R", fmt.Sprintf("sif /%s flags %#x", guestapi.SigningKeyFile, stat().flags|0x10), img).CombinedOutput(); err != nil {
		t.Fatalf("debugfs sif: %v: %s", err, out)
	}
	if flags := stat().flags; flags&0x10 == 0 {
		t.Fatalf("self.key's flags %#x: not immutable", flags)
	}
	if live, err := be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, spec.ID, []byte(key2)); err != nil || !live {
		t.Fatalf("InstallSigningKey over an immutable key: %v, %v; want live", live, err)
	}
	check(key2)

	// A key kept for the next boot (as while the VM ran) goes in before
	// QEMU starts, and is dropped.
	staged := filepath.Join(be.PileDir(spec.ID), stagedKeyFile)
	if err := os.WriteFile(staged, []byte(key1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := be.installStagedKey(spec.ID); err != nil {
		t.Fatal(err)
	}
	check(key1)
	if backend.FileExists(staged) {
		t.Errorf("%s is left after its boot", staged)
	}
	if err := be.installStagedKey(spec.ID); err != nil {
		t.Errorf("a boot with no key kept: %v", err)
	}
	// One that is not a key fails the boot, and changes nothing.
	if err := os.WriteFile(staged, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := be.installStagedKey(spec.ID); err == nil || strings.Contains(err.Error(), "not a key\"") {
		t.Errorf("a malformed key kept for the boot: %v, want an error", err)
	}
	check(key1)
}
