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

// Package ocitest gives other packages' tests real oci backends: runc
// containers on this machine, each backend with its own state directory (a
// "node"). The tests need root; without it they skip, and without runc they
// fail, since `make test` installs it.
package ocitest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/internal/testbin"
)

// Require skips tb unless it can run real containers.
func Require(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("real oci sandboxes need root (user namespaces, cgroups, chattr)")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		tb.Fatal("runc is not installed: run make prereqs (or apt-get install runc)")
	}
}

// GuestBinary returns the static playground-sandbox binary, built once.
func GuestBinary(tb testing.TB) string {
	tb.Helper()
	p, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// StateDir makes a node's state directory that sandboxes' unprivileged
// roots can traverse, and destroys whatever the test left in it.
func StateDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pg-node-")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		tb.Fatal(err)
	}
	guest := GuestBinary(tb)
	tb.Cleanup(func() {
		// With runsc when there is one, so that gVisor sandboxes go too.
		if b, err := oci.New(oci.Options{StateDir: dir, GuestBinary: guest, GVisorRuntime: os.Getenv(RunscEnv)}); err == nil {
			if err := b.DestroyAll(context.Background()); err != nil {
				tb.Errorf("cleanup: %v", err)
			}
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// New returns a backend over stateDir (a new one when empty).
func New(tb testing.TB, stateDir string) *oci.Backend {
	tb.Helper()
	Require(tb)
	if stateDir == "" {
		stateDir = StateDir(tb)
	}
	b, err := oci.New(oci.Options{StateDir: stateDir, GuestBinary: GuestBinary(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// RunscEnv names runsc for the tests that run gVisor sandboxes; make test
// sets it to hack/runsc.sh's build.
const RunscEnv = "PLAYGROUND_RUNSC"

// NewGVisor returns a backend over stateDir (a new one when empty) that
// also runs sandboxes of gVisor isolation, with $PLAYGROUND_RUNSC; without
// it the test skips.
func NewGVisor(tb testing.TB, stateDir string) *oci.Backend {
	tb.Helper()
	Require(tb)
	runsc := os.Getenv(RunscEnv)
	if runsc == "" {
		tb.Skip("gVisor sandboxes need runsc: set " + RunscEnv + " (make runsc prints one; make test sets it)")
	}
	if stateDir == "" {
		stateDir = StateDir(tb)
	}
	b, err := oci.New(oci.Options{StateDir: stateDir, GuestBinary: GuestBinary(tb), GVisorRuntime: runsc})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
