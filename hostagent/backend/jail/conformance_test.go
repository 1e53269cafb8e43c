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
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/conformance"
)

// TestConformance runs the suite every backend passes on real jails: on
// FreeBSD, as root, with rctl enabled (kern.racct.enable=1). Elsewhere it
// skips, saying so; the contract tests (jail_test.go) cover what this
// backend asks of FreeBSD against a fake of its tools.
func TestConformance(t *testing.T) {
	if runtime.GOOS != "freebsd" {
		t.Skip("the jail backend runs on FreeBSD only, this is " + runtime.GOOS + ": run go test ./hostagent/backend/jail/ as root on a FreeBSD node prepared as docs/freebsd.md says")
	}
	if os.Geteuid() != 0 {
		t.Skip("jails need root: run this test as root")
	}
	conformance.Run(t, conformance.Harness{
		NewStateDir: func(tb testing.TB) string {
			dir, err := os.MkdirTemp("", "pg-jail-node-")
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() {
				if b, err := New(Options{StateDir: dir}); err == nil {
					entries, _ := os.ReadDir(filepath.Join(dir, "jails"))
					for _, e := range entries {
						if err := b.Destroy(t.Context(), e.Name(), false); err != nil {
							tb.Errorf("cleanup: %v", err)
						}
					}
				}
				_ = os.RemoveAll(dir)
			})
			return dir
		},
		New: func(tb testing.TB, dir string) backend.Backend {
			b, err := New(Options{StateDir: dir})
			if err != nil {
				tb.Fatal(err)
			}
			return b
		},
		Leftovers: leftovers,
		Known: map[string]string{
			"faculties": "the jail backend refuses faculty bundles: not ported yet",
		},
	})
}

// leftovers lists what the node holds of sandbox id: its jail, its rctl
// rules, its mounts, its directories.
func leftovers(tb testing.TB, stateDir, id string) []string {
	tb.Helper()
	var left []string
	if err := exec.Command("/usr/sbin/jls", "-d", "-j", jailNameOf(id)).Run(); err == nil {
		left = append(left, "jail "+jailNameOf(id))
	}
	if out, err := exec.Command("/usr/bin/rctl", "jail:"+jailNameOf(id)+":").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		left = append(left, "rctl rules "+strings.TrimSpace(string(out)))
	}
	out, err := exec.Command("/sbin/mount", "-p").Output()
	if err != nil {
		tb.Fatalf("mount -p: %v", err)
	}
	dir := filepath.Join(stateDir, "jails", id)
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			left = append(left, "mount "+f[1])
		}
	}
	if _, err := os.Stat(dir); err == nil {
		left = append(left, "file "+dir)
	}
	return left
}
