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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestHostView checks what a sandbox sees of the node beyond its own
// namespaces (docs/isolation.md, "What stays visible"): its cgroups are
// "/" (a cgroup namespace), host-wide statistics are masked, and so are
// the block devices, whose loop devices name every sandbox's image on the
// node; ordinary tools work all the same.
func TestHostView(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "view"})
	for _, line := range strings.Split(strings.TrimSpace(sh(t, b, id, "cat /proc/self/cgroup")), "\n") {
		if !strings.HasSuffix(line, ":/") {
			t.Errorf("/proc/self/cgroup: %q, want every hierarchy at / (a cgroup namespace)", line)
		}
	}
	for _, f := range []string{"/proc/stat", "/proc/meminfo", "/proc/loadavg", "/proc/uptime", "/proc/vmstat"} {
		if got := sh(t, b, id, "wc -c < "+f); strings.TrimSpace(got) == "0" {
			t.Errorf("%s is empty: ps, top, free, vmstat and uptime need it", f)
		}
	}
	for _, f := range []string{"/proc/diskstats", "/proc/locks", "/proc/partitions", "/proc/swaps", "/proc/interrupts",
		"/proc/softirqs", "/proc/zoneinfo", "/proc/buddyinfo", "/proc/cmdline", "/proc/key-users", "/proc/cgroups",
		"/proc/config.gz", "/sys/kernel/vmcoreinfo"} {
		if got := sh(t, b, id, "cat "+f+" 2>/dev/null | wc -c"); strings.TrimSpace(got) != "0" {
			t.Errorf("%s shows %s bytes inside the sandbox, want it masked", f, strings.TrimSpace(got))
		}
	}
	for _, d := range []string{"/sys/block", "/sys/class/block", "/sys/dev/block", "/sys/devices/virtual/block", "/sys/fs", "/sys/kernel", "/sys/module", "/proc/pressure"} {
		if got := sh(t, b, id, "ls -A "+d+" 2>/dev/null | wc -l"); strings.TrimSpace(got) != "0" {
			t.Errorf("%s lists %s entries inside the sandbox, want it masked", d, strings.TrimSpace(got))
		}
	}
	// No file of /sys names the node's state directory (a loop device's
	// backing_file named every sandbox's image).
	if got := sh(t, b, id, "grep -rlsF '"+b.opts.StateDir+"' /sys | head -3; true"); got != "" {
		t.Errorf("files of /sys name the state directory: %q", got)
	}
	for _, cmd := range []string{"ps aux", "top -bn1", "uptime", "free", "vmstat", "nproc", "df /tmp",
		"python3 -c 'import os, platform; print(os.cpu_count(), os.getloadavg(), platform.platform())'"} {
		if r := run(t, b, id, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}); r.Status.ExitCode != 0 {
			t.Errorf("%q in the sandbox: exit %d, stderr %q", cmd, r.Status.ExitCode, r.Stderr)
		}
	}
}

// TestTmpRepaired: a sandbox made before /tmp got its sticky bit (its
// layer's tmp was 0777) has 1777 from its next start on.
func TestTmpRepaired(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "oldtmp"})
	ctx := context.Background()
	if err := b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Stop unmounts the layer: mount it to damage it as an old agent had.
	sb, err := b.load(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.mountVolume(ctx, sb, b.volumes(sb)[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b.sandboxDir(id), layerName, "tmp"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, id, "stat -c %a /tmp"); got != "1777\n" {
		t.Fatalf("/tmp after a start: %s, want 1777", got)
	}
}

// TestSeccompProfile: the filter names the native architecture alone, and
// refuses every socket family but AF_UNIX, AF_INET, AF_INET6 and
// AF_NETLINK, whatever the argument's upper bits.
func TestSeccompProfile(t *testing.T) {
	p := seccompProfile()
	if len(p.Architectures) != 1 || !strings.HasPrefix(p.Architectures[0], "SCMP_ARCH_") {
		t.Fatalf("architectures %v, want the native one alone", p.Architectures)
	}
	for _, bad := range []string{"SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_ARM"} {
		if slices.Contains(p.Architectures, bad) {
			t.Fatalf("architectures %v admit %s", p.Architectures, bad)
		}
	}
	refused := func(call string, v uint64) bool {
		for _, r := range p.Syscalls {
			if !slices.Contains(r.Names, call) || len(r.Args) != 1 || r.Args[0].Index != 0 {
				continue
			}
			switch a := r.Args[0]; a.Op {
			case "SCMP_CMP_EQ":
				if v == a.Value {
					return true
				}
			case "SCMP_CMP_GT":
				if v > a.Value {
					return true
				}
			default:
				t.Fatalf("unexpected op %s on %s", a.Op, call)
			}
		}
		return false
	}
	allowed := []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}
	for _, call := range []string{"socket", "socketpair"} {
		for v := range uint64(unix.AF_MAX + 8) {
			if got, want := !refused(call, v), slices.Contains(allowed, v); got != want {
				t.Errorf("%s(%d): allowed %v, want %v", call, v, got, want)
			}
		}
		for _, v := range []uint64{1<<32 | unix.AF_INET, 1<<32 | unix.AF_VSOCK, 1<<63 | unix.AF_UNIX} {
			if !refused(call, v) {
				t.Errorf("%s(%#x) allowed: the kernel reads the low 32 bits", call, v)
			}
		}
	}
}
