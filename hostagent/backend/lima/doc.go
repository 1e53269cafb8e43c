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

// Package lima is the lima backend: one Lima virtual machine per sandbox,
// driven through limactl's command line (create, start, stop, delete,
// list --json, shell, disk create/list/delete), with the same guest binary
// (playground-sandbox init and its shepherds) inside the VM as in every
// other kind of sandbox.
//
// Built to limactl's documented contract (Lima v2: cmd/limactl, pkg/store,
// templates/default.yaml), not against a running Lima: Lima is not
// obtainable on the machines this was written on. The tests run a recorded
// fake of limactl (fake_test.go), run the guest's half (the provision
// script, init as its unit starts it) in a Debian root without Lima or
// systemd (guest_test.go), and run the conformance suite only where
// limactl is on the PATH. docs/lima.md says what that does and does not
// prove.
//
// How a sandbox is laid out:
//
//   - The instance is named InstanceName(id) ("pg-" + the sandbox ID) and
//     lives in LIMA_HOME (Options.LimaHome), which this backend owns.
//     limactl refuses to run as root, so an agent running as root runs it
//     as Options.RunAs.
//   - The generated lima.yaml (see config.go) sizes the VM from the Spec,
//     mounts nothing of the host but a directory holding only the guest
//     binary, read-only, enables no containerd, forwards no TCP port, and
//     forwards one unix socket: init's, /.playground/run/agent.sock in the
//     guest, to sock/agent.sock in the instance directory, so that Exec is
//     the guest protocol over a unix socket exactly as on the oci backend.
//   - A provision script (mode system: root, on every boot) creates the
//     tenant user (uid 1000, no sudo, checked), installs the guest binary,
//     seals the pile append-only (chattr +a, by root), leaving the
//     tenant's signing key read-only and immutable (chattr +i, key.go),
//     and starts
//     playground-sandbox.service: init as PID 1 of its own PID and mount
//     namespaces (unshare) and of a network namespace with loopback only
//     (PrivateNetwork), with NoNewPrivileges so that no setuid program
//     (sudo) raises a tenant process, address families and system-call
//     ABI restricted as the oci backend's seccomp does, and the Spec's
//     memory, PIDs and CPU as the service's cgroup limits.
//   - The pile is a Lima disk of its own (limactl disk create), attached
//     as an additional disk, ext4, mounted by Lima at /mnt/lima-<disk> and
//     bound to /pile in init's namespace. Destroy deletes the instance and
//     keeps the disk when asked to keep the pile; PileDir is the disk's
//     directory in LIMA_HOME/_disks (the disk image, not the pile's files).
package lima
