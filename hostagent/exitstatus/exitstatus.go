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

// Package exitstatus is how a command ended, one shape of it for every
// side that speaks of it: the guest binary that reaps the command and the
// guest protocol that carries its end (hostagent/guestapi), the backends,
// the job engine and the kernel that report it, and the agent API
// (hostagent/agentapi) that answers it. It imports nothing of them.
//
// Status's JSON is the agent API's (docs/agent-api.md); the guest
// protocol carries the same value in its own form, fixed by its version
// (guestapi.End), converted there.
package exitstatus

import "time"

// Status is how a command or a job ended. A sandbox's guest says what it
// saw (the code or signal, and whether its Kill ended the command); the
// host adds what only it knows (TimedOut, OOMKilled, and the Duration it
// measured), which the guest leaves zero.
type Status struct {
	// ExitCode is the shell's exit code when it exited normally, else -1
	// (also when the agent does not know).
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the shell ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// Killed is true when a kill ended it (cancel, timeout or shutdown)
	// and its process tree was proven dead.
	Killed bool `json:"killed,omitempty"`
	// TimedOut is true when that kill was the command's timeout: the
	// kernel's to say, not a backend's.
	TimedOut bool `json:"timed_out,omitempty"`
	// OOMKilled is true when the sandbox ran out of memory while the
	// command ran and the OOM killer killed one of its processes (the
	// command's shell or another).
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Duration is the time from start to end (nanoseconds on the wire).
	Duration time.Duration `json:"duration"`
}

// Job is how a job that its sandbox held ended, as its holder says: the
// Status of its shell (Duration its run time, from its start to its end)
// and its output's totals.
type Job struct {
	Status
	// Output, DroppedBytes and DroppedChunks are the job's totals: the
	// bytes it wrote, and what its ring evicted of them.
	Output, DroppedBytes, DroppedChunks uint64
}
