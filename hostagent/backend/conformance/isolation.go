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

package conformance

import (
	"fmt"
	"testing"

	"github.com/playground-dev/playground/hostagent/guest"
)

// testIsolation checks two tenants' sandboxes on one node: what one holds,
// the other cannot see or touch. What else a sandbox is isolated from (the
// host's files, network, capabilities) is each backend's own to test.
func testIsolation(t *testing.T, n *node) {
	a, b := n.open(t, spec("iso-a")), n.open(t, spec("iso-b"))
	const marker = "sleep 7654323"
	a.sh(t, "echo secret-of-a > ~/marker")
	startNamed(t, a.shell(t), marker)

	t.Run("tenant user", func(t *testing.T) {
		want := fmt.Sprintf("%d %d\n", guest.TenantUID, guest.TenantGID)
		for _, s := range []*session{a, b} {
			if got := s.sh(t, `echo "$(id -u) $(id -g)"`); got != want {
				t.Errorf("%s: commands run as %q, want the tenant's %q", s.id, got, want)
			}
		}
	})

	t.Run("files", func(t *testing.T) {
		for _, p := range []string{n.stateDir, n.be.PileDir(a.id), "~/marker"} {
			if got := b.sh(t, "[ -e "+p+" ] && echo visible || echo absent"); got != "absent\n" {
				t.Errorf("%s is %s in the other sandbox", p, got)
			}
		}
		if got := b.sh(t, "grep -rls secret-of-a ~ /tmp "+guest.Workspace+" "+guest.PileDir+"; true"); got != "" {
			t.Errorf("the other sandbox finds the first's secret in %q", got)
		}
	})

	t.Run("processes", func(t *testing.T) {
		if got := running(b.shell(t), marker); got != 0 {
			t.Fatalf("the other sandbox sees %d processes %q", got, marker)
		}
	})

	t.Run("signals", func(t *testing.T) {
		// Everything the tenant of b may signal: its own processes only,
		// not a's, nor the supervision that runs b's commands.
		b.sh(t, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & kill -KILL -1; true")
		if got := b.sh(t, "echo ok"); got != "ok\n" {
			t.Fatalf("the sandbox after its tenant's kill -KILL -1: %q", got)
		}
		if !n.agent.Alive(b.id) {
			t.Fatal("the tenant killed its sandbox's init")
		}
		if got := running(a.shell(t), marker); got != 1 {
			t.Fatalf("the other tenant's kill -KILL -1 reached this sandbox: %d processes %q left", got, marker)
		}
	})
}
