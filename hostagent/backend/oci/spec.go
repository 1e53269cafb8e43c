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
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// The subset of the OCI runtime specification (runtime-spec v1.0.2) that
// this backend writes. Declared here rather than imported so the module
// does not take a dependency for a few structs.
type (
	runtimeSpec struct {
		Version  string      `json:"ociVersion"`
		Process  specProcess `json:"process"`
		Root     root        `json:"root"`
		Hostname string      `json:"hostname,omitempty"`
		Mounts   []mount     `json:"mounts"`
		Linux    linuxCfg    `json:"linux"`
	}
	specProcess struct {
		Terminal        bool          `json:"terminal"`
		User            user          `json:"user"`
		Args            []string      `json:"args"`
		Env             []string      `json:"env"`
		Cwd             string        `json:"cwd"`
		Capabilities    *capabilities `json:"capabilities,omitempty"`
		Rlimits         []rlimit      `json:"rlimits,omitempty"`
		NoNewPrivileges bool          `json:"noNewPrivileges"`
	}
	user struct {
		UID uint32 `json:"uid"`
		GID uint32 `json:"gid"`
	}
	capabilities struct {
		Bounding    []string `json:"bounding"`
		Effective   []string `json:"effective"`
		Permitted   []string `json:"permitted"`
		Inheritable []string `json:"inheritable"`
		Ambient     []string `json:"ambient"`
	}
	rlimit struct {
		Type string `json:"type"`
		Hard uint64 `json:"hard"`
		Soft uint64 `json:"soft"`
	}
	root struct {
		Path     string `json:"path"`
		Readonly bool   `json:"readonly"`
	}
	mount struct {
		Destination string   `json:"destination"`
		Type        string   `json:"type"`
		Source      string   `json:"source"`
		Options     []string `json:"options,omitempty"`
	}
	linuxCfg struct {
		UIDMappings   []idMapping  `json:"uidMappings"`
		GIDMappings   []idMapping  `json:"gidMappings"`
		Resources     resources    `json:"resources"`
		CgroupsPath   string       `json:"cgroupsPath"`
		Namespaces    []namespace  `json:"namespaces"`
		MaskedPaths   []string     `json:"maskedPaths"`
		ReadonlyPaths []string     `json:"readonlyPaths"`
		Seccomp       *seccompSpec `json:"seccomp,omitempty"`
	}
	idMapping struct {
		ContainerID uint32 `json:"containerID"`
		HostID      uint32 `json:"hostID"`
		Size        uint32 `json:"size"`
	}
	namespace struct {
		Type string `json:"type"`
		Path string `json:"path,omitempty"`
	}
	resources struct {
		Devices []deviceRule `json:"devices"`
		Memory  *memory      `json:"memory,omitempty"`
		CPU     *cpu         `json:"cpu,omitempty"`
		Pids    *pids        `json:"pids,omitempty"`
	}
	deviceRule struct {
		Allow  bool   `json:"allow"`
		Access string `json:"access"`
	}
	memory struct {
		Limit *int64 `json:"limit,omitempty"`
		Swap  *int64 `json:"swap,omitempty"`
	}
	cpu struct {
		Quota  *int64  `json:"quota,omitempty"`
		Period *uint64 `json:"period,omitempty"`
	}
	pids struct {
		Limit int64 `json:"limit"`
	}
	seccompSpec struct {
		DefaultAction string           `json:"defaultAction"`
		Architectures []string         `json:"architectures,omitempty"`
		Syscalls      []seccompSyscall `json:"syscalls"`
	}
	seccompSyscall struct {
		Names    []string     `json:"names"`
		Action   string       `json:"action"`
		ErrnoRet *uint        `json:"errnoRet,omitempty"`
		Args     []seccompArg `json:"args,omitempty"`
	}
	seccompArg struct {
		Index    uint   `json:"index"`
		Value    uint64 `json:"value"`
		ValueTwo uint64 `json:"valueTwo"`
		Op       string `json:"op"`
	}
)

// cpuPeriod is the CFS period for CPUMillis; quota = millis × period / 1000.
const cpuPeriod = 100000

// guestCaps are the only capabilities of init and the shepherds (container
// root, inside the sandbox's user namespace): dropping to the tenant uid,
// killing the tenant's processes, and handing the worker's token file to
// the tenant uid (chown). Tenant commands run as TenantUID and hold none.
var guestCaps = []string{"CAP_CHOWN", "CAP_SETUID", "CAP_SETGID", "CAP_KILL"}

