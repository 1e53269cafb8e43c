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

package lima

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/internal/testbin"
)

// TestConformance runs the suite every backend passes, on real Lima VMs,
// wherever limactl is on the PATH (the fake is on the PATH only inside the
// contract tests). As root, $PLAYGROUND_LIMA_USER names the user limactl
// runs as; $PLAYGROUND_GUEST_BINARY the static guest binary (default:
// built from this tree).
func TestConformance(t *testing.T) {
	limactlPath, err := exec.LookPath("limactl")
	if err != nil {
		t.Skip("limactl is not installed: Lima is not obtainable on this machine")
	}
	var runAs *RunAs
	if os.Geteuid() == 0 {
		name := os.Getenv("PLAYGROUND_LIMA_USER")
		if name == "" {
			t.Fatal("limactl refuses to run as root: set PLAYGROUND_LIMA_USER to the user to run it as")
		}
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		runAs = &RunAs{UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	}
	guestBin := os.Getenv("PLAYGROUND_GUEST_BINARY")
	if guestBin == "" {
		if guestBin, err = testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox"); err != nil {
			t.Fatal(err)
		}
	}
	conformance.Run(t, conformance.Harness{
		NewStateDir: func(tb testing.TB) string {
			// Short: a sandbox's socket is under it (maxSocketPath).
			dir, err := os.MkdirTemp("", "pgl-")
			if err != nil {
				tb.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() {
				// Whatever the suite left: its instances and disks.
				l := &limactl{path: limactlPath, home: dir + "/lima"}
				if runAs != nil {
					l.cred, l.userDir = credOf(runAs), runAs.Home
				}
				c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				if entries, err := os.ReadDir(l.home); err == nil {
					for _, e := range entries {
						if e.IsDir() && e.Name()[0] != '_' {
							_, _ = l.run(c, nil, "delete", "--force", e.Name())
						}
					}
				}
				os.RemoveAll(dir)
			})
			return dir
		},
		New: func(tb testing.TB, stateDir string) backend.Backend {
			be, err := New(Options{StateDir: stateDir, Limactl: limactlPath, RunAs: runAs, GuestBinary: guestBin})
			if err != nil {
				tb.Fatal(err)
			}
			return be
		},
		Known: map[string]string{
			"pile/append-only":                    "the pile is the ext4 of a Lima disk: the host's PileDir holds the disk image, not the pile's files (the in-guest refusals are the kernel's chattr +a; see docs/lima.md)",
			"faculties":                           "the lima backend refuses Spec.Faculties (a Lima mount is fixed at limactl create)",
			"signing-key/read-only to the tenant": "it reads the key back from the host's PileDir, which holds the disk image, not the pile's files (the in-guest refusals are the kernel's chattr +i: TestGuestSide)",
		},
	})
}
