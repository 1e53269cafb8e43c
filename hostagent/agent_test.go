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

package hostagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// racyInit is a backend whose sandbox's init dies between the kernel's
// Alive and its Reattach: Alive still says yes, and Reattach, finding the
// init gone, starts it again, as the oci backend does, and counts it.
type racyInit struct {
	*backendtest.Fake
	mu     sync.Mutex
	starts uint64
	dies   bool // the next Reattach finds the init gone
	fails  bool // and then fails, as a start that times out does
}

func (r *racyInit) Capabilities() backend.Capabilities {
	c := r.Fake.Capabilities()
	c.Prober, c.StartCounter = r, r
	return c
}

func (r *racyInit) Alive(string) bool { return true }

func (r *racyInit) Starts(string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

func (r *racyInit) Reattach(ctx context.Context, spec backend.Spec) error {
	if err := r.Fake.Reattach(ctx, spec); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dies {
		r.dies = false
		r.starts++
		if r.fails {
			r.fails = false
			return errors.New("init not ready")
		}
	}
	return nil
}

func (r *racyInit) Start(ctx context.Context, id string) error {
	r.mu.Lock()
	r.starts++
	r.mu.Unlock()
	return r.Fake.Start(ctx, id)
}

// TestInitDeadAtReattachIsARestart: an init that dies after the kernel
// found it alive, and that Reattach therefore starts again, is reported
// as a restart (the Sandbox's Restarted event hangs on it), not as a
// sandbox found running.
func TestInitDeadAtReattachIsARestart(t *testing.T) {
	be := &racyInit{Fake: backendtest.New("oci", backendtest.Writes())}
	a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := backend.Spec{ID: "sbx-1", Tenant: "ns/t"}
	if restarted, err := a.EnsureRestarted(ctx, spec); err != nil || restarted {
		t.Fatalf("the first start: restarted %v, %v; want a start, not a restart", restarted, err)
	}
	if restarted, err := a.EnsureRestarted(ctx, spec); err != nil || restarted {
		t.Fatalf("a running sandbox: restarted %v, %v; want neither", restarted, err)
	}
	be.mu.Lock()
	be.dies = true
	be.mu.Unlock()
	if restarted, err := a.EnsureRestarted(ctx, spec); err != nil || !restarted {
		t.Fatalf("an init that died before Reattach: restarted %v, %v; want a restart", restarted, err)
	}
	if restarted, err := a.EnsureRestarted(ctx, spec); err != nil || restarted {
		t.Fatalf("running again: restarted %v, %v; want neither", restarted, err)
	}

	// Started again, but the Ensure failed: the next one that succeeds
	// reports the restart, once.
	be.mu.Lock()
	be.dies, be.fails = true, true
	be.mu.Unlock()
	if _, err := a.EnsureRestarted(ctx, spec); err == nil {
		t.Fatal("the failing Ensure succeeded")
	}
	if restarted, err := a.EnsureRestarted(ctx, spec); err != nil || !restarted {
		t.Fatalf("after a restart whose Ensure failed: restarted %v, %v; want the restart reported", restarted, err)
	}
	if restarted, err := a.EnsureRestarted(ctx, spec); err != nil || restarted {
		t.Fatalf("after the report: restarted %v, %v; want neither", restarted, err)
	}
}

// otherGuest is a backend whose sandboxes run a guest binary of another
// guest protocol version. Its init answers every request as such a guest
// does (readRequest in guest/shepherd_linux.go, readControlRequest in
// guest/control_linux.go): it refuses the version by name.
type otherGuest struct{ *backendtest.Fake }

func (otherGuest) shepherd(context.Context, string) (net.Conn, error) {
	agent, sandbox := net.Pipe()
	go func() {
		defer sandbox.Close()
		var req guestapi.StartRequest
		fr := guestapi.NewFrameReader(bufio.NewReader(sandbox))
		if t, payload, err := fr.ReadFrame(); err != nil || t != guestapi.FrameStart || json.Unmarshal(payload, &req) != nil {
			return
		}
		_, _ = sandbox.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(guestapi.UnsupportedVersion(req.Version, guestapi.ProtocolVersion+1))))
	}()
	return agent, nil
}

