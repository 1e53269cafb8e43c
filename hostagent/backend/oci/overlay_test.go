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
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// lockPy holds or probes an fcntl lock: "posix" or "ofd", "hold" a read
// lock (the files are read-only: no write lock can be taken) until
// killed, touching the marker once it is held, or "probe" whether a write
// lock would conflict with one (F_GETLK), printing "locked" or "free".
const lockPy = `
import fcntl, struct, sys, time
kind, op, path = sys.argv[1:4]
get, set = (fcntl.F_GETLK, fcntl.F_SETLK) if kind == "posix" else (36, 37)  # F_OFD_GETLK, F_OFD_SETLK
f = open(path, "rb")
if op == "hold":
    fcntl.fcntl(f, set, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0))
    open(sys.argv[4], "w").close()
    time.sleep(1e6)
got = fcntl.fcntl(f, get, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
print("free" if struct.unpack("hhqqi", got)[0] == fcntl.F_UNLCK else "locked")
`

// watchPy watches path for reads (inotify), touches ready and waits for
// go; then it counts the reads it saw, reads path itself and counts again,
// and writes both counts to out: "0 1" unless another sandbox's reads
// reach its watch. Reads, not opens: the watcher's own sandbox opens its
// dynamic linker's cache and the guest binary (a new shepherd) all the
// time, but maps them, which is no read(2). (The kernel merges an event
// with the same one queued unread: the first count is read before its
// own read.)
const watchPy = `
import ctypes, os, struct, sys, time
path, ready, go, out = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0 or libc.inotify_add_watch(fd, path.encode(), 0x1) < 0:  # IN_ACCESS
    sys.exit("inotify: errno %d" % ctypes.get_errno())
def events():
    n = 0
    while True:
        try:
            buf = os.read(fd, 4096)
        except BlockingIOError:
            return n
        i = 0
        while i < len(buf):
            n, i = n + 1, i + 16 + struct.unpack_from("iIII", buf, i)[3]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.01)
before = events()
with open(path, "rb") as f:
    f.read(1)
with open(out + ".tmp", "w") as o:
    o.write("%d %d" % (before, events()))
os.rename(out + ".tmp", out)
`

// TestNoSharedInodes: two sandboxes of one node share no inode that a
// lock or a watch attaches to. While a tenant holds `flock -x` on a file
// every sandbox has (the base system, a host /etc entry, the guest
// binary, a faculty both have), or a POSIX or OFD lock, another tenant's
// `flock -n` on the same path succeeds and its F_GETLK sees no lock, and
// an inotify watch in one does not see the other's opens; in the holder's
// own sandbox the lock is seen (the probes work), and the node's own
// inode is not locked either. gVisor: the same, from its sentry.
func TestNoSharedInodes(t *testing.T) {
	t.Run("runc", func(t *testing.T) {
		requireRunc(t)
		testNoSharedInodes(t, newBackend(t, newStateDir(t)), backend.IsolationContainer)
	})
	t.Run("gvisor", func(t *testing.T) {
		runsc := requireRunsc(t)
		testNoSharedInodes(t, newGVisorBackend(t, newStateDir(t), runsc), backend.IsolationGVisor)
	})
}