// buildSpec renders the runc config for sandbox sb, whose shared files
// come from src (overlay.go).
func (b *Backend) buildSpec(sb *sandbox, src sources) *runtimeSpec {
	dir := sb.dir
	bindRO := []string{"bind", "ro", "nosuid", "nodev"}
	rw := []string{"bind", "rw", "nosuid", "nodev"}

	mounts := []mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
	}
	if !hasEgress(sb) {
		// sysfs may only be mounted by the owner of the network namespace:
		// an egress namespace belongs to the node's user namespace.
		mounts = append(mounts, mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}})
	}
	for _, d := range src.dirs {
		mounts = append(mounts, mount{Destination: d, Type: "bind", Source: src.baseDirs[d], Options: bindRO})
	}
	mounts = append(mounts, mount{Destination: "/etc", Type: "bind", Source: filepath.Join(dir, "etc"), Options: append(bindRO, "noexec")})
	mounts = append(mounts, etcMounts(src)...)
	mounts = append(mounts, b.trustMount(sb)...)
	mounts = append(mounts,
		mount{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "mode=755", "size=16384k"}},
		mount{Destination: guestapi.TenantHome, Type: "bind", Source: filepath.Join(dir, layerName, "home"), Options: rw},
		mount{Destination: guestapi.Workspace, Type: "bind", Source: filepath.Join(dir, layerName, "workspace"), Options: rw},
		mount{Destination: "/tmp", Type: "bind", Source: filepath.Join(dir, layerName, "tmp"), Options: rw},
		guestMount(src),
		mount{Destination: guestapi.RunDir, Type: "bind", Source: filepath.Join(dir, "run"), Options: append(rw, "noexec")},
	)
	if sb.builder {
		mounts = append(mounts,
			mount{Destination: buildSrcDir, Type: "bind", Source: sb.source, Options: bindRO},
			mount{Destination: buildOutDir, Type: "bind", Source: filepath.Join(dir, layerName, buildOut), Options: rw},
		)
	} else {
		mounts = append(mounts, mount{Destination: guestapi.PileDir, Type: "bind", Source: filepath.Join(dir, pileName), Options: append(rw, "noexec")})
	}
	mounts = append(mounts, facultyMounts(sb, src)...)

	// A cgroup namespace rooted at the sandbox's cgroup: /proc/*/cgroup
	// shows "/", not the agent's cgroup path on the node.
	namespaces := []namespace{{Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}, {Type: "user"}, {Type: "cgroup"}}
	if hasEgress(sb) {
		// The agent's namespace for this sandbox, with its veth and
		// ruleset (egress.go).
		namespaces = append(namespaces, namespace{Type: "network", Path: b.egressNet(sb).netns})
	} else {
		// A fresh network namespace: runc brings up loopback only.
		namespaces = append(namespaces, namespace{Type: "network"})
	}

	res := b.resources(sb.spec.Resources)
	rs := resources{
		// No device nodes beyond the defaults runc bind-mounts.
		Devices: []deviceRule{{Allow: false, Access: "rwm"}},
		Memory:  &memory{Limit: &res.MemoryBytes},
		Pids:    &pids{Limit: hostPIDs(res.PIDs)},
	}
	if b.swapLimit {
		// memory+swap = memory: the sandbox does not swap.
		rs.Memory.Swap = &res.MemoryBytes
	}
	if res.CPUMillis > 0 {
		quota, period := res.CPUMillis*cpuPeriod/1000, uint64(cpuPeriod)
		rs.CPU = &cpu{Quota: &quota, Period: &period}
	}

	uidBase := b.opts.IDMapBase + uint32(sb.slot)*idMapSize
	// A user namespace cannot raise a hard limit beyond the agent's own.
	nofile := uint64(65536)
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Max < nofile {
		nofile = lim.Max
	}
	env := append(guestapi.OwnEnv(), "PLAYGROUND_SANDBOX="+sb.spec.ID)
	if sb.warm {
		// A pooled sandbox runs init alone until it is used (P6): its
		// claim wakes it (wakeInit), or its first connection does. Said
		// in init's environment, which its tenant cannot read, not in its
		// command line, which it can.
		env = append(env, guestapi.LazyInitEnv+"=1")
	}
	return &runtimeSpec{
		Version: "1.0.2",
		Process: specProcess{
			User: user{UID: 0, GID: 0},
			Args: []string{guestapi.Binary, "init", "-spares", strconv.Itoa(b.opts.SpareShepherds)},
			Env:  env,
			Cwd:  "/",
			Capabilities: &capabilities{
				Bounding: guestCaps, Effective: guestCaps, Permitted: guestCaps,
				Inheritable: []string{}, Ambient: []string{},
			},
			Rlimits: []rlimit{
				{Type: "RLIMIT_NOFILE", Hard: nofile, Soft: nofile},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
				// The tenant's bound (hostPIDs).
				{Type: "RLIMIT_NPROC", Hard: uint64(res.PIDs), Soft: uint64(res.PIDs)},
			},
			NoNewPrivileges: true,
		},
		Root:     root{Path: filepath.Join(dir, "rootfs"), Readonly: true},
		Hostname: backend.Hostname(sb.spec.ID),
		Mounts:   mounts,
		Linux: linuxCfg{
			UIDMappings:   []idMapping{{ContainerID: 0, HostID: uidBase, Size: idMapSize}},
			GIDMappings:   []idMapping{{ContainerID: 0, HostID: uidBase, Size: idMapSize}},
			Resources:     rs,
			CgroupsPath:   b.cgroupPath(sb),
			Namespaces:    namespaces,
			MaskedPaths:   b.maskedPaths,
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			Seccomp:       seccompProfile(),
		},
	}
}

