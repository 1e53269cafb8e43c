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

package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// TestListShowsWhatHoldsTheBounds: a tenant's listing has its jobs in one
// sandbox that it can still poll or cancel, oldest first, with their
// commands: running ones, and ended ones until their final page is
// acknowledged. Another tenant's jobs and another sandbox's are not in it.
// (An agent that lost its job IDs finds them here: kubectl playground
// jobs.)
func TestListShowsWhatHoldsTheBounds(t *testing.T) {
	h := newHarness(t, Limits{})
	first, _ := h.start("alice", nil, WithCommand("sleep 600"))
	h.clock.Advance(time.Second)
	second, p2 := h.start("alice", nil, WithCommand("make test"))
	h.clock.Advance(time.Second)
	third, p3 := h.start("alice", nil)
	h.start("bob", nil, WithCommand("bob's secret"))
	if _, err := startOn(t, h.m, "alice", "another-sandbox", func(s backend.Sink) (backend.Process, error) {
		return newFakeProc(s), nil
	}, WithCommand("elsewhere")); err != nil {
		t.Fatal(err)
	}
	h.finish(second.ID, p2, 3)
	h.finish(third.ID, p3, 0)
	cur, _ := h.drain("alice", third.ID, "")
	h.poll("alice", third.ID, cur, 0) // acknowledges the final page

	list := h.m.List("alice", "sb-alice")
	var got []string
	for _, j := range list {
		got = append(got, j.ID+" "+string(j.State)+" "+j.Command)
	}
	want := []string{first.ID + " running sleep 600", second.ID + " exited make test"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("List = %q, want %q", got, want)
	}
	if r := list[1].Result; r == nil || r.ExitCode != 3 {
		t.Errorf("the ended job's result %+v: want exit code 3", r)
	}
	if l := h.m.List("mallory", "sb-alice"); len(l) != 0 {
		t.Errorf("another tenant lists %d jobs of alice's sandbox", len(l))
	}
}

// TestAdoptedJobsKeepTheirCommand: a held job's command is in its record
// in the sandbox, so the agent that adopts it after a restart lists it as
// the one that started it did.
func TestAdoptedJobsKeepTheirCommand(t *testing.T) {
	h := newHarness(t, Limits{})
	meta, err := json.Marshal(heldMeta{Tenant: "alice", Command: "npm run dev"})
	if err != nil {
		t.Fatal(err)
	}
	rec := backend.JobRecord{Spec: backend.JobSpec{ID: agentapi.NewJobID(), Meta: meta}, PID: 42}
	attach := func(context.Context, string) (Held, error) { return newRunningHeld(), nil }
	if _, err := h.m.Adopt(context.Background(), "alice", "sb-alice", rec, attach); err != nil {
		t.Fatal(err)
	}
	list := h.m.List("alice", "sb-alice")
	if len(list) != 1 || list[0].ID != rec.Spec.ID || list[0].Command != "npm run dev" || list[0].State != StateRunning {
		t.Fatalf("List after adoption = %+v: want the running job %s with its command", list, rec.Spec.ID)
	}
}

// TestCommandSummary: a listing shows at most MaxCommandSummary bytes of
// a command, valid UTF-8, cut between characters and marked as cut.
func TestCommandSummary(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	for _, tc := range []struct{ in, want string }{
		{"ls -la", "ls -la"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{long, strings.Repeat("é", 98) + "…"},
	} {
		got := commandSummary(tc.in)
		if got != tc.want {
			t.Errorf("commandSummary(%.20q…) = %q, want %q", tc.in, got, tc.want)
		}
		if len(got) > MaxCommandSummary {
			t.Errorf("commandSummary(%.20q…) is %d bytes, over %d", tc.in, len(got), MaxCommandSummary)
		}
	}
}
