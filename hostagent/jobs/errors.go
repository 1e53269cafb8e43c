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
	"errors"
	"fmt"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/guestapi/outring"
)

// Sentinels for errors.Is; the typed errors below carry the details.
var (
	// ErrCapacity: a job bound was hit and no capacity could be freed.
	ErrCapacity = errors.New("job capacity exhausted")
	// ErrNotFound: no such job for this tenant.
	ErrNotFound = errors.New("job not found")
	// ErrAdmissionHalted: the manager stopped admitting jobs in a sandbox because a kill
	// could not be proven.
	ErrAdmissionHalted = errors.New("job admission halted")
	// ErrBadCursor: the cursor is malformed or does not fit the job's output.
	ErrBadCursor = outring.ErrBadCursor
	// ErrClosed: the manager has been closed.
	ErrClosed = errors.New("job manager closed")
	// ErrUnreachable: the sandbox that holds the job did not answer (its
	// connection broke and could not be made again in time); the job and
	// its output are in the sandbox, and a later call may reach them.
	ErrUnreachable = errors.New("the sandbox that holds the job does not answer right now: retry shortly")
	// ErrSuspended: the sandbox that holds the job is suspended with its
	// memory (ParkSandbox); the job and its output are kept in the
	// suspended sandbox and go on when it resumes.
	ErrSuspended = errors.New("the sandbox that holds the job is suspended: the job and its output are kept and go on when it resumes")
	// ErrKeyConflict: the start's idempotency key is the tenant's key of
	// a job of another request.
	ErrKeyConflict = errors.New("idempotency key given to another request")
)

// Bound names a capacity bound.
type Bound string

// The bounds of Limits, by the name a LimitError gives them.
const (
	BoundActivePerTenant   Bound = "active_per_tenant"
	BoundActivePerAgent    Bound = "active_per_agent"
	BoundRetainedPerTenant Bound = "retained_per_tenant"
	BoundRetainedPerAgent  Bound = "retained_per_agent"
)

// LimitError is a refused start (StartHeld, Adopt): which bound was hit, its value, and what the
// caller can do about it.
type LimitError struct {
	Bound  Bound
	Tenant string
	// Count is how many jobs the bound was counting, Limit its value.
	Count int
	Limit int
	// TTL is the terminal-job TTL, quoted in the advice for retained bounds.
	TTL time.Duration
	// RetryAfter, for retained bounds, is when the first unread result
	// counted by the bound expires and frees a slot; zero when every job
	// it counts is still running.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	switch e.Bound {
	case BoundActivePerTenant:
		return fmt.Sprintf("tenant %s has %d active jobs (limit %d): wait for one to finish or cancel one with job_cancel",
			e.Tenant, e.Count, e.Limit)
	case BoundActivePerAgent:
		return fmt.Sprintf("this node has %d active jobs across all tenants (limit %d): retry when some have finished, or cancel one of yours with job_cancel",
			e.Count, e.Limit)
	case BoundRetainedPerTenant:
		first := ""
		if e.RetryAfter > 0 {
			first = fmt.Sprintf(" (the first in %s)", e.RetryAfter.Round(time.Second))
		}
		return fmt.Sprintf("tenant %s holds %d jobs that are still running or whose results were not collected (limit %d): "+
			"poll terminal jobs to their end (until done, then once more) so they can be recycled, cancel jobs you no longer need, "+
			"or wait for unread results to expire after %s%s",
			e.Tenant, e.Count, e.Limit, e.TTL, first)
	case BoundRetainedPerAgent:
		first := ""
		if e.RetryAfter > 0 {
			first = fmt.Sprintf(", or in %s, when the first unread result expires", e.RetryAfter.Round(time.Second))
		}
		return fmt.Sprintf("this node holds %d jobs across all tenants that are still running or whose results were not collected (limit %d), "+
			"and you hold as many as any other tenant (the node's slots are shared fairly): poll your terminal jobs to their end "+
			"(until done, then once more) so they can be recycled, or retry when a running job ends%s",
			e.Count, e.Limit, first)
	}
	return fmt.Sprintf("job bound %s hit (%d of %d)", e.Bound, e.Count, e.Limit)
}

// Is makes errors.Is(err, ErrCapacity) true.
func (e *LimitError) Is(target error) bool { return target == ErrCapacity }

// NotFoundError is returned for unknown, malformed, recycled and other
// tenants' jobs alike, with the same message (agentapi.JobNotFound), so
// that a caller learns nothing about jobs that are not its own.
type NotFoundError struct {
	// JobID is the ID asked for. It is not in the message: it is the
	// caller's, of any shape.
	JobID string
}

func (e *NotFoundError) Error() string { return agentapi.JobNotFound }

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

func notFound(id string) error { return &NotFoundError{JobID: id} }

// HaltedError refuses a start in a sandbox whose admission is halted. Its
// message is shown to the sandbox's tenant: it names the reason but not the
// job that caused it; Cause (and AdmissionStatus) carry the details for
// operators.
type HaltedError struct {
	SandboxID string
	Since     time.Time
	Cause     error
}

func (e *HaltedError) Error() string {
	return "background jobs are halted in this sandbox: the backend could not prove that a killed command's processes are gone " +
		"(its sandbox ran out of memory, or a process of the sandbox's supervision was killed), so no job starts here until the sandbox is restarted, " +
		"which kills every process in it; exec still works; ask the operator to restart it (kubectl playground tenant restart), " +
		"or it restarts by itself if its init died"
}

// Is makes errors.Is(err, ErrAdmissionHalted) true.
func (e *HaltedError) Is(target error) bool { return target == ErrAdmissionHalted }

// Unwrap exposes the backend error, e.g. backend.ErrProofLost.
func (e *HaltedError) Unwrap() error { return e.Cause }

// KeyConflictError refuses a start whose idempotency key (WithKey) the
// tenant gave a job of another request, still retained.
type KeyConflictError struct {
	Key   string
	JobID string
}

func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("idempotency_key %q belongs to job %s, started by another request (another command, shell, cwd, stdin, timeout or terminal, or another sandbox): "+
		"send the same request to get job %s back, or a new key for a new job", e.Key, e.JobID, e.JobID)
}

// Is makes errors.Is(err, ErrKeyConflict) true.
func (e *KeyConflictError) Is(target error) bool { return target == ErrKeyConflict }

// CursorError refuses a cursor.
type CursorError = outring.CursorError
