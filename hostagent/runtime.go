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

package hostagent

import (
	"time"
)

// Runtime states. Whether a sandbox's processes run is the agent's to
// decide and to say (its Sandbox's Running condition): it puts a sandbox
// to sleep for idleness (idle.go), freezes it for its usage limit
// (limits.go) and suspends it for its spec. The state is derived from the
// sandbox's suspension, the idle service's record of its sleep and the
// limiter's of its freeze (stateLocked), and noted (noteState) by whoever
// completes a transition, never half-way: a sleep that checkpoints the sandbox is
// IdleSuspended once the checkpoint is taken, and a failed one was never
// anything but Running.

// RuntimeState is how a sandbox's processes are on this node.
type RuntimeState string

// The runtime states. Their names are the reasons of the Sandbox's
// Running condition.
const (
	// RuntimeRunning: its processes run.
	RuntimeRunning RuntimeState = "Running"
	// RuntimeIdlePaused: frozen for idleness, its memory in RAM.
	RuntimeIdlePaused RuntimeState = "IdlePaused"
	// RuntimeIdleSuspended: checkpointed for idleness, with its memory.
	RuntimeIdleSuspended RuntimeState = "IdleSuspended"
	// RuntimeIdleStopped: stopped for idleness, its files kept.
	RuntimeIdleStopped RuntimeState = "IdleStopped"
	// RuntimeWaking: a call waits for it to wake, for longer than
	// Options.WakeNotice.
	RuntimeWaking RuntimeState = "Waking"
	// RuntimeFrozen: frozen for its spent usage limit.
	RuntimeFrozen RuntimeState = "CPULimitReached"
	// RuntimeSuspended: suspended for its spec, with its memory.
	RuntimeSuspended RuntimeState = "Suspended"
	// RuntimeStopped: suspended for its spec, its processes stopped.
	RuntimeStopped RuntimeState = "Stopped"
)

// DefaultWakeNotice is Options.WakeNotice's default.
const DefaultWakeNotice = time.Second

// stateChangesBuffer bounds the notifications of state changes waiting for
// their reader; past it they are dropped (StateChanges).
const stateChangesBuffer = 1024

// Runtime is a sandbox's runtime state, as the agent last noted it.
type Runtime struct {
	State RuntimeState
	// Since is when the sandbox came to this state (on this agent
	// process: a sandbox it took over is in its state since then).
	Since time.Time
	// KeptMemory: asleep or suspended (or waking from that) with its
	// memory, which its wake or resume restores.
	KeptMemory bool
	// Idle is the idle policy it sleeps under.
	Idle IdlePolicy
}

// RuntimeOf is sandbox id's runtime state; false for a sandbox this agent
// does not serve.
func (a *Agent) RuntimeOf(id string) (Runtime, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sandboxes[id]
	if !ok || s.state == "" {
		return Runtime{}, false
	}
	_, keptMemory, idle := a.idle.runtimeOf(id)
	return Runtime{State: s.state, Since: s.stateSince, KeptMemory: s.keptMemory || keptMemory, Idle: idle}, true
}

// suspendedCount counts the sandboxes suspended by their spec.
func (a *Agent) suspendedCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, s := range a.sandboxes {
		if s.suspended {
			n++
		}
	}
	return n
}

// StateChanges delivers the ID of each sandbox whose runtime state
// changed, for its reader to report. It holds a bounded number; a change
// that finds it full is dropped, so the reader must also compare states
// on its own from time to time (the node agent's resync does).
func (a *Agent) StateChanges() <-chan string { return a.stateChanges }

// stateLocked derives s's runtime state from its suspension, its freeze
// (the limiter's) and its sleep (the idle service's), and says whether
// it kept its memory. The caller holds a.mu.
func (a *Agent) stateLocked(s *sandbox) (RuntimeState, bool) {
	id := s.spec.ID
	idle, idleKept, _ := a.idle.runtimeOf(id)
	keptMemory := s.keptMemory || idleKept
	switch {
	case a.limits.frozen(id):
		return RuntimeFrozen, keptMemory
	case s.suspended && s.keptMemory:
		return RuntimeSuspended, keptMemory
	case s.suspended:
		return RuntimeStopped, keptMemory
	case idle != "":
		return idle, keptMemory
	default:
		// Awake, or on its way to sleep: a sleep that fails leaves it
		// running.
		return RuntimeRunning, keptMemory
	}
}

// noteState records sandbox id's runtime state, after a change that the
// caller completed (noteStateLocked).
func (a *Agent) noteState(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sandboxes[id]; ok {
		a.noteStateLocked(s)
	}
}

// noteStateLocked records s's runtime state, where a transition is
// complete: a change is logged and its sandbox's ID sent to StateChanges.
// A sandbox's first state is recorded silently: the write that reports it
// provisioned carries it. The caller holds a.mu.
func (a *Agent) noteStateLocked(s *sandbox) {
	st, keptMemory := a.stateLocked(s)
	if st == s.state {
		return
	}
	from := s.state
	s.state, s.stateSince = st, a.clock.Now()
	if from == "" {
		return
	}
	a.opts.Logger.Info("Sandbox state changed", "sandbox", s.spec.ID, "tenant", s.spec.Tenant, "from", from, "to", st, "keptMemory", keptMemory)
	select {
	case a.stateChanges <- s.spec.ID:
	default: // full: the reader's own comparison finds it
	}
}
