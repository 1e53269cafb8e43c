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

// Package jobs is the host agent's job manager: it admits background jobs
// (job_exec), keeps each job's output in a bounded ring, serves it to
// job_poll by cursor with an optional long poll, cancels jobs with the
// backend's proof of cleanup (job_cancel, timeouts), and recycles finished
// jobs once the client has acknowledged their final page or they went unread
// for the TTL.
//
// # Bounds
//
// Every bound is in [Limits] and enforced under the Manager's single mutex,
// so admission is atomic: the capacity check and the insertion of the new
// job happen in one critical section. The defaults are DESIGN.md section 4's:
// 8 active jobs per tenant and 32 in all, 8 retained jobs per tenant and 64 in
// all, a ring of 4 MiB and 1024 chunks per job, and a 1 h TTL for unread
// terminal jobs. A job is active while it is running or cancelling; it is
// retained from admission until it is recycled, so active jobs count against
// both bounds. A refusal never kills or recycles unfinished work.
//
// # Output
//
// The backend writes a job's output through a [backend.Sink]. The ring never
// blocks the writer: when a write does not fit, the oldest chunks are evicted
// and counted. Adjacent writes to the same stream are coalesced into one chunk
// of up to Limits.ChunkBytes, so that a process writing a byte at a time does
// not exhaust the chunk bound; a chunk is sealed (never extended again) once a
// poll has handed out any of it, so every byte is delivered under a single
// (seq, offset) address.
//
// # Cursors
//
// A cursor names the next chunk the client wants and its byte position in
// the job's whole output: "<seq>.<pos>" in canonical decimal, "" for the start.
// Clients should treat it as opaque. The position lets a poll whose chunks
// were evicted report exactly how many bytes it missed; a cursor that does not
// fit the job's output is refused, never guessed at.
//
// # Acknowledgement and TTL
//
// The poll that returns Done hands out the final page. A later poll whose
// cursor is still at the end returns Done again and acknowledges it; the job
// is then recycled the next time capacity is needed or the sweeper runs. A
// terminal job that is not acknowledged expires TTL after the later of the
// moment it became terminal and its last poll, so a client that is still
// paging through a large result is not cut off. Expired and acknowledged
// jobs are recycled lazily: by the periodic sweep, by a lookup that finds
// them expired, and by admission when a retained bound is hit. A recycled
// job is indistinguishable from one that never existed, as is another
// tenant's job.
//
// # Cancellation and proof
//
// Cancel moves a job to "cancelling" at once and calls Process.Kill in a
// goroutine the manager owns. The job turns terminal only once Kill has
// returned nil (the backend proved every descendant dead) and the process's
// Wait has returned (all output delivered). If Kill fails, the job becomes
// "failed" with the error, and the manager halts admission in that sandbox
// until ResumeAdmission is called for it: it cannot promise that the
// sandbox is clean. Other sandboxes are unaffected. The same path serves
// per-job timeouts. EndSandbox ends a sandbox's jobs when all of its
// processes are killed at once (restart, suspension, destroy).
//
// # Jobs their sandboxes hold
//
// On a backend whose sandboxes hold jobs (backend.JobHolder), StartHeld
// starts a job in the sandbox's holder (over the guest protocol): the processes,
// the ring, the cursors and the kill with proof are the holder's, in the
// sandbox, and the manager keeps only the account: admission and bounds,
// the timeout, the TTL and the final page's acknowledgement. Polls and
// cancels go to the holder over a Held connection; a watcher per job
// follows the end the holder reports unasked, to release the active slot,
// and attaches again when the connection breaks. A holder gone while its
// sandbox runs is a lost proof, and halts admission as a failed kill does.
// Close leaves held jobs running, and the next manager takes them over
// with Adopt, under their IDs, from the record kept with each in the
// sandbox; recycling a held job releases its holder.
package jobs
