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
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/conformance"
)

// TestConformanceGVisor runs the suite on sandboxes of gVisor isolation:
// the same backend, with runsc ($PLAYGROUND_RUNSC, else built by
// hack/runsc.sh) as their runtime.
func TestConformanceGVisor(t *testing.T) {
	runsc := requireRunsc(t)
	conformance.Run(t, conformance.Harness{
		NewStateDir: newStateDir,
		New:         func(tb testing.TB, dir string) backend.Backend { return newGVisorBackend(tb, dir, runsc) },
		Leftovers: func(tb testing.TB, stateDir, id string) []string {
			return append(leftovers(tb, stateDir, id), gvisorLeftovers(tb, stateDir, id)...)
		},
		Isolation: backend.IsolationGVisor,
		// What gVisor cannot give; docs/isolation.md names both.
		Known: map[string]string{
			"pile/append-only": "gVisor emulates O_APPEND with positioned writes through a file opened without it, which the pile's append-only flag on the node refuses: the pile is read-only in a gVisor sandbox (TestGVisorPileIsReadOnly)",
			"limits/memory":    "gVisor has no OOM killer of its own: past its memory limit the node's OOM killer ends the sentry, the whole sandbox, which the agent starts again over its files (TestGVisorOutOfMemory holds what happens instead)",
		},
	})
}

var (
	runscOnce   sync.Once
	runscPath   string
	runscReason string
)

// requireRunsc returns the runsc to test with, or skips the test saying
// why there is none.
func requireRunsc(tb testing.TB) string {
	tb.Helper()
	requireRunc(tb)
	runscOnce.Do(func() {
		if p := os.Getenv("PLAYGROUND_RUNSC"); p != "" {
			runscPath = p
			return
		}
		// The package is hostagent/backend/oci: the script is three up.
		out, err := exec.Command("../../../hack/runsc.sh").Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = strings.TrimSpace(string(ee.Stderr))
			}
			runscReason = "runsc could not be built (hack/runsc.sh): " + err.Error() + ": " + stderr
			return
		}
		runscPath = strings.TrimSpace(string(out))
	})
	if runscPath == "" {
		tb.Skip(runscReason)
	}
	return runscPath
}

