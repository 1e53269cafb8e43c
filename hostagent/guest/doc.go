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

// Package guest is the guest binary's logic (playground-sandbox): what runs
// inside every sandbox, as its init (PID 1) and the per-command shepherds
// init keeps ready, and serves the host agent the guest protocol (package
// guestapi). Of Playground it imports that protocol (guestapi, its output
// ring and its multiplexer) and the leaves it shares with the agent, which
// import nothing of either (bounds, filecall, regularfile, duplex), so that
// nothing of the agent runs in a sandbox by accident; test/deps checks it.
//
// The agent never uses `runc exec` on the hot path (about 23 ms per call on
// the reference machine). Instead the container's PID 1 is this package's
// init, started from the static playground-sandbox binary. It listens on a
// unix socket in a directory only container root can enter and keeps a few
// idle shepherd processes blocked in accept(2) on that socket, so no process
// start is on a command's path (a sandbox waiting in the warm pool keeps
// none until it is claimed or first used: InitOptions.Lazy). A shepherd that accepts a connection runs
// that connection's one command; it serves another connection afterwards
// only if the command left no process behind (otherwise it exits, so that
// the leftovers become init's). A shepherd forks the command as the tenant's
// user and, on a Kill, kills every descendant until wait4 says ECHILD: the
// proof of cleanup the agent's cancellations rely on.
//
// The init and shepherds are Linux-only; the FreeBSD guest is the reaper
// that a jail's commands run under (reaper_freebsd.go) and the holder of
// each of its jobs (hold.go): a shepherd's job holding (shepherd.go,
// job.go), started for one job, with the operating system's process
// calls behind process_linux.go and process_freebsd.go.
package guest
