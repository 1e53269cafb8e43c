//go:build linux

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

package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// gVisor (runsc) as the runtime of sandboxes of backend.IsolationGVisor.
//
// The sandbox is the same as under runc: the same bundle layout, mounts,
// guest binary, ID map and cgroup limits, with runsc's own root
// (<state>/runsc). What differs is handled here and named in
// docs/isolation.md:
//
//   - init's socket. A socket that a process in gVisor binds lives in the
//     sentry, not on the node. runsc runs with --host-uds=create, so that a
//     bind(2) on a host-backed mount (the run directory is one) creates a
//     real socket on the node, served by the sentry: the agent connects to
//     run/agent.sock exactly as under runc, and the shepherds accept on it.
//   - init's PID. runsc's --pid-file names the sandbox process (the sentry,
//     "runsc-sandbox"), not the guest's init, which has no node PID: Alive
//     checks that process, which ends with init. The worker's reload signal
//     goes through `runsc kill`, which signals the container's init. The
//     sentry's end is also the proof that a command's processes are gone
//     when its connection breaks (exec.go, process.kernel).
//   - names, state and cgroups. runsc's container names end in '+'
//     (runc.name), it keeps their state in <root>/<name>_sandbox:<name>.state
//     and their cgroup there (cgroupPaths).
//   - limits. The PIDs limit is the sentry's RLIMIT_NPROC (gvisorSpec).
//   - egress. The sandbox takes its namespace's link at its start and keeps
//     it: a reattach renews only the node's side (egress.go).
//
// runsc's global flags: systrap (ptrace is slower, KVM is absent on most
// nodes and on these machines), no overlay over the read-only root (every
// writable path is a bind mount of the node's), the OCI seccomp profile
// applied by the sentry to the guest's system calls, and a network stack
// with loopback only (runsc's "sandbox" network would copy the interfaces
// of a namespace without egress, whose loopback is not up).
var gvisorFlags = []string{
	"--platform=systrap",
	"--host-uds=create",
	"--overlay2=none",
	"--oci-seccomp",
	"--network=none",
}

// gvisorEgressFlags start a sandbox with an egress list: gVisor's network
// stack takes the interfaces, addresses and routes of the sandbox's egress
// namespace (egress.go), whose eth0 it drives through a packet socket. The
// ruleset is on the node's end of the veth pair, in the agent's namespace,
// so it filters gVisor's packets as it does a runc sandbox's.
var gvisorEgressFlags = []string{"--network=sandbox"}

// newGVisor is the runtime of gVisor sandboxes; nil when the agent has
// no runsc.
func (b *Backend) newGVisor() *runc {
	if b.opts.GVisorRuntime == "" {
		return nil
	}
	return &runc{
		bin:    b.opts.GVisorRuntime,
		root:   filepath.Join(b.opts.StateDir, "runsc"),
		flags:  gvisorFlags,
		gvisor: true,
	}
}

// Isolations implements backend.Isolator: containers always, gVisor when
// the agent has runsc.
func (b *Backend) Isolations() []string {
	if b.gvisor == nil {
		return []string{backend.IsolationContainer}
	}
	return []string{backend.IsolationContainer, backend.IsolationGVisor}
}

// checkIsolation refuses an isolation this backend does not run.
func (b *Backend) checkIsolation(spec backend.Spec) error {
	switch iso := backend.IsolationOf(spec); iso {
	case backend.IsolationContainer:
		return nil
	case backend.IsolationGVisor:
		if b.gvisor == nil {
			return fmt.Errorf("oci: sandbox %s asks for gVisor isolation, but this agent has no runsc (start it with --runsc)", spec.ID)
		}
		return nil
	default:
		return fmt.Errorf("oci: sandbox %s asks for isolation %q, neither %q nor %q", spec.ID, iso, backend.IsolationContainer, backend.IsolationGVisor)
	}
}

