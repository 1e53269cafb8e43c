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

	"github.com/playground-dev/playground/hostagent/backend"
)

// testLifecycle checks the backend's own contract for provisioning,
// starting and destroying, which the kernel's Ensure and Remove build on.
func testLifecycle(t *testing.T, n *node) {
	ctx := context.Background()
	be := n.be

	t.Run("expected states", func(t *testing.T) {
		if _, err := be.Exec(ctx, "nope", backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("exec in an unknown sandbox: %v, want ErrNotFound", err)
		}
		if err := be.Reattach(ctx, spec("nope")); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("reattaching an unknown sandbox: %v, want ErrNotFound", err)
		}
		if err := be.Destroy(ctx, "never-existed", false); err != nil {
			t.Errorf("destroying an unknown sandbox: %v, want success (a retried delete converges)", err)
		}
		if err := be.Provision(ctx, spec("idle")); err != nil {
			t.Fatal(err)
		}
		if _, err := be.Exec(ctx, "idle", backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotRunning) {
			t.Errorf("exec in a sandbox never started: %v, want ErrNotRunning", err)
		}
		if err := be.Stop(ctx, "idle"); err != nil {
			t.Errorf("stopping a sandbox that is not running: %v, want success", err)
		}
	})

	t.Run("unsafe IDs", func(t *testing.T) {
		// The backend keys its state by the ID: none may name a path.
		for _, id := range []string{"", ".", "..", "../x", "a/b", "/abs"} {
			if err := be.Provision(ctx, spec(id)); err == nil {
				t.Errorf("Provision(%q) succeeded", id)
			}
		}
	})

	t.Run("provision and start again", func(t *testing.T) {
		s := spec("again")
		start(t, be, s)
		Sh(t, be, s.ID, "echo kept > ~/file")
		sentinel := StartSentinel(t, be, s.ID)
		start(t, be, s)
		if got := Sh(t, be, s.ID, "cat ~/file"); got != "kept\n" {
			t.Fatalf("a file after Provision and Start again: %q", got)
		}
		if !Alive(t, be, s.ID, sentinel)[0] {
			t.Fatal("Provision and Start of a running sandbox killed its processes")
		}
	})

	t.Run("destroy", func(t *testing.T) {
		s := spec("doomed")
		start(t, be, s)
		Sh(t, be, s.ID, "echo old > ~/file")
		out := NewSink()
		p, err := be.Exec(ctx, s.ID, backend.ExecRequest{Command: "echo running; sleep 1000", Shell: backend.ShellClean}, out)
		if err != nil {
			t.Fatal(err)
		}
		out.WaitFor(t, "running")
		if err := be.Destroy(ctx, s.ID, false); err != nil {
			t.Fatal(err)
		}
		// The sandbox's end is the command's: it was killed, and that
		// is proven, not lost.
		if st, err := p.Wait(ctx); err != nil || !st.Killed {
			t.Fatalf("a command in a destroyed sandbox ended %+v, %v; want killed", st, err)
		}
		if _, err := be.Exec(ctx, s.ID, backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("exec in a destroyed sandbox: %v, want ErrNotFound", err)
		}
		if err := be.Reattach(ctx, s); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("reattaching a destroyed sandbox: %v, want ErrNotFound", err)
		}
		start(t, be, s)
		if got := Sh(t, be, s.ID, "ls ~ | wc -l"); got != "0\n" {
			t.Fatalf("the workspace survived Destroy: %s entries in the home directory", got)
		}
	})
}

// start provisions and starts a sandbox directly on the backend.
func start(t testing.TB, be backend.Backend, s backend.Spec) {
	t.Helper()
	ctx := context.Background()
	if err := be.Provision(ctx, s); err != nil {
		t.Fatalf("provisioning %s: %v", s.ID, err)
	}
	if err := be.Start(ctx, s.ID); err != nil {
		t.Fatalf("starting %s: %v", s.ID, err)
	}
}