func testNoSharedInodes(t *testing.T, b *Backend, isolation string) {
	tool := conformance.HostDir(t, map[string]string{"tool": "#!/bin/sh\necho tool\n"}) // a faculty's build on the node
	spec := func(id string) backend.Spec {
		return backend.Spec{ID: id, Tenant: "t/" + id, Isolation: isolation,
			Faculties: []backend.Faculty{{Name: "tools", Fingerprint: "fp", Dir: tool, Binaries: []string{"tool"}}}}
	}
	startSandbox(t, b, spec("holder"))
	startSandbox(t, b, spec("other"))
	// The files, their node's own (for a check that the node's is not
	// locked), and whether a watch on them can be checked: an execve
	// reads its binary, and the watcher's own sandbox execs the guest
	// binary for each new shepherd, whenever it starts one; a read of
	// /dev/null reads nothing, which is no event.
	// gVisor's devices are its sentry's, and refuse locks (ENOLCK).
	files := []struct {
		path, node    string
		watch, device bool
	}{
		{"/usr/bin/env", "/usr/bin/env", true, false},
		{"/etc/ld.so.cache", "/etc/ld.so.cache", true, false},
		{guestapi.Binary, b.guestBin, false, false},
		{guestapi.FacultiesDir + "/tools/tool", filepath.Join(tool, "tool"), true, false},
		{"/dev/null", "/dev/null", false, true},
		{"/dev/urandom", "/dev/urandom", true, true},
	}
	py := func(script string, args ...string) string {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = backend.ShellQuote(a)
		}
		return "python3 -c " + backend.ShellQuote(script) + " " + strings.Join(quoted, " ")
	}
	// hold starts cmd detached in the holder and returns once it touched
	// its marker.
	n := 0
	hold := func(cmd func(marker string) string) {
		t.Helper()
		n++
		marker := "/tmp/held." + string(rune('a'+n))
		sh(t, b, "holder", "setsid sh -c "+backend.ShellQuote(cmd(marker))+" </dev/null >/dev/null 2>/tmp/hold.err & "+waitFor(marker, "/tmp/hold.err"))
	}
	for _, f := range files {
		path, node := f.path, f.node
		if f.device && isolation == backend.IsolationGVisor {
			continue
		}
		t.Run("flock "+path, func(t *testing.T) {
			hold(func(marker string) string {
				return "exec flock -x " + backend.ShellQuote(path) + " sh -c 'touch " + marker + "; exec sleep 1000000'"
			})
			probe := "flock -n " + backend.ShellQuote(path) + " true && echo free || echo locked"
			if got := sh(t, b, "holder", probe); got != "locked\n" {
				t.Fatalf("flock -n %s in the holder's own sandbox: %q, want locked (the probe sees the lock)", path, got)
			}
			if got := sh(t, b, "other", probe); got != "free\n" {
				t.Errorf("flock -n %s in another sandbox while the holder has flock -x on it: %q, want free", path, got)
			}
			// Nor is the node's inode locked: the lock is the sandbox's.
			fd, err := unix.Open(node, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Errorf("flock of the node's %s while a sandbox holds it: %v, want free", node, err)
			}
			_ = unix.Flock(fd, unix.LOCK_UN)
		})
		for _, kind := range []string{"posix", "ofd"} {
			t.Run(kind+" "+path, func(t *testing.T) {
				hold(func(marker string) string { return "exec " + py(lockPy, kind, "hold", path, marker) })
				probe := py(lockPy, kind, "probe", path)
				if got := sh(t, b, "holder", probe); got != "locked\n" {
					t.Fatalf("%s F_GETLK of %s in the holder's own sandbox: %q, want locked", kind, path, got)
				}
				if got := sh(t, b, "other", probe); got != "free\n" {
					t.Errorf("%s F_GETLK of %s in another sandbox while the holder has a read lock: %q, want free", kind, path, got)
				}
			})
		}
		t.Run("inotify "+path, func(t *testing.T) {
			if !f.watch {
				t.Skip("not a file whose reads the watcher's own sandbox leaves alone")
			}
			sh(t, b, "other", "rm -f /tmp/ready /tmp/go /tmp/opens; setsid "+py(watchPy, path, "/tmp/ready", "/tmp/go", "/tmp/opens")+
				" </dev/null >/dev/null 2>/tmp/watch.err & "+waitFor("/tmp/ready", "/tmp/watch.err"))
			sh(t, b, "holder", "head -c 1 "+backend.ShellQuote(path)+" >/dev/null")
			got := sh(t, b, "other", "touch /tmp/go; until [ -e /tmp/opens ]; do sleep 0.01; done; cat /tmp/opens")
			if got != "0 1" {
				t.Errorf("reads of %s that a watch in another sandbox saw before its own, and its own: %q, want 0 1", path, got)
			}
		})
	}
}

