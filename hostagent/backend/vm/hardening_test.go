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

package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// TestHardening boots one sandbox's VM through the backend and checks
// docs/isolation.md's "VM hardening": QEMU as a user of its own under its
// seccomp sandbox, opening no file of its own; in the guest no setuid
// binary, nosuid mounts, no_new_privs and the seccomp filter for the
// tenant and the supervision alike; the pile read through the guest while
// it runs and by a confined debugfs when it does not; the signing key,
// written into the image before the first boot, the tenant's to read and
// not to change, and a key installed while the VM runs kept for its next
// boot.
func TestHardening(t *testing.T) {
	kernel, modules, root := vmImage(t)
	if os.Geteuid() != 0 {
		t.Skip("QEMU runs as a user of its own only when the agent is root")
	}
	// A debugfs that says who and where it runs before it reads (-c;
	// the signing key's writer reads back what it wrote, which must be
	// the key alone).
	realDebugfs, err := exec.LookPath("debugfs")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	report := `#!/bin/sh
[ "$1" = -c ] || exec ` + realDebugfs + ` "$@"
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) pid=$$"
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t ' ' '
if (true >> /proc/self/fd/3) 2>/dev/null; then echo "image writable"; else echo "image read-only"; fi
if cat /etc/shadow >/dev/null 2>&1; then echo "shadow readable"; fi
echo "links: $(awk 'NR > 2 {printf "%s", $1}' /proc/net/dev)"
echo "unshare: $(unshare -U true 2>&1)"
echo "--"
exec ` + realDebugfs + ` "$@"
`
	if err := os.WriteFile(filepath.Join(bin, "debugfs"), []byte(report), 0o755); err != nil {
		t.Fatal(err)
	}
	// The reader's user runs it: it must reach it.
	for _, d := range []string{bin, filepath.Dir(bin)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))

	ctx := context.Background()
	dir := newStateDir(t)
	be, err := New(ctx, Options{StateDir: dir, GuestBinary: guestBinary(t), Kernel: kernel, Modules: modules, Root: root, Accel: AccelTCG})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if note, caveat := be.Describe(); !strings.Contains(note, "as a user of its own per sandbox") || !caveat {
		t.Errorf("Describe: %q, %v; want the VM users named, and TCG a caveat", note, caveat)
	}
	spec := backend.Spec{ID: "hardened", Tenant: "t/hardened"}
	if err := be.Provision(ctx, spec); err != nil {
		t.Fatal(err)
	}
	rec, err := be.load(spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Slot < 1 || rec.Slot >= uidSlots {
		t.Fatalf("slot %d", rec.Slot)
	}
	uid := DefaultUIDBase + rec.Slot
	sbx := be.sandboxDir(spec.ID)

	// A setuid-root program on the tenant's disk, as if the tenant had
	// made one: the guest mounts the disk nosuid, and no_new_privs would
	// refuse it anyway.
	idBin, err := exec.LookPath("id")
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{
		"mkdir workspace", "write " + idBin + " workspace/suid-id",
		"sif workspace/suid-id mode 0104755", "sif workspace/suid-id uid 0", "sif workspace/suid-id gid 0",
	} {
		if out, err := exec.Command(realDebugfs, "-w", "-R", req, filepath.Join(sbx, diskImage)).CombinedOutput(); err != nil {
			t.Fatalf("debugfs %s: %v: %s", req, err, out)
		}
	}
	// The tenant's signing key, installed before the first boot: into
	// the image, at once.
	key1, key2 := strings.Repeat("0123456789abcdef", 4), strings.Repeat("fedcba9876543210", 4)
	if live, err := be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, spec.ID, []byte(key1)); err != nil || !live {
		t.Fatalf("InstallSigningKey before the first boot: %v, %v; want live", live, err)
	}
	if err := be.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	sh := func(cmd string) string {
		t.Helper()
		var out collect
		p, err := be.Exec(ctx, spec.ID, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}, &out)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out.String()
	}

	t.Run("qemu", func(t *testing.T) {
		pid, err := os.ReadFile(filepath.Join(sbx, pidFile))
		if err != nil {
			t.Fatal(err)
		}
		proc := "/proc/" + strings.TrimSpace(string(pid))
		status := statusFields(t, proc+"/status")
		ids := fmt.Sprintf("%d %d %d %d", uid, uid, uid, uid)
		for k, want := range map[string]string{
			"Uid": ids, "Gid": ids, "Groups": "", "CapEff": "0000000000000000", "CapPrm": "0000000000000000",
			"NoNewPrivs": "1", "Seccomp": "2",
		} {
			if status[k] != want {
				t.Errorf("QEMU's %s: %q, want %q", k, status[k], want)
			}
		}
		// Namespaces of its own: no network but its loopback.
		for _, ns := range []string{"net", "ipc", "uts", "pid"} {
			mine, _ := os.Readlink("/proc/self/ns/" + ns)
			its, err := os.Readlink(proc + "/ns/" + ns)
			if err != nil || its == mine {
				t.Errorf("QEMU's %s namespace: %q (%v), this process's %q", ns, its, err, mine)
			}
		}
		cmdline, _ := os.ReadFile(proc + "/cmdline")
		if !strings.Contains(string(cmdline), "\x00-sandbox\x00"+Sandbox+"\x00") {
			t.Errorf("QEMU's command line has no -sandbox %s: %q", Sandbox, cmdline)
		}
		// Everything it has open was handed to it: the images, the
		// kernel and initrd, sockets, pipes; its user owns nothing of
		// the sandbox's but its initrd.
		fds, _ := os.ReadDir(proc + "/fd")
		for _, fd := range fds {
			if target, _ := os.Readlink(proc + "/fd/" + fd.Name()); !strings.HasPrefix(target, "anon_inode:") {
				t.Logf("QEMU's fd %s: %s", fd.Name(), target)
			}
		}
		_ = filepath.WalkDir(sbx, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			st := info.Sys().(*syscall.Stat_t)
			switch {
			case d.Name() == initrdFile:
				if int(st.Uid) != uid || info.Mode().Perm() != 0o400 {
					t.Errorf("%s: owner %d, mode %v; want the VM user's, 0400", p, st.Uid, info.Mode())
				}
			case d.Name() == pileImage:
				if st.Uid != 0 || int(st.Gid) != uid || info.Mode().Perm() != 0o640 {
					t.Errorf("%s: %d:%d %v; want root's, its VM user's group to read", p, st.Uid, st.Gid, info.Mode())
				}
			case st.Uid != 0 || info.Mode().Perm()&0o077 != 0 && !d.IsDir():
				t.Errorf("%s: owner %d, mode %v; want the agent's alone", p, st.Uid, info.Mode())
			case d.IsDir() && info.Mode().Perm()&0o077 != 0:
				t.Errorf("directory %s: mode %v; want the agent's alone", p, info.Mode())
			}
			return nil
		})
	})

	t.Run("guest", func(t *testing.T) {
		if got := sh("find / -xdev -type f -perm /6000"); got != "" {
			t.Errorf("setuid or setgid files in the root image:\n%s", got)
		}
		if got := sh("/workspace/suid-id -u; ls -ln /workspace/suid-id | cut -c1-10"); got != "1000\n-rwsr-xr-x\n" {
			t.Errorf("a setuid-root program on the tenant's disk: %q, want it to run as 1000", got)
		}
		mounts := sh(`awk '{print $2, $4}' /proc/mounts`)
		for _, m := range []string{"/", "/workspace", "/home/sandbox", "/tmp", "/pile", "/run", guestapi.Dir, "/dev", "/proc", "/sys"} {
			found := false
			for _, l := range strings.Split(mounts, "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == m {
					found = true
					if !strings.Contains(","+f[1]+",", ",nosuid,") {
						t.Errorf("%s is mounted %s, without nosuid", m, f[1])
					}
				}
			}
			if !found {
				t.Errorf("%s is not mounted:\n%s", m, mounts)
			}
		}
		// The tenant's shell, init and a shepherd alike.
		status := sh(`for p in self 1 $PPID; do grep -E '^(NoNewPrivs|Seccomp):' /proc/$p/status | tr -s '\t ' ' '; done`)
		if want := strings.Repeat("NoNewPrivs: 1\nSeccomp: 2\n", 3); status != want {
			t.Errorf("the tenant, init and a shepherd: %q, want %q", status, want)
		}
		if got := sh("unshare -U true 2>&1; echo $?"); !strings.Contains(got, "Operation not permitted") {
			t.Errorf("unshare -U in the guest: %q, want EPERM", got)
		}
		// Perl calls what no tool of the image does; x86_64's numbers.
		calls := map[string]string{
			"keyctl":            "250, 0, -3, 0",
			"io_uring_setup":    "425, 1, 0",
			"bpf":               "321, 0, 0, 0",
			"perf_event_open":   "298, 0, 0, -1, -1, 0",
			"kexec_load":        "246, 0, 0, 0, 0",
			"init_module":       "175, 0, 0, 0",
			"finit_module":      "313, 0, 0, 0",
			"mount":             "165, 0, 0, 0, 0, 0",
			"umount2":           "166, 0, 0",
			"pivot_root":        "155, 0, 0",
			"reboot":            "169, 0, 0, 0, 0",
			"swapon":            "167, 0, 0",
			"ptrace(ATTACH, 1)": "101, 16, 1, 0, 0",
		}
		for name, args := range calls {
			got := sh(`perl -e '$! = 0; $r = syscall(` + args + `); print "$r ", $!+0, "\n"'`)
			if got != "-1 1\n" {
				t.Errorf("%s in the guest: %q, want -1 and EPERM (1)", name, got)
			}
		}
		if got := sh(`perl -e 'use Socket; socket(my $s, 40, SOCK_STREAM, 0) or print $!+0, "\n"'`); got != "97\n" {
			t.Errorf("socket(AF_VSOCK) in the guest: %q, want EAFNOSUPPORT (97)", got)
		}
	})

	t.Run("signing key", func(t *testing.T) {
		const keyFile = guestapi.PileDir + "/" + guestapi.SigningKeyFile
		// FS_IOC_GETFLAGS (x86_64's number): immutable (0x10), not
		// append-only (0x20).
		const flags = `perl -e 'open(my $f, "<", "` + keyFile + `") or die "$!\n"; my $a = pack("L", 0); ioctl($f, 0x80086601, $a) or die "$!\n"; printf "%x\n", unpack("L", $a) & 0x30'`
		want := fmt.Sprintf("%s\n400 %d:%d\n10\n", key1, guestapi.TenantUID, guestapi.TenantGID)
		if got := sh("cat " + keyFile + "; echo; stat -c '%a %u:%g' " + keyFile + "; " + flags); got != want {
			t.Fatalf("the key as the tenant sees it: %q, want %q", got, want)
		}
		for _, cmd := range []string{
			"echo x > " + keyFile,
			"echo x >> " + keyFile,
			"truncate -s 0 " + keyFile,
			"chmod 600 " + keyFile,
			"chown 1000:1000 " + keyFile,
			"rm -f " + keyFile,
			"mv " + keyFile + " " + guestapi.PileDir + "/moved",
			"ln " + keyFile + " /tmp/link",
			"touch " + keyFile,
		} {
			if got := sh(cmd + " 2>/dev/null && echo succeeded"); got != "" {
				t.Errorf("%q succeeded on the signing key", cmd)
			}
		}
		if got := sh("cat " + keyFile + "; echo; stat -c '%a %u:%g' " + keyFile + "; " + flags); got != want {
			t.Fatalf("the key after the refusals: %q, want %q", got, want)
		}
		// While the VM runs, a new key waits for its next boot.
		if live, err := be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx, spec.ID, []byte(key2)); err != nil || live {
			t.Fatalf("InstallSigningKey while the VM runs: %v, %v; want not live", live, err)
		}
		if got := sh("cat " + keyFile); got != key1 {
			t.Errorf("the key before the next boot: %q, want the previous one", got)
		}
		if data, err := be.PileFile(spec.ID, guestapi.SigningKeyFile); err != nil || string(data) != key1 {
			t.Errorf("PileFile of the key before the next boot: %q, %v; want the previous one", data, err)
		}
	})

	t.Run("pile", func(t *testing.T) {
		sh("echo appended >> /pile/self.pile")
		data, err := be.PileFile(spec.ID, "self.pile")
		if err != nil || string(data) != "appended\n" {
			t.Fatalf("PileFile of a running VM: %q, %v", data, err)
		}
		if _, err := be.PileFile(spec.ID, "missing"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("PileFile of a missing file, running: %v, want not exist", err)
		}
		if err := be.Stop(ctx, spec.ID); err != nil {
			t.Fatal(err)
		}
		// Stopped: debugfs, confined, reads the image the guest wrote.
		data, err = be.PileFile(spec.ID, "self.pile")
		if err != nil {
			t.Fatal(err)
		}
		head, content, _ := strings.Cut(string(data), "--\n")
		t.Logf("the confined reader: %s", head)
		if content != "appended\n" {
			t.Errorf("PileFile of a stopped VM: %q", content)
		}
		for _, want := range []string{
			fmt.Sprintf("uid=%d gid=%d groups=%d pid=1\n", uid, uid, uid),
			"NoNewPrivs: 1\n", "Seccomp: 2\n", "image read-only\n", "links: lo:\n", "unshare: unshare: unshare failed: Operation not permitted\n",
		} {
			if !strings.Contains(head, want) {
				t.Errorf("the confined reader's report lacks %q", want)
			}
		}
		if strings.Contains(head, "shadow readable") {
			t.Error("the confined reader read /etc/shadow")
		}
		if _, err := be.PileFile(spec.ID, "missing"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("PileFile of a missing file, stopped: %v, want not exist", err)
		}
		// A retained pile, its sandbox gone.
		if err := be.Destroy(ctx, spec.ID, true); err != nil {
			t.Fatal(err)
		}
		if data, err := be.PileFile(spec.ID, "self.pile"); err != nil || !strings.HasSuffix(string(data), "--\nappended\n") {
			t.Errorf("PileFile of a retained pile: %q, %v", data, err)
		}
	})
}

