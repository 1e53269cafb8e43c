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
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testIsolation checks two tenants' sandboxes on one node: what one holds,
// the other cannot see or touch; and what every sandbox keeps its tenant
// from, whatever isolates it: sockets of families that reach outside the
// sandbox (AF_VSOCK's port space is the host's), system calls of another
// ABI than the filter knows, other users' files in /tmp. What else a
// sandbox is isolated from (the host's files, network, capabilities) is
// each backend's own to test.
func testIsolation(t *testing.T, n *node) {
	a, b := n.open(t, n.spec("iso-a")), n.open(t, n.spec("iso-b"))
	const marker = "sleep 7654323"
	a.sh(t, "echo secret-of-a > ~/marker")
	startNamed(t, a.shell(t), marker)

	t.Run("tenant user", func(t *testing.T) {
		n.known(t)
		want := fmt.Sprintf("%d %d\n", guestapi.TenantUID, guestapi.TenantGID)
		for _, s := range []*session{a, b} {
			if got := s.sh(t, `echo "$(id -u) $(id -g)"`); got != want {
				t.Errorf("%s: commands run as %q, want the tenant's %q", s.id, got, want)
			}
		}
	})

	t.Run("files", func(t *testing.T) {
		n.known(t)
		for _, p := range []string{n.stateDir, n.be.PileDir(a.id), "~/marker"} {
			if got := b.sh(t, "[ -e "+p+" ] && echo visible || echo absent"); got != "absent\n" {
				t.Errorf("%s is %s in the other sandbox", p, got)
			}
		}
		if got := b.sh(t, "grep -rls secret-of-a ~ /tmp "+guestapi.Workspace+" "+guestapi.PileDir+"; true"); got != "" {
			t.Errorf("the other sandbox finds the first's secret in %q", got)
		}
	})

	t.Run("processes", func(t *testing.T) {
		n.known(t)
		if got := running(b.shell(t), marker); got != 0 {
			t.Fatalf("the other sandbox sees %d processes %q", got, marker)
		}
	})

	t.Run("signals", func(t *testing.T) {
		n.known(t)
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

	t.Run("tmp", func(t *testing.T) {
		n.known(t)
		// Every user may create there, and only the owner of an entry
		// may remove or rename it (the sticky bit).
		if got := a.sh(t, "ls -ldL /tmp /var/tmp 2>/dev/null | cut -c1-10"); strings.TrimSpace(got) == "" ||
			strings.Trim(strings.ReplaceAll(got, "drwxrwxrwt", ""), "\n") != "" {
			t.Errorf("/tmp (and /var/tmp) are %q, want drwxrwxrwt (1777)", got)
		}
	})

	t.Run("socket families", func(t *testing.T) {
		n.known(t)
		probe := a.probeInside(t)
		got := map[string]string{}
		for _, line := range strings.Split(probe(append([]string{"socket"}, append(localFamilies, foreignFamilies...)...)...), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				got[f[0]] = f[1]
			}
		}
		if got["unix"] == "unsupported" {
			t.Skip("the probe knows the address families of Linux only")
		}
		for _, f := range localFamilies {
			if got[f] != "ok" && (f != "inet6" || probeOnHost(t, "socket", "inet6") == "inet6 ok") {
				t.Errorf("socket(AF_%s) inside the sandbox: %s, want it to work", strings.ToUpper(f), got[f])
			}
		}
		for _, f := range foreignFamilies {
			if got[f] == "ok" || got[f] == "" {
				t.Errorf("socket(AF_%s) inside the sandbox: %q, want a refusal", strings.ToUpper(f), got[f])
			}
		}
	})

	t.Run("foreign ABI", func(t *testing.T) {
		n.known(t)
		// A system call through another ABI has other numbers, which a
		// filter written by name does not see by its name: it is killed,
		// or, in a sandbox whose kernel has no such ABI (gVisor
		// implements the native one only), fails with ENOSYS where the
		// node's kernel would have made it.
		for _, abi := range []string{"unshare32", "unsharex32"} {
			host := probeOnHost(t, abi)
			if !strings.HasPrefix(host, "returned") || host == "returned -38" {
				t.Logf("%s: this machine's kernel does not make such a call (%s): not checked", abi, host)
				continue
			}
			if got := a.probeInside(t)(abi); got != "killed" && got != "returned -38" && !strings.Contains(got, "159") && !strings.Contains(got, "SIGSYS") {
				t.Errorf("%s inside the sandbox: %s, want it killed (on the node: %s)", abi, got, host)
			}
		}
	})
}

// localFamilies are the address families a tenant's programs need: their
// endpoints live in the sandbox's own namespaces. foreignFamilies reach
// further (the host's vsock port space, raw links, kernel crypto and
// keys, buses and radios) or are obsolete, and no shell sandbox needs them.
var (
	localFamilies   = []string{"unix", "inet", "inet6"}
	foreignFamilies = []string{"vsock", "packet", "alg", "key", "bluetooth", "can", "tipc", "rds", "xdp",
		"appletalk", "x25", "llc", "nfc", "qipcrtr", "smc", "kcm"}
)
