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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// small are limits that tests can reach in a second.
var small = backend.Storage{LayerBytes: 64 << 20, LayerInodes: 1024, PileBytes: 32 << 20, PileInodes: 256}

// enospc runs cmd, which must fail with "No space left on device".
func enospc(t *testing.T, b *Backend, id, cmd string) {
	t.Helper()
	r := run(t, b, id, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean})
	if r.Status.ExitCode == 0 || !strings.Contains(r.Stdout+r.Stderr, "No space left on device") {
		t.Fatalf("%q: want ENOSPC, got %+v, stdout %q, stderr %q", cmd, r.Status, r.Stdout, r.Stderr)
	}
}

// fillInodes creates empty files in a directory until the filesystem
// refuses one; it prints how many it made and the refusal.
const fillInodes = `mkdir -p %[1]s && i=0; while true > %[1]s/f$i; do i=$((i+1)); done 2>/tmp/.err || true; echo $i; cat /tmp/.err >&2; exit 1`

// volumeMounts lists the mounts and loop devices of a state directory.
func volumeMounts(t testing.TB, state string) []string {
	t.Helper()
	var found []string
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], state+"/") {
			found = append(found, "mount "+f[4])
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if data, err := os.ReadFile(l); err == nil && strings.HasPrefix(string(data), state+"/") {
			found = append(found, "loop "+strings.TrimSpace(string(data)))
		}
	}
	return found
}

// stopAllLeavesNothing stops every sandbox of b, whose state directory is
// state, and fails unless nothing of it is left mounted or attached.
func stopAllLeavesNothing(t *testing.T, b *Backend, state string) {
	t.Helper()
	if err := b.StopAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := volumeMounts(t, state); len(left) > 0 {
		t.Fatalf("StopAll left %q", left)
	}
}

// TestDiskLimits: a sandbox that fills its writable layer or its pile, in
// bytes or in inodes, gets ENOSPC inside, while a second sandbox on the
// node writes normally; the limits hold after the backend is re-created
// (an agent restart) and after StopAll, which leaves no mount or loop
// device behind.
func TestDiskLimits(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	b := newBackend(t, state)
	full := backend.Spec{ID: "full", Storage: small}
	startSandbox(t, b, full)
	startSandbox(t, b, backend.Spec{ID: "neighbour", Storage: small})

	t.Run("bytes", func(t *testing.T) {
		enospc(t, b, full.ID, "fallocate -l 100M "+guestapi.Workspace+"/big")
		// Every directory of the layer shares the one limit.
		sh(t, b, full.ID, "rm -f "+guestapi.Workspace+"/big; fallocate -l 40M ~/a")
		enospc(t, b, full.ID, "fallocate -l 30M /tmp/b")
		enospc(t, b, full.ID, "head -c 30M /dev/zero > "+guestapi.Workspace+"/c")
		if got := sh(t, b, "neighbour", "fallocate -l 40M "+guestapi.Workspace+"/big && head -c 1M /dev/zero > ~/d && echo ok"); got != "ok\n" {
			t.Fatalf("neighbour: %q", got)
		}
		sh(t, b, full.ID, "rm -f ~/a /tmp/b "+guestapi.Workspace+"/c")
	})

	t.Run("inodes", func(t *testing.T) {
		r := run(t, b, full.ID, backend.ExecRequest{Command: strings.ReplaceAll(fillInodes, "%[1]s", guestapi.Workspace+"/many"), Shell: backend.ShellClean})
		if !strings.Contains(r.Stderr, "No space left on device") {
			t.Fatalf("inode loop: stdout %q, stderr %q", r.Stdout, r.Stderr)
		}
		// ext4 rounds the inode count up to fill its tables: a little over 1024.
		if n, err := strconv.Atoi(strings.TrimSpace(r.Stdout)); err != nil || n < 900 || n > 1100 {
			t.Fatalf("created %q files before ENOSPC, want about 1024", r.Stdout)
		}
		if got := sh(t, b, "neighbour", "mkdir -p m && for i in $(seq 200); do : > m/f$i; done && ls m | wc -l"); got != "200\n" {
			t.Fatalf("neighbour: %q", got)
		}
		sh(t, b, full.ID, "rm -rf "+guestapi.Workspace+"/many")
	})

	t.Run("pile", func(t *testing.T) {
		enospc(t, b, full.ID, "head -c 40M /dev/zero >> "+guestapi.PileDir+"/self.pile")
		// Still append-only when full.
		if r := run(t, b, full.ID, backend.ExecRequest{Command: ": > " + guestapi.PileDir + "/self.pile", Shell: backend.ShellClean}); r.Status.ExitCode == 0 {
			t.Fatal("a full pile could be truncated")
		}
	})

	t.Run("the node still provisions", func(t *testing.T) {
		// The full sandbox filled its images, not the state directory: the
		// agent's own files and a new sandbox are unaffected.
		startSandbox(t, b, backend.Spec{ID: "later", Storage: small})
		if got := sh(t, b, "later", "echo ok > ~/f && cat ~/f"); got != "ok\n" {
			t.Fatalf("new sandbox: %q", got)
		}
	})

	t.Run("after an agent restart", func(t *testing.T) {
		b2 := newBackend(t, state)
		// The spec asks for more; the limits are fixed at provisioning.
		bigger := full
		bigger.Storage = backend.Storage{LayerBytes: 1 << 30, LayerInodes: 100000}
		if err := b2.Reattach(context.Background(), bigger); err != nil {
			t.Fatal(err)
		}
		enospc(t, b2, full.ID, "fallocate -l 100M "+guestapi.Workspace+"/big")
	})

	t.Run("after StopAll", func(t *testing.T) {
		stopAllLeavesNothing(t, b, state)
		b3 := newBackend(t, state)
		if err := b3.Reattach(context.Background(), full); err != nil {
			t.Fatal(err)
		}
		enospc(t, b3, full.ID, "fallocate -l 100M "+guestapi.Workspace+"/big")
		// The pile is the same filesystem, still full.
		enospc(t, b3, full.ID, "head -c 1M /dev/zero >> "+guestapi.PileDir+"/self.pile")
	})
}

