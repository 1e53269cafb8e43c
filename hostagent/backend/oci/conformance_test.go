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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/conformance"
)

// TestConformance runs the suite every backend passes, on real runc
// containers (or $PLAYGROUND_OCI_RUNTIME's).
func TestConformance(t *testing.T) {
	requireRunc(t)
	conformance.Run(t, conformance.Harness{
		NewStateDir: newStateDir,
		New:         func(tb testing.TB, dir string) backend.Backend { return newBackend(tb, dir) },
		Leftovers:   leftovers,
	})
}

// leftovers lists what the node holds of sandbox id: its container in
// runc's state, its directories, its mounts and loop devices, its cgroups.
func leftovers(tb testing.TB, stateDir, id string) []string {
	tb.Helper()
	var left []string
	out, err := exec.Command(testRuntime, "--root", filepath.Join(stateDir, "runc"), "list", "-q").Output()
	if err != nil {
		tb.Fatalf("%s list: %v", testRuntime, err)
	}
	for _, c := range strings.Fields(string(out)) {
		if c == containerID(id) {
			left = append(left, "container "+c)
		}
	}
	for _, p := range []string{filepath.Join(stateDir, "sandboxes", id), filepath.Join(stateDir, buildersDir, id), filepath.Join(stateDir, "runc", containerID(id))} {
		if backend.FileExists(p) {
			left = append(left, "file "+p)
		}
	}
	left = append(left, volumeMounts(tb, filepath.Join(stateDir, "sandboxes", id))...)
	parent, _ := cgroupDefaults(Options{StateDir: stateDir})
	for _, p := range cgroupDirs(filepath.Join(parent, containerID(id))) {
		if backend.FileExists(p) {
			left = append(left, "cgroup "+p)
		}
	}
	return left
}

// TestConformanceOnAnImage runs the suite on sandboxes whose system is an
// image: a layer of the node's own userland (the suite needs a whole one,
// which no image pushed here would hold in reasonable time), its /usr
// hard-linked, mounted and read as an image's layers are.
func TestConformanceOnAnImage(t *testing.T) {
	requireRunc(t)
	layer, err := os.MkdirTemp("", "pg-image-layer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(layer) })
	if out, err := exec.Command("cp", "-a", "-l", "/usr", filepath.Join(layer, "usr")).CombinedOutput(); err != nil {
		t.Skipf("hard-linking the node's /usr into a layer: %v: %s", err, out)
	}
	if err := os.Mkdir(filepath.Join(layer, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range DefaultEtcFiles {
		if src := filepath.Join("/etc", e); backend.FileExists(src) {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(layer, "etc", e)), 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("cp", "-a", src, filepath.Join(layer, "etc", e)).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		}
	}
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if target, err := os.Readlink(filepath.Join("/", d)); err == nil {
			if err := os.Symlink(target, filepath.Join(layer, d)); err != nil {
				t.Fatal(err)
			}
		} else if fi, err := os.Stat(filepath.Join("/", d)); err == nil && fi.IsDir() {
			t.Skipf("the node's /%s is no link into /usr: this test takes a merged-/usr node", d)
		}
	}
	img := &backend.Image{Digest: "sha256:" + strings.Repeat("0c", 32), Layers: []string{layer}, Env: []string{"FROM_IMAGE=1"}}
	conformance.Run(t, conformance.Harness{
		NewStateDir: newStateDir,
		New: func(tb testing.TB, dir string) backend.Backend {
			return backendtest.OnImage{Backend: newBackend(tb, dir), Image: img}
		},
		Leftovers: leftovers,
	})
}
