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
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testFaculties checks what a sandbox makes of its Spec.Faculties: the
// listed binaries run by name in every shell, nothing of a build can be
// written from inside, only the listed binaries are on PATH (the first
// faculty listed wins a name), and a change of the set shows at the next
// restart, not before.
func testFaculties(t *testing.T, n *node) {
	ctx := context.Background()
	a := HostDir(t, map[string]string{
		"hello":    "#!/bin/sh\necho hello from a\n",
		"unlisted": "#!/bin/sh\necho unlisted\n",
	})
	// Writable by everyone on the host: only the installation stands
	// between the tenant and the build.
	for _, p := range []string{a, filepath.Join(a, "hello")} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	b := HostDir(t, map[string]string{
		"hello": "#!/bin/sh\necho hello from b\n",
		"bye":   "#!/bin/sh\necho bye from b\n",
	})
	sp := n.spec("faculties")
	sp.Faculties = []backend.Faculty{{Name: "a", Fingerprint: "fp-a", Dir: a, Binaries: []string{"hello"}}}
	s := n.open(t, sp)

	t.Run("by name in every shell", func(t *testing.T) {
		n.known(t)
		for _, shell := range []backend.ShellMode{backend.ShellLogin, backend.ShellClean} {
			res := s.exec(t, agentapi.ExecRequest{Command: "hello; command -v hello", Shell: shell})
			if want := "hello from a\n" + guestapi.FacultiesBin + "/hello\n"; string(res.Stdout) != want || res.ExitCode != 0 {
				t.Errorf("%s shell: got %q (exit %d, stderr %q), want %q", shell, res.Stdout, res.ExitCode, res.Stderr, want)
			}
		}
		if got := s.sh(t, `echo "$PATH"`); got != guestapi.DefaultPath+"\n" {
			t.Errorf("PATH in a clean shell is %q, want %q", got, guestapi.DefaultPath)
		}
	})

	t.Run("read-only", func(t *testing.T) {
		n.known(t)
		build := guestapi.FacultiesDir + "/a"
		for _, cmd := range []string{
			"echo x >> " + build + "/hello",
			"echo x > " + build + "/new",
			"rm -f " + build + "/hello",
			"chmod 777 " + build + "/hello",
			"mkdir " + build + "/sub",
			"echo x > " + guestapi.FacultiesBin + "/new",
			"ln -s /bin/true " + guestapi.FacultiesBin + "/true2",
			"rm -f " + guestapi.FacultiesBin + "/hello",
			"mkdir " + guestapi.FacultiesDir + "/c",
		} {
			if got := s.sh(t, "if ("+cmd+") 2>/dev/null; then echo written; else echo refused; fi"); got != "refused\n" {
				t.Errorf("%q inside the sandbox: %s", cmd, got)
			}
		}
		if data, err := os.ReadFile(filepath.Join(a, "hello")); err != nil || string(data) != "#!/bin/sh\necho hello from a\n" {
			t.Errorf("the build's file on the host: %q, %v", data, err)
		}
	})

	t.Run("only the listed binaries", func(t *testing.T) {
		n.known(t)
		if got := s.sh(t, "ls -A "+guestapi.FacultiesBin); got != "hello\n" {
			t.Errorf("%s lists %q, want hello alone", guestapi.FacultiesBin, got)
		}
		res := s.exec(t, agentapi.ExecRequest{Command: "unlisted", Shell: backend.ShellLogin})
		if res.ExitCode == 0 {
			t.Errorf("a file of the build not listed in Binaries runs by name: %q", res.Stdout)
		}
	})

	t.Run("a new set at the next restart", func(t *testing.T) {
		n.known(t)
		sp.Faculties = []backend.Faculty{
			{Name: "b", Fingerprint: "fp-b", Dir: b, Binaries: []string{"hello", "bye"}},
			{Name: "a", Fingerprint: "fp-a", Dir: a, Binaries: []string{"hello"}},
		}
		// The agent learns of the change while the sandbox runs: its
		// processes keep the set they started with.
		if err := n.agent.Ensure(ctx, sp); err != nil {
			t.Fatal(err)
		}
		if got := s.sh(t, "hello; command -v bye || echo no bye"); got != "hello from a\nno bye\n" {
			t.Fatalf("before the restart: %q, want the old set", got)
		}
		if err := n.agent.Restart(ctx, sp); err != nil {
			t.Fatal(err)
		}
		if got := s.sh(t, "hello; bye; ls -A "+guestapi.FacultiesBin+"; cat "+guestapi.FacultiesDir+"/a/hello"); got != "hello from b\nbye from b\nbye\nhello\n#!/bin/sh\necho hello from a\n" {
			t.Fatalf("after the restart: %q, want b's hello (listed first), b's bye and a mounted", got)
		}
		sp.Faculties = nil
		if err := n.agent.Restart(ctx, sp); err != nil {
			t.Fatal(err)
		}
		res := s.exec(t, agentapi.ExecRequest{Command: "hello", Shell: backend.ShellClean})
		if res.ExitCode == 0 {
			t.Fatalf("a removed faculty still runs after the restart: %q", res.Stdout)
		}
		if got := s.sh(t, "echo ok"); got != "ok\n" {
			t.Fatalf("a sandbox without faculties: %q", got)
		}
	})
}

// HostDir makes a directory on the host holding files (those that start
// with "#!" executable; owned by the test), that a sandbox's unprivileged
// IDs can read and traverse to (t.TempDir is 0700), and removes it when
// the test ends. A backend's own tests use it for what they mount.
func HostDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pg-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
