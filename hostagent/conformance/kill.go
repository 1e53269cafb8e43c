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
	"fmt"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// killRounds is how often the proof is checked in a row: a race between
// the kill and a forking escapee would show as a rare survivor.
const killRounds = 20

// testKill checks Process.Kill, directly: on a backend that ProvesCleanup
// it returns nil only once every descendant of the command is dead, which
// is what cancellation and timeouts promise; elsewhere it says that it
// cannot prove it.
func testKill(t *testing.T, n *node) {
	s := n.spec("kill")
	start(t, n.be, s)
	sh := direct(t, n.be, s.ID)
	sentinel := startSentinel(sh)
	launch := func(t *testing.T, round int) (backend.Process, *Sink, []string) {
		t.Helper()
		e := newEscapees(round)
		out := NewSink()
		p, err := n.be.Exec(context.Background(), s.ID, backend.ExecRequest{Command: e.command(), Shell: backend.ShellClean}, out)
		if err != nil {
			t.Fatal(err)
		}
		out.WaitFor(t, "ready")
		return p, out, e.pids(t, sh)
	}
	// kill kills a launched command and checks the proof.
	kill := func(t *testing.T, round int, p backend.Process, escapees []string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := p.Kill(ctx); err != nil {
			t.Fatalf("round %d: Kill: %v", round, err)
		}
		if st, err := p.Wait(ctx); err != nil || !st.Killed || st.Signal != "SIGKILL" {
			t.Fatalf("round %d: the command ended %+v, %v; want killed by SIGKILL", round, st, err)
		}
		checkProof(t, sh, fmt.Sprintf("round %d", round), escapees, sentinel)
	}

	if !n.be.Capabilities().ProvesCleanup {
		t.Run("no proof claimed", func(t *testing.T) {
			n.known(t)
			p, _, _ := launch(t, 0)
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := p.Kill(ctx); !errors.Is(err, backend.ErrProofLost) {
				t.Fatalf("Kill on a backend that does not prove cleanup: %v, want ErrProofLost", err)
			}
		})
		return
	}

	t.Run("proves descendants dead", func(t *testing.T) {
		n.known(t)
		for round := range killRounds {
			p, _, pids := launch(t, round)
			kill(t, round, p, pids)
		}
	})

	t.Run("kill after a timed-out wait", func(t *testing.T) {
		n.known(t)
		// The kernel's timeout: Wait gives up at the deadline, then Kill.
		for round := range 5 {
			p, out, pids := launch(t, killRounds+round)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err := p.Wait(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: Wait past its deadline: %v", round, err)
			}
			kill(t, round, p, pids)
			if out.Stdout() != "ready\n" {
				t.Fatalf("round %d: the output so far was lost: %q", round, out.Stdout())
			}
		}
	})

	t.Run("kill after the end", func(t *testing.T) {
		n.known(t)
		// The kernel may cancel a job whose command has just ended.
		p, err := n.be.Exec(context.Background(), s.ID, backend.ExecRequest{Command: "exit 7", Shell: backend.ShellClean}, NewSink())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if st, err := p.Wait(ctx); err != nil || st.ExitCode != 7 {
			t.Fatalf("the command ended %+v, %v", st, err)
		}
		if err := p.Kill(ctx); err != nil {
			t.Fatalf("Kill of a command that has ended: %v, want nil", err)
		}
		if st, err := p.Wait(ctx); err != nil || st.ExitCode != 7 || st.Killed {
			t.Fatalf("after the late Kill the command reads %+v, %v; want its own exit 7", st, err)
		}
	})
}
