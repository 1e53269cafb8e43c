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

// Package oci is the Linux sandbox backend: one persistent OCI container per
// sandbox, run detached by runc from the distribution, with its state kept
// under the agent's state directory so that the workspace (and the processes
// in it) outlive the agent process.
//
// # Layout
//
//	<state>/runc/                   runc --root: container state (0700)
//	<state>/runsc/                  runsc --root: gVisor sandboxes' state (0700; gvisor.go)
//	<state>/bin/playground-sandbox-<hash>  the guest binary, by content
//	<state>/shared/<fingerprint>/   the node's /etc entries (copies) and the guest binary (a link), overlaid by runc sandboxes (overlay.go)
//	<state>/empty/                  every such overlay's bottom layer
//	<state>/images/<hex>/           an image's layers mounted read-only while a sandbox names it (image.go)
//	<state>/builders/<id>           a builder (builder.go) exists: removed by New if left
//	<state>/sandboxes/<id>/         one sandbox or builder (root:<its gid>, 0710)
//	    sandbox.json                the Spec (its isolation: the runtime) and the sandbox's ID-map slot
//	    config.json                 the runc bundle, rewritten at each start
//	    rootfs/                     read-only root: mount points and symlinks
//	    etc/                        generated /etc (passwd, profile, hosts…)
//	    layer.img                   the writable layer's ext4 image (sparse)
//	    layer/                      its mount: home/ workspace/ tmp/
//	    pile.img                    the pile's ext4 image (sparse)
//	    pile/                       its mount: the append-only pile, at /pile
//	    run/                        init's socket directory (container root, 0700)
//	    faculties/                  /opt/faculties: mount points, bin/ links (made at each start)
//	    base/                       mount points of its overlays and device nodes, mounted only where runc starts it (overlay.go)
//	    shared.ref                  the snapshot of <state>/shared/ its container was made with
//	    init.log                    init's stderr, runc's errors
//
// # Disk
//
// The writable layer and the pile are each a filesystem of its own, in a
// sparse image loop-mounted by the agent, so the kernel bounds their bytes
// and inodes (see disk.go and docs/isolation.md). The images are mounted
// while the sandbox is provisioned, and unmounted (their loop devices
// released) by Stop, StopAll and Destroy. Destroy keeps pile.img when the
// pile is retained; InspectPile reads it.
//
// # Execution
//
// The container's PID 1 is playground-sandbox (package hostagent/guest), which
// keeps idle shepherds ready on a unix socket in run/. Exec connects to that
// socket; no runc process is involved per command. See package guestapi for
// the protocol, and docs/isolation.md for what the sandbox does and does not
// isolate.
//
// # Deployment
//
// Containers are started with `runc run --detach` and reparent away from the
// agent, so they survive the agent process. For them to survive the agent's
// pod as well, the agent must run in the host's PID namespace (a container's
// PID namespace is nested in its creator's and dies with it), with StateDir
// on a host path, and with an absolute Options.CgroupParent outside the
// pod's cgroup. One Backend per state directory at a time: lifecycle
// operations are serialised within a Backend, not across processes.
package oci
