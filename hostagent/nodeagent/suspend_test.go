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
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
)

// TestSuspendKeepsMemoryGVisor: a gVisor Sandbox suspended through its
// spec keeps its memory. A process that counts in memory goes on from its
// count when the Sandbox resumes, not started again; a job started before
// the suspension, polled as suspended meanwhile (unavailable, not failed),
// delivers the rest of its output from the client's cursor and its exit.
// The agent's Lease says where suspension keeps memory; the Sandbox's
// status and Events say that it did.
func TestSuspendKeepsMemoryGVisor(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "suspend-memory")
	stateDir := ocitest.StateDir(t)
	n := startNode(t, "suspend-mem-a", stateDir, "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{ocitest.NewGVisor(t, stateDir)}
	})
	var lease coordinationv1.Lease
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(n.name)}, &lease)
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(lease.Annotations).To(HaveKeyWithValue(agentlease.AnnotationMemorySuspend, "oci/gvisor"))

	createSandbox(t, ns, "ws", n.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Isolation = playgroundv1alpha1.IsolationGVisor })
	s := openSession(t, n, ns, "ws")
	s.exec(t, counter)
	count := func(s session) int { return countOf(t, s) }
	g.Eventually(func() int { return count(s) }).WithTimeout(timeout).Should(BeNumerically(">", 5))
	g.Expect(gvisorProcesses(s.id)).NotTo(BeEmpty(), "the running sandbox's sentry, seen on the node")

	const lines = 80
	job, err := s.startJob(fmt.Sprintf("i=1; while [ $i -le %d ]; do echo line $i; i=$((i+1)); sleep 0.1; done", lines))
	g.Expect(err).NotTo(HaveOccurred())
	var out strings.Builder
	cursor := ""
	poll := func() (agentapi.PollResponse, error) {
		res, err := n.client.Poll(ctx, agentapi.PollRequest{Tenant: s.tenant, Cursor: cursor, Wait: time.Second}, job.ID)
		if err == nil {
			for _, c := range res.Chunks {
				out.WriteString(c.Data)
			}
			cursor = res.NextCursor
		}
		return res, err
	}
	g.Eventually(func() string { _, _ = poll(); return out.String() }).WithTimeout(timeout).Should(ContainSubstring("line 2\n"))
	before := count(s)

	suspendWithMemory(t, ns, "ws")
	g.Expect(waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonSuspended).Message).To(ContainSubstring("with its memory"))
	g.Expect(gvisorProcesses(s.id)).To(BeEmpty(), "no process of the sandbox on the node while suspended")
	_, err = poll()
	var ae *agentapi.Error
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "a poll while suspended: %v", err)
	g.Expect(ae.Code).To(Equal(agentapi.CodeUnavailable))
	g.Expect(ae.Message).To(ContainSubstring("suspended"))

	updateSandbox(t, ns, "ws", func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.Suspended = false })
	s2 := openSessionEventually(t, n, ns, "ws")
	pid := strings.TrimSpace(s2.exec(t, "cat /tmp/counter.pid"))
	g.Expect(s2.exec(t, "ps -o args= -p "+pid+" || true")).NotTo(BeEmpty(), "the counter runs on after the resume")
	g.Eventually(func() int { return count(s2) }).WithTimeout(timeout).Should(BeNumerically(">", before+3), "the counter goes on from its count")

	var last agentapi.PollResponse
	g.Eventually(func(g Gomega) {
		res, err := poll()
		g.Expect(err).NotTo(HaveOccurred())
		last = res
		g.Expect(res.Job.State).To(Equal(agentapi.JobExited))
		g.Expect(res.Done).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed())
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	g.Expect(out.String()).To(Equal(want.String()), "the job's output across the suspension, from the client's cursor")
	g.Expect(last.Job.Result.ExitCode).To(Equal(0))
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonProvisioned).Note).To(ContainSubstring("Restored"))
}

