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

// Package jobs is the host agent's job manager. Every job is held by its
// sandbox (backend.JobHolder): the job's processes, its output ring and
// its kill with proof live there, in a holder process (hostagent/guest),
// charged to the sandbox and outliving the agent. The manager keeps the
// account: it admits jobs (job_exec) within bounds, routes polls and
// cancels to their holders, enforces timeouts, and recycles finished jobs
// once the client has acknowledged their final page or they went unread
// for the TTL.
//
// # Bounds
//
// Every bound is in [Limits] and enforced under the Manager's single mutex,
// so admission is atomic: the capacity check and the insertion of the new
// job happen in one critical section. The defaults are DESIGN.md section 4's:
// 8 active jobs per tenant and 32 in all, 8 retained jobs per tenant and 64 in
// all, a ring of 4 MiB and 1024 chunks per job (the holder's, in the
// sandbox), and a 1 h TTL for unread terminal jobs. A job is active while
// it is running or cancelling; it is retained from admission until it is
// recycled, so active jobs count against both bounds. A refusal never kills
// or recycles unfinished work.
//
// # Output and cursors
//
// A job's holder keeps its output in a bounded ring (package outring)
// that never blocks the job: the oldest chunks are evicted and counted. A
// cursor names the next chunk the client wants and its byte position in
// the job's whole output: "<seq>.<pos>" in canonical decimal, "" for the
// start. Clients should treat it as opaque. The position lets a poll whose
// chunks were evicted report exactly how many bytes it missed; a cursor
// that does not fit the job's output is refused, never guessed at. A long
// poll waits in the holder, for output or the job's end.
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
// tenant's job; recycling releases its holder.
//
// # Cancellation and proof
//
// Cancel moves a job to "cancelling" at once and asks its holder to kill
// it. The job turns terminal when the holder reports the end: killed, once
// every descendant is proven dead, or a lost proof. A lost proof (or a
// holder gone while its sandbox runs) makes the job "failed" with the
// error, and the manager halts admission in that sandbox until
// ResumeAdmission is called for it: it cannot promise that the sandbox is
// clean. Other sandboxes are unaffected. The same path serves per-job
// timeouts. EndSandbox ends a sandbox's jobs when all of its processes are
// killed at once (restart, suspension, destroy); their output goes with
// them, their results stay.
//
// # Connections and restarts
//
// StartHeld starts a job in its sandbox's holder (over the guest
// protocol) and keeps a Held connection to it; a watcher per job follows
// the end the holder reports unasked, to release the active slot, and
// attaches again when the connection breaks. Close leaves every job
// running, and the next manager takes them over with Adopt, under their
// IDs, from the record kept with each in the sandbox.
package jobs
