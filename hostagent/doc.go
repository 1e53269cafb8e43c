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

// Package hostagent is the execution kernel of a node: the sandboxes this
// node serves, the session handles open on them, synchronous commands,
// background jobs and file transfer, all on top of one backend. The agent
// API (hostagent/agentapi) exposes it to the gateway; the node-local
// reconciler drives its sandboxes from the Sandbox resources.
//
// Every call names the tenant, and the agent checks that the sandbox,
// handle or job belongs to it; a caller asking for another tenant's gets the
// same answer as for one that does not exist.
//
// # Services (issue 51, item 3: the split of Agent, under way)
//
// Agent had some 60 exported methods over a dozen files, one lock and one
// record per sandbox that every concern wrote. It is being split into
// services by concern. Each owns its state behind its own lock; another
// service reaches that state only through the owner's methods, named in a
// small interface at the consumer (this package's for services, agentserver's
// and nodeagent's for theirs). New builds them and wires them to each other;
// the agent server (agentserver.NewServer) and the node agent
// (nodeagent.Run) take the ones they call from the Agent. The services,
// their callers (S: agentserver, N: nodeagent, C: the conformance suite;
// the package's tests call most) and the state each owns:
//
//   - sandboxes (lifecycle; agent.go): Ensure, EnsureRestarted, Restart,
//     Suspend, Checkpointed, Remove, Serves, Alive, Pending, PendingFailed,
//     Backend, Backends, SetEgressCredentials, Close (N, C). Owns the table
//     of per-sandbox records (spec, backend, suspended, restartUnreported)
//     and the pending take-overs. Others ask it: served(id) (spec, backend),
//     backendFor(spec), pendingTakeover(id).
//   - runtime states (runtime.go): RuntimeOf, StateChanges (N); derived from
//     the record's flags, noted by the sandboxes, calls and limits services.
//   - sessions (agent.go): Open, Renew, CloseHandle, Activity (S),
//     OpenHandles (S, N). Owns the handle table and the handles per tenant
//     and per sandbox. Others ask it: resolve(tenant, handle) (spec,
//     backend); the sandboxes service has it drop a sandbox's handles.
//   - calls and idleness (idle.go): SetIdlePolicy, Asleep, RunIdle (N).
//     Owns the calls in progress per sandbox, their last end, the idle
//     policy, asleep/paused and the transit lock a sleep, wake, freeze or
//     restart holds. Others ask it: awaken(ctx, id) (ctx, done).
//   - usage and limits (usage.go, limits.go): SetUsageLimits, SampleUsage,
//     SaveUsage, Usage, UsageOf, RunLimits (N). Owns the usage book and the
//     freeze for a spent limit (limited, unadopted, afterThaw, inflight).
//     Others ask it: chargeable(ctx, spec, backend), limitRefusal(id),
//     frozenRefusal(id), killAtThaw, releaseAtThaw.
//   - exec and jobs (exec.go): Exec, StartJob, PollJob, JobInput, JobResize,
//     JobScreen, CancelJob, ExecOutputLimit (S, C), Jobs (S, N, C). Owns the
//     job manager and exec's latency histogram; the sandboxes service has
//     it adopt, park and end a sandbox's jobs.
//   - files (files.go): ReadFile, ReadFileRange, DigestFile, WriteFile,
//     WriteFileAt, AppendFile (S, C). No state: it resolves a handle
//     (sessions), checks the limits (usage), awakens the sandbox (calls) and
//     hands the call to the backend's FileServer.
//   - signing keys (signingkey.go): SetSigningKey, SigningKey,
//     ExpectSigningKey, SetStartSigningKey (N). Owns the keys to install at
//     the next start, the key each pile is known to hold, the calls waiting
//     for one. Others ask it: installStartKey and started (sandboxes), wait
//     (sessions, workers), forget (sandboxes' Remove).
//   - snapshots (snapshot.go): Snapshot, DeleteSnapshot, Snapshots (N).
//     Owns the count of snapshots in progress per sandbox, which the
//     sandboxes and limits services ask (taking(id)) before they take a
//     sandbox away for dead or freeze it.
//   - workers (workers.go): SetWorker, WorkerStatus, WorkerLog (N, C),
//     DialWorker (S). No state of its own (the backend's supervisor holds
//     the worker).
//   - warm pools (pool.go): ClaimWarm, UnclaimWarm, RunPools (N). Owns the
//     claimed sandboxes no Ensure took yet (blank: no job to adopt), which
//     the sandboxes service takes (takeBlank) at their first Ensure.
//   - metrics (metrics.go): Collector (N), read from each service.
//
// Agent keeps, while the split goes on, thin methods of the old names that
// call the service (each says so); they go once no caller uses them.
package hostagent
