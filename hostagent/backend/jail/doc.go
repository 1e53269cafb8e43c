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

// Package jail is the FreeBSD sandbox backend: one persistent jail per
// sandbox, made and run with the base system's tools (jail(8), jexec(8),
// jls(8), rctl(8), chflags(1), mount_nullfs(8), umount(8), pwd_mkdb(8)),
// every one issued through a Runner, so that what the backend asks of
// FreeBSD is tested on any system against a fake that behaves as the
// manuals say (jail_test.go).
//
// # Layout
//
//	<state>/jails/<id>/             one sandbox (0700)
//	    sandbox.json                the Spec
//	    root/                       the jail's path (root:wheel 0755)
//	        bin lib libexec sbin usr  nullfs of the base tree's, read-only
//	        etc/                    generated: passwd databases (pwd_mkdb),
//	                                the login profile, copies of EtcFiles
//	        dev/                    devfs with ruleset 4 (devfsrules_jail)
//	        home/sandbox workspace tmp  nullfs of layer/, writable
//	        pile/                   nullfs of the pile, writable, its files sappnd,
//	                                the signing key self.key schg (key.go)
//	        .playground/bin/        nullfs of the installed guest binary's directory, read-only
//	        .playground/run/jobs/   the jobs' sockets and records (root's, 0700)
//	    layer/{home,workspace,tmp}  the sandbox's writable files
//	<state>/piles/<id>/             the pile (PileDir): kept by Destroy with keepPile
//	<state>/bin/<hash>/playground-sandbox  the guest binary, by content
//
// # The jail
//
// jail -c with persist (it lives without processes), its own hostname,
// enforce_statfs=2, children.max=0, securelevel=3, every allow.* off (no
// raw sockets, no chflags, no mounts, no SysV IPC, no hostname changes) and
// a vnet of its own with only lo0 up: the network none of the other
// backends. rctl(8) rules on the jail's name bound its memory (memoryuse),
// processes (maxproc) and CPU (pcpu); they are added before the jail
// exists, so it never runs unbounded, and need kern.racct.enable=1.
//
// # Commands and their proof of cleanup
//
// A command runs through jexec(8) under the guest binary's reaper
// (playground-sandbox reap, hostagent/guest/reaper_freebsd.go),
// nullfs-mounted read-only at /.playground/bin: it becomes a reaper
// (procctl PROC_REAP_ACQUIRE) as the jail's root, runs the tenant's
// /bin/sh as the sandbox user, and on the agent's SIGTERM kills its whole
// subtree (PROC_REAP_KILL) until the kernel counts no descendant
// (PROC_REAP_STATUS), which its exit status reports. Without the guest
// binary, commands run under jexec -U as the sandbox user and Capabilities
// does not claim ProvesCleanup. Unlike the Linux guest, there is no init
// with idle shepherds: each command starts its own reaper, and workers,
// the relay and faculties are not offered.
//
// # Jobs
//
// The jail holds its background jobs as every sandbox does (job.go): a
// holder per job, `playground-sandbox hold` started by jexec as the jail's
// root, keeps the job's output ring, its socket and record under the
// jail's run directory (/.playground/run/jobs, emptied when the jail
// starts), and outlives the agent.
//
// # What is not done (see docs/isolation.md)
//
// Egress and faculties: a spec with egress rules or faculties is refused.
// Disk limits need ZFS (Options.ZFSParent, storage.go); on UFS a sandbox's
// disk is unbounded. The reaper's kill loop and the
// whole backend have been built and vetted for FreeBSD and tested here
// against a fake of its tools, never run on FreeBSD.
package jail