// TestRunningVolumesOffTheNodeMountTable: a running sandbox's images are
// mounted in its container only, not in the node's mount table (where
// every runc process and every new container would read them); its files
// and pile are the same filesystem whenever the agent mounts them again
// (its tenant's work, read from the host), through the same loop device;
// a restart of its container mounts them again and releases them.
func TestRunningVolumesOffTheNodeMountTable(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	b := newBackend(t, state)
	spec := backend.Spec{ID: "offtable", Storage: small}
	startSandbox(t, b, spec)
	sh(t, b, spec.ID, "echo work > "+guestapi.Workspace+"/f; echo entry >> "+guestapi.PileDir+"/self.pile")

	onNode := func() (mounts, loops int) {
		for _, m := range volumeMounts(t, state) {
			if strings.HasPrefix(m, "mount ") {
				mounts++
			} else {
				loops++
			}
		}
		return mounts, loops
	}
	if m, l := onNode(); m != 0 || l != 2 {
		t.Fatalf("a running sandbox: %d mounts on the node (want 0), %d loop devices (want 2, held by its container): %q", m, l, volumeMounts(t, state))
	}
	if data, err := b.PileFile(spec.ID, "self.pile"); err != nil || string(data) != "entry\n" {
		t.Fatalf("PileFile of a running sandbox: %q, %v", data, err)
	}
	if err := b.InspectPile(spec.ID, func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "new"), nil, 0o644)
	}); !errors.Is(err, unix.EROFS) {
		t.Fatalf("InspectPile of a running sandbox is not read-only: %v", err)
	}
	for _, bad := range []string{"", "..", "../sandbox.json", "a/b"} {
		if _, err := b.PileFile(spec.ID, bad); err == nil {
			t.Errorf("PileFile(%q) succeeded", bad)
		}
	}
	// A Provision of the running sandbox (what a claim or a spec change
	// does) mounts its images on the node again: the same filesystem.
	if err := b.Provision(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(b.sandboxDir(spec.ID), layerName, "workspace", "f")); err != nil || string(data) != "work\n" {
		t.Fatalf("the layer mounted again on the node: %q, %v", data, err)
	}
	if m, l := onNode(); m != 2 || l != 2 {
		t.Fatalf("mounted again: %d mounts, %d loop devices on the node, want 2 and 2 (one device per image): %q", m, l, volumeMounts(t, state))
	}
	if err := b.Start(context.Background(), spec.ID); err != nil {
		t.Fatal(err)
	}
	if m, _ := onNode(); m != 0 {
		t.Fatalf("started: %d mounts left on the node", m)
	}
	if got := sh(t, b, spec.ID, "cat "+guestapi.Workspace+"/f"); got != "work\n" {
		t.Fatalf("after the agent's mount: %q", got)
	}
	// Stopped and started: the container's mounts went with it, and the
	// images are attached again for the new one.
	if err := b.Stop(context.Background(), spec.ID); err != nil {
		t.Fatal(err)
	}
	if left := volumeMounts(t, state); len(left) > 0 {
		t.Fatalf("Stop left %q", left)
	}
	if data, err := b.PileFile(spec.ID, "self.pile"); err != nil || string(data) != "entry\n" {
		t.Fatalf("PileFile of a stopped sandbox: %q, %v", data, err)
	}
	if left := volumeMounts(t, state); len(left) > 0 {
		t.Fatalf("PileFile of a stopped sandbox left %q", left)
	}
	startSandbox(t, b, spec)
	if got := sh(t, b, spec.ID, "cat "+guestapi.Workspace+"/f "+guestapi.PileDir+"/self.pile"); got != "work\nentry\n" {
		t.Fatalf("restarted: %q", got)
	}
	if m, l := onNode(); m != 0 || l != 2 {
		t.Fatalf("restarted: %d mounts, %d loop devices on the node", m, l)
	}
}