func (g otherGuest) Capabilities() backend.Capabilities {
	c := g.Fake.Capabilities()
	c.JobHolder = guestexec.Holder{Shepherd: g.shepherd}
	return c
}

// TestGuestOfAnotherProtocolIsRefused: the agent does not drive a
// sandbox whose guest speaks another guest protocol version: the guest's
// refusal, which names both versions and says to restart the sandbox,
// fails the sandbox's Ensure (its conditions show it), and the agent
// does not hold the sandbox's jobs itself instead.
func TestGuestOfAnotherProtocolIsRefused(t *testing.T) {
	be := otherGuest{backendtest.New("oci", backendtest.Writes())}
	a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	ctx := context.Background()
	spec := backend.Spec{ID: "sbx-other", Tenant: "ns/t"}
	err = a.Ensure(ctx, spec)
	want := guestapi.UnsupportedVersion(guestapi.ProtocolVersion, guestapi.ProtocolVersion+1)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sbx-other") {
		t.Fatalf("ensuring a sandbox whose guest speaks another protocol: %v; want its refusal %q", err, want)
	}
	if _, err := a.Sessions().Open(ctx, spec.Tenant, spec.ID); err == nil {
		t.Fatal("a handle was opened on the sandbox that refused the agent")
	}
	if st := a.Jobs().Stats(); st.Held != 0 {
		t.Errorf("jobs %+v, want none", st)
	}
}

// atPIDLimit is a sandbox whose tenant holds every PID: no process takes
// a command, so each start runs out of time, while its limit refuses
// forks.
type atPIDLimit struct {
	*backendtest.Fake
	refused atomic.Uint64
	counted bool
}

func (b *atPIDLimit) start() error {
	if b.counted {
		b.refused.Add(3)
	}
	return fmt.Errorf("oci: starting command in sandbox: %w", context.DeadlineExceeded)
}

func (b *atPIDLimit) Exec(context.Context, string, backend.ExecRequest, backend.Sink) (backend.Process, error) {
	return nil, b.start()
}

func (b *atPIDLimit) JobConn(context.Context, string) (net.Conn, error) { return nil, b.start() }

func (b *atPIDLimit) ForksRefused(string) (uint64, bool) { return b.refused.Load(), true }

func (b *atPIDLimit) Capabilities() backend.Capabilities {
	c := b.Fake.Capabilities()
	c.ForkCounter, c.JobHolder = b, b
	return c
}

// TestStartAtProcessLimitIsExhausted: a command or job that cannot start
// while the sandbox's process limit refuses forks is refused as
// resource_exhausted, saying the limit is reached; the same failure
// without refused forks stays an internal error.
func TestStartAtProcessLimitIsExhausted(t *testing.T) {
	for _, counted := range []bool{true, false} {
		be := &atPIDLimit{Fake: backendtest.New("oci", backendtest.Writes()), counted: counted}
		a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		spec := backend.Spec{ID: "sbx-pids", Tenant: "ns/t"}
		h := hostagent.EnsureOpen(ctx, t, a, spec)
		_, execErr := a.Execs().Exec(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "true"})
		_, jobErr := a.Execs().StartJob(ctx, spec.Tenant, h.ID, agentapi.ExecRequest{Command: "true"})
		for what, err := range map[string]error{"exec": execErr, "job": jobErr} {
			code := hostagent.CodeOf(err)
			switch {
			case counted && (code != agentapi.CodeExhausted || !strings.Contains(err.Error(), "process limit is reached")):
				t.Errorf("%s at the process limit: %v (%s), want resource_exhausted saying the limit is reached", what, err, code)
			case !counted && code != agentapi.CodeInternal:
				t.Errorf("%s failing without refused forks: %v (%s), want internal", what, err, code)
			}
		}
		a.Close(ctx)
	}
}
