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

package guest

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// A container's init runs under the seccomp filter its runtime applies
// (the oci backend's profile, hostagent/backend/oci/spec.go). A VM's init
// has no runtime above it: RunVMInit applies this one, the same rules
// written as a BPF program, to itself before it execs init, so that init,
// the shepherds and every tenant process inherit it with no_new_privs.
// The agent applies it to the programs it runs on the host over files a
// guest wrote (RunConfine).

// deniedSyscalls fail with EPERM: they widen the kernel surface a tenant
// reaches without being useful in a shell sandbox (new namespaces, the
// mount API, keyrings, BPF, perf, userfaultfd, io_uring, handle-based
// opens, modules, kexec, host-global knobs), as in the oci profile. In a
// VM they also keep a process that became the guest's root from
// remounting, replacing or rebooting the supervision it runs under.
var deniedSyscalls = append([]uintptr{
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_ACCT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_SYSLOG,
	unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_NFSSERVCTL,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
}, archDeniedSyscalls...)

// cloneNamespaceFlags are refused in clone's flags: a nested user
// namespace would hand the tenant capabilities over fresh mounts and
// networks. clone3 takes its flags in memory, which seccomp cannot read:
// it fails with ENOSYS, and libc falls back to clone.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// socketFamilies are the address families sockets may be opened in, as
// in the oci profile: those whose endpoints live in the sandbox. Above
// all not AF_VSOCK, whose port space is the host's; any other family
// fails with EAFNOSUPPORT, as on a kernel without it.
var socketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// Offsets in struct seccomp_data: the call's number, its architecture,
// and the low 32 bits of its first argument (little-endian: amd64, arm64).
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16
)

// seccompFilter is the BPF program: another ABI than the native one
// (i386's int 0x80 on amd64, x32, 32-bit ARM on arm64) kills the process,
// since rules written by number would have to be right twice; the calls
// above fail; everything else is allowed. It is a deny list on purpose,
// as the oci profile is (docs/isolation.md, "System calls").
func seccompFilter() ([]bpf.Instruction, error) {
	if nativeAuditArch == 0 {
		return nil, fmt.Errorf("no seccomp filter is written for %s", runtime.GOARCH)
	}
	var p program
	p.add(bpf.LoadAbsolute{Off: seccompArch, Size: 4})
	p.jumpUnless(bpf.JumpEqual, nativeAuditArch, "kill")
	p.add(bpf.LoadAbsolute{Off: seccompNr, Size: 4})
	if foreignSyscallBit != 0 {
		p.jumpIf(bpf.JumpBitsSet, foreignSyscallBit, "kill")
	}
	p.jumpIf(bpf.JumpEqual, unix.SYS_CLONE3, "enosys")
	p.jumpIf(bpf.JumpEqual, unix.SYS_CLONE, "clone")
	p.jumpIf(bpf.JumpEqual, unix.SYS_SOCKET, "socket")
	p.jumpIf(bpf.JumpEqual, unix.SYS_SOCKETPAIR, "socket")
	for _, nr := range deniedSyscalls {
		p.jumpIf(bpf.JumpEqual, uint32(nr), "eperm")
	}
	p.add(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})

	p.label("clone")
	p.add(bpf.LoadAbsolute{Off: seccompArg0, Size: 4})
	p.jumpIf(bpf.JumpBitsSet, cloneNamespaceFlags, "eperm")
	p.add(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})

	p.label("socket")
	// socket(2) takes an int: the low 32 bits are the family, whatever
	// the upper ones hold.
	p.add(bpf.LoadAbsolute{Off: seccompArg0, Size: 4})
	for _, f := range socketFamilies {
		p.jumpIf(bpf.JumpEqual, f, "allow")
	}
	p.add(bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)})

	p.label("allow")
	p.add(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	p.label("eperm")
	p.add(bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)})
	p.label("enosys")
	p.add(bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	p.label("kill")
	p.add(bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS})
	return p.resolve()
}

// program is a BPF program with forward jumps to named labels.
type program struct {
	insts  []bpf.Instruction
	labels map[string]int
	jumps  []labelJump
}

// labelJump is a conditional jump at insts[at] to label when (or unless)
// its condition holds; the other way falls through.
type labelJump struct {
	at     int
	label  string
	unless bool
}

func (p *program) add(i bpf.Instruction) { p.insts = append(p.insts, i) }

func (p *program) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.insts)
}

func (p *program) jumpIf(cond bpf.JumpTest, val uint32, label string) {
	p.jumps = append(p.jumps, labelJump{at: len(p.insts), label: label})
	p.add(bpf.JumpIf{Cond: cond, Val: val})
}

func (p *program) jumpUnless(cond bpf.JumpTest, val uint32, label string) {
	p.jumps = append(p.jumps, labelJump{at: len(p.insts), label: label, unless: true})
	p.add(bpf.JumpIf{Cond: cond, Val: val})
}

