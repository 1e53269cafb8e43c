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
// Files, SigningKeys, ImageCredentials, Snapshots, Workers, Pools, Usage,
// Idleness, Limiter). Callers below: S agentserver, N nodeagent, C the conformance
// suite (the package's tests call most).
//
// Locks are taken in one order, which keeps them deadlock-free:
//
//  1. a sandbox's transit lock (the Agent's, one per sandbox), held by
//     whatever changes how its processes are while it runs: Ensure,
//     Restart, Suspend, a sleep and a wake (Idleness, through hold), a
//     freeze and a thaw (Limiter, through tryHold, which never waits);
//  2. the Agent's lock (its table of sandboxes, the pending ones);
//  3. the Idleness's lock;
//  4. the Limiter's lock;
//  5. the other services' (UsageBook, the call tracker, Snapshots,
//     SigningKeys, ImageCredentials, Sessions, Pools) and the job engine's, none of which
//     takes a lock above it while it holds its own (the job engine may
//     charge an ended job to the book: its lock, then the book's).
//
// A lock is only ever taken while holding ones above it: the Agent holds
// its own while it asks the Idleness and the Limiter of a sandbox (its
// runtime state, a freeze to forget); the Idleness holds its own while it
// asks the call tracker whether a sandbox is quiet; the Limiter holds its
// own while it asks the book for a refusal and begins a call (so that a
// freeze after finds it). Neither the Idleness nor the Limiter calls the
// Agent, nor one another, while it holds its own; a service below the
// Agent never holds its own while it calls another service.
//
//   - Sessions (sessions.go): Open, Renew, CloseHandle, Activity (S),
//     OpenHandles (S, N). Owns the handle table and the handles per tenant
//     and per sandbox; offers resolve (handleResolver) to the services
//     whose calls name a handle, and dropSandbox to a suspension or
//     removal.
//   - Execs (exec.go): Exec, StartJob, PollJob, JobInput, JobResize,
//     JobScreen, CancelJob, ExecOutputLimit (S, C). Owns exec's histogram;
//     offers adoptJobs. Asks handleResolver, callGate, execFreezes (the
//     limiter) and execTakeover (the sandboxes). Runs a command over the
//     guest protocol itself (guestexec.Exec) with how to reach the
//     sandbox's guest that its backend gives (Capabilities.Guest), else
//     through the backend's Exec (jail). The job engine (jobs.Manager,
//     Agent.Jobs) keeps its own state behind its methods.
//   - Files (files.go): ReadFile, ReadFileRange, DigestFile, WriteFile,
//     WriteFileAt, AppendFile (S, C). No state; asks handleResolver and
//     fileCalls, and hands the call to the backend's FileServer.
//   - SigningKeys (signingkey.go): SetSigningKey, SigningKey,
//     ExpectSigningKey, Untouched, SetStartSigningKey (N). Owns the keys to
//     install at the next start, the key each pile is known to hold, the
//     calls waiting for one and the claims whose first key goes in
//     unpaused; offers waitFor (keyWaiter) to Sessions and Workers,
//     and installStartKey, track, started and forget to the sandboxes.
//   - ImageCredentials (imagecredentials.go): SetImageCredentials,
//     ForgetImageCredentials, Keychain (N). Owns the registry credentials
//     the manager delivered for each Sandbox object of the node (by
//     namespace, name and UID), parsed into a keychain, in memory only;
//     the node agent decides which objects it takes them for and when
//     they go, and its pulls ask Keychain. No state of another service.
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
//   - Idleness (idle.go): SetIdlePolicy, Asleep, RunIdle (N). Owns each
//     sandbox's idle policy and its sleep (asleep, paused, slept, kept
//     memory, a wake noticed) and the sleep and wake metrics; offers
//     awaken (awakener: the wake on a call) to Sessions and, with the
//     Limiter as callGates, to Execs, Files, Workers and Snapshots; and
//     track, forget, sleeping, woken, runtimeOf to the sandboxes, and
//     sleeping, frozenAsleep to the Limiter. Asks idleSandboxes (hold,
//     resume, suspendOrStop, noteState) and idleLimits (admitCall,
//     frozen).
//   - Limiter (limits.go): RunLimits (N). Owns each sandbox's freeze for
//     its usage limit (frozen, its held jobs unadopted, what its thaw
//     finishes, the channel a call waiting for the thaw reads) and the
//     freeze metrics; offers admitCall (a call refused or counted in
//     progress), chargeable, limitRefusal and frozenRefusal (through
//     callGates), execFreezes to Execs, checkLimitSoon to the book, and
//     track, forget, frozen, unfreeze, adopted, freezeTakenOver to the
//     sandboxes. Asks limitSandboxes (served, servedIDs, tryHold,
//     noteState), limitIdle, the book, Snapshots (taking) and Execs
//     (adoptJobs, jobAdopter).
//   - the call tracker (calls.go, unexported): owns the calls in progress
//     in each sandbox and its last call's end; the Limiter begins calls
//     there (admitCall), the Idleness asks it (quietFor), a freeze
//     cancels them (cancelAll).
//
// The Agent (agent.go, runtime.go) is the sandboxes service, their
// lifecycle: Ensure, EnsureRestarted, Restart, Suspend, Checkpointed,
// Remove, Serves, Alive, Pending, PendingFailed, Backend, Backends,
// SetEgressCredentials, Jobs, Close (N, C); RuntimeOf, StateChanges (N);
// Collector (N). It owns the table of sandboxes (each one's spec,
// backend, suspension and transit lock), the pending ones and each
// sandbox's runtime state, which it derives from its own suspension, the
// Limiter's freeze and the Idleness's sleep (stateLocked) whenever one of
// them completes a change (noteState). It offers served, tenants,
// backendFor, pendingTakeover, pendingFor, waitPending, hold, tryHold,
// resume, suspendOrStop and noteState. A sandbox's record in the
// Idleness and the Limiter lives as long as its record in the Agent: the
// Agent starts them (track) and ends them (forget) under its lock.
package hostagent