// counter starts, in the background, a shell that counts in its memory, 20
// times a second, and writes each count to /tmp/count (by rename: a read
// never sees it truncated) and its PID to /tmp/counter.pid.
const counter = `(i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done) >/dev/null 2>&1 & echo $! > /tmp/counter.pid`

// countOf reads the counter's count (0 before the first).
func countOf(t *testing.T, s session) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s.exec(t, "cat /tmp/count 2>/dev/null || echo 0")))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// gvisorProcesses lists the node's processes of gVisor sandbox id: its
// sentry and gofer name its container (pg-<id>+) on their command lines.
func gvisorProcesses(id string) []int {
	return pidsOf("pg-" + id + "+")
}

// suspendWithMemory suspends Sandbox ns/name (spec.suspended) and waits
// until its Provisioned condition says it is suspended with its memory.
func suspendWithMemory(t *testing.T, ns, name string) {
	t.Helper()
	updateSandbox(t, ns, name, func(sbx *playgroundv1alpha1.Sandbox) { sbx.Spec.Suspended = true })
	NewWithT(t).Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, name))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonSuspended))
		g.Expect(c.Message).To(ContainSubstring("with its memory"))
	}).WithTimeout(timeout).Should(Succeed())
}

// TestIdleSuspendGVisor: a Sandbox with spec.idleSuspend is suspended by
// its agent after that long without calls, with its memory (gVisor): no
// process of it remains on the node, and its status (Running=False,
// IdleSuspended) and an Event say so. The next exec, on the session opened
// before, wakes it and is served: the client sees latency, not an error,
// and a process that counted in memory goes on from its count; its status
// says Running again. The resume is counted and timed in the agent's
// metrics.
func TestIdleSuspendGVisor(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "idle")
	stateDir := ocitest.StateDir(t)
	addr := freeAddr(t)
	n := startNode(t, "idle-a", stateDir, "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{ocitest.NewGVisor(t, stateDir)}
		o.MetricsBindAddress = addr
		o.StateWriteInterval = time.Second
	})
	metric := func(name string, count bool, kv ...string) float64 {
		t.Helper()
		m, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		kv = append([]string{"node", n.name}, kv...)
		if count {
			return float64(m.count(t, name, kv...))
		}
		return m.value(t, name, kv...)
	}
	createSandbox(t, ns, "ws", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Isolation = playgroundv1alpha1.IsolationGVisor
		s.Spec.IdleSuspend = &playgroundv1alpha1.IdleSuspend{After: metav1.Duration{Duration: 10 * time.Second}}
	})
	s := openSession(t, n, ns, "ws")
	s.exec(t, counter)
	count := func() int { return countOf(t, s) }
	g.Eventually(count).WithTimeout(timeout).Should(BeNumerically(">", 5))
	g.Expect(gvisorProcesses(s.id)).NotTo(BeEmpty())
	before := count()

	// Nothing calls it now: within its idle period and the agent's check,
	// it sleeps.
	g.Eventually(func() []int { return gvisorProcesses(s.id) }).WithTimeout(timeout).WithPolling(200*time.Millisecond).Should(BeEmpty(),
		"the idle sandbox's processes are gone from the node")
	// Counted once the suspension is over, a moment after its processes
	// went.
	g.Eventually(func() float64 { return metric("playground_idle_suspensions_total", false, "kind", "memory_kept") }).
		WithTimeout(timeout).Should(BeNumerically(">=", 1))
	g.Expect(metric("playground_sandboxes_suspended", false, "reason", "idle")).To(BeEquivalentTo(1))
	g.Eventually(func(g Gomega) {
		c := running(getSandbox(g, ns, "ws"))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonIdleSuspended))
		g.Expect(c.Message).To(SatisfyAll(ContainSubstring("with its memory"), ContainSubstring("the next call restores them where they were")))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonIdleSuspended).Action).To(Equal("Sleep"))

	start := time.Now()
	after := count() // the same handle: the call wakes the sandbox
	t.Logf("the first exec after the idle suspension took %s", time.Since(start))
	g.Expect(after).To(BeNumerically(">=", before), "the counter goes on from its count, not from the start")
	g.Eventually(count).WithTimeout(timeout).Should(BeNumerically(">", after+3), "the counter runs again")
	g.Expect(metric("playground_idle_resume_seconds", true)).To(BeNumerically(">=", 1))
	g.Expect(metric("playground_sandboxes_suspended", false, "reason", "idle")).To(BeZero())
	g.Expect(provisioned(getSandbox(g, ns, "ws")).Status).To(Equal(metav1.ConditionTrue), "an idle suspension is not a Sandbox's suspension")
	waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonRunning)
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonRunning).Action).To(Equal("Wake"))
}

