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
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testExec checks exec as a tenant meets it: through the kernel, in a
// sandbox with a login profile.
func testExec(t *testing.T, n *node) {
	s := n.open(t, backend.Spec{
		ID: "exec", Tenant: "conformance/exec", Persona: "alice's helper", Isolation: n.h.Isolation,
		LoginEnv:    []backend.EnvVar{{Name: "GREETING", Value: "it's $HOME"}},
		LoginScript: "export FROM_SCRIPT=yes",
	})
	login := func(cmd string) agentapi.ExecResult {
		t.Helper()
		return s.exec(t, agentapi.ExecRequest{Command: cmd}) // login is the default
	}

	t.Run("fresh shell", func(t *testing.T) {
		n.known(t)
		login("mkdir -p sub && cd sub && echo hello > f && X=1 && export Y=2")
		res := login(`cat sub/f; pwd; echo "${X-unset} ${Y-unset}"`)
		if want := "hello\n" + guestapi.TenantHome + "\nunset unset\n"; string(res.Stdout) != want {
			t.Fatalf("got %q, want %q: files persist, the cwd and variables do not", res.Stdout, want)
		}
	})

	t.Run("login shell", func(t *testing.T) {
		n.known(t)
		res := login(`echo "$PERSONA|$GREETING|$FROM_SCRIPT|$HOME|$(id -un)"`)
		if want := "alice's helper|it's $HOME|yes|" + guestapi.TenantHome + "|" + guestapi.TenantUser + "\n"; string(res.Stdout) != want {
			t.Fatalf("got %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
		}
	})

	t.Run("clean shell", func(t *testing.T) {
		n.known(t)
		out := s.sh(t, `echo "${PERSONA-unset}|${GREETING-unset}|${FROM_SCRIPT-unset}|$HOME"; env | sort`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if want := "unset|unset|unset|" + guestapi.TenantHome; lines[0] != want {
			t.Fatalf("got %q, want %q", lines[0], want)
		}
		for _, line := range lines[1:] {
			switch name, _, _ := strings.Cut(line, "="); name {
			case "PATH", "HOME", "PWD":
			default:
				t.Errorf("the clean environment has %q", line)
			}
		}
	})

	t.Run("cwd", func(t *testing.T) {
		n.known(t)
		s.sh(t, "mkdir -p cwd-sub")
		for cwd, want := range map[string]string{"/tmp": "/tmp", "cwd-sub": guestapi.TenantHome + "/cwd-sub", "": guestapi.TenantHome} {
			if got := s.exec(t, agentapi.ExecRequest{Command: "pwd", Cwd: cwd}).Stdout; string(got) != want+"\n" {
				t.Errorf("cwd %q: pwd says %q, want %q", cwd, got, want)
			}
		}
		_, err := s.tryExec(agentapi.ExecRequest{Command: "pwd", Cwd: "/no/such/dir"})
		if hostagent.CodeOf(err) != agentapi.CodeInvalid || !strings.Contains(err.Error(), "/no/such/dir") {
			t.Fatalf("a missing cwd: %v (%s), want invalid_argument naming it", err, hostagent.CodeOf(err))
		}
	})

	t.Run("stdin", func(t *testing.T) {
		n.known(t)
		in := bytes.Repeat([]byte("0123456789abcdef\x00\xff"), 20000) // 360 KB: many frames of any transport
		sum := sha256.Sum256(in)
		res := s.exec(t, agentapi.ExecRequest{Command: "cat > /tmp/stdin; wc -c < /tmp/stdin; sha256sum < /tmp/stdin", Stdin: in})
		if want := fmt.Sprintf("%d\n%s  -\n", len(in), hex.EncodeToString(sum[:])); string(res.Stdout) != want {
			t.Fatalf("got %q, want %q", res.Stdout, want)
		}
		if got := s.sh(t, "cat"); got != "" {
			t.Fatalf("without stdin: cat read %q", got)
		}
	})

	t.Run("byte-exact output", func(t *testing.T) {
		n.known(t)
		res := login(`printf '\377\376a\000b\n'; printf '\200err' >&2; head -c 200000 /dev/zero`)
		if want := "\xff\xfea\x00b\n" + strings.Repeat("\x00", 200000); string(res.Stdout) != want {
			t.Fatalf("stdout: got %d bytes %q…, want %d", len(res.Stdout), res.Stdout[:min(len(res.Stdout), 16)], len(want))
		}
		if string(res.Stderr) != "\x80err" {
			t.Fatalf("stderr: got %q", res.Stderr)
		}
	})

	t.Run("exit status", func(t *testing.T) {
		n.known(t)
		// The backend's ExitStatus, which jobs report as it is.
		for _, tc := range []struct {
			cmd    string
			code   int
			signal string
		}{
			{"true", 0, ""},
			{"exit 3", 3, ""},
			{"kill -TERM $$", -1, "SIGTERM"},
			{"kill -KILL $$", -1, "SIGKILL"},
			{"sh -c 'kill -SEGV $$'; exit $?", 128 + 11, ""},
		} {
			r := Exec(t, n.be, s.id, backend.ExecRequest{Command: tc.cmd, Shell: backend.ShellClean})
			if r.Status.ExitCode != tc.code || r.Status.Signal != tc.signal || r.Status.Killed {
				t.Errorf("%q: got %+v, want code %d, signal %q, not killed", tc.cmd, r.Status, tc.code, tc.signal)
			}
		}
	})

	t.Run("background outlives its command", func(t *testing.T) {
		n.known(t)
		// The loop goes on writing to the stdout of a command that has
		// ended; it must neither die of it nor block.
		// Ticks written before the shell ended may come before the PID.
		out := s.sh(t, "rm -f /tmp/ticks; (i=0; while :; do echo tick; i=$((i+1)); echo $i > /tmp/ticks; sleep 0.02; done) & echo pid=$!")
		_, pid, _ := strings.Cut(out, "pid=")
		pid, _, _ = strings.Cut(pid, "\n")
		ticks := func() int {
			n, _ := strconv.Atoi(strings.TrimSpace(s.sh(t, "cat /tmp/ticks 2>/dev/null || echo 0")))
			return n
		}
		after := ticks()
		eventually(t, "the background writer ticking on", func() error {
			if got := ticks(); got < after+10 {
				return fmt.Errorf("%d ticks, want %d", got, after+10)
			}
			return nil
		})
		s.sh(t, "kill "+pid)
	})

	t.Run("concurrent commands", func(t *testing.T) {
		n.known(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				want := strconv.Itoa(i)
				if got := strings.TrimSpace(s.sh(t, "sleep 0.1; echo "+want)); got != want {
					t.Errorf("got %q, want %q", got, want)
				}
			})
		}
		wg.Wait()
	})

	t.Run("timeout kills the tree", func(t *testing.T) {
		n.known(t)
		sentinel := startSentinel(s.shell(t))
		e := newEscapees(0)
		// Long enough for the escapees to start on a loaded machine; the
		// fixture waits for them, so a longer timeout only costs time.
		res := s.exec(t, agentapi.ExecRequest{Command: e.command(), Shell: backend.ShellClean, Timeout: 2 * time.Second})
		if !res.TimedOut {
			t.Fatalf("the command was not timed out: %+v", res)
		}
		if string(res.Stdout) != "ready\n" {
			t.Fatalf("the output before the timeout: %q, want %q (stderr %q)", res.Stdout, "ready\n", res.Stderr)
		}
		checkProof(t, s.shell(t), "timed-out exec", e.pids(t, s.shell(t)), sentinel)
	})
}
