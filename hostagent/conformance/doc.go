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

// Package conformance is the test suite every sandbox backend runs: what
// the host agent's kernel (package hostagent and its job manager) relies on
// a backend for, checked against the real thing. A backend is done when it
// passes; one that cannot run on the machine skips the suite and says why.
//
// The suite drives the backend through the kernel (hostagent.Agent) where
// the kernel is what a user meets (exec, files, jobs, sessions, restarts),
// and directly where the contract is the backend's own (the doc comments of
// backend.Backend and backend.Process: Kill's proof of cleanup, the errors
// for expected states, Stop, Destroy). It lives above the kernel it
// drives, not under backend/, so that no package of backend/ imports the
// kernel (test/deps); each backend's tests import it. Its groups, each a
// subtest on a fresh node so that any of them runs alone (go test -run
// 'TestConformance/jobs'):
//
//   - lifecycle: unknown and stopped sandboxes say so, unsafe sandbox IDs
//     are refused by every call, handles and job IDs not of the shape the
//     kernel issues are answered as unknown ones, provisioning and starting
//     again keep files and processes, Destroy ends running commands and
//     removes the workspace.
//   - exec: a fresh /bin/sh per call, login and clean shells, cwd, stdin,
//     byte-exact output, exit status, background processes outliving their
//     command, concurrent commands, and a timeout that kills the command's
//     whole tree.
//   - files: write and read byte-exact, atomic replacement, the size limit
//     refusing rather than truncating, the tenant's permissions; a file
//     over the limit uploaded in ranges (by append, and at offsets in any
//     order) and downloaded in ranges, checked by its digest; ranges at
//     the start, middle and end and past the end; refusals that change
//     nothing; no ranged write into the pile, even through a link.
//   - kill: Process.Kill proves dead every descendant of a command (setsid,
//     double fork, SIGTERM ignored), while an unrelated process lives; also
//     after a Wait that gave up at its deadline, and harmlessly after the
//     command's end.
//   - jobs: byte-exact output through the job manager, cancellation with
//     that proof, and the bound on active jobs.
//   - persistence: files and processes across closing the last session
//     and across an agent restart (a new backend and kernel over the same
//     node state, the new login profile applied); files, but no process,
//     across a restart of the sandbox and across a stop followed by a new
//     agent (a node reboot); another node's backend does not know it.
//   - limits: the PIDs and memory limits of backend.Resources hold inside.
//   - pile: the pile is append-only inside, visible on the host, and kept
//     by Destroy when asked.
//   - isolation: a second sandbox on the node sees neither the first's files
//     nor its processes, and cannot signal them or the supervision; /tmp is
//     1777; sockets of families beyond unix, inet and inet6 (AF_VSOCK above
//     all) do not open, and a system call of another ABI (i386's int 0x80
//     on amd64) is killed (or, on a kernel that has no such ABI, such as
//     gVisor's, fails with ENOSYS), both tried by a probe program (package
//     probe) that the suite builds and writes into the sandbox.
//   - faculties: Spec.Faculties' listed binaries run by name in login and
//     clean shells, the first faculty listed winning a name; nothing of an
//     installed build, nor the links to it, can be written from inside;
//     an unlisted file is not on PATH; a changed set shows at the next
//     restart, not before.
//   - builder (backends with a Builder in their Capabilities): /src read-only
//     with the source, cwd /out, /out's files back on the host owned by
//     the agent and without links, exit code and a bounded log tail, the
//     timeout and a cancelled context killing the build, no network, none
//     of the node's files or another sandbox's, a tenant's sandbox ID
//     refused, and nothing left once Build returns (Harness.Leftovers).
//
// Capability flags decide: on a backend without ProvesCleanup the kernel
// must refuse jobs and Kill must report a lost proof; without
// AppendOnlyPile the pile group is skipped.
//
// A backend that runs several isolations (oci: runc or gVisor) runs the
// suite once for each, with Harness.Isolation. A guarantee that one cannot
// give is listed in Harness.Known with its reason, and its case is skipped
// saying so: the list is the record of what a backend lacks, and the
// backend's documentation names every entry.
//
// # Running it
//
// A backend's tests call Run with a Harness that makes a node's state
// directory and builds the backend over it; building it again over the same
// directory is an agent restart. A backend that cannot run here skips first:
//
//	func TestConformance(t *testing.T) {
//		if reason := unavailable(); reason != "" {
//			t.Skip(reason)
//		}
//		conformance.Run(t, conformance.Harness{
//			NewStateDir: func(tb testing.TB) string { return newStateDir(tb) },
//			New: func(tb testing.TB, dir string) backend.Backend { return newBackend(tb, dir) },
//			Leftovers: leftovers, // optional: what a node holds of a sandbox
//		})
//	}
//
// The helpers Exec, Sh, Sink, StartSentinel, Alive, StartNamed and Running
// serve a backend's own tests of what is particular to it.
package conformance