// TestDestroyReleasesVolumes: Destroy leaves no mount or loop device; a
// retained pile is its image, readable with InspectPile and adopted by the
// next sandbox of that ID.
func TestDestroyReleasesVolumes(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	b := newBackend(t, state)
	ctx := context.Background()
	spec := backend.Spec{ID: "kept", Storage: small}
	startSandbox(t, b, spec)
	sh(t, b, spec.ID, "echo entry >> /pile/self.pile; echo gone > ~/f")
	if err := b.Destroy(ctx, spec.ID, true); err != nil {
		t.Fatal(err)
	}
	if left := volumeMounts(t, state); len(left) > 0 {
		t.Fatalf("Destroy left %q", left)
	}
	if backend.FileExists(filepath.Join(b.sandboxDir(spec.ID), layerName+imageSuffix)) {
		t.Fatal("the writable layer's image survived Destroy")
	}
	var kept []byte
	if err := b.InspectPile(spec.ID, func(dir string) (err error) {
		kept, err = os.ReadFile(filepath.Join(dir, "self.pile"))
		return err
	}); err != nil || string(kept) != "entry\n" {
		t.Fatalf("retained pile: %q, %v", kept, err)
	}
	if left := volumeMounts(t, state); len(left) > 0 {
		t.Fatalf("InspectPile left %q", left)
	}
	startSandbox(t, b, spec)
	if got := sh(t, b, spec.ID, "cat /pile/self.pile; ls ~ | wc -l; ls -A /pile"); got != "entry\n0\nself.pile\n" {
		t.Fatalf("re-provisioned: %q", got)
	}
	if err := b.Destroy(ctx, spec.ID, false); err != nil {
		t.Fatal(err)
	}
	if left := volumeMounts(t, state); len(left) > 0 || backend.FileExists(b.sandboxDir(spec.ID)) {
		t.Fatalf("Destroy without keepPile left %q and the directory: %v", left, backend.FileExists(b.sandboxDir(spec.ID)))
	}
}

// TestStorageReserve: below the reserve, a new sandbox is refused with
// ErrInsufficientStorage; an existing one still reattaches.
func TestStorageReserve(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	startSandbox(t, newBackend(t, state), backend.Spec{ID: "before", Storage: small})
	b, err := New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, StorageReserve: 1 << 60})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Provision(context.Background(), backend.Spec{ID: "after", Storage: small})
	if !errors.Is(err, backend.ErrInsufficientStorage) || !strings.Contains(err.Error(), "below its reserve of") {
		t.Fatalf("provisioning below the reserve: %v", err)
	}
	if backend.FileExists(b.sandboxDir("after")) {
		t.Fatal("a refused sandbox left files")
	}
	if err := b.Reattach(context.Background(), backend.Spec{ID: "before", Storage: small}); err != nil {
		t.Fatalf("reattaching below the reserve: %v", err)
	}
}

