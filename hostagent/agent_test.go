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
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
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
