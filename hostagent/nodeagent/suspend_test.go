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
	s.exec(t, `(i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done) >/dev/null 2>&1 & echo $! > /tmp/counter.pid`)
	count := func(s session) int {
		n, err := strconv.Atoi(strings.TrimSpace(s.exec(t, "cat /tmp/count")))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	g.Eventually(func() int { return count(s) }).WithTimeout(timeout).Should(BeNumerically(">", 5))

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

	set := func(suspended bool) {
		sbx := getSandbox(g, ns, "ws")
		patch := client.MergeFrom(sbx.DeepCopy())
		sbx.Spec.Suspended = suspended
		g.Expect(k8s.Patch(ctx, sbx, patch)).To(Succeed())
	}
	set(true)
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "ws"))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonSuspended))
		g.Expect(c.Message).To(ContainSubstring("with its memory"))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(n.containers(t)).To(BeEmpty(), "no container while suspended")
	_, err = poll()
	var ae *agentapi.Error
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "a poll while suspended: %v", err)
	g.Expect(ae.Code).To(Equal(agentapi.CodeUnavailable))
	g.Expect(ae.Message).To(ContainSubstring("suspended"))

	set(false)
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
