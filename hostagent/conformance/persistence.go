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
	"errors"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// testPersistence checks that a workspace outlives what a tenant and an
// operator do to it: sessions closing, the agent restarting, the sandbox
// restarting. Each step works on the node as the previous left it.
func testPersistence(t *testing.T, n *node) {
	ctx := context.Background()
	sp := backend.Spec{ID: "persist", Tenant: "conformance/persist", Persona: "first", Isolation: n.h.Isolation}
	s := n.open(t, sp)
	s.sh(t, "echo kept > ~/file")

	t.Run("close and reopen", func(t *testing.T) {
		n.known(t)
		sentinel := startSentinel(s.shell(t))
		if err := n.agent.Sessions().CloseHandle(ctx, s.tenant, s.handle); err != nil {
			t.Fatal(err) // the last handle: the backend detaches the sandbox
		}
		if _, err := s.tryExec(agentapi.ExecRequest{Command: "true"}); hostagent.CodeOf(err) != agentapi.CodeNotFound {
			t.Fatalf("a closed handle still runs commands: %v", err)
		}
		h, err := n.agent.Sessions().Open(ctx, s.tenant, s.id)
		if err != nil {
			t.Fatal(err)
		}
		s.handle = h.ID
		if got := s.sh(t, "cat ~/file"); got != "kept\n" {
			t.Fatalf("a file after reopening: %q", got)
		}
		if !alive(s.shell(t), sentinel)[0] {
			t.Fatal("a background process died when the last session closed")
		}
	})

	t.Run("agent restart", func(t *testing.T) {
		n.known(t)
		sentinel := startSentinel(s.shell(t))
		next := n.restarted(t)
		sp.Persona = "second" // the Sandbox changed while no agent ran
		restarted, err := next.agent.EnsureRestarted(ctx, sp)
		if err != nil {
			t.Fatal(err)
		}
		if restarted {
			t.Error("the new agent reports the sandbox started again, but it ran on")
		}
		n, s = next, next.open(t, sp)
		if got := s.sh(t, "cat ~/file"); got != "kept\n" {
			t.Fatalf("a file after the agent restart: %q", got)
		}
		if !alive(s.shell(t), sentinel)[0] {
			t.Fatal("a process of the sandbox died with the agent that started it")
		}
		if got := s.exec(t, agentapi.ExecRequest{Command: "echo $PERSONA"}).Stdout; string(got) != "second\n" {
			t.Fatalf("the login profile after the restart: PERSONA=%q, want the new spec's", got)
		}
		if n.be.Capabilities().ProvesCleanup {
			job, err := s.startJob(agentapi.ExecRequest{Command: "echo job"})
			if err != nil {
				t.Fatalf("a job in the reattached sandbox: %v", err)
			}
			r := s.follow(job.ID)
			r.untilDone(t)
			if r.stdout.String() != "job\n" {
				t.Fatalf("a job in the reattached sandbox wrote %q", r.stdout.String())
			}
		}
	})

	t.Run("sandbox restart", func(t *testing.T) {
		n.known(t)
		const marker = "sleep 7654321"
		startNamed(t, s.shell(t), marker)
		if err := n.agent.Restart(ctx, sp); err != nil {
			t.Fatal(err)
		}
		// PIDs start over in a new incarnation: look for it by name.
		if got := running(s.shell(t), marker); got != 0 {
			t.Fatalf("%d processes %q survived the restart", got, marker)
		}
		if got := s.sh(t, "cat ~/file"); got != "kept\n" {
			t.Fatalf("a file after the sandbox restart: %q", got)
		}
	})

	t.Run("node reboot", func(t *testing.T) {
		n.known(t)
		// The sandbox stopped, then a new agent starts.
		const marker = "sleep 7654322"
		startNamed(t, s.shell(t), marker)
		for range 2 { // stopping a stopped sandbox succeeds
			if err := n.be.Stop(ctx, sp.ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := n.be.Exec(ctx, sp.ID, backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotRunning) {
			t.Fatalf("exec in a stopped sandbox: %v, want ErrNotRunning", err)
		}
		if p := n.be.Capabilities().Prober; p != nil && p.Alive(sp.ID) {
			t.Fatal("a stopped sandbox is reported alive")
		}
		next := n.restarted(t)
		n, s = next, next.open(t, sp)
		if p := n.be.Capabilities().Prober; p != nil && !p.Alive(sp.ID) {
			t.Fatal("a started sandbox is reported dead")
		}
		if got := s.sh(t, "cat ~/file"); got != "kept\n" {
			t.Fatalf("a file after the stop: %q", got)
		}
		if got := running(s.shell(t), marker); got != 0 {
			t.Fatalf("%d processes %q survived the stop", got, marker)
		}
	})

	t.Run("another node", func(t *testing.T) {
		n.known(t)
		other := n.h.newNode(t)
		if err := other.be.Reattach(ctx, sp); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("another node's backend reattached the sandbox: %v, want ErrNotFound", err)
		}
	})
}