// maskedPaths are the paths of /proc and /sys that runc hides in every
// sandbox (a file behind /dev/null, a directory behind an empty read-only
// tmpfs; a path the kernel does not have is skipped). Beyond runc's own
// defaults (the first line), they are what shows the node rather than the
// sandbox and that no ordinary tool needs: host-wide statistics (disks,
// file locks, interrupts, memory zones and slabs, pressure), the kernel's
// command line, configuration and memory layout, and the block devices,
// whose loop devices name every sandbox's image on the node. What stays
// visible is listed, with the reason, in docs/isolation.md.
func maskedPaths() []string {
	paths := []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
		"/proc/diskstats", "/proc/partitions", "/proc/swaps", "/proc/locks",
		"/proc/interrupts", "/proc/softirqs", "/proc/zoneinfo",
		"/proc/buddyinfo", "/proc/pagetypeinfo", "/proc/slabinfo", "/proc/vmallocinfo",
		"/proc/pressure", "/proc/key-users", "/proc/cgroups", "/proc/cmdline",
		"/proc/config.gz", "/proc/kallsyms", "/proc/modules", "/proc/iomem", "/proc/ioports",
		"/proc/kmsg", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup",
		"/proc/mtrr", "/proc/dma",
		"/sys/kernel", "/sys/fs", "/sys/module", "/sys/block", "/sys/class/block", "/sys/dev/block",
		"/sys/devices/virtual/block", "/sys/devices/virtual/dmi", "/sys/class/dmi", "/sys/hypervisor",
	}
	// The node's own disks live under their bus (/sys/devices/pci…), not
	// /sys/devices/virtual: their statistics are masked where they are.
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		if dev, err := filepath.EvalSymlinks(filepath.Join("/sys/block", e.Name())); err == nil &&
			strings.HasPrefix(dev, "/sys/devices/") && !strings.HasPrefix(dev, "/sys/devices/virtual/") {
			paths = append(paths, dev)
		}
	}
	return paths
}

func (b *Backend) cgroupPath(sb *sandbox) string {
	return filepath.Join(b.cgroupParent, containerID(sb.spec.ID))
}

