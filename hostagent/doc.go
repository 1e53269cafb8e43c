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
// # Services (issue 51, item 3)
//
// Agent had some 60 exported methods over a dozen files, one lock and one
// record per sandbox that every concern wrote. It is split into services
// by concern, each owning its state behind its own lock; another service
// reaches that state only through the owner's methods, named in a small
// interface at the consumer (this package's for services, agentserver's
// and nodeagent's for theirs). New builds them and wires them to each
// other; the agent server (agentserver.NewServer) and the node agent
// (nodeagent.Run) take the ones they call from the Agent (Sessions, Execs,
// Files, SigningKeys, Snapshots, Workers, Pools, Usage). Locks are taken
// in one order, the Agent's before a service's: a service never holds its
// own while it calls another. Callers below: S agentserver, N nodeagent,
// C the conformance suite (the package's tests call most).
//
//   - Sessions (sessions.go): Open, Renew, CloseHandle, Activity (S),
//     OpenHandles (S, N). Owns the handle table and the handles per tenant
//     and per sandbox; offers resolve (handleResolver) to the services
//     whose calls name a handle, and dropSandbox to a suspension or
//     removal.
//   - Execs (exec.go): Exec, StartJob, PollJob, JobInput, JobResize,
//     JobScreen, CancelJob, ExecOutputLimit (S, C). Owns exec's histogram;
//     offers adoptJobs. Asks handleResolver, callGate, execFreezes (the
//     limiter) and execTakeover (the sandboxes). The job engine
//     (jobs.Manager, Agent.Jobs) keeps its own state behind its methods.
//   - Files (files.go): ReadFile, ReadFileRange, DigestFile, WriteFile,
//     WriteFileAt, AppendFile (S, C). No state; asks handleResolver and
//     fileCalls, and hands the call to the backend's FileServer.
//   - SigningKeys (signingkey.go): SetSigningKey, SigningKey,
//     ExpectSigningKey, Untouched, SetStartSigningKey (N). Owns the keys to
//     install at the next start, the key each pile is known to hold, the
//     calls waiting for one and the claims whose first key goes in
//     unpaused; offers waitFor (keyWaiter) to Sessions and Workers,
//     and installStartKey, track, started and forget to the sandboxes.
//   - Snapshots (snapshot.go): Snapshot, DeleteSnapshot, Snapshots (N).
//     Owns the count of snapshots in progress, which Ensure, Alive and the
//     limiter ask (taking) before they take a sandbox for dead or freeze it.
//   - Workers (workers.go): SetWorker, WorkerStatus, WorkerLog (N),
//     DialWorker (S). No state (the backend's supervisor holds the worker).
//   - Pools (pool.go): ClaimWarm, UnclaimWarm, RunPools (N). Owns the
//     claimed sandboxes no Ensure took yet, which Ensure and Remove take
//     (takeBlank).
//   - UsageBook (usage.go): SetUsageLimits, SampleUsage, SaveUsage, Usage,
//     UsageOf (N). Owns the book; the limiter reads and marks it through
//     its methods (admit, stand, dueAmong, setFrozen, ...).
//   - the call tracker (calls.go, unexported): owns the calls in progress
//     in each sandbox and its last call's end; awaken begins and ends
//     calls there, idleness asks it (quietFor), a freeze cancels them
//     (cancelAll).
//
// Still the Agent's (agent.go, idle.go, limits.go, runtime.go), as the
// sandboxes service: Ensure, EnsureRestarted, Restart, Suspend,
// Checkpointed, Remove, Serves, Alive, Pending, PendingFailed, Backend,
// Backends, SetEgressCredentials, Jobs, Close (N, C); RuntimeOf,
// StateChanges (N); the calls in progress and idleness, SetIdlePolicy,
// Asleep, RunIdle (N); the usage limiter, RunLimits (N); Collector (N). It
// offers the services served, tenants, backendFor, pendingTakeover,
// pendingFor, waitPending (the table of sandboxes), awaken (awakener),
// chargeable (callGate), and the limiter's answers. What keeps these
// together is the per-sandbox record: idleness (the policy, asleep,
// paused), the freeze (limited, unadopted, afterThaw, thawed) and
// the lifecycle (suspended, restartUnreported) are its fields, written
// under one lock by Ensure, Restart, Suspend, a sleep, a wake and a freeze,
// serialised per sandbox by its transit lock, and the runtime state is
// derived from all of them; they are the next to part.
package hostagent