// statusFields reads a /proc/PID/status file into its fields, each
// value's whitespace made single spaces.
func statusFields(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// TestConsoleLogIsBounded boots a guest whose kernel prints every
// message, with a call for each of its initcalls, far more than the bound:
// console.log and console.log.1 stay within it, and init's line, among
// the newest, is kept.
func TestConsoleLogIsBounded(t *testing.T) {
	kernel, modules, root := vmImage(t)
	dir := t.TempDir()
	const bound = 16 << 10
	cfg := Config{
		Kernel: kernel, Initrd: makeInitrd(t, dir, modules), Root: root,
		Dir: filepath.Join(dir, "vm"), Accel: AccelTCG, VCPUs: 1, MemoryMiB: 256,
		LogBytes: bound, KernelArgs: []string{"ignore_loglevel", "initcall_debug"},
	}
	if os.Geteuid() == 0 {
		// As a VM user, reading the initrd through its descriptor.
		cfg.User = &Credential{UID: DefaultUIDBase, GID: DefaultUIDBase}
		if err := os.Chown(cfg.Initrd, DefaultUIDBase, DefaultUIDBase); err != nil {
			t.Fatal(err)
		}
	}
	v, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Stop(10 * time.Second) }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := v.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := v.Exec(ctx, "true"); err != nil || res.Exit.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	// Once the console's reader has written what it read.
	v.unwatchConsole()
	var sizes []int64
	for _, name := range []string{consoleLog, consoleLog + ".1"} {
		st, err := os.Stat(filepath.Join(cfg.Dir, name))
		if err != nil {
			t.Fatalf("%s: %v (a guest that prints this much must have filled the log)", name, err)
		}
		if st.Size() > bound {
			t.Errorf("%s holds %d bytes, more than the bound %d", name, st.Size(), bound)
		}
		sizes = append(sizes, st.Size())
	}
	ents, _ := os.ReadDir(cfg.Dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	t.Logf("console.log %d bytes, console.log.1 %d bytes; %v", sizes[0], sizes[1], names)
	// Init's last line is among the newest (the kernel may print after it).
	cur, _ := os.ReadFile(filepath.Join(cfg.Dir, consoleLog))
	prev, _ := os.ReadFile(filepath.Join(cfg.Dir, consoleLog+".1"))
	if !strings.Contains(string(prev)+string(cur), "starting init") {
		t.Errorf("init's line is in neither console log; the newest: %q", lastLine(filepath.Join(cfg.Dir, consoleLog)))
	}
	for _, n := range names {
		if strings.HasPrefix(n, consoleLog) && n != consoleLog && n != consoleLog+".1" {
			t.Errorf("a third console log: %s", n)
		}
	}
}

// TestNewRefusesAKernelQEMUCannotRead: QEMU reads the kernel as its own
// user, so a kernel only root may read is refused when the agent starts,
// saying why, rather than at a tenant's boot.
func TestNewRefusesAKernelQEMUCannotRead(t *testing.T) {
	kernel, modules, root := vmImage(t)
	if os.Geteuid() != 0 {
		t.Skip("QEMU runs as a user of its own only when the agent is root")
	}
	data, err := os.ReadFile(kernel)
	if err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(t.TempDir(), "vmlinuz")
	if err := os.WriteFile(private, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), Options{StateDir: newStateDir(t), GuestBinary: guestBinary(t), Kernel: private, Modules: modules, Root: root, Accel: AccelTCG})
	if err == nil || !strings.Contains(err.Error(), "is not readable by uid") {
		t.Fatalf("New with a kernel of mode 0600: %v, want a refusal that says why", err)
	}
}
