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
	"strings"
	"time"
	"unicode/utf8"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// Chunk is a piece of a job's output as a poll returns it.
type Chunk = heldjob.Chunk

// Gap reports output the client had not read when the ring evicted it.
type Gap = heldjob.Gap

// State is a job's lifecycle state.
type State string

const (
	// StateRunning says the command runs.
	StateRunning State = "running"
	// StateCancelling says Kill was called (cancel, timeout or shutdown) and has
	// not yet proven the command's process tree dead.
	StateCancelling State = "cancelling"
	// StateExited says the command ended by itself; see Result.ExitCode and
	// Result.Signal.
	StateExited State = "exited"
	// StateKilled says job_cancel (or shutdown) ended it and the backend proved
	// its process tree dead.
	StateKilled State = "killed"
	// StateTimedOut says its timeout ended it, with the same proof as killed.
	StateTimedOut State = "timed_out"
	// StateFailed says the manager lost track of the command: Wait failed, or
	// Kill could not prove the tree dead. Result.Error says which.
	StateFailed State = "failed"
)

// Terminal reports whether the job has ended.
func (s State) Terminal() bool {
	return s != StateRunning && s != StateCancelling
}

// JobInfo describes a job.
type JobInfo struct {
	ID        string
	Tenant    string
	SandboxID string
	// Command is the job's command as a listing shows it (WithCommand);
	// empty when the job was started without one.
	Command string
	// Input says the job takes input (Manager.Input); TTY is its
	// terminal's size, nil for a job without one.
	Input     bool
	TTY       *TTYSize
	State     State
	StartedAt time.Time
	// EndedAt is when the job became terminal; zero while active.
	EndedAt time.Time
	// Result is set once the job is terminal.
	Result *Result
}

// Ended is a job that ended, as WithOnEnd's func is told.
type Ended struct {
	ID, Tenant, SandboxID string
	// Ran is the time it ran: from its start to its end, less the time
	// its sandbox was parked (suspended with its memory, or frozen).
	Ran time.Duration
}

// Result is how a job ended (the agent API's JobResult, the one shape of
// it): the ExitStatus its backend reported (ExitCode -1 when the shell did
// not exit normally or the manager does not know; Killed when Kill ended
// it, for a cancel, its timeout or a shutdown, and the backend proved its
// process tree dead; TimedOut when that Kill was its timeout's), and Error,
// which explains a failed job or a caveat of a killed one (output the
// backend did not deliver in time).
type Result = agentapi.JobResult

// PollResult is one page of a job's output.
type PollResult struct {
	// Job is the job's state when the page was taken.
	Job JobInfo
	// Chunks are the output after the cursor, oldest first, at most the
	// poll's byte budget in total.
	Chunks []Chunk
	// NextCursor is the cursor for the next poll.
	NextCursor string
	// Gap is set when output after the cursor was evicted before this poll.
	Gap *Gap
	// DroppedBytes and DroppedChunks count all output the job's ring has
	// evicted so far, read or not.
	DroppedBytes  uint64
	DroppedChunks uint64
	// Done is true when the job is terminal and this page reaches the end of
	// its output: Job.Result is final and there is nothing more to read. A
	// later poll with NextCursor acknowledges it.
	Done bool
}

// Stats are counters for metrics. Counts are current values; the uint64
// fields only grow.
type Stats struct {
	// Active and Retained are the jobs currently counted against the bounds.
	Active   int
	Retained int
	// Held counts the retained jobs that their sandboxes hold (their
	// output is there); Adopted, the held jobs taken over from an
	// earlier agent process.
	Held    int
	Adopted uint64
	// Started counts jobs admitted and started; Refused, Starts refused by
	// admission (bounds, halt, closed); StartFailed, admitted jobs whose
	// start func failed; Recycled, terminal jobs recycled.
	Started     uint64
	Refused     uint64
	StartFailed uint64
	Recycled    uint64
	// Reclaimed counts unread terminal jobs recycled to give their slot to
	// a tenant holding fewer (the fair-share rule of the node-wide bound).
	Reclaimed uint64
	// OutputBytes counts bytes written by jobs into their rings, in their
	// sandboxes, from each holder's totals when its job ends, as do
	// DroppedBytes and Evictions.
	OutputBytes uint64
	// DroppedBytes and Evictions count bytes and chunks the rings evicted.
	DroppedBytes uint64
	Evictions    uint64
	// HaltedSandboxes counts the sandboxes whose admission is halted.
	HaltedSandboxes int
}

// AdmissionStatus says whether the manager admits jobs in a sandbox; it is
// the source of the Sandbox's JobsAdmitted condition.
type AdmissionStatus struct {
	Halted bool
	// Reason is the error that halted admission, for operators: it may name
	// a tenant's job and sandbox.
	Reason string
	Since  time.Time
	// JobID, Tenant and SandboxID identify the job whose kill was not proven.
	JobID     string
	Tenant    string
	SandboxID string
}

// StartOption modifies one Start.
type StartOption func(*startOptions)

type startOptions struct {
	timeout time.Duration
	oom     func() (uint64, bool)
	command string
	input   bool
	tty     *TTYSize
	key     string
	request string
}

// WithKey makes a start idempotent for the job's lifetime: while the job
// it starts is retained (until its final page is acknowledged, it
// expires, or its sandbox is destroyed), another start of the same
// tenant's with the same key returns that job as it is now, counting
// against no bound, instead of starting one more; with another request
// it is refused with a *KeyConflictError. request identifies what was
// asked (a digest of the command, its sandbox and its options): the
// caller's, compared as it is. Keys are the tenant's own: another
// tenant's same key is another key. A held job keeps its key in its
// record in the sandbox, so the agent that adopts it honours it too.
// The caller bounds the key (agentapi.CheckIdempotencyKey); the manager
// keeps one per retained job, within the retained bounds.
func WithKey(key, request string) StartOption {
	return func(o *startOptions) { o.key, o.request = key, request }
}

// WithInput keeps a held job's standard input open after its start's:
// Manager.Input writes to it until it is ended.
func WithInput() StartOption {
	return func(o *startOptions) { o.input = true }
}

// WithTTY runs a held job on a pseudo-terminal of size, whose screen its
// holder keeps (Manager.Screen); the job takes input.
func WithTTY(size TTYSize) StartOption {
	return func(o *startOptions) { o.tty = &size }
}

// WithCommand records the job's command, as a listing shows it (List):
// at most MaxCommandSummary bytes of it, valid UTF-8. A held job keeps it
// in its record in the sandbox, so an agent that adopts the job lists it
// too.
func WithCommand(command string) StartOption {
	return func(o *startOptions) { o.command = commandSummary(command) }
}

// MaxCommandSummary bounds the bytes of a job's command that a listing
// shows; a longer one ends with "…".
const MaxCommandSummary = 200

// commandSummary is command as a listing shows it.
func commandSummary(command string) string {
	s := strings.ToValidUTF8(command, "\uFFFD")
	if len(s) <= MaxCommandSummary {
		return s
	}
	cut := MaxCommandSummary - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// WithTimeout kills the job (with the same proof as a cancel) once d has
// passed since its start func returned, and reports it timed_out. d <= 0
// means no timeout.
func WithTimeout(d time.Duration) StartOption {
	return func(o *startOptions) { o.timeout = d }
}

// WithOOMCounter gives a held job its sandbox's count of OOM kills
// (backend.OOMCounter): read when the job starts, kept with it, and read
// again when it ends by a signal, to say whether the OOM killer did it.
// Nil means none.
func WithOOMCounter(count func() (uint64, bool)) StartOption {
	return func(o *startOptions) { o.oom = count }
}
