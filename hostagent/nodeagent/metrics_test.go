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
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/jobs"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// TestMetrics: the agent's metrics endpoint counts what a user did on its
// node: each exec by outcome, the bytes a job wrote and the bytes its ring
// dropped (as its poll reports them), the jobs running; and an agent
// restarted in the same process exports its own metrics again.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const name = "metrics-a"
	const ring = 64 << 10
	start := func() (*node, string) {
		addr := freeAddr(t)
		n := startNode(t, name, "", "", func(o *nodeagent.Options) {
			o.MetricsBindAddress = addr
			o.Agent.JobLimits = jobs.Limits{RingBytes: ring, ChunkBytes: 4 << 10}
		})
		return n, "http://" + addr + "/metrics"
	}
	n, url := start()
	ns := newNamespace(t, "metrics")
	createSandbox(t, ns, "m", n.name)
	waitProvisioned(t, ns, "m")
	tenant, id := ns+"/m", idOf(t, ns, "m")
	on := []string{"node", name}
	with := func(kv ...string) []string { return append(slices.Clone(on), kv...) }

	var before metricSet
	g.Eventually(func() (err error) { before, err = scrape(url); return err }).
		WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), "the metrics endpoint did not come up")
	g.Expect(before.value(t, "playground_jobs_active", on...)).To(BeZero())
	g.Expect(before.value(t, "playground_jobs_retained", on...)).To(BeZero())
	g.Expect(before.value(t, "playground_jobs_halted_sandboxes", on...)).To(BeZero())
	g.Expect(before.count(t, "playground_exec_duration_seconds", with("outcome", hostagent.ExecExited)...)).To(BeZero())
	// controller-runtime's own metrics of the node's reconciler are served beside ours.
	g.Expect(before.has("controller_runtime_reconcile_errors_total", "controller", "nodeagent-sandbox")).To(BeTrue())

	h, err := n.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())

	// Four execs that end by themselves, whatever their exit code, and one
	// its timeout kills.
	for _, cmd := range []string{"echo one", "echo two", "true", "exit 3"} {
		_, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: cmd})
		g.Expect(err).NotTo(HaveOccurred())
	}
	res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "sleep 30", Timeout: 300 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.TimedOut).To(BeTrue())
	afterExec, err := scrape(url)
	g.Expect(err).NotTo(HaveOccurred())
	exited, timedOut := with("outcome", hostagent.ExecExited), with("outcome", hostagent.ExecTimedOut)
	g.Expect(afterExec.count(t, "playground_exec_duration_seconds", exited...) - before.count(t, "playground_exec_duration_seconds", exited...)).To(BeEquivalentTo(4))
	g.Expect(afterExec.count(t, "playground_exec_duration_seconds", timedOut...) - before.count(t, "playground_exec_duration_seconds", timedOut...)).To(BeEquivalentTo(1))
	g.Expect(afterExec.sum(t, "playground_exec_duration_seconds", timedOut...)).To(BeNumerically(">=", 0.3), "the timed-out exec lasted at least its timeout")

	// A running job is active; cancelled, it is not, and stays retained
	// until its end is read.
	sleeper, err := n.client.StartJob(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "sleep 100"})
	g.Expect(err).NotTo(HaveOccurred())
	running, err := scrape(url)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(running.value(t, "playground_jobs_active", on...)).To(BeEquivalentTo(1))
	g.Expect(running.value(t, "playground_jobs_retained", on...)).To(BeEquivalentTo(1))
	info, err := n.client.Cancel(ctx, tenant, sleeper.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.State).To(Equal(agentapi.JobKilled))
	cancelled, err := scrape(url)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cancelled.value(t, "playground_jobs_active", on...)).To(BeZero())
	g.Expect(cancelled.value(t, "playground_jobs_retained", on...)).To(BeEquivalentTo(1))

	// A job writes N bytes into a ring that keeps 64 KiB: the output
	// counter grows by N, and the dropped bytes and evictions by what its
	// poll reports as dropped.
	const written = 300000
	job, err := n.client.StartJob(ctx, tenant, h.ID, agentapi.ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero", written), Shell: agentapi.ShellClean})
	g.Expect(err).NotTo(HaveOccurred())
	var page agentapi.PollResponse
	cursor := ""
	deadline := time.Now().Add(timeout)
	for !page.Done {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not end: %+v", page.Job)
		}
		page, err = n.client.Poll(ctx, agentapi.PollRequest{Tenant: tenant, Cursor: cursor, Wait: time.Second}, job.ID)
		g.Expect(err).NotTo(HaveOccurred())
		cursor = page.NextCursor
	}
	g.Expect(page.Job.Result.ExitCode).To(BeZero(), "%+v", page.Job.Result)
	g.Expect(page.DroppedBytes).To(BeNumerically(">=", written-ring), "the ring dropped what it could not keep")
	after, err := scrape(url)
	g.Expect(err).NotTo(HaveOccurred())
	delta := func(metric string) float64 { return after.value(t, metric, on...) - before.value(t, metric, on...) }
	g.Expect(delta("playground_job_output_bytes_total")).To(BeEquivalentTo(written))
	g.Expect(delta("playground_job_dropped_bytes_total")).To(BeEquivalentTo(page.DroppedBytes))
	g.Expect(delta("playground_job_ring_evictions_total")).To(BeEquivalentTo(page.DroppedChunks))
	g.Expect(delta("playground_jobs_started_total")).To(BeEquivalentTo(2))
	g.Expect(after.value(t, "playground_jobs_retained", on...)).To(BeEquivalentTo(2))

	// A new agent of the same node in this process: its metrics are its
	// own (the stopped agent's were unregistered, not left behind).
	n.stop()
	_, url = start()
	g.Eventually(func(g Gomega) {
		again, err := scrape(url)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.has("playground_job_output_bytes_total", on...)).To(BeTrue())
		g.Expect(again.value(t, "playground_job_output_bytes_total", on...)).To(BeZero())
		g.Expect(again.count(t, "playground_exec_duration_seconds", exited...)).To(BeZero())
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// metricSet is one scrape of a Prometheus endpoint.
type metricSet map[string]*dto.MetricFamily

func scrape(url string) (metricSet, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// find returns the series of the family with the labels (name, value
// pairs), failing the test unless there is exactly one.
func (s metricSet) find(t *testing.T, name string, labels ...string) *dto.Metric {
	t.Helper()
	var found []*dto.Metric
	if f := s[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, labels) {
				found = append(found, m)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d series of %s with labels %q, want 1", len(found), name, labels)
	}
	return found[0]
}

func (s metricSet) has(name string, labels ...string) bool {
	if f := s[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, labels) {
				return true
			}
		}
	}
	return false
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		ok := false
		for _, l := range m.Label {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// value is a counter's or a gauge's value.
func (s metricSet) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := s.find(t, name, labels...)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0
}

// count and sum are a histogram's.
func (s metricSet) count(t *testing.T, name string, labels ...string) uint64 {
	t.Helper()
	return s.find(t, name, labels...).GetHistogram().GetSampleCount()
}

func (s metricSet) sum(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return s.find(t, name, labels...).GetHistogram().GetSampleSum()
}