// waitFor is a shell command that waits until the background process
// just started ($!) has made marker, and fails with its errors if it
// exits first.
func waitFor(marker, errors string) string {
	return "pid=$!; until [ -e " + marker + " ]; do kill -0 $pid 2>/dev/null || { cat " + errors + " >&2; exit 1; }; sleep 0.01; done"
}

// TestOwnOverlaysAndDevices: a runc sandbox's /usr, /etc entries and
// guest binary are overlays and its /dev/null is not the node's, and none
// of it was ever mounted on the node (the runtime's own mount namespace
// held them while it started the container).
func TestOwnOverlaysAndDevices(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "ovl"})
	if left := volumeMounts(t, filepath.Join(b.sandboxDir(id), baseName)); len(left) > 0 {
		t.Errorf("mounted on the node: %v", left)
	}
	if got := sh(t, b, id, "stat -f -c %T /usr /etc/ld.so.cache "+guestapi.Binary); got != "overlayfs\noverlayfs\noverlayfs\n" {
		t.Errorf("filesystem types of /usr, /etc/ld.so.cache and the guest binary: %q, want overlayfs", got)
	}
	if got := sh(t, b, id, "/usr/bin/env true && echo ran; touch /usr/x 2>/dev/null || echo read-only"); got != "ran\nread-only\n" {
		t.Errorf("/usr: %q", got)
	}
	var node unix.Stat_t
	if err := unix.Stat("/dev/null", &node); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(sh(t, b, id, "stat -c '%d %t:%T' /dev/null; echo x >/dev/null && head -c 4 /dev/zero | wc -c"))
	if len(got) != 3 || got[0] == strconv.FormatUint(node.Dev, 10) || got[1] != "1:3" || got[2] != "4" {
		t.Errorf("/dev/null in the sandbox (device of its filesystem, its own number; /dev/zero read): %q, want a filesystem other than the node's /dev (%d), 1:3 and 4", got, node.Dev)
	}
}