// keepIsolation refuses to run an existing sandbox with another isolation
// than it was provisioned with (sandbox.json records it): its boundary
// never changes under its tenant.
func keepIsolation(sb *sandbox, spec backend.Spec) error {
	if have, want := backend.IsolationOf(sb.spec), backend.IsolationOf(spec); have != want {
		return fmt.Errorf("oci: sandbox %s was provisioned with %s isolation and cannot change to %s: delete it and create it anew", spec.ID, have, want)
	}
	return nil
}

// runtimeFor is the runtime that runs sb.
func (b *Backend) runtimeFor(sb *sandbox) (*runc, error) {
	if backend.IsolationOf(sb.spec) != backend.IsolationGVisor {
		return b.runc, nil
	}
	if b.gvisor == nil {
		return nil, fmt.Errorf("oci: sandbox %s runs under gVisor, but this agent has no runsc (start it with --runsc)", sb.spec.ID)
	}
	return b.gvisor, nil
}

// runtimeOf is the runtime that holds sandbox id's container, if any
// (runc otherwise): what stops, signals and probes a running sandbox go
// by, whatever its sandbox.json says.
func (b *Backend) runtimeOf(id string) *runc {
	if b.gvisor != nil && b.gvisor.exists(containerID(id)) {
		return b.gvisor
	}
	return b.runc
}

// gvisorStateFile is runsc's state file of the root container id, which
// names its sandbox after itself.
func (r *runc) gvisorStateFile(id string) string {
	name := r.name(id)
	return filepath.Join(r.root, name+"_sandbox:"+name+".state")
}

// gvisorCgroup is the part of runsc's state file that says where the
// sandbox's cgroup is.
type gvisorCgroup struct {
	V1 *struct {
		Name    string            `json:"name"`
		Parents map[string]string `json:"parents"`
	} `json:"cgroupv1"`
	V2 *struct {
		Mountpoint string `json:"mountpoint"`
		Path       string `json:"path"`
	} `json:"cgroupv2"`
}

func (r *runc) gvisorCgroup(id string) (gvisorCgroup, bool) {
	var st struct {
		Sandbox struct {
			Cgroup gvisorCgroup `json:"cgroup"`
		} `json:"sandbox"`
	}
	data, err := os.ReadFile(r.gvisorStateFile(id))
	if err != nil || json.Unmarshal(data, &st) != nil {
		return gvisorCgroup{}, false
	}
	return st.Sandbox.Cgroup, true
}

// hybridUnified is the cgroup2 hierarchy that a cgroup v1 host in hybrid
// mode mounts beside its controllers, without controllers of its own,
// where systemd and the kubelet track processes; "" on other hosts.
func hybridUnified() string {
	const dir = "/sys/fs/cgroup/unified"
	var st unix.Statfs_t
	if backend.FileExists("/sys/fs/cgroup/cgroup.controllers") || unix.Statfs(dir, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return ""
	}
	return dir
}

// unifiedPath is a cgroup path in the unified hierarchy: an absolute one
// as it is, a relative one (the tests' cgroup parent) under the agent's own
// unified cgroup, as the runtimes place relative paths.
func unifiedPath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	for _, l := range strings.Split(string(self), "\n") {
		if own, ok := strings.CutPrefix(l, "0::"); ok {
			return filepath.Join(own, p)
		}
	}
	return "/" + p
}

