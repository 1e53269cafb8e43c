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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// running provisions spec on be and starts it, failing t if either fails.
func running(ctx context.Context, t *testing.T, be *Backend, spec backend.Spec) {
	t.Helper()
	if err := be.Provision(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := be.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
}

// newBackend is a backend over a new state directory that boots the
// test's image (vmImage, or skips) under TCG.
func newBackend(ctx context.Context, t *testing.T) *Backend {
	t.Helper()
	kernel, modules, root := vmImage(t)
	be, err := New(ctx, Options{StateDir: newStateDir(t), GuestBinary: guestBinary(t), Kernel: kernel, Modules: modules, Root: root, Accel: AccelTCG})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// vmImage returns hack/vm-image.sh's outputs, or skips: the boot test
// needs QEMU and the image, which `eval "$(hack/vm-image.sh)"` provides.
func vmImage(t *testing.T) (kernel, modules, root string) {
	t.Helper()
	kernel, modules, root = os.Getenv("PLAYGROUND_VM_KERNEL"), os.Getenv("PLAYGROUND_VM_MODULES"), os.Getenv("PLAYGROUND_VM_ROOT")
	if kernel == "" || modules == "" || root == "" {
		t.Skip("PLAYGROUND_VM_KERNEL, PLAYGROUND_VM_MODULES and PLAYGROUND_VM_ROOT are not set: run eval \"$(hack/vm-image.sh)\" first")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
	}
	return kernel, modules, root
}

func TestModuleOrderPutsDependenciesFirst(t *testing.T) {
	_, modules, _ := vmImage(t)
	order, err := ModuleOrder(modules)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range order {
		pos[m] = i
	}
	for _, dep := range [][2]string{
		{"virtio.ko", "virtio_pci.ko"},
		{"virtio_ring.ko", "virtio_blk.ko"},
		{"virtio_pci_modern_dev.ko", "virtio_pci.ko"},
		{"jbd2.ko", "ext4.ko"},
		{"mbcache.ko", "ext4.ko"},
		{"crc16.ko", "ext4.ko"},
	} {
		if pos[dep[0]] >= pos[dep[1]] {
			t.Errorf("order %v: %s does not come before %s", order, dep[0], dep[1])
		}
	}
}

// TestBootAndExec boots one VM under TCG with the guest binary as its
// init and runs commands over the virtio-serial port.
func TestBootAndExec(t *testing.T) {
	kernel, modules, root := vmImage(t)
	dir := t.TempDir()

	initrd := makeInitrd(t, dir, modules)
	disk := filepath.Join(dir, "disk.ext4")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "playground-disk", disk, "256M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}

	cfg := Config{
		Kernel: kernel, Initrd: initrd, Root: root, Disks: []string{disk},
		Dir: filepath.Join(dir, "vm"), Accel: AccelTCG, VCPUs: 1, MemoryMiB: 512,
	}
	start := time.Now()
	v, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := v.Stop(10 * time.Second); err != nil {
			t.Error(err)
		}
		// The console holds the guest's own timestamps of its boot stages.
		names := []string{consoleLog}
		if t.Failed() {
			names = append(names, "qemu.log")
		}
		for _, name := range names {
			b, _ := os.ReadFile(filepath.Join(cfg.Dir, name))
			t.Logf("%s:\n%s", name, b)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := v.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := v.Exec(ctx, "uname -r")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot to first exec under TCG: %v", time.Since(start).Round(time.Millisecond))

	want, err := os.ReadFile(filepath.Join(filepath.Dir(modules), "release"))
	if err != nil {
		t.Fatal(err)
	}
	var host unix.Utsname
	_ = unix.Uname(&host)
	got := strings.TrimSpace(string(res.Stdout))
	if got != strings.TrimSpace(string(want)) || res.Exit.ExitCode != 0 {
		t.Fatalf("uname -r in the guest: %q (exit %+v), want %q", got, res.Exit, want)
	}
	if got == unix.ByteSliceToString(host.Release[:]) {
		t.Fatalf("the guest reports the node's kernel %q", got)
	}

	t0 := time.Now()
	res, err = v.Exec(ctx, "echo out; echo err >&2; id -u; touch /workspace/f && echo written; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second exec: %v", time.Since(t0).Round(time.Millisecond))
	if string(res.Stdout) != "out\n1000\nwritten\n" || string(res.Stderr) != "err\n" || res.Exit.ExitCode != 3 {
		t.Fatalf("got stdout %q stderr %q exit %+v", res.Stdout, res.Stderr, res.Exit)
	}
	// An agent restart: a new connection to the running VM works.
	v.Disconnect()
	t0 = time.Now()
	if err := v.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := v.Exec(ctx, "cat /workspace/f && echo again"); err != nil || string(res.Stdout) != "again\n" {
		t.Fatalf("after reconnecting: %q, %v", res.Stdout, err)
	}
	t.Logf("reconnect and exec: %v", time.Since(t0).Round(time.Millisecond))

	// The root image is mounted read-only; workspace is the sandbox's disk.
	res, err = v.Exec(ctx, "awk '$2 == \"/\" || $2 == \"/workspace\" {print $1, $2, substr($4, 1, 2)}' /proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/dev/vda / ro\n/dev/vdb /workspace rw\n"; string(res.Stdout) != want {
		t.Fatalf("mounts: %q, want %q", res.Stdout, want)
	}
}

// makeInitrd builds the initramfs in dir.
func makeInitrd(t *testing.T, dir, modules string) string {
	t.Helper()
	initrd := filepath.Join(dir, "initrd.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteInitrd(f, guestBinary(t), modules); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return initrd
}

// TestProbeAccel boots a guest under KVM when /dev/kvm opens; whichever
// it picks, it says why, and TCG is never refused.
func TestProbeAccel(t *testing.T) {
	kernel, modules, root := vmImage(t)
	dir := t.TempDir()
	cfg := Config{
		Kernel: kernel, Initrd: makeInitrd(t, dir, modules), Root: root,
		Dir: filepath.Join(dir, "probe"), VCPUs: 1, MemoryMiB: 256,
	}
	start := time.Now()
	accel, reason := ProbeAccel(context.Background(), cfg, DefaultProbeTimeout)
	t.Logf("accelerator %s after %v: %s", accel, time.Since(start).Round(time.Millisecond), reason)
	if (accel != AccelKVM && accel != AccelTCG) || reason == "" {
		t.Fatalf("ProbeAccel: %q, %q", accel, reason)
	}
	if time.Since(start) > DefaultProbeTimeout+15*time.Second {
		t.Fatalf("the probe took %v", time.Since(start))
	}
}
