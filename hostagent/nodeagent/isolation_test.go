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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// session is an open handle of one tenant's sandbox on a node.
type session struct {
	tenant, id, handle string
	client             *agentapi.Client
}

func openSession(t *testing.T, n *node, ns, name string) session {
	t.Helper()
	id := waitProvisioned(t, ns, name).Status.SandboxID
	h, err := n.client.Open(context.Background(), ns+"/"+name, id)
	if err != nil {
		t.Fatal(err)
	}
	return session{tenant: ns + "/" + name, id: id, handle: h.ID, client: n.client}
}

func (s session) exec(t *testing.T, cmd string) string {
	t.Helper()
	res, err := s.client.Exec(context.Background(), s.tenant, s.handle, agentapi.ExecRequest{Command: cmd})
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d: %s", cmd, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

func (s session) startJob(cmd string) (agentapi.JobInfo, error) {
	return s.client.StartJob(context.Background(), s.tenant, s.handle, agentapi.ExecRequest{Command: cmd})
}

// pidsOf lists the host PIDs of processes whose command line contains s.
func pidsOf(s string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parentOf is the host PID of pid's parent.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return ppid
		}
	}
	t.Fatalf("no PPid for %d", pid)
	return 0
}

// waitProcess waits for a process of the host whose command line contains
// marker, and returns its PID.
func waitProcess(t *testing.T, marker string) int {
	t.Helper()
	var pid int
	NewWithT(t).Eventually(func() []int {
		pids := pidsOf(marker)
		if len(pids) > 0 {
			pid = pids[0]
		}
		return pids
	}).WithTimeout(timeout).WithPolling(50 * time.Millisecond).ShouldNot(BeEmpty())
	return pid
}

// waitHalted waits for the Sandbox to say that its job admission halted
// on a lost proof of cleanup.
func waitHalted(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := jobsAdmitted(g, ns, name)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonProofLost))
	}).WithTimeout(timeout).Should(Succeed())
}

func jobsAdmitted(g Gomega, ns, name string) *metav1.Condition {
	c := meta.FindStatusCondition(getSandbox(g, ns, name).Status.Conditions, playgroundv1alpha1.JobsAdmittedCondition)
	g.Expect(c).NotTo(BeNil())
	return c
}