// resolve turns the labels into the relative skips BPF jumps take.
func (p *program) resolve() ([]bpf.Instruction, error) {
	for _, j := range p.jumps {
		to, ok := p.labels[j.label]
		if !ok || to <= j.at {
			return nil, fmt.Errorf("seccomp filter: jump to %q is not forward", j.label)
		}
		skip := to - j.at - 1
		if skip > 255 {
			return nil, fmt.Errorf("seccomp filter: jump to %q skips %d instructions, more than BPF's 255", j.label, skip)
		}
		in := p.insts[j.at].(bpf.JumpIf)
		if j.unless {
			in.SkipFalse = uint8(skip)
		} else {
			in.SkipTrue = uint8(skip)
		}
		p.insts[j.at] = in
	}
	return p.insts, nil
}

// ConfineSelf sets no_new_privs and installs the seccomp filter on every
// thread of this process; both are inherited by every process it starts
// and kept across execve, and neither can be undone. No_new_privs means a
// setuid or setgid binary, or one with file capabilities, raises no one.
func ConfineSelf() error {
	insts, err := seccompFilter()
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	// TSYNC: a Go process has several threads, and a filter installed on
	// one would leave the others (and what they start) without it; the
	// kernel gives them no_new_privs with it.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))) //nolint:gosec // seccomp(2) takes the filter by address; prog outlives the call
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("installing the seccomp filter: %w", errno)
	}
	return nil
}

// ConfineMode is the playground-sandbox subcommand RunConfine serves.
const ConfineMode = "confine"

// RunConfine is `playground-sandbox confine [-as BYTES] [-cpu SECONDS]
// [-fds N] [-fsize BYTES] PROGRAM ARGS...`: it bounds its address space
// and CPU time, forbids writing regular files (RLIMIT_FSIZE 0: output
// goes to pipes) or, with -fsize, writing past BYTES into one (the vm
// backend's pile writer rewrites an image in place, never grows it),
// passes on descriptors 0 to N-1 only, applies ConfineSelf and execs
// PROGRAM (an absolute path) with a fixed environment. The agent runs
// what parses a file a guest wrote under it (the vm backend's pile
// reader and writer), already as an unprivileged user in namespaces of
// its own. It returns only on failure, with the process's exit code.
func RunConfine(args []string) int {
	fs := flag.NewFlagSet(guestapi.ConfineMode, flag.ContinueOnError)
	as := fs.Uint64("as", 256<<20, "the address space's bound, in bytes")
	cpu := fs.Uint64("cpu", 10, "the CPU time's bound, in seconds")
	fds := fs.Int("fds", 3, "how many descriptors, from 0, PROGRAM inherits")
	fsize := fs.Uint64("fsize", 0, "the offset, in bytes, no write to a regular file may reach")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 || argv[0] == "" || argv[0][0] != '/' {
		fmt.Fprintln(os.Stderr, "usage: playground-sandbox confine [-as BYTES] [-cpu SECONDS] [-fds N] [-fsize BYTES] /PROGRAM [ARGS...]")
		return 2
	}
	if err := closeOnExecFrom(*fds); err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox confine: %v\n", err)
		return 1
	}
	// Everything exec needs is allocated before the address space is
	// bounded: a Go process has already reserved much of it (arenas,
	// thread stacks), and an allocation after the bound can abort the
	// runtime ("cannot allocate memory") instead of failing cleanly.
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox confine: %v\n", err)
		return 2
	}
	envp, _ := syscall.SlicePtrFromStrings([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"})
	path, err := unix.BytePtrFromString(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox confine: %v\n", err)
		return 2
	}
	for _, l := range []struct {
		res int
		max uint64
	}{
		{unix.RLIMIT_CPU, *cpu},
		{unix.RLIMIT_FSIZE, *fsize},
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_NOFILE, 64},
	} {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.max, Max: l.max}); err != nil {
			fmt.Fprintf(os.Stderr, "playground-sandbox confine: limit %d: %v\n", l.res, err)
			return 1
		}
	}
	if err := ConfineSelf(); err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox confine: %v\n", err)
		return 1
	}
	// The address space last, then execve with no Go allocation between:
	// the bound applies to PROGRAM, whose image replaces this one.
	runtime.LockOSThread()
	rlim := unix.Rlimit{Cur: *as, Max: *as}
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_AS, uintptr(unsafe.Pointer(&rlim)), 0, 0, 0); errno != 0 { //nolint:gosec // raw prlimit: no Go allocation between it and execve
		fmt.Fprintf(os.Stderr, "playground-sandbox confine: limit %d: %v\n", unix.RLIMIT_AS, errno)
		return 1
	}
	_, _, errno := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0]))) //nolint:gosec // raw execve, its arguments allocated before the address space was bounded
	runtime.KeepAlive(rlim)
	fmt.Fprintf(os.Stderr, "playground-sandbox confine: exec %s: %v\n", strconv.Quote(argv[0]), errno)
	if errno == unix.ENOENT {
		return 127
	}
	return 126
}

// closeOnExecFrom marks every open descriptor from first on close-on-exec.
func closeOnExecFrom(first int) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}