// TestStorageValidation: limits the images cannot honour are refused
// before anything is made.
func TestStorageValidation(t *testing.T) {
	requireRunc(t)
	b := newBackend(t, newStateDir(t))
	for _, tc := range []struct {
		s    backend.Storage
		want string
	}{
		// Sizes read as a spec gives them (1Mi, not 1048576).
		{backend.Storage{LayerBytes: 1 << 20}, "the writable layer's size of 1Mi is below the minimum of 32Mi"},
		{backend.Storage{PileInodes: 10}, "below the minimum"},
		{backend.Storage{LayerBytes: 64 << 20, LayerInodes: 1 << 20}, "inodes exceed what 64Mi hold (one inode per 4Ki at most: 16384)"},
	} {
		if err := b.Provision(context.Background(), backend.Spec{ID: "bad", Storage: tc.s}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.s, err, tc.want)
		}
	}
	err := b.Provision(context.Background(), backend.Spec{ID: "bad", Resources: backend.Resources{MemoryBytes: 1024}})
	if want := "memory limit 1Ki is below the 32Mi a sandbox's init needs"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("memory of 1Ki: got %v, want %q", err, want)
	}
}

// TestFailsClosed: without loop devices or mkfs.ext4 the backend refuses
// to start and says why and what to do, unless disk limits are opted out
// of explicitly; then the layer and the pile are plain directories.
func TestFailsClosed(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	_, err := New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, Mkfs: "/nonexistent/mkfs.ext4"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install e2fsprogs") {
		t.Fatalf("without mkfs.ext4: %v", err)
	}
	loopControl = "/nonexistent/loop-control"
	t.Cleanup(func() { loopControl = "/dev/loop-control" })
	_, err = New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime})
	if err == nil || !strings.Contains(err.Error(), "disk limits need loop devices") || !strings.Contains(err.Error(), "--unbounded-storage") {
		t.Fatalf("without loop devices: %v", err)
	}
	b, err := New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, UnboundedStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	startSandbox(t, b, backend.Spec{ID: "unbounded", Storage: small})
	if got := sh(t, b, "unbounded", "echo x >> /pile/self.pile; echo y > ~/f; cat /pile/self.pile ~/f"); got != "x\ny\n" {
		t.Fatalf("unbounded sandbox: %q", got)
	}
	if backend.FileExists(filepath.Join(b.sandboxDir("unbounded"), layerName+imageSuffix)) || len(volumeMounts(t, state)) > 0 {
		t.Fatal("an unbounded sandbox has disk images")
	}
}

// BenchmarkProvision measures what disk limits cost a new sandbox:
// Provision (making and mounting the images, with the default 4 GiB and
// 512 MiB limits) and Start, against plain directories, and the disk the
// sandbox's directory then takes (disk-KiB/op, from allocated blocks).
func BenchmarkProvision(b *testing.B) {
	requireRunc(b)
	for _, unbounded := range []bool{false, true} {
		name := "images"
		if unbounded {
			name = "unbounded"
		}
		b.Run(name, func(b *testing.B) {
			state := newStateDir(b)
			be, err := New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, UnboundedStorage: unbounded})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var disk int64
			i := 0
			for b.Loop() {
				id := "p" + strconv.Itoa(i)
				i++
				if err := be.Provision(ctx, backend.Spec{ID: id}); err != nil {
					b.Fatal(err)
				}
				if err := be.Start(ctx, id); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				disk += duKiB(b, be.sandboxDir(id))
				if err := be.Destroy(ctx, id, false); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(disk)/float64(i), "disk-KiB/op")
		})
	}
}

// duKiB is the disk allocated to the files below dir, across mounts.
func duKiB(tb testing.TB, dir string) int64 {
	tb.Helper()
	var total int64
	seen := map[[2]uint64]bool{}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		var st unix.Stat_t
		if err != nil || unix.Lstat(p, &st) != nil {
			return nil //nolint:nilerr // a file gone or unreadable is not counted
		}
		key := [2]uint64{st.Dev, st.Ino}
		if seen[key] {
			return nil
		}
		seen[key] = true
		// Files inside the images count in the images' blocks already.
		if st.Dev != rootDev(dir) {
			return nil
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return total / 1024
}

func rootDev(dir string) uint64 {
	var st unix.Stat_t
	_ = unix.Lstat(dir, &st)
	return st.Dev
}