// running is a Sandbox's Running condition.
func running(s *playgroundv1alpha1.Sandbox) *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.RunningCondition)
}

// waitRunningReason waits until the Sandbox's Running condition has the
// reason, and returns it.
func waitRunningReason(t *testing.T, ns, name, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		c = running(getSandbox(g, ns, name))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return c
}

// TestIdlePause: a Sandbox with spec.idleSuspend in mode Pause is frozen
// by its agent after its idle period (its container paused, its memory
// kept in RAM; its status and an Event say IdlePaused), and thawed by the
// next call on the same session, which is served; a process that ran in
// it runs on, and its status says Running. Suspended through its spec
// then, it is Stopped (runc keeps no memory), and Running once resumed.
func TestIdlePause(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "idle-pause")
	n := startNode(t, "idle-pause-a", "", "", func(o *nodeagent.Options) { o.StateWriteInterval = time.Second })
	createSandbox(t, ns, "ws", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.IdleSuspend = &playgroundv1alpha1.IdleSuspend{Mode: playgroundv1alpha1.IdleModePause, After: metav1.Duration{Duration: 10 * time.Second}}
	})
	s := openSession(t, n, ns, "ws")
	marker := fmt.Sprintf("sleep %d", 900000+time.Now().UnixNano()%99999)
	s.exec(t, marker+" >/dev/null 2>&1 &")
	pid := waitProcess(t, marker)
	state := func() string { return n.runcState(s.id) }
	g.Expect(state()).To(Equal("running"))
	g.Eventually(state).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Equal("paused"))
	g.Expect(pidsOf(marker)).To(ContainElement(pid), "a paused sandbox keeps its processes")
	c := waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonIdlePaused)
	g.Expect(c.Message).To(SatisfyAll(ContainSubstring("mode Pause"), ContainSubstring("the next call thaws it")))
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonIdlePaused).Action).To(Equal("Sleep"))

	g.Expect(s.exec(t, "echo awake")).To(Equal("awake\n"), "the call on the session opened before is served")
	g.Expect(state()).To(Equal("running"))
	g.Expect(pidsOf(marker)).To(ContainElement(pid), "the process runs on")
	waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonRunning)

	// Paused again, then suspended through its spec: it is thawed and
	// stopped as any suspension of a runc sandbox, and starts again after.
	g.Eventually(state).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Equal("paused"))
	updateSandbox(t, ns, "ws", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Suspended = true })
	g.Eventually(func(g Gomega) {
		g.Expect(provisioned(getSandbox(g, ns, "ws")).Reason).To(Equal(playgroundv1alpha1.ReasonSuspended))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(n.containers(t)).To(BeEmpty(), "the paused sandbox's container is gone once it is suspended")
	g.Expect(waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonStopped).Message).To(ContainSubstring("until spec.suspended is cleared, which starts it again over its files"))
	updateSandbox(t, ns, "ws", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Suspended = false })
	g.Expect(openSessionEventually(t, n, ns, "ws").exec(t, "echo again")).To(Equal("again\n"))
	waitRunningReason(t, ns, "ws", playgroundv1alpha1.ReasonRunning)
}
