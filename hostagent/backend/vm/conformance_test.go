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
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/testbin"
)

// TestConformanceVM runs the suite every backend passes on real QEMU
// virtual machines, under TCG here (KVM does not work on this machine;
// the accelerator changes speed, not behaviour). Each VM boots in about
// ten seconds of emulation: the groups that need a VM of their own are
// what this test costs.
func TestConformanceVM(t *testing.T) {
	kernel, modules, root := vmImage(t)
	conformance.Run(t, vmHarness(kernel, modules, root, func(be *Backend) backend.Backend { return be }))
}

// vmHarness is the conformance suite's harness of VMs under TCG, each
// backend as wrap makes it of the vm backend.
func vmHarness(kernel, modules, root string, wrap func(*Backend) backend.Backend) conformance.Harness {
	return conformance.Harness{
		NewStateDir: newStateDir,
		New: func(tb testing.TB, dir string) backend.Backend {
			be, err := New(context.Background(), Options{
				StateDir: dir, GuestBinary: guestBinary(tb),
				Kernel: kernel, Modules: modules, Root: root, Accel: AccelTCG,
			})
			if err != nil {
				tb.Fatal(err)
			}
			return wrap(be)
		},
		Leftovers: leftovers,
		Known: map[string]string{
			"limits/memory": "a VM's memory bounds it as a whole: the guest kernel gives the tenant no limit of its own within it (docs/isolation.md, vm)",
			"faculties":     "the vm backend does not install faculty builds yet and refuses a spec that has them",
		},
	}
}

// newStateDir is a short state directory (the VMs' sockets are under it)
// whose VMs are stopped when the test ends.
func newStateDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pgvm")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, p := range qemuPIDFiles(dir) {
			if v, err := Attach(Config{Dir: filepath.Dir(p)}); err == nil {
				_ = v.Stop(5 * time.Second)
			}
		}
		// The cgroups of the sandboxes no test destroyed.
		b := &Backend{opts: Options{StateDir: dir}}
		for _, id := range sandboxIDs(dir) {
			b.removeCgroup(id)
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// sandboxIDs are the sandboxes a state directory holds.
func sandboxIDs(stateDir string) []string {
	ents, _ := os.ReadDir(filepath.Join(stateDir, "sandboxes"))
	var ids []string
	for _, e := range ents {
		ids = append(ids, e.Name())
	}
	return ids
}

func qemuPIDFiles(stateDir string) []string {
	m, _ := filepath.Glob(filepath.Join(stateDir, "sandboxes", "*", pidFile))
	return m
}

// leftovers lists what the node holds of sandbox id: its directory, and
// a QEMU whose pid file names it.
func leftovers(tb testing.TB, stateDir, id string) []string {
	tb.Helper()
	var left []string
	dir := filepath.Join(stateDir, "sandboxes", id)
	if backend.FileExists(dir) {
		left = append(left, "file "+dir)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), filepath.Join(dir, pidFile)) {
			left = append(left, "process "+filepath.Base(filepath.Dir(p)))
		}
	}
	return left
}

// guestBinary builds playground-sandbox once for the package's tests.
func guestBinary(tb testing.TB) string {
	tb.Helper()
	p, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestConformanceVMOnAnImage runs the suite on VMs whose root is an
// image's: a layer of the default root's files (the suite needs a whole
// userland, which no image pushed here would hold in reasonable time),
// copied out of it by debugfs, without anything of the guest's (its mount
// points, /.playground, /etc's links to the generated files), so that the
// disk built of it has them from the backend alone. Under TCG it takes as
// long as TestConformanceVM (16 minutes on a loaded 2-core machine), which
// make test runs already over the node's root: it runs with
// PLAYGROUND_VM_IMAGE_CONFORMANCE=1 (make conformance-vm-image);
// TestImageIsTheRoot is make test's check of a VM on an image.
func TestConformanceVMOnAnImage(t *testing.T) {
	if os.Getenv("PLAYGROUND_VM_IMAGE_CONFORMANCE") != "1" {
		t.Skip("the whole suite again under TCG; set PLAYGROUND_VM_IMAGE_CONFORMANCE=1 or run make conformance-vm-image")
	}
	kernel, modules, root := vmImage(t)
	layer, err := os.MkdirTemp("", "pgvm-image-layer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(layer) })
	if out, err := exec.Command("debugfs", "-R", "rdump / "+layer, root).CombinedOutput(); err != nil {
		t.Fatalf("copying the default root out: %v: %s", err, out)
	}
	for _, p := range []string{guestapi.Dir, guestapi.Workspace, guestapi.PileDir, guestapi.TenantHome, guestapi.FacultiesDir, "/run", "/tmp", "/dev", "/proc", "/sys"} {
		if err := os.RemoveAll(filepath.Join(layer, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range guestapi.EtcNames {
		if err := os.Remove(filepath.Join(layer, "etc", n)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	// rdump drops the sticky bit, which the image's /var/tmp has.
	if err := unix.Chmod(filepath.Join(layer, "var", "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	img := &backend.Image{Digest: "sha256:" + strings.Repeat("0c", 32), Layers: []string{layer}, Env: []string{"FROM_IMAGE=1"}}
	// The harness's restarted agent closes the previous backend, whose
	// connection a VM's port would keep otherwise: OnImage closes it.
	conformance.Run(t, vmHarness(kernel, modules, root, func(be *Backend) backend.Backend {
		return backendtest.OnImage{Backend: be, Image: img}
	}))
}