// gvisorIntoUnified prepares, on a hybrid host, the sandbox's cgroup in
// the unified hierarchy and returns it open, for runsc to be started in it
// (CLONE_INTO_CGROUP): runsc places its sentry and gofer in the v1
// controllers' cgroups only, as runc does not, so they would otherwise stay
// in the agent's unified cgroup, and keep an agent pod's cgroup from being
// removed (the kubelet waits on it) long after the pod ended. -1 where
// there is no such hierarchy.
func (r *runc) gvisorIntoUnified(bundle string) (int, error) {
	unified := hybridUnified()
	if unified == "" {
		return -1, nil
	}
	var spec struct {
		Linux struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil || json.Unmarshal(data, &spec) != nil || spec.Linux.CgroupsPath == "" {
		return -1, fmt.Errorf("oci: the bundle %s names no cgroup (%v)", bundle, err)
	}
	dir := filepath.Join(unified, unifiedPath(spec.Linux.CgroupsPath))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, fmt.Errorf("oci: the sandbox's cgroup in the unified hierarchy: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("oci: the sandbox's cgroup in the unified hierarchy: %w", err)
	}
	return fd, nil
}

// gvisorCgroupPaths are the sandbox's cgroup directories, one per v1
// controller (and, on a hybrid host, its unified one) or the v2 one.
func (r *runc) gvisorCgroupPaths(id string) []string {
	cg, ok := r.gvisorCgroup(id)
	if !ok {
		return nil
	}
	var paths []string
	switch {
	case cg.V1 != nil:
		for ctrl, parent := range cg.V1.Parents {
			p := cg.V1.Name
			if !filepath.IsAbs(p) {
				p = filepath.Join(parent, p)
			}
			// A named hierarchy ("name=systemd") is mounted without the prefix.
			paths = append(paths, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(ctrl, "name="), p))
		}
		if unified := hybridUnified(); unified != "" {
			paths = append(paths, filepath.Join(unified, unifiedPath(cg.V1.Name)))
		}
	case cg.V2 != nil:
		paths = append(paths, filepath.Join(cg.V2.Mountpoint, cg.V2.Path))
	}
	return paths
}

// gvisorOOMCounter is the memory cgroup file that counts OOM kills.
func (r *runc) gvisorOOMCounter(id string) string {
	cg, ok := r.gvisorCgroup(id)
	switch {
	case !ok:
		return ""
	case cg.V1 != nil:
		parent, ok := cg.V1.Parents["memory"]
		if !ok {
			return ""
		}
		p := cg.V1.Name
		if !filepath.IsAbs(p) {
			p = filepath.Join(parent, p)
		}
		return filepath.Join("/sys/fs/cgroup/memory", p, "memory.oom_control")
	case cg.V2 != nil:
		return filepath.Join(cg.V2.Mountpoint, cg.V2.Path, "memory.events")
	}
	return ""
}

// isGVisorSandbox reports whether pid is the runsc sandbox process (the
// sentry) of sandbox id: a PID may have been reused, by another sandbox's
// sentry too, and runsc names the sandbox last on the sentry's command line.
func (b *Backend) isGVisorSandbox(pid int, id string) bool {
	if b.gvisor == nil {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	return len(args) > 1 && args[0] == "runsc-sandbox" && args[len(args)-1] == b.gvisor.name(containerID(id))
}

// signal sends sig to the init of a running container through the runtime.
func (r *runc) signal(ctx context.Context, id, sig string) error {
	_, err := r.output(ctx, "kill", r.name(id), sig)
	return err
}

// gvisorSpec adapts the runc bundle of a sandbox whose tenant may have
// tenantPIDs tasks for runsc.
func gvisorSpec(spec *runtimeSpec, tenantPIDs int64) {
	// The sentry's /proc and /sys are its own, synthesised: they show
	// none of the node's devices, disks, interrupts or kernel memory, so
	// there is nothing of the node to mask in them.
	spec.Linux.MaskedPaths = nil
	spec.Linux.ReadonlyPaths = nil
	// The node's pids cgroup counts the sentry's and the gofer's threads
	// and systrap's stub processes, not the guest's processes: a limit
	// sized for the guest kills the sentry at its start. The guest's
	// processes are bounded by the sentry itself, with the spec's
	// RLIMIT_NPROC (it counts the tasks of each user, the tenant's among
	// them), as runc's kernel does; the node's cgroup keeps a bound on
	// the sandbox's host tasks, above what the guest's limit lets them
	// reach.
	if p := spec.Linux.Resources.Pids; p != nil {
		p.Limit = gvisorHostPIDs(tenantPIDs)
	}
}

// gvisorHostPIDs is the node's pids limit of a gVisor sandbox whose guest
// may have guestPIDs tasks: about one stub process of one or two threads
// per guest address space, and the sentry's and gofer's own threads.
func gvisorHostPIDs(guestPIDs int64) int64 {
	return 2*guestPIDs + 256
}
