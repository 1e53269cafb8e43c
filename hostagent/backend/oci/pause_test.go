//go:build linux

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

package oci

import (
	"context"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestPause: a paused sandbox's processes get no CPU (a counter does not
// move while it is paused, two seconds in which it would count forty) and
// thaw where they were (the same process counts on); a paused sandbox
// counts as alive, and a Stop of it leaves nothing behind.
func TestPause(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "pause"})
	ctx := context.Background()
	if b.Capabilities().Pauser == nil {
		t.Fatal("oci offers no Pauser")
	}
	count := startCounter(t, b, id)
	eventually(t, "the counter to count", func() error { return check(count() > 3) })
	before := count()
	if err := b.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := b.runc.state(ctx, containerID(id)); err != nil || st.Status != "paused" {
		t.Fatalf("after Pause the container is %+v, %v; want paused", st, err)
	}
	if !b.Alive(id) {
		t.Error("a paused sandbox reads as dead")
	}
	time.Sleep(2 * time.Second) // the interval measured, not a wait for a condition
	if err := b.Unpause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if after := count(); after-before > 10 {
		t.Errorf("the counter went from %d to %d across two seconds paused: it ran", before, after)
	}
	eventually(t, "the counter to count on", func() error { return check(count() > before+5) })
	if err := b.Unpause(ctx, id); err != nil {
		t.Errorf("Unpause of a running sandbox: %v", err)
	}

	if err := b.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(ctx, id); err != nil {
		t.Fatalf("Stop of a paused sandbox: %v", err)
	}
	if b.runc.exists(containerID(id)) {
		t.Error("the paused sandbox's container outlived its Stop")
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, id, "echo again"); got != "again\n" {
		t.Fatalf("after a Stop of a paused sandbox and a Start: %q", got)
	}
}