func newGVisorBackend(tb testing.TB, stateDir, runsc string) *Backend {
	tb.Helper()
	b, err := New(Options{StateDir: stateDir, GuestBinary: guestBinary, Runtime: testRuntime, GVisorRuntime: runsc})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// gvisorLeftovers lists what runsc still holds of sandbox id: its state
// and lock files under its root (`runsc list` reads the same files).
func gvisorLeftovers(tb testing.TB, stateDir, id string) []string {
	tb.Helper()
	var left []string
	matches, err := filepath.Glob(filepath.Join(stateDir, "runsc", containerID(id)+"+*"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range matches {
		left = append(left, "runsc state "+m)
	}
	return left
}

// TestGVisorIsAnotherKernel: a gVisor sandbox's processes run on gVisor's
// kernel, not the node's: the node has no process of the tenant's, and the
// sandbox's kernel is not the node's.
func TestGVisorIsAnotherKernel(t *testing.T) {
	runsc := requireRunsc(t)
	b := newGVisorBackend(t, newStateDir(t), runsc)
	spec := backend.Spec{ID: "gv-kernel", Tenant: "t/gv-kernel", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, spec)

	marker := "424242.5"
	sh(t, b, spec.ID, "sleep "+marker+" >/dev/null 2>&1 &")
	if got := sh(t, b, spec.ID, "ps -eo args | grep -c '^sleep "+marker+"'"); got != "1\n" {
		t.Fatalf("the tenant's sleep inside the sandbox: %q processes", got)
	}
	if pids := nodeProcesses(t, "sleep\x00"+marker); len(pids) > 0 {
		t.Fatalf("the tenant's sleep is a process of the node (PIDs %v): the sandbox runs on the node's kernel", pids)
	}
	host, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	if inside := sh(t, b, spec.ID, "cat /proc/version"); inside == string(host) {
		t.Fatalf("the sandbox's kernel is the node's: %q", inside)
	}
	pid, err := b.initPID(spec.ID)
	if err != nil || !b.isGVisorSandbox(pid, spec.ID) {
		t.Fatalf("init.pid names %d (%v), not the gVisor sandbox process", pid, err)
	}
}

// TestGVisorStopAllLeavesNoMount: once StopAll has stopped the gVisor
// sandboxes (playground-dev's exit), or DestroyAll destroyed them (the
// soak's, the benchmarks' and the tests' end), nothing stays mounted under
// the state directory: not even the empty network namespace runsc pins
// for its gofers, which would make removing the directory fail (EBUSY).
func TestGVisorStopAllLeavesNoMount(t *testing.T) {
	runsc := requireRunsc(t)
	for _, all := range []struct {
		name string
		do   func(*Backend, context.Context) error
	}{{"StopAll", (*Backend).StopAll}, {"DestroyAll", (*Backend).DestroyAll}} {
		t.Run(all.name, func(t *testing.T) {
			dir := newStateDir(t)
			b := newGVisorBackend(t, dir, runsc)
			startSandbox(t, b, backend.Spec{ID: "gv-all", Tenant: "t/gv-all", Isolation: backend.IsolationGVisor})
			if err := all.do(b, context.Background()); err != nil {
				t.Fatal(err)
			}
			info, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(info), "\n") {
				if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
					t.Errorf("still mounted after %s: %s", all.name, line)
				}
			}
		})
	}
}

// nodeProcesses are the PIDs of the node's processes whose command line
// starts with prefix (NUL-separated arguments).
func nodeProcesses(t *testing.T, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmdline), prefix) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestIsolationIsFixed: a sandbox keeps the isolation it was provisioned
// with. Asking for another is refused, not obeyed, and an agent without
// runsc neither makes nor runs a gVisor sandbox (it does not fall back to
// runc).
func TestIsolationIsFixed(t *testing.T) {
	runsc := requireRunsc(t)
	ctx := context.Background()
	state := newStateDir(t)
	b := newGVisorBackend(t, state, runsc)
	spec := backend.Spec{ID: "gv-fixed", Tenant: "t/gv-fixed", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, spec)
	sh(t, b, spec.ID, "echo kept > ~/f")

	runc := spec
	runc.Isolation = ""
	for what, err := range map[string]error{
		"Provision": b.Provision(ctx, runc),
		"Reattach":  b.Reattach(ctx, runc),
	} {
		if err == nil || !strings.Contains(err.Error(), "cannot change to container") {
			t.Errorf("%s of the gVisor sandbox with container isolation: %v, want a refusal", what, err)
		}
	}

	without := newBackend(t, state) // an agent restarted without runsc
	if err := without.Reattach(ctx, spec); err == nil || !strings.Contains(err.Error(), "no runsc") {
		t.Errorf("reattaching a gVisor sandbox without runsc: %v, want a refusal", err)
	}
	other := backend.Spec{ID: "gv-new", Tenant: "t/gv-new", Isolation: backend.IsolationGVisor}
	if err := without.Provision(ctx, other); err == nil || !strings.Contains(err.Error(), "no runsc") {
		t.Errorf("provisioning a gVisor sandbox without runsc: %v, want a refusal", err)
	}

	again := newGVisorBackend(t, state, runsc) // and with it again
	if err := again.Reattach(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, again, spec.ID, "cat ~/f; cat /proc/version"); !strings.HasPrefix(got, "kept\n") || nodeProcessesOf(t, again, spec.ID) {
		t.Fatalf("after the refusals: %q", got)
	}
}

// nodeProcessesOf reports whether the sandbox's init is a process of the
// node (a runc sandbox) rather than gVisor's.
func nodeProcessesOf(t *testing.T, b *Backend, id string) bool {
	t.Helper()
	pid, err := b.initPID(id)
	if err != nil {
		t.Fatal(err)
	}
	return isGuestInit(pid)
}

