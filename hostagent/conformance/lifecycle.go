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
	"os"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// testLifecycle checks the backend's own contract for provisioning,
// starting and destroying, which the kernel's Ensure and Remove build on.
func testLifecycle(t *testing.T, n *node) {
	ctx := context.Background()
	be := n.be

	t.Run("expected states", func(t *testing.T) {
		n.known(t)
		if _, err := be.Exec(ctx, "nope", backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("exec in an unknown sandbox: %v, want ErrNotFound", err)
		}
		if err := be.Reattach(ctx, n.spec("nope")); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("reattaching an unknown sandbox: %v, want ErrNotFound", err)
		}
		if err := be.Destroy(ctx, "never-existed", false); err != nil {
			t.Errorf("destroying an unknown sandbox: %v, want success (a retried delete converges)", err)
		}
		if err := be.Provision(ctx, n.spec("idle")); err != nil {
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
		n.known(t)
		// The backend keys its state by the ID: none may name a path, not
		// even to stop or destroy "nothing there".
		for _, id := range []string{"", ".", "..", "../x", "a/b", "/abs"} {
			if err := be.Provision(ctx, n.spec(id)); err == nil {
				t.Errorf("Provision(%q) succeeded", id)
			}
			if err := be.Reattach(ctx, n.spec(id)); err == nil {
				t.Errorf("Reattach(%q) succeeded", id)
			}
			if err := be.Start(ctx, id); err == nil {
				t.Errorf("Start(%q) succeeded", id)
			}
			if _, err := be.Exec(ctx, id, backend.ExecRequest{Command: "true"}, nil); err == nil {
				t.Errorf("Exec(%q) succeeded", id)
			}
			if err := be.Stop(ctx, id); err == nil {
				t.Errorf("Stop(%q) succeeded", id)
			}
			if err := be.Destroy(ctx, id, false); err == nil {
				t.Errorf("Destroy(%q) succeeded", id)
			}
		}
		if _, err := os.Stat(n.stateDir); err != nil {
			t.Fatalf("the node's state after unsafe IDs: %v", err)
		}
	})

	t.Run("malformed handles and job IDs", func(t *testing.T) {
		n.known(t)
		// The kernel takes only handles and job IDs of the shape it
		// issues, and answers anything else exactly as an unknown one,
		// quoting none of it.
		s := n.open(t, n.spec("ids"))
		job, err := n.agent.Execs().StartJob(ctx, s.tenant, s.handle, agentapi.ExecRequest{Command: "true"})
		if err != nil && be.Capabilities().ProvesCleanup {
			t.Fatal(err)
		}
		bad := []string{"", ".", "..", "../x", "a/b", "h_nope", "job_nope", s.handle + "/..", strings.ToUpper(s.handle),
			s.handle + "a", "\xff\x00<x>", strings.Repeat("h_", 4096), "abcdefghijklmnop"}
		handleCalls := map[string]func(string) error{
			"Exec": func(h string) error {
				_, err := n.agent.Execs().Exec(ctx, s.tenant, h, agentapi.ExecRequest{Command: "true"})
				return err
			},
			"StartJob": func(h string) error {
				_, err := n.agent.Execs().StartJob(ctx, s.tenant, h, agentapi.ExecRequest{Command: "true"})
				return err
			},
			"ReadFile": func(h string) error { _, err := n.agent.Files().ReadFile(ctx, s.tenant, h, "f", ""); return err },
			"WriteFile": func(h string) error {
				_, err := n.agent.Files().WriteFile(ctx, s.tenant, h, "f", "", []byte("x"))
				return err
			},
			"Renew":       func(h string) error { _, err := n.agent.Sessions().Renew(s.tenant, h); return err },
			"CloseHandle": func(h string) error { return n.agent.Sessions().CloseHandle(ctx, s.tenant, h) },
		}
		jobCalls := map[string]func(string) error{
			"PollJob":   func(j string) error { _, err := n.agent.Execs().PollJob(ctx, s.tenant, j, "", 0, 0); return err },
			"CancelJob": func(j string) error { _, err := n.agent.Execs().CancelJob(ctx, s.tenant, j); return err },
		}
		refused := func(call, id string, err error, want string) {
			t.Helper()
			if hostagent.CodeOf(err) != agentapi.CodeNotFound || err.Error() != want {
				t.Errorf("%s(%q): %v; want not_found: %s", call, id, err, want)
			}
		}
		for name, call := range handleCalls {
			for _, id := range append(bad, agentapi.NewHandle()) {
				refused(name, id, call(id), agentapi.HandleNotFound)
			}
		}
		for name, call := range jobCalls {
			for _, id := range append(bad, agentapi.NewJobID(), job.ID+"/..", strings.ToUpper(job.ID)) {
				refused(name, id, call(id), agentapi.JobNotFound)
			}
		}
		if got := s.sh(t, "echo still here"); got != "still here\n" {
			t.Fatalf("the session after the refusals: %q", got)
		}
	})

	t.Run("provision and start again", func(t *testing.T) {
		n.known(t)
		s := n.spec("again")
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
		n.known(t)
		s := n.spec("doomed")
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
