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
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/internal/testbin"
)

// TestHeldJobsOnTheFake runs the conformance group of jobs that outlive
// the agent against the fake of FreeBSD's tools with the real job holder,
// built for this machine: the agent's side of the jail's job holding
// (JobConn, AttachJob's handed-over connection, ListJobs from the node,
// the run directory reset at start) and the holder's code, all of it but
// its FreeBSD process calls (process_freebsd.go: procctl's reaper, kqueue
// and PROC_REAP_KILL), which TestConformance runs on FreeBSD.
func TestHeldJobsOnTheFake(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the holder runs each job as the sandbox user: run this test as root")
	}
	guest, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	// Every process the suite leaves (its sentinels, started by exec
	// through the fake's reaper, and the jobs' escapees) stays this
	// process's descendant, and goes with the test, as with the jail on
	// FreeBSD; so do the escapees' files, in this machine's /tmp here.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killDescendants(os.Getpid())
		for {
			var ws unix.WaitStatus
			if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		escapees, _ := filepath.Glob("/tmp/escapee-*.pid")
		for _, e := range escapees {
			_ = os.Remove(e)
		}
	})
	nodes := map[string]*node{}
	conformance.Run(t, conformance.Harness{
		Groups: []string{"jobs-across-restarts"},
		NewStateDir: func(tb testing.TB) string {
			n := newNodeWith(t, guest)
			tb.Cleanup(n.fake.killHolders)
			nodes[n.state] = n
			return n.state
		},
		New: func(_ testing.TB, dir string) backend.Backend { return nodes[dir].over() },
	})
}

// killHolders kills every job holder the fake started, with its jobs: a
// test's end, as if the node went down.
func (f *fakeBSD) killHolders() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jails {
		for _, p := range j.procs {
			if p.holder {
				killTree(p.cmd.Process.Pid)
			}
		}
	}
}
