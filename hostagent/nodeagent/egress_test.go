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

package nodeagent_test

import (
	"context"
	"os/exec"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/netnstest"
)

// A Sandbox in mode egress: an agent that runs sandboxes without network
// refuses it and says why; an agent with --network=egress gives it an
// interface and a ruleset with its list, which go with the Sandbox. How
// the ruleset holds is oci's TestEgress.
func TestEgressSandbox(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The test's refused connection aims at a test host in a network
	// namespace of the test's own (below). Making it holds IPv4
	// forwarding, which the backend turns on, for the test, so that the
	// machine gets back what it had.
	const host, port = "198.19.78.1", "18090"
	world := netnstest.New(t, "198.19.78", 1)
	ns := newNamespace(t, "egress")
	egress := func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
			Egress: []playgroundv1alpha1.EgressRule{{CIDR: "198.51.100.0/24", Ports: []int32{8443}}}}
	}
	closed := startNode(t, "egress-none", "", "")
	g.Expect(registrationOf(t, closed.name).OffersNetwork("oci", "egress")).To(BeFalse(), "an agent without network offers no egress")
	createSandbox(t, ns, "refused", closed.name, egress)
	waitFailed(t, ns, "refused", playgroundv1alpha1.ReasonBackendFailed, "start it with --network=egress")
	// Its first start is worded as one, not as a reattach.
	g.Expect(provisioned(getSandbox(g, ns, "refused")).Message).To(HavePrefix("provisioning sandbox "))
	g.Expect(closed.containers(t)).To(BeEmpty())
	closed.stop()

	state := ocitest.StateDir(t)
	hub := &egressdns.Hub{}
	// The upstream is never asked: the test's names are denied.
	be, err := oci.New(oci.Options{StateDir: state, GuestBinary: ocitest.GuestBinary(t), Network: oci.NetworkEgress,
		EgressResolvers: []string{"127.0.0.1:9"}, OnEgressDNS: hub.Record})
	g.Expect(err).NotTo(HaveOccurred())
	n := startNode(t, "egress-a", state, "", func(o *nodeagent.Options) { o.Backends = []backend.Backend{be}; o.EgressDNS = hub })
	g.Expect(registrationOf(t, n.name).Networks).To(Equal(map[string][]string{"oci": {"egress", "none"}}), "its Lease offers egress")
	createSandbox(t, ns, "open", n.name, egress)
	createSandbox(t, ns, "plain", n.name)
	open, plain := waitProvisioned(t, ns, "open"), waitProvisioned(t, ns, "plain")
	g.Expect(conformance.Sh(t, be, open.Status.SandboxID, "cat /proc/net/dev")).To(ContainSubstring("eth0"))
	g.Expect(conformance.Sh(t, be, plain.Status.SandboxID, "cat /proc/net/dev")).NotTo(ContainSubstring("eth0"))
	ruleset := func() string {
		out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		return string(out)
	}
	g.Expect(ruleset()).To(ContainSubstring("ip daddr 198.51.100.0/24 meta l4proto { tcp, udp } th dport 8443 counter name \"allowed\" accept"))

	g.Expect(k8s.Delete(ctx, open)).To(Succeed())
	waitGone(t, ns, "open")
	g.Expect(ruleset()).NotTo(ContainSubstring("198.51.100.0/24"))

	// Egress by name: a name no rule allows is NXDOMAIN in the sandbox,
	// counted by tenant and reported on the Sandbox as an Event that says
	// what to add.
	createSandbox(t, ns, "named", n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
			Egress: []playgroundv1alpha1.EgressRule{{Host: "pypi.test", Ports: []int32{443}}}}
	})
	named := waitProvisioned(t, ns, "named")
	out := conformance.Sh(t, be, named.Status.SandboxID, "getent hosts blocked.test; echo status=$?")
	g.Expect(out).To(ContainSubstring("status=2"), "a name no rule allows does not resolve")
	// A connection attempt the rules refuse (dropped at the node) is on
	// record too. It aims at the test host, listening on a port no rule
	// opens, so that a regression that let it through would reach that
	// host and nothing outside the machine; the host sees no connection.
	l := world.Listen(t, host+":"+port)
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	out = conformance.Sh(t, be, named.Status.SandboxID, "timeout 2 bash -c '</dev/tcp/"+host+"/"+port+"'; echo status=$?")
	g.Expect(out).NotTo(ContainSubstring("status=0"), "a connection no rule allows does not connect")
	g.Eventually(func(g Gomega) {
		var evs corev1.EventList
		g.Expect(k8s.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range evs.Items {
			if e.Reason == playgroundv1alpha1.ReasonEgressDenied && e.InvolvedObject.Name == "named" {
				notes = append(notes, e.Message)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring("blocked.test: no egress rule allows this name")))
		g.Expect(notes).To(ContainElement(ContainSubstring("connections to " + host + ":" + port + "/tcp refused: no egress rule allows this address")))
	}, "30s", "100ms").Should(Succeed())
	fams, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	deniedOf := func(metric string) float64 {
		sum := 0.0
		for _, f := range fams {
			if f.GetName() != metric {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["tenant"] == ns+"/named" && labels["result"] == "denied" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}
	g.Expect(deniedOf("playground_egress_dns_queries_total")).To(BeNumerically(">=", 1), "the denial is counted with its tenant")
	g.Expect(deniedOf("playground_egress_flows_total")).To(BeNumerically(">=", 1), "the refused connection is counted with its tenant")
	g.Expect(accepted.Load()).To(BeZero(), "the test host saw the refused connection")
}

// registrationOf waits for node's Lease and reads its registration.
func registrationOf(t *testing.T, node string) agentlease.Registration {
	t.Helper()
	g := NewWithT(t)
	var lease coordinationv1.Lease
	key := client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(node)}
	g.Eventually(func() error { return k8s.Get(context.Background(), key, &lease) }).WithTimeout(timeout).Should(Succeed())
	reg, err := agentlease.FromLease(&lease)
	g.Expect(err).NotTo(HaveOccurred())
	return reg
}
