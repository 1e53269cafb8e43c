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
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// Harness says how to run a backend on this machine.
type Harness struct {
	// NewStateDir makes the state directory of a fresh node and removes it,
	// with whatever the node's sandboxes left, when the test ends.
	NewStateDir func(tb testing.TB) string
	// New builds a backend over a node's state directory, as an agent
	// process does when it starts. Building another over the same directory
	// is an agent restart: the new one must take over what the old one left.
	New func(tb testing.TB, stateDir string) backend.Backend
	// Leftovers lists what is left on a node of the sandbox or builder id
	// (its container, state, mounts, devices, cgroups), nothing when it is
	// gone: the builder group checks that a build leaves nothing behind.
	// Nil skips that check.
	Leftovers func(tb testing.TB, stateDir, id string) []string
	// Isolation is the Spec.Isolation of every sandbox of the suite (empty:
	// the backend's default), for a backend that runs several.
	Isolation string
	// Known lists the cases this backend cannot pass, by their name under
	// the suite ("pile/append-only"), with the reason: they are skipped
	// with it. Each is a guarantee the backend does not give, and its
	// documentation must say so; none may be a bug to fix.
	Known map[string]string
	// Groups, when set, are the only groups run, by name: a harness over
	// a fake of what cannot run on this machine (the jail backend's)
	// runs those the fake carries.
	Groups []string
}

// Run runs the suite against the backend of h.
func Run(t *testing.T, h Harness) {
	if h.NewStateDir == nil || h.New == nil {
		t.Fatal("conformance: the Harness needs NewStateDir and New")
	}
	for _, g := range []struct {
		name string
		run  func(*testing.T, *node)
	}{
		{"lifecycle", testLifecycle},
		{"exec", testExec},
		{"files", testFiles},
		{"kill", testKill},
		{"jobs", testJobs},
		{"jobs-across-restarts", testJobsAcrossRestarts},
		{"persistence", testPersistence},
		{"limits", testLimits},
		{"pile", testPile},
		{"signing-key", testSigningKey},
		{"shared-pile", testSharedPile},
		{"isolation", testIsolation},
		{"relay", testRelay},
		{"worker", testWorker},
		{"faculties", testFaculties},
		{"builder", testBuilder},
	} {
		t.Run(g.name, func(t *testing.T) {
			if why, ok := h.Known[g.name]; ok {
				t.Skip("known: " + why)
			}
			if h.Groups != nil && !slices.Contains(h.Groups, g.name) {
				t.Skip("not among the harness's groups")
			}
			g.run(t, h.newNode(t))
		})
	}
}

// patience bounds every wait of the suite: generous, so that a loaded
// machine is slow, not failing (a QEMU guest under TCG on two cores at a
// load of 25 took longer than 30 s to boot).
const patience = 2 * time.Minute

// node is one machine's sandbox state, with the backend and the kernel
// that currently serve it.
type node struct {
	h        Harness
	stateDir string
	be       backend.Backend
	agent    *hostagent.Agent
}

func (h Harness) newNode(t *testing.T) *node {
	t.Helper()
	return h.nodeOver(t, h.NewStateDir(t))
}

func (h Harness) nodeOver(t *testing.T, stateDir string) *node {
	t.Helper()
	be := h.New(t, stateDir)
	return &node{h: h, stateDir: stateDir, be: be, agent: newAgent(t, be, hostagent.Options{})}
}

// newNodeWith is a fresh node whose kernel has opts (its backend set
// here), for the bounds of the kernel that a case pushes past.
func (h Harness) newNodeWith(t *testing.T, opts hostagent.Options) *node {
	t.Helper()
	stateDir := h.NewStateDir(t)
	be := h.New(t, stateDir)
	return &node{h: h, stateDir: stateDir, be: be, agent: newAgent(t, be, opts)}
}

// restarted is the node after an agent restart: a new backend and a new
// kernel over the same state. The old ones are abandoned, as by a process
// that died, and serve no more calls: the kernel is closed (its own
// background work ends; jobs the sandboxes hold run on) and a backend that
// holds connections (an io.Closer) has them closed, as the process's exit
// would.
func (n *node) restarted(t *testing.T) *node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := n.agent.Close(ctx); err != nil {
		t.Errorf("closing the agent before its restart: %v", err)
	}
	if c, ok := n.be.(io.Closer); ok {
		_ = c.Close()
	}
	return n.h.nodeOver(t, n.stateDir)
}

// known skips t when the harness lists it as a case the backend cannot
// pass. t is a case of a group: its name is the suite's, then the group's.
func (n *node) known(t *testing.T) {
	t.Helper()
	_, name, _ := strings.Cut(t.Name(), "/")
	if why, ok := n.h.Known[name]; ok {
		t.Skip("known: " + why)
	}
}

// newAgent is the one place the suite builds a kernel over a backend, with
// the kernel's defaults: the bounds the suite checks are the shipped ones.
func newAgent(t *testing.T, be backend.Backend, opts hostagent.Options) *hostagent.Agent {
	t.Helper()
	opts.Backends = []backend.Backend{be}
	a, err := hostagent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := a.Close(ctx); err != nil {
			t.Errorf("closing the agent: %v", err)
		}
	})
	return a
}

// spec is a sandbox of its own tenant, with the harness's isolation.
func (n *node) spec(id string) backend.Spec {
	return backend.Spec{ID: id, Tenant: "conformance/" + id, Isolation: n.h.Isolation}
}

// session is an open handle on a sandbox served by a kernel.
type session struct {
	agent  *hostagent.Agent
	tenant string
	id     string
	handle string
}

// open makes the sandbox of s ready on the node (provisioned, or taken over
// from a previous agent) and opens a session on it.
func (n *node) open(t *testing.T, s backend.Spec) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := n.agent.Ensure(ctx, s); err != nil {
		t.Fatalf("ensuring sandbox %s: %v", s.ID, err)
	}
	h, err := n.agent.Sessions().Open(ctx, s.Tenant, s.ID)
	if err != nil {
		t.Fatalf("opening a session on %s: %v", s.ID, err)
	}
	return &session{agent: n.agent, tenant: s.Tenant, id: s.ID, handle: h.ID}
}

// exec runs a command through the kernel; it fails t if the kernel refuses.
func (s *session) exec(t testing.TB, req agentapi.ExecRequest) agentapi.ExecResult {
	t.Helper()
	res, err := s.tryExec(req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Command, err)
	}
	return res
}

func (s *session) tryExec(req agentapi.ExecRequest) (agentapi.ExecResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return s.agent.Execs().Exec(ctx, s.tenant, s.handle, req)
}

// sh runs a command in a clean shell through the kernel; it must succeed.
func (s *session) sh(t testing.TB, cmd string) string {
	t.Helper()
	res := s.exec(t, agentapi.ExecRequest{Command: cmd, Shell: backend.ShellClean})
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d (signal %q): stderr %q", cmd, res.ExitCode, res.Signal, res.Stderr)
	}
	return string(res.Stdout)
}

// shell is s.sh bound to t, for the fixtures that run on either path.
func (s *session) shell(t testing.TB) shell {
	return func(cmd string) string { t.Helper(); return s.sh(t, cmd) }
}

// eventually calls check until it returns nil, and fails t with its last
// error after patience. It is for conditions that have no event to wait
// on from outside the sandbox (a process reaped, a limit uncharged).
func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, patience, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
