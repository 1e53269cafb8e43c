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
	"strconv"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// testLimits checks that backend.Resources bound what a tenant can take,
// and that a sandbox that hit a bound serves again once it is released.
// Each limit has a sandbox of its own: hitting one disturbs its sandbox.
// The CPU limit is not checked: throttling shows only as timing, which a
// loaded machine blurs.
func testLimits(t *testing.T, n *node) {
	t.Run("pids", func(t *testing.T) {
		n.known(t)
		const pids = 64
		sp := n.spec("limit-pids")
		sp.Resources.PIDs = pids
		s := n.open(t, sp)
		// Fork until refused, in a subshell, then kill what started with
		// builtins only: no process can start until some are gone.
		res := s.exec(t, agentapi.ExecRequest{Shell: backend.ShellClean, Command: `(
  i=0
  while [ $i -lt 200 ]; do sleep 1000 & i=$((i+1)); echo $i > /tmp/started; done
) 2>/tmp/refusal
kill -KILL -1
read -r started < /tmp/started; echo "$started"
read -r refusal < /tmp/refusal; echo "$refusal"`})
		lines := strings.SplitN(string(res.Stdout), "\n", 2)
		started, err := strconv.Atoi(lines[0])
		if err != nil || started >= pids || len(lines) < 2 || !strings.Contains(lines[1], "fork") {
			t.Fatalf("under a limit of %d PIDs: %q, stderr %q; want fewer started and a refused fork", pids, res.Stdout, res.Stderr)
		}
		t.Logf("%d processes started under a limit of %d", started, pids)
		serves(t, s, "process limit")
	})

	t.Run("memory", func(t *testing.T) {
		n.known(t)
		sp := n.spec("limit-memory")
		sp.Resources.MemoryBytes = 64 << 20
		s := n.open(t, sp)
		// tail keeps the last 200 MiB of a pipe in its own memory.
		res := s.exec(t, agentapi.ExecRequest{Shell: backend.ShellClean, Command: "head -c 300M /dev/zero | tail -c 200M >/dev/null"})
		if !res.OOMKilled || res.ExitCode == 0 {
			t.Fatalf("a command holding 200 MiB under a limit of 64 MiB: %+v, want killed by the OOM killer, and said so", res)
		}
		if !n.agent.Alive(sp.ID) {
			t.Fatal("the sandbox's init died of its tenant's memory")
		}
		serves(t, s, "out of memory")

		// The same as a job: its result says so too (a job the sandbox
		// holds is told from the sandbox's count of OOM kills).
		if !n.be.Capabilities().ProvesCleanup {
			return
		}
		job, err := s.startJob(agentapi.ExecRequest{Shell: backend.ShellClean, Command: "head -c 300M /dev/zero | tail -c 200M >/dev/null"})
		if err != nil {
			t.Fatal(err)
		}
		r := s.follow(job.ID)
		r.untilDone(t)
		if res := r.info.Result; res == nil || !res.OOMKilled || res.ExitCode == 0 {
			t.Fatalf("a job holding 200 MiB under a limit of 64 MiB ended %s with %+v, want killed by the OOM killer, and said so", r.info.State, res)
		}
		serves(t, s, "out of memory")
	})
}

// serves waits until the sandbox runs a command again after it hit a
// limit: the kernel releases what its processes held shortly after they
// die, and until then a start may be refused with a message saying which.
func serves(t *testing.T, s *session, refusal string) {
	t.Helper()
	eventually(t, "the sandbox serving again", func() error {
		res, err := s.tryExec(agentapi.ExecRequest{Command: "echo ok", Shell: backend.ShellClean})
		switch {
		case err != nil && !strings.Contains(err.Error(), refusal):
			t.Fatalf("a command after the limit was hit: %v", err)
		case err != nil:
			return err
		case string(res.Stdout) != "ok\n":
			return fmt.Errorf("echo ok: %+v", res)
		}
		return nil
	})
}
