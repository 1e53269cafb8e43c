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
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is a struct seccomp_data for x/net/bpf's VM, which loads
// words in network byte order where the kernel loads them in the host's:
// the fields the filter reads are written big-endian, so that both see
// the same values.
func seccompData(arch, nr, arg0 uint32) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[seccompNr:], nr)
	binary.BigEndian.PutUint32(b[seccompArch:], arch)
	binary.BigEndian.PutUint32(b[seccompArg0:], arg0)
	return b
}

// TestSeccompFilterDecides runs the filter on calls and checks its answer.
func TestSeccompFilterDecides(t *testing.T) {
	insts, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		eafno  = unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)
		kill   = unix.SECCOMP_RET_KILL_PROCESS
	)
	native := uint32(nativeAuditArch)
	for _, tc := range []struct {
		name           string
		arch, nr, arg0 uint32
		want           uint32
	}{
		{"read", native, unix.SYS_READ, 0, allow},
		{"kexec_load", native, unix.SYS_KEXEC_LOAD, 0, eperm},
		{"init_module", native, unix.SYS_INIT_MODULE, 0, eperm},
		{"finit_module", native, unix.SYS_FINIT_MODULE, 0, eperm},
		{"mount", native, unix.SYS_MOUNT, 0, eperm},
		{"umount2", native, unix.SYS_UMOUNT2, 0, eperm},
		{"pivot_root", native, unix.SYS_PIVOT_ROOT, 0, eperm},
		{"bpf", native, unix.SYS_BPF, 0, eperm},
		{"perf_event_open", native, unix.SYS_PERF_EVENT_OPEN, 0, eperm},
		{"keyctl", native, unix.SYS_KEYCTL, 0, eperm},
		{"reboot", native, unix.SYS_REBOOT, 0, eperm},
		{"swapon", native, unix.SYS_SWAPON, 0, eperm},
		{"unshare", native, unix.SYS_UNSHARE, 0, eperm},
		{"clone3", native, unix.SYS_CLONE3, 0, enosys},
		{"clone, a thread", native, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND, allow},
		{"clone, a user namespace", native, unix.SYS_CLONE, unix.CLONE_NEWUSER | uint32(unix.SIGCHLD), eperm},
		{"clone, a network namespace", native, unix.SYS_CLONE, unix.CLONE_NEWNET, eperm},
		{"socket AF_UNIX", native, unix.SYS_SOCKET, unix.AF_UNIX, allow},
		{"socket AF_INET6", native, unix.SYS_SOCKET, unix.AF_INET6, allow},
		{"socket AF_NETLINK", native, unix.SYS_SOCKET, unix.AF_NETLINK, allow},
		{"socket AF_VSOCK", native, unix.SYS_SOCKET, unix.AF_VSOCK, eafno},
		{"socketpair AF_VSOCK", native, unix.SYS_SOCKETPAIR, unix.AF_VSOCK, eafno},
		{"socket AF_PACKET", native, unix.SYS_SOCKET, unix.AF_PACKET, eafno},
		{"socket AF_ALG", native, unix.SYS_SOCKET, unix.AF_ALG, eafno},
		{"another ABI", unix.AUDIT_ARCH_I386, 310, 0, kill},
	} {
		got, err := vm.Run(seccompData(tc.arch, tc.nr, tc.arg0))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if uint32(got) != tc.want {
			t.Errorf("%s: the filter answers %#x, want %#x", tc.name, got, tc.want)
		}
	}
	if foreignSyscallBit != 0 {
		got, _ := vm.Run(seccompData(native, foreignSyscallBit|unix.SYS_UNSHARE, 0))
		if uint32(got) != kill {
			t.Errorf("x32's unshare: %#x, want the process killed", got)
		}
	}
}

// confinedChildEnv makes the test binary the confined child of
// TestConfineSelfOnThisKernel.
const confinedChildEnv = "PLAYGROUND_TEST_CONFINED_CHILD"

// confineCommandEnv makes the test binary `playground-sandbox confine`
// for TestConfineBoundsTheProgram.
const confineCommandEnv = "PLAYGROUND_TEST_CONFINE"

func TestMain(m *testing.M) {
	if os.Getenv(confinedChildEnv) == "1" {
		os.Exit(confinedChild())
	}
	if os.Getenv(confineCommandEnv) == "1" {
		os.Exit(RunConfine(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// confinedChild applies ConfineSelf and reports, one line each, what the
// kernel then answers.
func confinedChild() int {
	if err := ConfineSelf(); err != nil {
		fmt.Println("ConfineSelf:", err)
		return 1
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "NoNewPrivs:") || strings.HasPrefix(l, "Seccomp:") {
			fmt.Println(strings.Join(strings.Fields(l), " "))
		}
	}
	errno := func(err error) string {
		if err == nil {
			return "ok"
		}
		if e, ok := err.(unix.Errno); ok {
			return unix.ErrnoName(e)
		}
		return err.Error()
	}
	fmt.Println("unshare", errno(unix.Unshare(unix.CLONE_NEWUSER)))
	_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	fmt.Println("keyctl", errno(err))
	_, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	fmt.Println("clone3", unix.ErrnoName(e))
	for _, f := range []struct {
		name   string
		family int
	}{{"unix", unix.AF_UNIX}, {"vsock", unix.AF_VSOCK}} {
		fd, err := unix.Socket(f.family, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		fmt.Println("socket", f.name, errno(err))
	}
	// A child inherits the filter.
	out, _ := exec.Command("unshare", "-U", "true").CombinedOutput()
	fmt.Println("child unshare", strings.Contains(string(out), "Operation not permitted"))
	return 0
}

// TestConfineSelfOnThisKernel installs the filter in a child process
// (it cannot be removed) and checks what this machine's kernel does.
func TestConfineSelfOnThisKernel(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), confinedChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the confined child: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"NoNewPrivs: 1", "Seccomp: 2",
		"unshare EPERM", "keyctl EPERM", "clone3 ENOSYS",
		"socket unix ok", "socket vsock EAFNOSUPPORT",
		"child unshare true",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the confined child's report lacks %q:\n%s", want, got)
		}
	}
}

// TestConfineBoundsTheProgram runs confine with an address space far
// below what a Go process has already reserved: the bound is the
// program's (ulimit -v reports it), and confine itself, which allocates
// nothing once it is set, neither aborts nor fails. Under CI's load the
// vm backend's pile reader once died here with "runtime: cannot allocate
// memory" before its exec.
func TestConfineBoundsTheProgram(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	const bound = 48 << 20
	for range 5 {
		cmd := exec.Command(os.Args[0], "-as", fmt.Sprint(bound), "-cpu", "5", sh, "-c", "ulimit -v; ulimit -f")
		cmd.Env = append(os.Environ(), confineCommandEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("confine: %v\n%s", err, out)
		}
		if got, want := string(out), fmt.Sprintf("%d\n0\n", bound>>10); got != want {
			t.Fatalf("the program's limits (ulimit -v, -f): %q, want %q", got, want)
		}
	}
	// -fsize, the pile writer's: writes may reach that far and no further
	// (sh's ulimit -f counts 512-byte blocks).
	cmd := exec.Command(os.Args[0], "-fsize", fmt.Sprint(1<<20), sh, "-c", "ulimit -f")
	cmd.Env = append(os.Environ(), confineCommandEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("confine -fsize: %v\n%s", err, out)
	}
	if got, want := string(out), fmt.Sprintf("%d\n", (1<<20)/512); got != want {
		t.Fatalf("the program's ulimit -f under -fsize: %q, want %q", got, want)
	}
}
