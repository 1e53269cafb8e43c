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
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// TestUsageShortJobsAndBurn is issue 50's trial that read all zeros:
// three background jobs of 3 to 6 s left the tenant's job time at 0 (the
// book counted the jobs running at its samples, every 15 s, so a job
// between two samples counted nothing, one seen at a sample a whole
// interval), and a burn under a CPU-second was 0 in status. Now, with
// samples ten seconds apart, the book holds each job's run time from its
// start to its end, exactly as the agent reports them, and the burn's CPU
// as its cgroup counted it, to the millisecond.
func TestUsageShortJobsAndBurn(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "usage-short")
	addr := freeAddr(t)
	n := startNode(t, "usage-short-a", "", "", func(o *nodeagent.Options) {
		o.MetricsBindAddress = addr
		o.UsageInterval = 10 * time.Second
	})
	createSandbox(t, ns, "ws", n.name)
	s := openSession(t, n, ns, "ws")
	book := func(metric string) float64 {
		m, err := scrape("http://" + addr + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		if !m.has(metric, "node", n.name, "tenant", s.tenant) {
			return 0
		}
		return m.value(t, metric, "node", n.name, "tenant", s.tenant)
	}

	// Two short jobs at once, polled to their end.
	var started []agentapi.JobInfo
	for _, cmd := range []string{"sleep 1.5", "sleep 2.5"} {
		job, err := s.startJob(cmd)
		g.Expect(err).NotTo(HaveOccurred())
		started = append(started, job)
	}
	var ran time.Duration
	for _, job := range started {
		var page agentapi.PollResponse
		deadline := time.Now().Add(timeout)
		for !page.Done {
			g.Expect(time.Now().Before(deadline)).To(BeTrue(), "job %s did not end: %+v", job.ID, page.Job)
			var err error
			page, err = s.client.Poll(context.Background(), agentapi.PollRequest{Tenant: s.tenant, Cursor: page.NextCursor, Wait: time.Second}, job.ID)
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(page.Job.Result.ExitCode).To(BeZero(), "%+v", page.Job.Result)
		ran += page.Job.EndedAt.Sub(page.Job.StartedAt)
	}
	g.Expect(ran).To(BeNumerically(">=", 4*time.Second))
	// Charged as each ended, not at a sample: at once.
	g.Expect(book("playground_tenant_job_seconds_total")).To(BeNumerically("~", ran.Seconds(), 0.001),
		"the book's job time, the jobs' own %v", ran)

	// A burn of under half a CPU-second: the next sample has it, as its
	// cgroup counted it.
	s.exec(t, "timeout 0.4 sh -c 'while :; do :; done'; true")
	burnt := n.cgroupCPU(t, s.id)
	g.Expect(burnt).To(BeNumerically(">", 0.05), "the burn used the CPU")
	g.Eventually(func() float64 { return book("playground_tenant_cpu_seconds_total") }).WithTimeout(timeout).WithPolling(100*time.Millisecond).
		Should(BeNumerically("~", burnt, 0.005), "the book's CPU, the cgroup's %.3f s", burnt)
	t.Logf("jobs ran %v, the book charged %.3f s; the cgroup counted %.4f CPU-seconds, the book %.4f",
		ran, book("playground_tenant_job_seconds_total"), burnt, book("playground_tenant_cpu_seconds_total"))
}

// TestUsageJobChargedOnceAcrossRestart: a job that ended under one agent
// process, and that the next one adopts ended (its sandbox holds it until
// its end is read), is charged once: the book the first wrote as it
// stopped says so, and the next does not charge it again.
func TestUsageJobChargedOnceAcrossRestart(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "usage-once")
	state := ocitest.StateDir(t)
	addr := freeAddr(t)
	quiet := func(o *nodeagent.Options) {
		o.MetricsBindAddress = addr
		o.UsageInterval = time.Hour // the book is written at the start and the stop only
	}
	n := startNode(t, "usage-once-a", state, "", quiet)
	createSandbox(t, ns, "ws", n.name)
	s := openSession(t, n, ns, "ws")
	job, err := s.startJob("sleep 1")
	g.Expect(err).NotTo(HaveOccurred())
	// Read to its end, not acknowledged: the sandbox keeps it.
	end := func(c *agentapi.Client) agentapi.JobInfo {
		var page agentapi.PollResponse
		g.Eventually(func(g Gomega) {
			var err error
			page, err = c.Poll(context.Background(), agentapi.PollRequest{Tenant: s.tenant, Wait: time.Second}, job.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(page.Done).To(BeTrue())
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
		return page.Job
	}
	ended := end(n.client)
	ran := ended.EndedAt.Sub(ended.StartedAt).Seconds()
	charged := func() float64 {
		m, err := scrape("http://" + addr + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		return m.value(t, "playground_tenant_job_seconds_total", "node", n.name, "tenant", s.tenant)
	}
	g.Expect(charged()).To(BeNumerically("~", ran, 0.001))

	n.stop()
	again := startNode(t, n.name, state, "", quiet)
	g.Expect(end(again.client).Result).To(Equal(ended.Result), "the next agent adopted the ended job")
	g.Expect(charged()).To(BeNumerically("~", ran, 0.001), "charged once, the job's %.3f s", ran)
}
