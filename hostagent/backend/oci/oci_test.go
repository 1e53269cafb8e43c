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
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/testbin"
)

// These tests run real runc containers. They need root and runc
// (`apt-get install runc`); without them they skip. The guest binary is
// built once by TestMain with CGO_ENABLED=0, exactly as the agent image
// ships it, and passed to the backend through Options.GuestBinary.

var (
	guestBinary string
	skipReason  string
	// testRuntime is the OCI runtime the tests run: runc, or the one named
	// by $PLAYGROUND_OCI_RUNTIME (say crun) to check the backend with it.
	testRuntime = "runc"
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if rt := os.Getenv("PLAYGROUND_OCI_RUNTIME"); rt != "" {
		testRuntime = rt
	}
	switch {
	case os.Geteuid() != 0:
		skipReason = "oci backend tests need root (user namespaces, cgroups, chattr)"
	default:
		// As root the tests run, so a missing runc is a broken set-up, not
		// a reason to skip: make test installs it (hack/prereqs.sh).
		if _, err := exec.LookPath(testRuntime); err != nil {
			fmt.Fprintf(os.Stderr, "%s is not installed: run make prereqs (or apt-get install runc)\n", testRuntime)
			return 1
		}
	}
	if skipReason == "" {
		var err error
		if guestBinary, err = testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

func requireRunc(tb testing.TB) {
	tb.Helper()
	if skipReason != "" {
		tb.Skip(skipReason)
	}
}

// newStateDir makes a state directory that a sandbox's unprivileged root
// can traverse (t.TempDir is 0700).
func newStateDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pg-oci-")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// Whatever a test left: containers first, then files (the pile's
		// append-only flags must go before it can be removed).
		b, err := New(Options{StateDir: dir, GuestBinary: guestBinary, Runtime: testRuntime, GVisorRuntime: runscPath})
		if err == nil {
			if err := b.DestroyAll(context.Background()); err != nil {
				tb.Errorf("cleanup: %v", err)
			}
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

func newBackend(tb testing.TB, stateDir string) *Backend {
	tb.Helper()
	b, err := New(Options{StateDir: stateDir, GuestBinary: guestBinary, Runtime: testRuntime})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// newSandbox provisions and starts a sandbox on a fresh "node".
func newSandbox(tb testing.TB, spec backend.Spec) (*Backend, string) {
	tb.Helper()
	requireRunc(tb)
	b := newBackend(tb, newStateDir(tb))
	startSandbox(tb, b, spec)
	return b, spec.ID
}

func startSandbox(tb testing.TB, b *Backend, spec backend.Spec) {
	tb.Helper()
	ctx := context.Background()
	if err := b.Provision(ctx, spec); err != nil {
		tb.Fatal(err)
	}
	if err := b.Start(ctx, spec.ID); err != nil {
		tb.Fatal(err)
	}
}

// run and sh run a command directly on the backend, as the conformance
// suite does.
func run(tb testing.TB, b *Backend, id string, req backend.ExecRequest) conformance.Result {
	tb.Helper()
	return conformance.Exec(tb, b, id, req)
}

func sh(tb testing.TB, b *Backend, id, cmd string) string {
	tb.Helper()
	return conformance.Sh(tb, b, id, cmd)
}

// TestIDRules: on top of the suite's unsafe IDs, oci refuses what runc or
// a socket path would choke on.
func TestIDRules(t *testing.T) {
	requireRunc(t)
	b := newBackend(t, newStateDir(t))
	for _, id := range []string{".hidden", "-flag", strings.Repeat("x", 64)} {
		if err := b.Provision(context.Background(), backend.Spec{ID: id}); err == nil {
			t.Errorf("Provision(%q) succeeded", id)
		}
	}
}

// TestAgentGoneKills covers the agent dying mid-command: the shepherd sees
// its connection close and kills the command's tree, since nobody is left
// to collect or cancel it.
func TestAgentGoneKills(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "gone"})
	sentinel := conformance.StartSentinel(t, b, id)
	conn, err := b.dial(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := guestapi.AppendJSONFrame(nil, guestapi.FrameStart, guestapi.StartRequest{Version: guestapi.ProtocolVersion,
		Command: "setsid sh -c 'trap \"\" TERM; sleep 1000' </dev/null >/dev/null 2>&1 & echo $!; sleep 1000"})
	req = guestapi.AppendFrame(req, guestapi.FrameStdinEnd, nil)
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	fr := guestapi.NewFrameReader(conn)
	var pid string
	for pid == "" {
		ft, payload, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if ft == guestapi.FrameStdout {
			pid = strings.TrimSpace(string(payload))
		}
	}
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := conformance.Alive(t, b, id, pid, sentinel)
		if !got[1] {
			t.Fatal("sentinel died")
		}
		if !got[0] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("descendant %s survived the agent's disconnect", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPileFlag: what makes the pile append-only (conformance's pile
// group checks that it is) is FS_APPEND_FL on the host inode, which also
// refuses a write at an offset (pwrite) through a descriptor opened
// without O_APPEND.
func TestPileFlag(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "pile"})
	f := guestapi.PileDir + "/self.pile"
	sh(t, b, id, "echo one >> "+f)
	pwrite := "python3 -c 'import os; fd=os.open(\"" + f + "\", os.O_WRONLY); os.pwrite(fd, b\"Z\", 0)'"
	if r := run(t, b, id, backend.ExecRequest{Command: pwrite, Shell: backend.ShellClean}); r.Status.ExitCode == 0 {
		t.Errorf("%q succeeded in the pile", pwrite)
	}
	// The running container holds the pile: the host reads it through
	// InspectPile.
	var flags uint32
	err := b.InspectPile(id, func(dir string) error {
		fd, err := unix.Open(filepath.Join(dir, "self.pile"), unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		flags, err = unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
		return err
	})
	if err != nil || flags&fsAppendFL == 0 {
		t.Fatalf("host flags %#x, %v", flags, err)
	}
	if got := sh(t, b, id, "cat "+f); got != "one\n" {
		t.Fatalf("pile content %q", got)
	}
}

// TestIsolation checks what a sandbox sees of the host, from inside; the
// conformance suite's isolation group checks what it sees of another
// sandbox.
func TestIsolation(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "iso"})
	checks := map[string]string{
		"uid_map":                     "cat /proc/self/uid_map",
		"root":                        "ls -d /root 2>&1 || echo absent",
		"shadow":                      "ls /etc/shadow /etc/ssh 2>&1 || echo absent",
		"top level":                   "ls -A / | tr '\\n' ' '",
		"status":                      "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t' ' '",
		"ps":                          "ps -eo user=,comm= | tr -s ' ' | sort -u | tr '\\n' ';'",
		"net":                         "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
		"unshare":                     "unshare -Ur true 2>&1 && echo allowed || echo refused",
		"socket dir":                  "ls " + guestapi.RunDir + " 2>&1 || echo refused",
		"kill init":                   "kill -9 1 2>&1 && echo allowed || echo refused",
		"read init environ":           "cat /proc/1/environ 2>&1 >/dev/null && echo allowed || echo refused",
		"write outside writable dirs": "touch /usr/x /etc/x /x 2>&1; echo done",
	}
	got := make(map[string]string)
	for name, cmd := range checks {
		got[name] = strings.TrimSpace(run(t, b, id, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}).Stdout)
	}
	if f := strings.Fields(got["uid_map"]); len(f) != 3 || f[0] != "0" || f[1] == "0" || f[2] != "65536" {
		t.Errorf("uid_map %q: container root must map to a non-root host uid", got["uid_map"])
	}
	if !strings.HasSuffix(got["root"], "absent") {
		t.Errorf("/root visible: %q", got["root"])
	}
	if !strings.Contains(got["shadow"], "absent") {
		t.Errorf("host secrets: %q", got["shadow"])
	}
	want := map[string]bool{".playground": true, "bin": true, "dev": true, "etc": true, "home": true, "lib": true,
		"lib64": true, "pile": true, "proc": true, "run": true, "sbin": true, "sys": true, "tmp": true, "usr": true,
		"var": true, "workspace": true, "lib32": true, "libx32": true, "opt": true}
	for _, e := range strings.Fields(got["top level"]) {
		if !want[e] {
			t.Errorf("unexpected top-level entry %q", e)
		}
	}
	for _, w := range []string{"CapEff: 0000000000000000", "CapBnd: 00000000000000e1", "NoNewPrivs: 1", "Seccomp: 2"} {
		if !strings.Contains(got["status"], w) {
			t.Errorf("status %q lacks %q", got["status"], w)
		}
	}
	for _, p := range strings.Split(strings.Trim(got["ps"], ";"), ";") {
		switch p {
		case "root playground-sand", "sandbox sh", "sandbox ps", "sandbox sort", "sandbox tr":
		default:
			t.Errorf("process visible in the sandbox: %q (all: %q)", p, got["ps"])
		}
	}
	if got["net"] != "lo" {
		t.Errorf("network interfaces: %q", got["net"])
	}
	for _, name := range []string{"unshare", "socket dir", "kill init", "read init environ"} {
		if !strings.HasSuffix(got[name], "refused") {
			t.Errorf("%s: %q", name, got[name])
		}
	}
	if strings.Count(got["write outside writable dirs"], "Read-only file system")+
		strings.Count(got["write outside writable dirs"], "Permission denied") != 3 {
		t.Errorf("writes outside the writable layer: %q", got["write outside writable dirs"])
	}
}

// TestReattachStoppedContainer: a container that the runtime stopped
// behind the agent's back (killed, or a node reboot) is not running; a new
// agent's Reattach starts it again over the same files, and Detach keeps
// them. (The conformance suite's persistence group covers the rest of
// reattaching.)
func TestReattachStoppedContainer(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	spec := backend.Spec{ID: "persist"}
	b := newBackend(t, state)
	startSandbox(t, b, spec)
	sh(t, b, spec.ID, "echo kept > ~/file")
	if _, err := b.runc.output(context.Background(), "kill", containerID(spec.ID), "KILL"); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		st, err := b.runc.state(context.Background(), containerID(spec.ID))
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == "stopped" {
			break
		}
		if i > 500 {
			t.Fatalf("container still %s", st.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Exec(context.Background(), spec.ID, backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotRunning) {
		t.Fatalf("exec in stopped sandbox: %v", err)
	}
	b2 := newBackend(t, state)
	if err := b2.Reattach(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b2, spec.ID, "cat ~/file"); got != "kept\n" {
		t.Fatalf("file after restart: %q", got)
	}
	if err := b2.Detach(context.Background(), spec.ID); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b2, spec.ID, "cat ~/file"); got != "kept\n" {
		t.Fatalf("file after detach: %q", got)
	}
}

// TestForkBombLeavesSupervision: a tenant that takes every PID it may
// (a fork bomb that grabs each one freed) meets its own limit, the
// RLIMIT_NPROC of its user, before the sandbox's pids cgroup, which init,
// the shepherds and the job holders share: the cgroup refuses no fork,
// init lives on (Go's runtime ends when the kernel refuses it a thread,
// which once took init down about once in five such bombs), a command
// that cannot start is refused as exhausted, and the jobs held are still
// listed by init.
func TestForkBombLeavesSupervision(t *testing.T) {
	const limit = 32
	b, id := newSandbox(t, backend.Spec{ID: "pidlimit", Resources: backend.Resources{PIDs: limit}})
	ctx := context.Background()
	init, err := b.initPID(id)
	if err != nil {
		t.Fatal(err)
	}
	// perl, not sh: a shell's failed fork ends it, and this must go on.
	sh(t, b, id, `setsid perl -e 'while (1) { my $p = fork(); if (defined $p && $p == 0) { sleep 3600; exit } }' >/dev/null 2>&1 &`)
	// The kernel counts a command's shell against the tenant when the
	// shell's user is set, before the shell itself is counted: with the
	// bomb at exactly the limit a command still starts (and may end the
	// bomb), but cannot fork. That is the sign that the bomb is there.
	eventually(t, "the bomb holding the tenant's limit", func() error {
		out := conformance.NewSink()
		var st backend.ExitStatus
		p, err := b.Exec(ctx, id, backend.ExecRequest{Command: "( true )"}, out)
		if err == nil {
			st, err = p.Wait(ctx)
		}
		switch {
		case errors.Is(err, backend.ErrExhausted):
			return err // a start met one of the bomb's forks
		case err != nil:
			t.Fatalf("a command beside the bomb: %v", err)
		case st.ExitCode == 0 || !strings.Contains(out.Stderr(), "fork"):
			return fmt.Errorf("a subshell still starts: %+v, stderr %q", st, out.Stderr())
		}
		return nil
	})
	// Each start the kernel lets through adds one to the tenant's count
	// for good (a job that sleeps; the bomb's processes never end): after
	// a few the tenant is past its limit, and every start is refused,
	// saying why.
	var held []*guestexec.Job
	defer func() {
		for _, j := range held {
			j.Close()
		}
	}()
	eventually(t, "every start refused", func() error {
		conn, err := b.dial(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: "exec sleep 3600", Shell: backend.ShellClean}, jobSpec(fmt.Sprintf("held-%d", len(held))))
		switch {
		case err == nil:
			held = append(held, j)
			return errors.New("a job started")
		case !errors.Is(err, backend.ErrExhausted):
			t.Fatal(err)
		}
		for range 5 {
			_, err := b.Exec(ctx, id, backend.ExecRequest{Command: "true"}, nil)
			if err == nil {
				return errors.New("a command started")
			}
			if !errors.Is(err, backend.ErrExhausted) || !strings.Contains(err.Error(), "process limit is reached") {
				t.Fatalf("a command in a sandbox past its tenant's limit: %v, want it refused as exhausted, saying why", err)
			}
		}
		return nil
	})
	if n, ok := b.ForksRefused(id); !ok || n != 0 {
		t.Errorf("the sandbox's pids cgroup refused %d forks (known %v): the tenant reached past its own limit into the supervision's", n, ok)
	}
	if now, err := b.initPID(id); err != nil || now != init {
		t.Fatalf("init is %d (%v), was %d: it did not survive the bomb", now, err, init)
	}
	// Init answers the listing itself: nothing of the sandbox starts.
	recs, err := b.Capabilities().JobHolder.ListJobs(ctx, id)
	if err != nil || len(recs) != len(held) {
		t.Errorf("held jobs at the limit: %+v (%v), want the %d jobs held", recs, err, len(held))
	}
}

// TestLeftCgroupsAreSwept: runc removes a container's state even when it
// gives up removing its cgroups (still busy with its processes' exit on a
// loaded node), and nothing named them again: a soak found two sandboxes'
// cgroups left in every hierarchy. Removing a container now sweeps what
// is left of its cgroups, even once its state is gone.
func TestLeftCgroupsAreSwept(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "swept"})
	ctx := context.Background()
	if err := b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	// What runc's give-up leaves: the directories, empty, in every
	// hierarchy, and no container.
	dirs := cgroupDirs(filepath.Join(b.cgroupParent, containerID(id)))
	if len(dirs) == 0 {
		t.Fatal("no cgroup hierarchy found for this process")
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Destroy(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, b.opts.StateDir, id); len(left) > 0 {
		t.Fatalf("after Destroy: %v", left)
	}
}

// TestCgroupLimits: Resources become the container's cgroup limits (the
// conformance suite's limits group checks that they hold inside).
func TestCgroupLimits(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "limits", Resources: backend.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, PIDs: 64}})
	st, err := b.runc.state(context.Background(), containerID(id))
	if err != nil {
		t.Fatal(err)
	}
	if got := cgroupValue(t, st.Pid, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(256<<20) {
		t.Errorf("memory limit %s", got)
	}
	if got, want := cgroupValue(t, st.Pid, "pids", "pids.max", "pids.max"), strconv.Itoa(int(hostPIDs(64))); got != want {
		t.Errorf("pids limit %s, want %s (the tenant's 64 and the supervision's headroom)", got, want)
	}
	if got := sh(t, b, id, "awk '/^Max processes/ { print $3, $4 }' /proc/self/limits"); got != "64 64\n" {
		t.Errorf("the tenant's process limit (soft, hard): %q, want 64 and 64", got)
	}
	if got := cgroupValue(t, st.Pid, "cpu", "cpu.cfs_quota_us", "cpu.max"); got != "50000" && got != "50000 100000" {
		t.Errorf("cpu quota %s", got)
	}
}

