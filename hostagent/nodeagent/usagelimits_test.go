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

package nodeagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// cgroupCPU is the CPU seconds the cgroup of sandbox id's container
// counted, read from the kernel's files that runc's state names.
func (n *node) cgroupCPU(t *testing.T, id string) float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.stateDir, "runc", "pg-"+id, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		CgroupPaths map[string]string `json:"cgroup_paths"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if dir := st.CgroupPaths["cpuacct"]; dir != "" {
		raw, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v / 1e9
	}
	raw, err := os.ReadFile(filepath.Join(st.CgroupPaths[""], "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f / 1e6
		}
	}
	t.Fatalf("no usage_usec in %s", raw)
	return 0
}

// runcState is the state runc reports of sandbox id's container.
func (n *node) runcState(id string) string {
	out, err := exec.Command("runc", "--root", n.stateDir+"/runc", "state", "pg-"+id).Output()
	if err != nil {
		return err.Error()
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return err.Error()
	}
	return st.Status
}

// farPeriod is a usage period whose current one ends a quarter of an hour
// from now or later: no reset comes in the middle of a test.
func farPeriod() time.Duration {
	for p := 24 * time.Hour; ; p += time.Hour {
		now := time.Now().UnixNano()
		if end := now - now%int64(p) + int64(p); time.Duration(end-now) > 15*time.Minute {
			return p
		}
	}
}

// limitedSandbox is a Sandbox of one core with a CPU limit per period.
func limitedSandbox(cpuSeconds int64, period time.Duration) func(*playgroundv1alpha1.Sandbox) {
	return func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Resources.CPU = ptr.To(resource.MustParse("1"))
		s.Spec.UsageLimits = &playgroundv1alpha1.UsageLimits{Period: metav1.Duration{Duration: period}, CPUSeconds: ptr.To(cpuSeconds)}
	}
}

// busyLoop leaves a process that burns a core, detached from every call.
const busyLoop = "setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &"

// waitUsageLimited waits for the Sandbox's UsageLimited condition to say
// limited (CPULimitReached) or not (WithinLimits), and returns it.
func waitUsageLimited(t *testing.T, ns, name string, limited bool) metav1.Condition {
	t.Helper()
	var c metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		found := meta.FindStatusCondition(getSandbox(g, ns, name).Status.Conditions, playgroundv1alpha1.UsageLimitedCondition)
		g.Expect(found).NotTo(BeNil())
		want := playgroundv1alpha1.ReasonWithinLimits
		if limited {
			want = playgroundv1alpha1.ReasonCPULimitReached
		}
		g.Expect(found.Reason).To(Equal(want), found.Message)
		c = *found
	}).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return c
}

// exhausted checks that err is the agent's refusal for a spent limit, and
// returns its message.
func exhausted(g Gomega, err error, limit int64) string {
	var ae *agentapi.Error
	g.ExpectWithOffset(1, errors.As(err, &ae)).To(BeTrue(), "want a refusal, got %v", err)
	g.ExpectWithOffset(1, ae.Code).To(Equal(agentapi.CodeExhausted), ae.Message)
	g.ExpectWithOffset(1, ae.Message).To(And(ContainSubstring("has used its "+strconv.FormatInt(limit, 10)+" CPU-seconds"),
		ContainSubstring("frozen"), ContainSubstring("when the period starts again")))
	return ae.Message
}

// TestUsageLimitFreezes is issue 49's attack: a tenant with a 10
// CPU-second limit leaves a setsid busy loop running, outside any call.
// Its agent freezes the sandbox within the configured overshoot (plus the
// freeze's latency, times its one core) past the limit, measured on the
// cgroup's own counter, and the counter stays still. Every call that would
// run something or reach it is refused with the limit and its reset: an
// exec, a job's poll (at once, not after its wait), its cancel (the job
// kept). The Sandbox says so in its UsageLimited condition and
// status.usage.exhaustedUntil, its Running condition (CPULimitReached) and
// a Warning Event. Raising the limit thaws it at once: the loop and the
// job go on where they were, and it is Running again.
func TestUsageLimitFreezes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "usage-freeze")
	addr := freeAddr(t)
	n := startNode(t, "usage-freeze-a", "", "", func(o *nodeagent.Options) {
		o.MetricsBindAddress = addr
		o.StateWriteInterval = time.Second
	})
	const limit = 10
	createSandbox(t, ns, "ws", n.name, limitedSandbox(limit, farPeriod()))
	s := openSession(t, n, ns, "ws")
	job, err := s.startJob("i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.2; done")
	g.Expect(err).NotTo(HaveOccurred())
	before := n.cgroupCPU(t, s.id) // what the limit may have counted of the sandbox's start
	s.exec(t, busyLoop)

	limited := waitUsageLimited(t, ns, "ws", true)
	g.Expect(n.runcState(s.id)).To(Equal("paused"))
	used := n.cgroupCPU(t, s.id)
	m, err := scrape("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	latency := m.sum(t, "playground_usage_limit_freeze_seconds", "node", n.name)
	g.Expect(m.count(t, "playground_usage_limit_freeze_seconds", "node", n.name)).To(BeEquivalentTo(1))
	over := used - limit
	t.Logf("frozen at %.3f CPU-seconds of the cgroup: %.3f past the limit of %d (the sandbox's own before the load %.3f, the agent's overshoot %.3f, the freeze's latency %s)",
		used, over, limit, before, m.sum(t, "playground_usage_limit_overshoot_cpu_seconds", "node", n.name), time.Duration(latency*float64(time.Second)))
	g.Expect(over).To(BeNumerically("<=", hostagent.DefaultUsageLimitOvershoot+latency*1+before),
		"the overshoot bound: %g CPU-seconds, plus the freeze's latency times the sandbox's one core", hostagent.DefaultUsageLimitOvershoot)
	g.Expect(over).To(BeNumerically(">", -0.5), "frozen before it spent its limit")

	// It stays so: its counter does not move across two seconds, in which
	// the loop would count two.
	time.Sleep(2 * time.Second) // the interval measured, not a wait for a condition
	g.Expect(n.cgroupCPU(t, s.id)).To(Equal(used), "the frozen sandbox used CPU")

	// Its calls are refused with the limit and its reset.
	until := getSandbox(g, ns, "ws").Status.Usage.ExhaustedUntil
	g.Expect(until).NotTo(BeNil(), "status.usage.exhaustedUntil")
	reset := until.UTC().Format(time.RFC3339)
	g.Expect(limited.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(limited.Message).To(And(ContainSubstring("until "+reset), ContainSubstring("frozen")))
	g.Expect(waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonCPULimitReached).Message).To(ContainSubstring("until " + reset))
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeWarning, playgroundv1alpha1.ReasonCPULimitReached).Action).To(Equal("Freeze"))
	_, err = s.client.Exec(ctx, s.tenant, s.handle, agentapi.ExecRequest{Command: "true"})
	g.Expect(exhausted(g, err, limit)).To(ContainSubstring("refused until " + reset))
	start := time.Now()
	_, err = n.client.Poll(ctx, agentapi.PollRequest{Tenant: s.tenant, Wait: 10 * time.Second}, job.ID)
	exhausted(g, err, limit)
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "the poll of a frozen job answers at once, not after its wait")
	_, err = n.client.Cancel(ctx, s.tenant, job.ID)
	exhausted(g, err, limit)
	_, err = n.client.Write(ctx, s.tenant, s.handle, "/tmp/x", "", []byte("x"))
	exhausted(g, err, limit)

	// A raised limit thaws it at once: the loop runs on, and so does the
	// job, which the cancel above left alone.
	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.UsageLimits.CPUSeconds = ptr.To[int64](100000) })
	waitUsageLimited(t, ns, "ws", false)
	g.Expect(n.runcState(s.id)).To(Equal("running"))
	g.Eventually(func() float64 { return n.cgroupCPU(t, s.id) }).WithTimeout(timeout).Should(BeNumerically(">", used+0.5), "the loop runs again")
	g.Eventually(func(g Gomega) {
		page, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: s.tenant, Wait: time.Second}, job.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Job.State).To(Equal(agentapi.JobRunning))
		g.Expect(page.Chunks).NotTo(BeEmpty())
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(getSandbox(g, ns, "ws").Status.Usage.ExhaustedUntil).To(BeNil())
	waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonRunning)
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonRunning).Action).To(Equal("Thaw"))
}

// resetIn finds the time of the reset in a UsageLimited condition.
var resetIn = regexp.MustCompile(`until (\S+), when the period starts again`)

// TestUsageLimitThawsAtTheReset: a sandbox frozen for its limit of a
// 10-second period stays frozen to the period's end, and thaws by itself
// then.
func TestUsageLimitThawsAtTheReset(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "usage-reset")
	n := startNode(t, "usage-reset-a", "", "", func(o *nodeagent.Options) {
		o.UsageInterval = time.Hour // the thaw comes at the reset, not at a regular check
	})
	// One CPU-second in a period of 30: reached early in a period even on
	// a loaded machine, where the loop gets a small share of a core (two
	// in ten seconds were not always reached).
	createSandbox(t, ns, "ws", n.name, limitedSandbox(1, 30*time.Second))
	s := openSession(t, n, ns, "ws")
	s.exec(t, busyLoop)
	// A freeze with a few seconds of its period left (one near its end is
	// followed by another in the next period).
	var until metav1.Time
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getSandbox(g, ns, "ws").Status.Conditions, playgroundv1alpha1.UsageLimitedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonCPULimitReached))
		m := resetIn.FindStringSubmatch(c.Message)
		g.Expect(m).NotTo(BeNil(), c.Message)
		at, err := time.Parse(time.RFC3339, m[1])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(time.Until(at)).To(BeNumerically(">", 3*time.Second))
		until = metav1.NewTime(at)
	}).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Eventually(n.runcState).WithArguments(s.id).WithTimeout(timeout).Should(Equal("paused"))
	frozen := n.cgroupCPU(t, s.id)
	// The reset is a time: waiting for it is the test.
	time.Sleep(time.Until(until.Add(-300 * time.Millisecond)))
	g.Expect(n.cgroupCPU(t, s.id)).To(Equal(frozen), "thawed before its period ended at %s", until)
	g.Eventually(func() float64 { return n.cgroupCPU(t, s.id) }).WithTimeout(timeout).WithPolling(20*time.Millisecond).
		Should(BeNumerically(">", frozen), "thawed at the reset")
	g.Expect(time.Now()).To(BeTemporally(">=", until.Time))
	g.Expect(time.Since(until.Time)).To(BeNumerically("<", 5*time.Second), "thawed at the reset")
	t.Logf("thawed %s after the period's end", time.Since(until.Time))
}

// TestUsageLimitKeptFrozenAcrossAgentRestart: an agent that restarts
// takes a frozen sandbox over without thawing it (its counter does not
// move, its container stays paused), refuses its calls and its job's
// polls as before, and, when the limit is raised, thaws it and adopts the
// job, which goes on.
func TestUsageLimitKeptFrozenAcrossAgentRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "usage-restart")
	n := startNode(t, "usage-restart-a", "", "")
	const limit = 3
	createSandbox(t, ns, "ws", n.name, limitedSandbox(limit, farPeriod()))
	s := openSession(t, n, ns, "ws")
	job, err := s.startJob("i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.2; done")
	g.Expect(err).NotTo(HaveOccurred())
	s.exec(t, busyLoop)
	waitUsageLimited(t, ns, "ws", true)
	frozen := n.cgroupCPU(t, s.id)

	n.stop()
	g.Expect(n.runcState(s.id)).To(Equal("paused"))
	n2 := startNode(t, n.name, n.stateDir, "")
	var h agentapi.Handle
	g.Eventually(func() error { h, err = n2.client.Open(ctx, s.tenant, s.id); return err }).WithTimeout(timeout).
		Should(Satisfy(func(err error) bool { return agentapi.CodeOf(err) == agentapi.CodeExhausted }), "the new agent serves it, frozen")
	exhausted(g, err, limit)
	_, err = n2.client.Poll(ctx, agentapi.PollRequest{Tenant: s.tenant, Wait: 5 * time.Second}, job.ID)
	exhausted(g, err, limit)
	g.Expect(n.runcState(s.id)).To(Equal("paused"), "the take-over thawed it")
	g.Expect(n.cgroupCPU(t, s.id)).To(Equal(frozen), "the take-over let it run")
	waitUsageLimited(t, ns, "ws", true)

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.UsageLimits = nil })
	g.Eventually(func() error { h, err = n2.client.Open(ctx, s.tenant, s.id); return err }).WithTimeout(timeout).Should(Succeed())
	g.Expect(n.runcState(s.id)).To(Equal("running"))
	g.Eventually(func(g Gomega) {
		page, err := n2.client.Poll(ctx, agentapi.PollRequest{Tenant: s.tenant, Wait: time.Second}, job.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Job.State).To(Equal(agentapi.JobRunning), "the job, adopted at the thaw")
		g.Expect(page.Chunks).NotTo(BeEmpty())
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(h.ID).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		g.Expect(meta.FindStatusCondition(getSandbox(g, ns, "ws").Status.Conditions, playgroundv1alpha1.UsageLimitedCondition)).To(BeNil(),
			"a sandbox without limits has no UsageLimited condition")
	}).WithTimeout(timeout).Should(Succeed())
}

// TestUsageChargedAtIdleSuspension is issue 49's attack on the book: a
// burn just before an idle suspension (which stops a runc sandbox's
// container, its cgroup with it) was never charged, the book adding only
// its last sample. Now the book holds, once the sandbox is suspended, what
// its cgroup counted at the stop, though no sample ran in between.
func TestUsageChargedAtIdleSuspension(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "usage-idle")
	addr := freeAddr(t)
	n := startNode(t, "usage-idle-a", "", "", func(o *nodeagent.Options) {
		o.MetricsBindAddress = addr
		o.UsageInterval = time.Hour // no sample between the burn and the stop
	})
	createSandbox(t, ns, "ws", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.IdleSuspend = &playgroundv1alpha1.IdleSuspend{After: metav1.Duration{Duration: 10 * time.Second}}
	})
	s := openSession(t, n, ns, "ws")
	// A burn of 1.5 CPU-seconds, however long a loaded machine takes to
	// give them (its shell reads its own time from /proc, in ticks).
	s.exec(t, `timeout 120 sh -c 'while :; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; set -- $(cat /proc/$$/stat); [ $((${14}+${15})) -ge 150 ] && break; done'; true`)
	burnt := n.cgroupCPU(t, s.id)
	g.Expect(burnt).To(BeNumerically(">", 1), "the burn used the CPU")
	book := func() float64 {
		m, err := scrape("http://" + addr + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		return m.value(t, "playground_tenant_cpu_seconds_total", "node", n.name, "tenant", s.tenant)
	}
	g.Eventually(n.containers).WithArguments(t).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(BeEmpty(), "suspended for idleness")
	// The agent reads what the stopped container counted once it is gone:
	// without that read (and the backend's before the delete) the book
	// stays at what its last sample saw, nothing.
	var charged float64
	g.Eventually(func() float64 { charged = book(); return charged }).WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).
		Should(BeNumerically("~", burnt, 0.1), "the book's CPU at the stop")
	t.Logf("the cgroup counted %.3f CPU-seconds after the burn; the book charged %.3f at the stop", burnt, charged)

	// Woken, its counter starts again, the book's goes on.
	g.Expect(s.exec(t, "echo awake")).To(Equal("awake\n"))
	g.Expect(n.cgroupCPU(t, s.id)).To(BeNumerically("<", burnt))
	g.Expect(book()).To(BeNumerically(">=", charged))
}

// TestUsageLimitEndsARunningExec: a synchronous command still running when
// its sandbox's limit is spent ends its call at once with the refusal
// (not at its timeout, nor by a kill the frozen sandbox cannot prove);
// the command is killed, with proof, when the sandbox thaws: its
// processes are gone and the sandbox's jobs are still admitted.
func TestUsageLimitEndsARunningExec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "usage-exec")
	n := startNode(t, "usage-exec-a", "", "")
	const limit = 3
	createSandbox(t, ns, "ws", n.name, limitedSandbox(limit, farPeriod()))
	s := openSession(t, n, ns, "ws")
	marker := "usage-exec-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	start := time.Now()
	_, err := s.client.Exec(ctx, s.tenant, s.handle, agentapi.ExecRequest{
		Command: "sh -c 'while :; do :; done; : " + marker + "' & sh -c 'while :; do :; done; : " + marker + "'",
		Timeout: 5 * time.Minute,
	})
	exhausted(g, err, limit)
	t.Logf("the exec ended %s after its start", time.Since(start))
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Minute), "ended by the freeze, not by its timeout")
	g.Expect(n.runcState(s.id)).To(Equal("paused"))
	g.Expect(pidsOf(marker)).NotTo(BeEmpty(), "the command's processes, frozen")

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.UsageLimits.CPUSeconds = ptr.To[int64](100000) })
	waitUsageLimited(t, ns, "ws", false)
	g.Eventually(func() []int { return pidsOf(marker) }).WithTimeout(timeout).Should(BeEmpty(), "killed once thawed")
	g.Consistently(func(g Gomega) {
		g.Expect(jobsAdmitted(g, ns, "ws").Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(2*time.Second).Should(Succeed(), "the kill was proven: the sandbox's jobs are still admitted")
	_, err = s.startJob("true")
	g.Expect(err).NotTo(HaveOccurred())
}

// gvisorCPU is the CPU seconds the cgroup of gVisor sandbox id counted:
// that of its sentry, found through the node's /proc.
func gvisorCPU(t *testing.T, id string) float64 {
	t.Helper()
	for _, pid := range gvisorProcesses(id) {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || !strings.Contains(parts[2], id) || !strings.Contains(parts[1], "cpuacct") {
				continue
			}
			raw, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[1], parts[2], "cpuacct.usage"))
			if err != nil {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
			if err == nil {
				return v / 1e9
			}
		}
	}
	t.Fatalf("no cpuacct cgroup of gVisor sandbox %s", id)
	return 0
}

// TestUsageLimitGVisor: a gVisor sandbox is frozen for its limit as a
// runc one (runsc pause: its cgroup's counter stays still). Suspended
// through its spec while frozen, it is checkpointed with its memory (a
// moment's thaw for it), and its book holds what the cgroup counted,
// though the container went; resumed while the limit stays spent, it is
// restored frozen.
func TestUsageLimitGVisor(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "usage-gvisor")
	stateDir := ocitest.StateDir(t)
	addr := freeAddr(t)
	n := startNode(t, "usage-gvisor-a", stateDir, "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{ocitest.NewGVisor(t, stateDir)}
		o.MetricsBindAddress = addr
	})
	const limit = 2
	createSandbox(t, ns, "ws", n.name, limitedSandbox(limit, farPeriod()), func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Isolation = playgroundv1alpha1.IsolationGVisor
	})
	s := openSession(t, n, ns, "ws")
	s.exec(t, counter)
	before := gvisorCPU(t, s.id) // its start's, which the limit may have counted
	s.exec(t, busyLoop)
	waitUsageLimited(t, ns, "ws", true)
	used := gvisorCPU(t, s.id)
	t.Logf("frozen at %.3f CPU-seconds of the sentry's cgroup, %.3f past the limit (%.3f before the load)", used, used-limit, before)
	g.Expect(used - limit).To(BeNumerically("<=", hostagent.DefaultUsageLimitOvershoot+0.5+before))
	time.Sleep(2 * time.Second) // the interval measured, not a wait for a condition
	// runsc's pause stops the sandbox's tasks; what is left of the sentry
	// uses a few milliseconds.
	g.Expect(gvisorCPU(t, s.id)).To(BeNumerically("<", used+0.05), "the frozen sandbox used CPU")
	book := func() float64 {
		m, err := scrape("http://" + addr + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		return m.value(t, "playground_tenant_cpu_seconds_total", "node", n.name, "tenant", s.tenant)
	}

	suspendWithMemory(t, ns, "ws")
	g.Expect(gvisorProcesses(s.id)).To(BeEmpty())
	charged := book()
	t.Logf("the book charged %.3f CPU-seconds at the checkpoint", charged)
	g.Expect(charged).To(BeNumerically(">=", used-0.01), "what the cgroup counted is in the book, the container gone")
	g.Expect(charged).To(BeNumerically("<", used+1), "a moment's thaw for the checkpoint")

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.Suspended = false })
	g.Eventually(func(g Gomega) {
		g.Expect(provisioned(getSandbox(g, ns, "ws")).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(gvisorProcesses(s.id)).NotTo(BeEmpty())
	}).WithTimeout(timeout).Should(Succeed())
	_, err := n.client.Open(ctx, s.tenant, s.id)
	exhausted(g, err, limit)
	restored := gvisorCPU(t, s.id)
	time.Sleep(2 * time.Second) // the interval measured, not a wait for a condition
	g.Expect(gvisorCPU(t, s.id)).To(BeNumerically("<", restored+0.2), "restored while its limit is spent: frozen again")

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.UsageLimits = nil })
	s2 := openSessionEventually(t, n, ns, "ws")
	count := countOf(t, s2)
	g.Eventually(func() int { return countOf(t, s2) }).WithTimeout(timeout).Should(BeNumerically(">", count+3), "its processes go on, restored with their memory")
}

// TestUsageLimitRestart: a restart of a sandbox frozen for its limit
// (spec.restartRequest) kills what the freeze held, and, the limit still
// spent, the sandbox starts frozen again: nothing of the tenant's runs.
func TestUsageLimitRestart(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "usage-restart-sbx")
	n := startNode(t, "usage-restart-sbx-a", "", "")
	const limit = 2
	createSandbox(t, ns, "ws", n.name, limitedSandbox(limit, farPeriod()))
	s := openSession(t, n, ns, "ws")
	marker := "usage-restart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s.exec(t, "setsid sh -c 'while :; do :; done; : "+marker+"' </dev/null >/dev/null 2>&1 &")
	waitUsageLimited(t, ns, "ws", true)
	g.Expect(pidsOf(marker)).NotTo(BeEmpty())

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.RestartRequest = "after-the-limit" })
	g.Eventually(func(g Gomega) {
		g.Expect(getSandbox(g, ns, "ws").Status.RestartRequest).To(Equal("after-the-limit"))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(pidsOf(marker)).To(BeEmpty(), "the restart killed the frozen loop")
	g.Eventually(n.runcState).WithArguments(s.id).WithTimeout(timeout).Should(Equal("paused"), "started again frozen")
	frozen := n.cgroupCPU(t, s.id)
	time.Sleep(time.Second) // the interval measured, not a wait for a condition
	g.Expect(n.cgroupCPU(t, s.id)).To(Equal(frozen))
	waitUsageLimited(t, ns, "ws", true)
}