// TestLostProofHaltsOnlyItsSandbox is issue 11's acceptance: killing
// sandbox A's shepherd from the host during an exec halts A's jobs only,
// says so on A's Sandbox, and tenant B on the same node still runs
// job_exec; restarting A (spec.restartRequest) clears it and keeps A's
// files.
func TestLostProofHaltsOnlyItsSandbox(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "lost-proof")
	n := startNode(t, "lost-proof-a", "", "")
	createSandbox(t, ns, "a", n.name)
	createSandbox(t, ns, "b", n.name)
	a, b := openSession(t, n, ns, "a"), openSession(t, n, ns, "b")
	a.exec(t, "echo kept > file")
	g.Eventually(func(g Gomega) {
		g.Expect(jobsAdmitted(g, ns, "a").Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(timeout).Should(Succeed())

	// Unique to this run: pidsOf looks at every process of the host.
	marker := fmt.Sprintf("lost-proof-%d-%d", os.Getpid(), time.Now().UnixNano())
	execErr := make(chan error, 1)
	go func() {
		_, err := a.client.Exec(ctx, a.tenant, a.handle, agentapi.ExecRequest{Command: "sleep 1000 & wait # " + marker})
		execErr <- err
	}()
	shell := waitProcess(t, marker)
	g.Expect(syscall.Kill(parentOf(t, shell), syscall.SIGKILL)).To(Succeed(), "killing the shepherd")
	select {
	case err := <-execErr:
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("restart"))
	case <-time.After(timeout):
		t.Fatal("the exec did not return after its shepherd was killed")
	}

	_, err := a.startJob("true")
	g.Expect(err).To(MatchError(ContainSubstring("halted in this sandbox")))
	waitHalted(t, ns, "a")
	// Tenant B on the same node is untouched.
	info, err := b.startJob("echo b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.State).To(Equal(agentapi.JobRunning))
	g.Expect(jobsAdmitted(g, ns, "b").Status).To(Equal(metav1.ConditionTrue))

	// The operator restarts A: every process in it is killed, its files stay.
	restart(t, ns, "a", "2026-11-30T16:00:00Z")
	g.Eventually(func(g Gomega) {
		g.Expect(jobsAdmitted(g, ns, "a").Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(timeout).Should(Succeed())
	waitEvent(t, ns, "a", corev1.EventTypeNormal, playgroundv1alpha1.ReasonRestarted)
	g.Expect(pidsOf(marker)).To(BeEmpty(), "the restart killed what the lost shepherd left")
	_, err = a.startJob("true")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.exec(t, "cat file")).To(Equal("kept\n"))
}

// TestLostJobHolderHaltsItsSandbox: the holder of a job the sandbox holds
// (its shepherd) killed from the host takes the job's proof of cleanup
// with it: the job fails saying so, job admission halts in that sandbox
// only, and a restart of it clears the halt.
func TestLostJobHolderHaltsItsSandbox(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "lost-holder")
	n := startNode(t, "lost-holder", "", "")
	createSandbox(t, ns, "a", n.name)
	createSandbox(t, ns, "b", n.name)
	a, b := openSession(t, n, ns, "a"), openSession(t, n, ns, "b")

	marker := fmt.Sprintf("lost-holder-%d-%d", os.Getpid(), time.Now().UnixNano())
	job, err := a.startJob("sleep 1000 & wait # " + marker)
	g.Expect(err).NotTo(HaveOccurred())
	shell := waitProcess(t, marker)
	g.Expect(syscall.Kill(parentOf(t, shell), syscall.SIGKILL)).To(Succeed(), "killing the job's holder")

	g.Eventually(func(g Gomega) {
		page, err := a.client.Poll(ctx, agentapi.PollRequest{Tenant: a.tenant, Wait: time.Second}, job.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Job.State).To(Equal(agentapi.JobFailed))
		g.Expect(page.Job.Result.Error).To(ContainSubstring("processes may still run"))
	}).WithTimeout(timeout).Should(Succeed())
	_, err = a.startJob("true")
	g.Expect(err).To(MatchError(ContainSubstring("halted in this sandbox")))
	waitHalted(t, ns, "a")
	_, err = b.startJob("true")
	g.Expect(err).NotTo(HaveOccurred(), "another sandbox on the node is untouched")

	restart(t, ns, "a", "2026-12-01T08:00:00Z")
	g.Eventually(func(g Gomega) {
		g.Expect(jobsAdmitted(g, ns, "a").Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(pidsOf(marker)).To(BeEmpty(), "the restart killed what the lost holder left")
}

// TestSuspendStopsCompute: a suspended sandbox's processes are gone
// (checked from the host) and its running jobs end with a clear state;
// its files are kept, and resuming starts it again with the same files.
func TestSuspendStopsCompute(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "suspend")
	n := startNode(t, "suspend-a", "", "")
	createSandbox(t, ns, "ws", n.name)
	s := openSession(t, n, ns, "ws")
	// A background process left by a command, unique to this run: pidsOf
	// looks at every process of the host.
	marker := fmt.Sprintf("sleep %d", 900000+time.Now().UnixNano()%99999)
	s.exec(t, "echo kept > file; setsid "+marker+" >/dev/null 2>&1 &")
	job, err := s.startJob("sleep 1000")
	g.Expect(err).NotTo(HaveOccurred())
	// The background process may be inside an execve (of setsid, then of
	// sleep) at this moment, when its /proc/PID/cmdline reads empty: wait
	// for it rather than look once.
	waitProcess(t, marker)

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.Suspended = true })
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "ws"))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonSuspended))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(n.containers(t)).To(BeEmpty(), "no container while suspended")
	g.Expect(pidsOf(marker)).To(BeEmpty(), "the tenant's processes are gone")
	res, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: s.tenant}, job.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Job.State).To(Equal(agentapi.JobFailed))
	g.Expect(res.Job.Result.Error).To(ContainSubstring("suspended"))
	// Its handle is gone, and no new one opens.
	_, err = n.client.Exec(ctx, s.tenant, s.handle, agentapi.ExecRequest{Command: "true"})
	g.Expect(err).To(HaveOccurred())
	_, err = n.client.Open(ctx, s.tenant, s.id)
	var he *agentapi.Error
	g.Expect(errors.As(err, &he) && strings.Contains(he.Message, "suspended")).To(BeTrue(), "open while suspended: %v", err)
	waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonSuspended)

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.Suspended = false })
	s2 := openSessionEventually(t, n, ns, "ws")
	g.Expect(s2.exec(t, "cat file")).To(Equal("kept\n"))
	g.Expect(pidsOf(marker)).To(BeEmpty(), "resuming starts new processes, not the old ones")
	// The resume is Normal, and no Warning reads as if its init had died.
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonProvisioned).Note).To(ContainSubstring("no longer suspended"))
	var events eventsv1.EventList
	g.Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Type).NotTo(Equal(corev1.EventTypeWarning), "a Warning on a plain suspend and resume: %s %s", e.Reason, e.Note)
	}
}