// cgroupValue reads a file of pid's cgroup: v1file of controller v1ctl on
// cgroup v1, v2file on a v2-only host.
func cgroupValue(t *testing.T, pid int, v1ctl, v1file, v2file string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var path string
		switch {
		case backend.FileExists("/sys/fs/cgroup/cgroup.controllers") && parts[0] == "0":
			path = filepath.Join("/sys/fs/cgroup", parts[2], v2file)
		case parts[1] == v1ctl || strings.Contains(","+parts[1]+",", ","+v1ctl+","):
			path = filepath.Join("/sys/fs/cgroup", parts[1], parts[2], v1file)
		default:
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	t.Fatalf("no %s cgroup for pid %d", v1ctl, pid)
	return ""
}

// TestDestroy: what Destroy leaves on the node. No container and no
// layer; a kept pile stays in its image, which InspectPile reads; without
// keepPile nothing at all. (The conformance suite checks what a tenant sees
// of it: a running command killed, the pile adopted or gone.)
func TestDestroy(t *testing.T) {
	requireRunc(t)
	b := newBackend(t, newStateDir(t))
	ctx := context.Background()
	startSandbox(t, b, backend.Spec{ID: "gone"})
	sh(t, b, "gone", "echo entry >> /pile/self.pile")
	if err := b.Destroy(ctx, "gone", true); err != nil {
		t.Fatal(err)
	}
	if b.runc.exists(containerID("gone")) {
		t.Fatal("container survived Destroy")
	}
	var data []byte
	if err := b.InspectPile("gone", func(dir string) (err error) {
		data, err = os.ReadFile(filepath.Join(dir, "self.pile"))
		return err
	}); err != nil || string(data) != "entry\n" {
		t.Fatalf("kept pile: %q, %v", data, err)
	}
	if backend.FileExists(filepath.Join(b.sandboxDir("gone"), layerName)) {
		t.Fatal("workspace survived Destroy")
	}
	if err := b.Destroy(ctx, "gone", false); err != nil {
		t.Fatal(err)
	}
	if backend.FileExists(b.sandboxDir("gone")) {
		t.Fatal("sandbox directory survived Destroy without keepPile")
	}
}

// TestIDMapSlots: each sandbox holds its own ID range until it is
// destroyed; a full node refuses with a clear error and loses nothing, and
// a restarted agent (a new Backend) sees the ranges its predecessor gave.
func TestIDMapSlots(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	ctx := context.Background()
	b, err := New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, IDMapSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := b.Provision(ctx, backend.Spec{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	slotOf := func(b *Backend, id string) int {
		sb, err := b.load(id)
		if err != nil {
			t.Fatal(err)
		}
		return sb.slot
	}
	if slotOf(b, "a") == slotOf(b, "b") {
		t.Fatal("two sandboxes share an ID range")
	}
	if err := b.Provision(ctx, backend.Spec{ID: "c"}); err == nil || !strings.Contains(err.Error(), "all 2 ID-map slots are in use") {
		t.Fatalf("third sandbox on two slots: %v", err)
	}
	freed := slotOf(b, "a")
	if err := b.Destroy(ctx, "a", false); err != nil {
		t.Fatal(err)
	}
	if err := b.Provision(ctx, backend.Spec{ID: "c"}); err != nil {
		t.Fatalf("after a destroy: %v", err)
	}
	if got := slotOf(b, "c"); got != freed {
		t.Fatalf("c got slot %d, want the freed %d", got, freed)
	}
	restarted, err := New(Options{StateDir: state, GuestBinary: guestBinary, Runtime: testRuntime, IDMapSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.Provision(ctx, backend.Spec{ID: "d"}); err == nil {
		t.Fatal("a restarted backend gave away a slot in use")
	}
}

// BenchmarkExecTrue compares a command round trip through the backend
// (connect, shepherd forks /bin/sh as the tenant, output, exit status)
// with a bare fork/exec of the same shell on the host, in the same run.
func BenchmarkExecTrue(b *testing.B) {
	requireRunc(b)
	be, id := newSandbox(b, backend.Spec{ID: "bench"})
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backend", func(b *testing.B) { benchExecTrue(b, be, id) })
}

// benchExecTrue runs `true` in a clean shell of sandbox id, through be's
// exec fast path, once per round of b.
func benchExecTrue(b *testing.B, be *Backend, id string) {
	ctx := context.Background()
	for b.Loop() {
		p, err := be.Exec(ctx, id, backend.ExecRequest{Command: "true", Shell: backend.ShellClean}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.ExitCode != 0 {
			b.Fatal(st, err)
		}
	}
}

// TestLongStatePath covers socket paths beyond sun_path's 108 bytes, which
// the agent reaches through /proc/self/fd of the socket's directory.
func TestLongStatePath(t *testing.T) {
	requireRunc(t)
	state := filepath.Join(newStateDir(t), strings.Repeat("long-state-directory-", 4))
	b := newBackend(t, state)
	startSandbox(t, b, backend.Spec{ID: "a-sandbox-with-a-long-name"})
	t.Cleanup(func() { _ = b.Destroy(context.Background(), "a-sandbox-with-a-long-name", false) })
	if n := len(b.socketPath("a-sandbox-with-a-long-name")); n <= maxSocketPath {
		t.Fatalf("socket path only %d bytes long", n)
	}
	if got := sh(t, b, "a-sandbox-with-a-long-name", "echo ok"); got != "ok\n" {
		t.Fatalf("got %q", got)
	}
}

// TestStopAll: stopping a node's sandboxes ends every process in them and
// leaves their files; the next Reattach runs them again over those files.
func TestStopAll(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	b := newBackend(t, state)
	spec := backend.Spec{ID: "stopped", Persona: "p"}
	startSandbox(t, b, spec)
	sh(t, b, spec.ID, "echo kept > ~/file")
	// PIDs restart in a new container: find the sentinel by its command line.
	const sentinel = "sleep 7654321"
	conformance.StartNamed(t, b, spec.ID, sentinel)

	if !b.Alive(spec.ID) {
		t.Fatal("a running sandbox's init is reported dead")
	}
	if err := b.StopAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.runc.exists(containerID(spec.ID)) {
		t.Fatal("the container still exists after StopAll")
	}
	if b.Alive(spec.ID) {
		t.Fatal("a stopped sandbox's init is reported alive")
	}
	if _, err := b.Exec(context.Background(), spec.ID, backend.ExecRequest{Command: "true"}, conformance.NewSink()); err == nil {
		t.Fatal("a stopped sandbox still runs commands")
	}

	b2 := newBackend(t, state)
	if err := b2.Reattach(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if !b2.Alive(spec.ID) {
		t.Fatal("a restarted sandbox's init is reported dead")
	}
	if got := sh(t, b2, spec.ID, "cat ~/file"); got != "kept\n" {
		t.Fatalf("file after the restart: %q", got)
	}
	if got := conformance.Running(t, b2, spec.ID, sentinel); got != 0 {
		t.Fatalf("a process survived StopAll (%d found)", got)
	}
}

// TestAliveWhileReattached: a sandbox whose init runs is alive however
// often the agent passes over it meanwhile. Each pass over a running
// sandbox records its init's PID again; written in place, a concurrent
// Alive could read the file empty and take the running init for a dead one
// (the agent then restarts the sandbox, killing the tenant's processes).
func TestAliveWhileReattached(t *testing.T) {
	spec := backend.Spec{ID: "alive"}
	b, id := newSandbox(t, spec)
	done := make(chan error, 1)
	go func() {
		for range 50 {
			if err := b.Reattach(context.Background(), spec); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for checks := 0; ; checks++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("alive at each of %d checks during 50 passes", checks)
			return
		default:
		}
		if !b.Alive(id) {
			t.Fatalf("a running sandbox was reported dead at check %d, during a pass over it", checks)
		}
	}
}

// TestOOMSparesTheSupervision is issue 11's memfd attack: a tenant fills
// its memory cgroup with shared memory that no process maps (a memfd, or
// here a file in /dev/shm), so that no process looks big. The OOM killer
// must take the tenant's processes before the sandbox's init or a shepherd
// (which would end the proof of cleanup of every running command): tenant
// commands start with an OOM score guestapi.TenantOOMScoreBoost above theirs.
// Without it the filler's shepherd died in every run.
func TestOOMSparesTheSupervision(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "oom", Resources: backend.Resources{MemoryBytes: 48 << 20}})
	initPID := func() string {
		data, err := os.ReadFile(filepath.Join(b.sandboxDir(id), "init.pid"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	pid := initPID()
	score, err := os.ReadFile("/proc/" + pid + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	initScore, err := strconv.Atoi(strings.TrimSpace(string(score)))
	if err != nil {
		t.Fatal(err)
	}
	if initScore >= 1000 {
		t.Skipf("init runs at the highest OOM score (%d): nothing can rank below it", initScore)
	}
	want := fmt.Sprintf("%d\n", min(initScore+guestapi.TenantOOMScoreBoost, 1000))
	if got := sh(t, b, id, "cat /proc/self/oom_score_adj"); got != want {
		t.Fatalf("a tenant command's oom_score_adj is %q, want %q (init's is %d)", got, want, initScore)
	}

	// /dev/shm (64 MiB) is larger than the memory limit (48 MiB): the
	// cgroup runs out first, while cat itself stays small. The file is
	// unlinked at once, so that it is freed with the command.
	//
	// The OOM killer takes the tenant's cat and shell first. Their memory is
	// a file they hold, freed only when they have exited, so the kernel may
	// run out of tenant processes to take before it is freed and then take
	// the shepherd (about one run in twenty here): that command then
	// reports a lost proof, marked OOM-killed. Either way init survives.
	c := conformance.NewSink()
	p, err := b.Exec(context.Background(), id, backend.ExecRequest{Command: "exec 3<>/dev/shm/fill && rm /dev/shm/fill && cat /dev/zero >&3", Shell: backend.ShellClean}, c)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(context.Background())
	switch {
	case err == nil && (st.Signal == "SIGKILL" || st.ExitCode == 128+9) && st.OOMKilled:
	case errors.Is(err, backend.ErrProofLost) && st.OOMKilled:
		t.Logf("the OOM killer took the filler's shepherd after its tenant processes: %v", err)
	default:
		t.Fatalf("the filler ended with %+v, %v (stderr %q), want killed by the OOM killer, and said so", st, err, c.Stderr())
	}
	if got := initPID(); got != pid || !b.Alive(id) {
		t.Fatalf("the sandbox's init died (pid %s, now %s): the OOM killer chose it", pid, got)
	}
	// The sandbox serves again once the filler's memory is freed, which the
	// kernel finishes shortly after the command ends; until then a command
	// may be refused at its start, saying why.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := conformance.NewSink()
		p, err := b.Exec(context.Background(), id, backend.ExecRequest{Command: "echo ok", Shell: backend.ShellClean}, c)
		if err == nil {
			_, err = p.Wait(context.Background())
		}
		if err == nil && c.Stdout() == "ok\n" {
			break
		}
		if err != nil && !strings.Contains(err.Error(), "out of memory") {
			t.Fatalf("exec after the OOM: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox is unusable 30 s after the OOM: %v %q", err, c.Stdout())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A SIGKILL that is not the OOM killer's does not read as one. (In a
	// sandbox of its own: the attribution is per sandbox, and the one
	// above may see more OOM kills while its memory drains.)
	calm, calmID := newSandbox(t, backend.Spec{ID: "oom-none", Resources: backend.Resources{MemoryBytes: 48 << 20}})
	if r := run(t, calm, calmID, backend.ExecRequest{Command: "kill -9 $$", Shell: backend.ShellClean}); r.Status.Signal != "SIGKILL" || r.Status.OOMKilled {
		t.Fatalf("a command killed by SIGKILL without an OOM: %+v", r.Status)
	}
}

// eventually calls f until it returns nil, failing the test with what
// it last said after a minute.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkFileTransfer: 3 MiB read and written by the guest's file calls
// beside the same bytes through exec `cat`, on the backend directly.
func BenchmarkFileTransfer(b *testing.B) {
	requireRunc(b)
	be, id := newSandbox(b, backend.Spec{ID: "benchfile"})
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	cat := func(b *testing.B, command string, stdin []byte) int {
		out := &countSink{}
		p, err := be.Exec(ctx, id, backend.ExecRequest{Command: command, Shell: backend.ShellClean, Stdin: stdin}, out)
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.ExitCode != 0 {
			b.Fatal(st, err)
		}
		return out.n
	}
	b.Run("write/file", func(b *testing.B) {
		for b.Loop() {
			if _, err := be.File(ctx, id, backend.FileCall{Op: filecall.Write, Path: "f", Data: data}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write/cat", func(b *testing.B) {
		for b.Loop() {
			cat(b, "cat > c", data)
		}
	})
	b.Run("read/file", func(b *testing.B) {
		for b.Loop() {
			if res, err := be.File(ctx, id, backend.FileCall{Op: filecall.Read, Path: "f", Length: len(data), Whole: true}); err != nil || len(res.Data) != len(data) {
				b.Fatal(len(res.Data), err)
			}
		}
	})
	b.Run("read/cat", func(b *testing.B) {
		for b.Loop() {
			if n := cat(b, "cat c", nil); n != len(data) {
				b.Fatal(n)
			}
		}
	})
}

// countSink counts a command's output.
type countSink struct{ n int }

func (s *countSink) Write(_ backend.Stream, p []byte) { s.n += len(p) }