// TestSharedSnapshot: the snapshot of the node's /etc entries holds them
// as the node has them (an entry that is a link by its target, links
// below it as links, modes kept) and the guest binary; a change of an
// entry makes a new snapshot at the next start, and one that no sandbox
// names goes when the next is made.
func TestSharedSnapshot(t *testing.T) {
	requireRunc(t)
	root, err := os.MkdirTemp("", "pg-baseroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	for _, d := range []string{"usr", "etc/certs", "zoneinfo"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/ld.so.cache", "cache 1", 0o644)
	write("etc/certs/bundle.crt", "certs", 0o644)
	write("etc/secret", "not listed", 0o600)
	write("zoneinfo/UTC", "utc", 0o644)
	for link, target := range map[string]string{"etc/localtime": "../zoneinfo/UTC", "etc/certs/ca.pem": "/usr/share/ca.crt"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	state := newStateDir(t)
	b, err := New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, BaseRoot: root,
		EtcFiles: []string{"ld.so.cache", "certs", "localtime", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func(id string) (string, []string) {
		t.Helper()
		sb := &sandbox{dir: filepath.Join(state, "sandboxes", id)}
		if err := os.MkdirAll(sb.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		// As a start more than sharedFresh after the last.
		b.shared.seen = time.Time{}
		dir, etc, err := b.sharedFor(sb)
		if err != nil {
			t.Fatal(err)
		}
		return dir, etc
	}
	first, etc := snapshot("a")
	if strings.Join(etc, " ") != "ld.so.cache certs localtime" {
		t.Errorf("entries %v, want those of the node that exist", etc)
	}
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(first, p))
		if err != nil {
			return err.Error()
		}
		return string(data)
	}
	if read("etc/ld.so.cache") != "cache 1" || read("etc/localtime") != "utc" || read("etc/certs/bundle.crt") != "certs" {
		t.Errorf("snapshot's files: %q %q %q", read("etc/ld.so.cache"), read("etc/localtime"), read("etc/certs/bundle.crt"))
	}
	if target, err := os.Readlink(filepath.Join(first, "etc/certs/ca.pem")); err != nil || target != "/usr/share/ca.crt" {
		t.Errorf("a link below an entry: %q, %v; want it kept as a link", target, err)
	}
	if backend.FileExists(filepath.Join(first, "etc/secret")) {
		t.Error("an entry not listed is in the snapshot")
	}
	if fi, err := os.Stat(filepath.Join(first, sharedGuest)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the guest binary in the snapshot: %v, %v", fi, err)
	}
	if again, _ := snapshot("b"); again != first {
		t.Errorf("a second sandbox got snapshot %s, want the first's %s (nothing changed)", again, first)
	}

	// Of another size: a file rewritten in place at its size within one
	// tick of the kernel's clock keeps its times (fingerprintShared).
	write("etc/ld.so.cache", "cache two", 0o644)
	second, _ := snapshot("b")
	if second == first {
		t.Fatal("the snapshot did not change with the node's ld.so.cache")
	}
	if data, _ := os.ReadFile(filepath.Join(second, "etc/ld.so.cache")); string(data) != "cache two" {
		t.Errorf("the new snapshot's ld.so.cache: %q", data)
	}
	if !backend.FileExists(first) {
		t.Error("the first snapshot went while sandbox a names it")
	}
	// Unnamed snapshots go when the next is made.
	write("etc/ld.so.cache", "cache three", 0o644)
	snapshot("a")
	snapshot("b")
	write("etc/ld.so.cache", "cache number four", 0o644)
	snapshot("a")
	if backend.FileExists(first) || backend.FileExists(second) {
		t.Error("snapshots that no sandbox names any more are still there")
	}
}

// BenchmarkOwnOverlays is what a runc start adds for a sandbox's own
// overlays and device nodes: the mount points, and a mount namespace with
// the mounts, as runc gets it (without runc); "stale" with a fingerprint
// of the node's /etc entries, as a start more than sharedFresh after the
// last takes, "fresh" without, as the others of a burst.
func BenchmarkOwnOverlays(b *testing.B) {
	requireRunc(b)
	be := newBackend(b, newStateDir(b))
	sb, err := be.allocate(backend.Spec{ID: "bench"}, false, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, stale := range []bool{true, false} {
		name := "fresh"
		if stale {
			name = "stale"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if stale {
					be.shared.seen = time.Time{}
				}
				sys, err := be.systemOf(sb)
				if err != nil {
					b.Fatal(err)
				}
				_, setup, err := be.baseFor(sb, sys)
				if err != nil {
					b.Fatal(err)
				}
				if err := inMountNamespace(setup); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMountNamespaceLeavesTheProcess: what inMountNamespace mounts is in
// its namespace alone, whichever thread the runtime gave it: the main
// thread's namespace (the one /proc/self shows) never changes, and no
// thread of the process stays in one of them.
func TestMountNamespaceLeavesTheProcess(t *testing.T) {
	requireRunc(t)
	dir := t.TempDir()
	ns := func(tid int) string {
		l, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/mnt", tid))
		if err != nil {
			return err.Error()
		}
		return l
	}
	main := ns(os.Getpid())
	for range 200 {
		if err := inMountNamespace(func() error {
			return unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4k")
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := ns(os.Getpid()); got != main {
		t.Fatalf("the main thread's mount namespace is %s, was %s", got, main)
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		t.Fatalf("mounted on the node: %v, %v", mounted, err)
	}
	// The last thread ends after it answered: wait for it, a bounded time.
	others := func() (left []string) {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			if got := ns(tid); got != main && !strings.Contains(got, "no such file") {
				left = append(left, fmt.Sprintf("thread %d in %s", tid, got))
			}
		}
		return left
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := others()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads in a mount namespace not the process's (%s): %v", main, left)
		}
	}
}
