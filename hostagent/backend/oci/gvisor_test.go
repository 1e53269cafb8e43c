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
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/conformance"
)

// TestConformanceGVisor runs the suite on sandboxes of gVisor isolation:
// the same backend, with runsc ($PLAYGROUND_RUNSC, else built by
// hack/runsc.sh) as their runtime.
func TestConformanceGVisor(t *testing.T) {
	runsc := requireRunsc(t)
	conformance.Run(t, conformance.Harness{
		NewStateDir: newStateDir,
		New:         func(tb testing.TB, dir string) backend.Backend { return newGVisorBackend(tb, dir, runsc) },
		Leftovers: func(tb testing.TB, stateDir, id string) []string {
			return append(leftovers(tb, stateDir, id), gvisorLeftovers(tb, stateDir, id)...)
		},
		Isolation: backend.IsolationGVisor,
		// What gVisor cannot give; docs/isolation.md names both.
		Known: map[string]string{
			"pile/append-only": "gVisor emulates O_APPEND with positioned writes through a file opened without it, which the pile's append-only flag on the node refuses: the pile is read-only in a gVisor sandbox",
			"limits/memory":    "gVisor has no OOM killer of its own: past its memory limit the node's OOM killer ends the sentry, the whole sandbox, which the agent starts again over its files",
		},
	})
}

var (
	runscOnce   sync.Once
	runscPath   string
	runscReason string
)

// requireRunsc returns the runsc to test with, or skips the test saying
// why there is none.
func requireRunsc(tb testing.TB) string {
	tb.Helper()
	requireRunc(tb)
	runscOnce.Do(func() {
		if p := os.Getenv("PLAYGROUND_RUNSC"); p != "" {
			runscPath = p
			return
		}
		// The package is hostagent/backend/oci: the script is three up.
		out, err := exec.Command("../../../hack/runsc.sh").Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = strings.TrimSpace(string(ee.Stderr))
			}
			runscReason = "runsc could not be built (hack/runsc.sh): " + err.Error() + ": " + stderr
			return
		}
		runscPath = strings.TrimSpace(string(out))
	})
	if runscPath == "" {
		tb.Skip(runscReason)
	}
	return runscPath
}

func newGVisorBackend(tb testing.TB, stateDir, runsc string) *Backend {
	tb.Helper()
	b, err := New(Options{StateDir: stateDir, GuestBinary: guestBinary, Runtime: testRuntime, GVisorRuntime: runsc})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// gvisorLeftovers lists what runsc still holds of sandbox id: its state
// and lock files under its root (`runsc list` reads the same files).
func gvisorLeftovers(tb testing.TB, stateDir, id string) []string {
	tb.Helper()
	var left []string
	matches, err := filepath.Glob(filepath.Join(stateDir, "runsc", containerID(id)+"+*"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range matches {
		left = append(left, "runsc state "+m)
	}
	return left
}
