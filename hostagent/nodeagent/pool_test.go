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
	"k8s.io/apimachinery/pkg/api/resource"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/hostagent/sandboxids"
)

// TestWarmPoolServesNewSandboxes: on a node with a warm pool, a new
// Sandbox gets a pooled sandbox: its ID is the pooled one's, its init is
// the one the pool started (no start on its way to Provisioned), and it
// runs commands; the pool refills behind it. A Sandbox that needs its
// own storage is a miss and starts cold. The node's metrics say so.
func TestWarmPoolServesNewSandboxes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stateDir := ocitest.StateDir(t)
	be, err := oci.New(oci.Options{StateDir: stateDir, GuestBinary: ocitest.GuestBinary(t), WarmPool: 2, WarmPoolRate: 50, NewID: sandboxids.New})
	g.Expect(err).NotTo(HaveOccurred())
	addr := freeAddr(t)
	n := startNode(t, "pool-a", stateDir, "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{be}
		o.MetricsBindAddress = addr
	})
	url := "http://" + addr + "/metrics"
	on := []string{"node", n.name, "backend", "oci"}
	ready := func() float64 {
		m, err := scrape(url)
		if err != nil {
			return -1
		}
		return m.value(t, "playground_warm_pool_ready", on...)
	}
	g.Eventually(ready).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(BeEquivalentTo(2))

	ns := newNamespace(t, "pool")
	createSandbox(t, ns, "warm", n.name)
	waitProvisioned(t, ns, "warm")
	id := idOf(t, ns, "warm")
	g.Expect(be.Capabilities().StartCounter.Starts(id)).To(BeEquivalentTo(1), "the sandbox's one start is the pool's")
	h, err := n.client.Open(ctx, ns+"/warm", id)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := n.client.Exec(ctx, ns+"/warm", h.ID, agentapi.ExecRequest{Command: "hostname"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal(id + "\n"))

	createSandbox(t, ns, "cold", n.name, func(s *playgroundv1alpha1.Sandbox) {
		size := resource.MustParse("3Gi")
		s.Spec.Storage.Size = &size
	})
	waitProvisioned(t, ns, "cold")
	g.Eventually(ready).WithTimeout(timeout).WithPolling(50*time.Millisecond).Should(BeEquivalentTo(2), "the pool refills")
	m, err := scrape(url)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.value(t, "playground_warm_pool_claims_total", append(on, "result", "hit")...)).To(BeEquivalentTo(1))
	g.Expect(m.value(t, "playground_warm_pool_claims_total", append(on, "result", "miss")...)).To(BeEquivalentTo(1))
	g.Expect(m.value(t, "playground_warm_pool_empty_total", on...)).To(BeZero(), "the miss was a spec that does not fit")
	g.Expect(m.value(t, "playground_warm_pool_starts_total", append(on, "result", "started")...)).To(BeEquivalentTo(3))

	// A graceful stop (an upgrade, an uninstall) destroys the blank
	// sandboxes and leaves the tenants' running.
	n.stop()
	g.Expect(n.containers(t)).To(ConsistOf("pg-"+id, "pg-"+idOf(t, ns, "cold")), "only the tenants' sandboxes run after the agent stopped")
	g.Expect(be.PoolStats().Ready).To(BeZero())
}