// openSessionEventually opens a handle once the sandbox serves again.
func openSessionEventually(t *testing.T, n *node, ns, name string) session {
	t.Helper()
	var s session
	NewWithT(t).Eventually(func(g Gomega) {
		sbx := getSandbox(g, ns, name)
		c := provisioned(sbx)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		h, err := n.client.Open(context.Background(), ns+"/"+name, sbx.Status.SandboxID)
		g.Expect(err).NotTo(HaveOccurred())
		s = session{tenant: ns + "/" + name, id: sbx.Status.SandboxID, handle: h.ID, client: n.client}
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return s
}

// TestHostileTenantCannotHoldARestart is the attack of a tenant that
// fills its PID limit from one held job, which grabs every PID freed, and
// holds its shepherds with sleeping jobs: a restarted agent used to wait
// for ever for that sandbox to list its jobs, serving nobody. Now the
// other tenants are served again within seconds of the new agent's start,
// the hostile tenant's jobs are still handed over (init lists and
// attaches them itself), its own new commands are refused as
// resource_exhausted, and an operator's restart recovers it.
func TestHostileTenantCannotHoldARestart(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := newNamespace(t, "hostile-restart")
	n := startNode(t, "hostile-a", "", "")
	createSandbox(t, ns, "hog", n.name, func(s *playgroundv1alpha1.Sandbox) {
		pids := int64(64)
		s.Spec.Resources.PIDs = &pids
	})
	createSandbox(t, ns, "calm", n.name)
	hog := openSession(t, n, ns, "hog")
	openSession(t, n, ns, "calm")

	var sleepers []string
	for range 7 {
		j, err := hog.startJob("exec sleep 3600")
		g.Expect(err).NotTo(HaveOccurred())
		sleepers = append(sleepers, j.ID)
	}
	// perl, not sh: a shell's failed fork ends it, and this must go on.
	_, err := hog.startJob(`exec perl -e 'while (1) { my $p = fork(); if (defined $p && $p == 0) { sleep 3600; exit } }'`)
	g.Expect(err).NotTo(HaveOccurred())
	// The sandbox is at its limit once its own commands cannot fork. (A
	// command's shell may still start: the kernel counts it against the
	// tenant when its user is set, before it is counted itself. A start
	// it refuses is resource_exhausted, saying why: TestForkBombLeavesSupervision.)
	atLimit := func() error {
		res, err := hog.client.Exec(ctx, hog.tenant, hog.handle, agentapi.ExecRequest{Command: "( true )"})
		switch {
		case agentapi.CodeOf(err) == agentapi.CodeExhausted:
			return nil
		case err != nil:
			return StopTrying(err.Error())
		case res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "fork"):
			return fmt.Errorf("a subshell still starts: exit %d, stderr %q", res.ExitCode, res.Stderr)
		}
		return nil
	}
	g.Eventually(atLimit).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Succeed())

	// The agent restarts, as on an upgrade or a crash.
	n.stop()
	started := time.Now()
	second := startNode(t, n.name, n.stateDir, strings.TrimPrefix(n.endpoint, "http://"))
	g.Eventually(func() error {
		h, err := second.client.Open(ctx, ns+"/calm", idOf(t, ns, "calm"))
		if err != nil {
			return err
		}
		res, err := second.client.Exec(ctx, ns+"/calm", h.ID, agentapi.ExecRequest{Command: "echo served"})
		if err == nil && string(res.Stdout) != "served\n" {
			err = fmt.Errorf("stdout %q", res.Stdout)
		}
		return err
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), "the other tenant is served again")
	if took := time.Since(started); took > 10*time.Second {
		t.Errorf("the other tenant was served again %s after the new agent started, want within 10 s", took)
	}

	// The hostile tenant's jobs were handed over: they run on, under
	// their IDs (its init and their holders are outside its PID budget),
	// and its own commands are refused with what to do, or start when
	// the bomb leaves them a PID.
	h, err := second.client.Open(ctx, hog.tenant, hog.id)
	g.Expect(err).NotTo(HaveOccurred(), "the hostile tenant's sandbox after the restart")
	for _, id := range sleepers {
		p, err := second.client.Poll(ctx, agentapi.PollRequest{Tenant: hog.tenant}, id)
		g.Expect(err).NotTo(HaveOccurred(), "job %s after the restart", id)
		g.Expect(p.Job.State).To(Equal(agentapi.JobRunning))
	}
	g.Eventually(func() error {
		_, err := second.client.Exec(ctx, hog.tenant, h.ID, agentapi.ExecRequest{Command: "true"})
		return err
	}).WithTimeout(timeout).WithPolling(20 * time.Millisecond).Should(WithTransform(agentapi.CodeOf, Equal(agentapi.CodeExhausted)))

	// An operator restarts the sandbox: every process of it goes, and it
	// serves again.
	updateSandbox(t, ns, "hog", func(s *playgroundv1alpha1.Sandbox) { s.Spec.RestartRequest = "recover" })
	g.Eventually(func() error {
		h, err := second.client.Open(ctx, hog.tenant, hog.id)
		if err != nil {
			return err
		}
		_, err = second.client.Exec(ctx, hog.tenant, h.ID, agentapi.ExecRequest{Command: "true"})
		return err
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}
