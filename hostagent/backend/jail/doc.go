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
//	        pile/                   nullfs of the pile, writable, its files sappnd
//	    layer/{home,workspace,tmp}  the sandbox's writable files
//	<state>/piles/<id>/             the pile (PileDir): kept by Destroy with keepPile
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
// # What is not done (see docs/isolation.md)
//
// Commands run through jexec(8) as the sandbox user, not under the guest
// binary's shepherds: the FreeBSD port of the guest's reaper (procctl
// PROC_REAP_ACQUIRE / PROC_REAP_KILL) is not written, so Capabilities does
// not claim ProvesCleanup and the agent admits no background jobs here.
// Disk limits (a ZFS dataset quota per sandbox) and egress are not done:
// a spec with egress rules is refused.
package jail