// BenchmarkGVisor measures what gVisor costs against runc, on the same
// node: starting a sandbox (Provision and Start of a new one, its disk
// images included), and one command (`true` in a clean shell) through the
// exec fast path.
func BenchmarkGVisor(b *testing.B) {
	runsc := requireRunsc(b)
	for _, iso := range []string{backend.IsolationContainer, backend.IsolationGVisor} {
		be := newGVisorBackend(b, newStateDir(b), runsc)
		ctx := context.Background()
		b.Run(iso+"/start", func(b *testing.B) {
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("bench-start-%d", i)
				i++
				startSandbox(b, be, backend.Spec{ID: id, Isolation: iso})
				b.StopTimer()
				if err := be.Destroy(ctx, id, false); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		id := "bench-exec"
		startSandbox(b, be, backend.Spec{ID: id, Isolation: iso})
		b.Run(iso+"/exec", func(b *testing.B) { benchExecTrue(b, be, id) })
	}
}

// TestGVisorOutOfMemory: gVisor has no OOM killer of its own, so a command
// past the sandbox's memory limit ends the whole sandbox (the node's OOM
// killer takes the sentry). What a user sees: the command ends killed by
// the OOM killer, with proof that nothing of it is left (the sentry's end
// is the end of all its processes, so jobs stay admitted), and the
// sandbox starts again over its files.
func TestGVisorOutOfMemory(t *testing.T) {
	runsc := requireRunsc(t)
	ctx := context.Background()
	b := newGVisorBackend(t, newStateDir(t), runsc)
	spec := backend.Spec{ID: "gv-oom", Tenant: "t/gv-oom", Isolation: backend.IsolationGVisor, Resources: backend.Resources{MemoryBytes: 64 << 20}}
	startSandbox(t, b, spec)
	sh(t, b, spec.ID, "echo kept > ~/f")

	r := run(t, b, spec.ID, backend.ExecRequest{Shell: backend.ShellClean, Command: "head -c 300M /dev/zero | tail -c 200M >/dev/null"})
	if !r.Status.OOMKilled || !r.Status.Killed {
		t.Fatalf("a command holding 200 MiB under a limit of 64 MiB: %+v, want killed by the OOM killer, and said so", r.Status)
	}
	if b.Alive(spec.ID) {
		t.Fatal("the sandbox survived its memory limit under gVisor: docs/isolation.md says it does not")
	}
	if err := b.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, spec.ID, "cat ~/f"); got != "kept\n" {
		t.Fatalf("the sandbox's files after its restart: %q", got)
	}
}

// TestGVisorDestroyLeavesNothing: destroying a gVisor sandbox leaves no
// runsc state, cgroup, mount or file of it on the node.
func TestGVisorDestroyLeavesNothing(t *testing.T) {
	runsc := requireRunsc(t)
	state := newStateDir(t)
	b := newGVisorBackend(t, state, runsc)
	spec := backend.Spec{ID: "gv-gone", Tenant: "t/gv-gone", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, spec)
	sh(t, b, spec.ID, "sleep 1000 >/dev/null 2>&1 &")
	cgroups := b.gvisor.cgroupPaths(containerID(spec.ID))
	if len(cgroups) == 0 {
		t.Fatal("runsc's state names no cgroup of the sandbox")
	}
	if err := b.Destroy(context.Background(), spec.ID, false); err != nil {
		t.Fatal(err)
	}
	left := append(leftovers(t, state, spec.ID), gvisorLeftovers(t, state, spec.ID)...)
	for _, p := range cgroups {
		if backend.FileExists(p) {
			left = append(left, "cgroup "+p)
		}
	}
	if len(left) > 0 {
		t.Fatalf("left on the node: %v", left)
	}
}

// TestEgressGVisor: a gVisor sandbox with an egress list reaches what the
// list allows and nothing else (the node, its agent, link-local and other
// addresses), through the same namespace, veth pair and ruleset as a runc
// sandbox; a gVisor sandbox without one has no interface but loopback; the
// tenant cannot change its routes; an agent restart applies a changed list
// to the running sandbox.
func TestEgressGVisor(t *testing.T) {
	runsc := requireRunsc(t)
	port, _ := egressWorld(t)
	agentPort := strconv.Itoa(port)
	if got := dialHello(worldServer + ":" + strconv.Itoa(allowedPort)); got != "hello" {
		t.Fatalf("node cannot reach the test server: %q", got)
	}

	opts := Options{StateDir: newStateDir(t), GuestBinary: guestBinary, Runtime: testRuntime, GVisorRuntime: runsc, Network: NetworkEgress}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	spec := backend.Spec{ID: "gv-egress", Isolation: backend.IsolationGVisor, Egress: []backend.EgressRule{
		{CIDR: worldServer + "/32", Ports: []int32{allowedPort}},
		{CIDR: "169.254.0.0/16", Ports: []int32{allowedPort}},
		{CIDR: worldNodeAddr + "/32"},
	}}
	startSandbox(t, b, spec)
	startSandbox(t, b, backend.Spec{ID: "gv-closed", Isolation: backend.IsolationGVisor})
	gateway := b.egressNet(mustLoad(t, b, spec.ID)).node.String()

	check := func(b *Backend, id string, want map[string]bool) {
		t.Helper()
		for addr, ok := range want {
			host, port, _ := net.SplitHostPort(addr)
			r := run(t, b, id, backend.ExecRequest{Shell: backend.ShellClean,
				Command: fmt.Sprintf("timeout 2 bash -c 'cat </dev/tcp/%s/%s'", host, port)})
			if got := strings.TrimSpace(r.Stdout) == "hello"; got != ok {
				t.Errorf("%s: reach %s = %v, want %v", id, addr, got, ok)
			}
		}
	}
	want := map[string]bool{
		worldServer + ":" + strconv.Itoa(allowedPort):  true,
		worldServer + ":" + strconv.Itoa(otherPort):    false,
		worldOther + ":" + strconv.Itoa(allowedPort):   false,
		worldLinkLoc + ":" + strconv.Itoa(allowedPort): false,
		gateway + ":" + agentPort:                      false,
		"127.0.0.1:" + agentPort:                       false,
	}
	for _, a := range nodeAddresses(t) {
		want[a+":"+agentPort] = false
	}
	check(b, spec.ID, want)
	check(b, "gv-closed", map[string]bool{worldServer + ":" + strconv.Itoa(allowedPort): false, gateway + ":" + agentPort: false})
	if out := sh(t, b, "gv-closed", "cat /proc/net/dev"); strings.Contains(out, "eth0") {
		t.Errorf("a gVisor sandbox without egress has an interface: %s", out)
	}
	if r := run(t, b, spec.ID, backend.ExecRequest{Shell: backend.ShellClean, Command: "ip route del default 2>&1 || echo refused"}); !strings.Contains(r.Stdout, "refused") && r.Status.ExitCode == 0 {
		t.Errorf("tenant changed the sandbox's routes: %q", r.Stdout)
	}

	spec.Egress[0].Ports = []int32{otherPort}
	b2 := reattached(t, opts, spec)
	want[worldServer+":"+strconv.Itoa(allowedPort)] = false
	want[worldServer+":"+strconv.Itoa(otherPort)] = true
	check(b2, spec.ID, want)

	// A new agent pod: the veth pair and the ruleset are gone. A running
	// gVisor stack cannot take a new link: the agent says to restart the
	// sandbox, and a restart serves it again.
	n := b2.egressNet(mustLoad(t, b2, spec.ID))
	for _, c := range [][]string{{"ip", "link", "del", n.hostDev}, {"nft", "delete", "table", "inet", n.table}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	if err := b2.Reattach(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "restart the sandbox") {
		t.Fatalf("reattaching a gVisor sandbox whose link is gone: %v, want a refusal that says to restart it", err)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", n.table).CombinedOutput(); err != nil {
		t.Fatalf("the refused reattach left the sandbox without its ruleset: %v: %s", err, out)
	}
	if err := b2.Stop(context.Background(), spec.ID); err != nil {
		t.Fatal(err)
	}
	if err := b2.Reattach(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	check(b2, spec.ID, want)
}

// TestGVisorLimits: a gVisor sandbox's CPU and memory limits are its
// cgroup's, around the sentry; its PIDs limit is the sentry's count of the
// tenant's tasks (RLIMIT_NPROC), the node's pids cgroup a looser bound.
func TestGVisorLimits(t *testing.T) {
	runsc := requireRunsc(t)
	b := newGVisorBackend(t, newStateDir(t), runsc)
	spec := backend.Spec{ID: "gv-limits", Isolation: backend.IsolationGVisor, Resources: backend.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, PIDs: 64}}
	startSandbox(t, b, spec)
	pid, err := b.initPID(spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := cgroupValue(t, pid, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(256<<20) {
		t.Errorf("memory limit %s", got)
	}
	if got := cgroupValue(t, pid, "cpu", "cpu.cfs_quota_us", "cpu.max"); got != "50000" && got != "50000 100000" {
		t.Errorf("cpu quota %s", got)
	}
	if got, want := cgroupValue(t, pid, "pids", "pids.max", "pids.max"), strconv.Itoa(int(gvisorHostPIDs(64))); got != want {
		t.Errorf("the node's pids limit %s, want %s", got, want)
	}
	if got := sh(t, b, spec.ID, "awk '/^Max processes/ { print $3 }' /proc/self/limits; grep MemTotal /proc/meminfo"); got != "64\nMemTotal:         262144 kB\n" {
		t.Errorf("inside: %q, want a process limit of 64 and the memory limit as MemTotal", got)
	}
	// On a hybrid host the unified hierarchy too holds the sandbox in its
	// own cgroup, as runc does: runsc left it in the agent's, which kept an
	// agent pod's cgroup, and the pod, from ending (the kubelet waits).
	if hybridUnified() != "" {
		own, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		if want := "0::" + unifiedPath(b.cgroupPath(&sandbox{spec: spec})) + "\n"; !strings.Contains(string(own), want) {
			t.Errorf("the sentry's cgroups:\n%s\nwant the line %q", own, want)
		}
	}
}

// TestGVisorPileIsReadOnly: in a gVisor sandbox the pile's append-only
// flag still holds, and, since gVisor opens files for writing without
// O_APPEND, refuses appends too: the tenant reads its pile and changes
// nothing in it.
func TestGVisorPileIsReadOnly(t *testing.T) {
	runsc := requireRunsc(t)
	b := newGVisorBackend(t, newStateDir(t), runsc)
	spec := backend.Spec{ID: "gv-pile", Isolation: backend.IsolationGVisor}
	startSandbox(t, b, spec)
	f := filepath.Join(b.PileDir(spec.ID), "self.pile")
	host, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.WriteString("from the node\n"); err != nil {
		t.Fatal(err)
	}
	host.Close()
	for _, cmd := range []string{"echo more >> /pile/self.pile", ": > /pile/self.pile", "truncate -s 0 /pile/self.pile", "rm -f /pile/self.pile", "touch /pile/new"} {
		if r := run(t, b, spec.ID, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}); r.Status.ExitCode == 0 {
			t.Errorf("%q succeeded in a gVisor sandbox's pile", cmd)
		}
	}
	if got := sh(t, b, spec.ID, "cat /pile/self.pile; ls /pile"); got != "from the node\nself.pile\n" {
		t.Fatalf("the pile inside: %q", got)
	}
}