// seccompProfile allows every system call except those that widen the
// kernel surface a tenant can reach without being useful in a shell
// sandbox: new namespaces (a nested user namespace would hand the tenant
// capabilities over fresh mounts and networks), mounting, keyrings (not
// namespaced), BPF, perf, userfaultfd, io_uring, handle-based opens,
// kernel modules and kexec, and host-global knobs. Most of them also need
// capabilities the sandbox does not have; the filter is defence in depth.
// It is a deny list on purpose: an allow list drifts out of date with the
// base image's software and breaks it in hard-to-diagnose ways.
//
// Two things are allow lists, because what they let through is small and
// stable: the architectures (the native ABI only; a call through another,
// such as i386's int 0x80 on amd64, is a call the rules above never see by
// its name, so it kills the calling thread instead), and the socket
// address families.
func seccompProfile() *seccompSpec {
	eperm, enosys, eafnosupport := uint(1), uint(38), uint(97)
	deny := []string{
		"unshare", "setns",
		"mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
		"keyctl", "add_key", "request_key",
		"bpf", "perf_event_open", "userfaultfd",
		"io_uring_setup", "io_uring_enter", "io_uring_register",
		"open_by_handle_at", "name_to_handle_at",
		"init_module", "finit_module", "delete_module",
		"kexec_load", "kexec_file_load",
		"acct", "swapon", "swapoff", "reboot", "syslog", "quotactl", "quotactl_fd",
		"lookup_dcookie", "nfsservctl", "vm86", "vm86old", "iopl", "ioperm",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
	}
	sc := []seccompSyscall{
		{Names: deny, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm},
		// clone3 takes its flags in memory, which seccomp cannot inspect;
		// ENOSYS makes libc fall back to clone, whose flags are checked.
		{Names: []string{"clone3"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &enosys},
	}
	// clone with any namespace flag; one rule per flag, rules are ORed.
	for _, flag := range []uint64{
		0x00020000, // CLONE_NEWNS
		0x02000000, // CLONE_NEWCGROUP
		0x04000000, // CLONE_NEWUTS
		0x08000000, // CLONE_NEWIPC
		0x10000000, // CLONE_NEWUSER
		0x20000000, // CLONE_NEWPID
		0x40000000, // CLONE_NEWNET
	} {
		sc = append(sc, seccompSyscall{
			Names: []string{"clone"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm,
			Args: []seccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: "SCMP_CMP_MASKED_EQ"}},
		})
	}
	// Sockets of the families in socketFamilies only; any other fails as
	// on a kernel without it. One rule per refused value below the
	// largest allowed, and one for everything above it (a value with
	// high bits set is above it too).
	top := socketFamilies[len(socketFamilies)-1]
	allowed := make(map[uint64]bool, len(socketFamilies))
	for _, f := range socketFamilies {
		allowed[f] = true
	}
	refuse := func(v uint64, op string) {
		sc = append(sc, seccompSyscall{
			Names: []string{"socket", "socketpair"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eafnosupport,
			Args: []seccompArg{{Index: 0, Value: v, Op: op}},
		})
	}
	for v := range top {
		if !allowed[v] {
			refuse(v, "SCMP_CMP_EQ")
		}
	}
	refuse(top, "SCMP_CMP_GT")
	return &seccompSpec{DefaultAction: "SCMP_ACT_ALLOW", Architectures: seccompArchitectures(runtime.GOARCH), Syscalls: sc}
}

// socketFamilies are the address families a sandbox may open sockets of,
// in increasing order: the ones whose endpoints live in the sandbox's own
// namespaces. AF_NETLINK is there for the sandbox's own network stack
// (getaddrinfo, ip); AF_VSOCK, AF_PACKET, AF_ALG, Bluetooth, CAN, TIPC,
// RDS, XDP and the rest are not, AF_VSOCK above all: its port space is the
// node's, shared by every sandbox and the host.
var socketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// seccompArchitectures are the ABIs the filter admits on goarch: the
// native one alone. Not i386 or x32 on amd64, nor arm on arm64: their
// system calls have other numbers, which a filter written by name would
// have to get right twice, and a shell sandbox has no 32-bit programs.
func seccompArchitectures(goarch string) []string {
	switch goarch {
	case "amd64":
		return []string{"SCMP_ARCH_X86_64"}
	case "arm64":
		return []string{"SCMP_ARCH_AARCH64"}
	case "riscv64":
		return []string{"SCMP_ARCH_RISCV64"}
	case "ppc64le":
		return []string{"SCMP_ARCH_PPC64LE"}
	case "s390x":
		return []string{"SCMP_ARCH_S390X"}
	}
	return nil // the runtime's native architecture only
}

// writeSpec writes config.json atomically.
func writeSpec(path string, spec *runtimeSpec) error {
	return writeJSON(path, spec, 0o600)
}

// supervisionPIDs is the headroom of a sandbox's pids cgroup above its
// tenant's PIDs limit: room for init, its spare shepherds, the holders of
// the tenant's jobs and their threads, which a tenant at its limit must
// not be able to take. The tenant's limit is RLIMIT_NPROC, which the
// kernel counts per user of the sandbox's user namespace: the tenant's
// tasks, not the supervision's (container root's, bounded by the same
// number on their own). Init and the holders are Go processes, whose
// runtime ends when the kernel refuses it a thread; the headroom keeps
// the kernel from refusing them what a tenant took.
const supervisionPIDs = 256

// hostPIDs is the pids cgroup limit of a runc sandbox whose tenant may
// have tenantPIDs tasks.
func hostPIDs(tenantPIDs int64) int64 {
	return tenantPIDs + supervisionPIDs
}

func (b *Backend) resources(r backend.Resources) backend.Resources {
	d := b.opts.DefaultResources
	if r.CPUMillis <= 0 {
		r.CPUMillis = d.CPUMillis
	}
	if r.MemoryBytes <= 0 {
		r.MemoryBytes = d.MemoryBytes
	}
	if r.PIDs <= 0 {
		r.PIDs = d.PIDs
	}
	return r
}
