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
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// endings records what WithOnEnd's func is told.
type endings struct {
	mu    sync.Mutex
	ended []Ended
}

func (e *endings) add(x Ended) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = append(e.ended, x)
}

func (e *endings) list() []Ended {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ended)
}

// TestRunTime is issue 50's short job: a job of a few seconds that began
// and ended between two of the agent's samples was charged nothing. Now
// its run time is counted from its start to its end, to the clock's
// tick, less the time its sandbox was parked (suspended with its memory,
// or frozen for a spent limit): the running jobs' so far in RunTime, and
// each job's whole at its end, told once to the agent's book.
func TestRunTime(t *testing.T) {
	var e endings
	h := newHarness(t, Limits{}, WithOnEnd(e.add))
	info, p := h.start("a", nil)
	other, q := h.start("b", nil)

	h.clock.Advance(3*time.Second + 250*time.Millisecond)
	if got := h.m.RunTime("sb-a"); got != 3250*time.Millisecond {
		t.Fatalf("a job 3.25 s into its run: RunTime %v", got)
	}
	h.m.ParkSandbox("sb-a")
	h.clock.Advance(time.Hour)
	if got := h.m.RunTime("sb-a"); got != 3250*time.Millisecond {
		t.Fatalf("after an hour parked: RunTime %v, want the 3.25 s it ran", got)
	}
	h.m.UnparkSandbox("sb-a")
	h.clock.Advance(1500*time.Millisecond + time.Millisecond)
	h.finish(info.ID, p, 0)
	if got := h.m.RunTime("sb-a"); got != 0 {
		t.Fatalf("RunTime %v with no job running", got)
	}
	want := []Ended{{ID: info.ID, Tenant: "a", SandboxID: "sb-a", Ran: 4751 * time.Millisecond}}
	if got := e.list(); !slices.Equal(got, want) {
		t.Fatalf("told at its end %+v, want %+v", got, want)
	}
	// The other sandbox's job ran all along, parked never.
	if got := h.m.RunTime("sb-b"); got != time.Hour+4751*time.Millisecond {
		t.Fatalf("the other sandbox's job: RunTime %v", got)
	}
	h.finish(other.ID, q, 0)
	if got := e.list(); len(got) != 2 || got[1].Ran != time.Hour+4751*time.Millisecond {
		t.Fatalf("told %+v", got)
	}
}

// TestRunTimeTakenOver: a job that another agent process took over is
// that one's to account for: its end here is not told.
func TestRunTimeTakenOver(t *testing.T) {
	var e endings
	h := newHarness(t, Limits{}, WithOnEnd(e.add))
	held := newRunningHeld()
	info, err := h.m.Adopt(context.Background(), "a", "sb-a", heldRecord(t, "a"), func(context.Context, string) (Held, error) { return held, nil })
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	held.err = heldjob.ErrSuperseded
	held.end()
	if got := h.waitDone(info.ID); got.State != StateFailed {
		t.Fatalf("a job taken over: %+v", got)
	}
	if got := e.list(); len(got) != 0 {
		t.Fatalf("a job taken over was told ended here: %+v", got)
	}
}
