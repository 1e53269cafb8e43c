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
	"testing"

	. "github.com/onsi/gomega"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest/conformance"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/sysctltest"
)

// A Sandbox in mode egress: an agent that runs sandboxes without network
// refuses it and says why; an agent with --network=egress gives it an
// interface and a ruleset with its list, which go with the Sandbox. How
// the ruleset holds is oci's TestEgress.
func TestEgressSandbox(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The backend turns IPv4 forwarding on; the test machine gets back
	// what it had.
	sysctltest.HoldIPv4Forwarding(t)
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
	be, err := oci.New(oci.Options{StateDir: state, GuestBinary: ocitest.GuestBinary(t), Network: oci.NetworkEgress})
	g.Expect(err).NotTo(HaveOccurred())
	n := startNode(t, "egress-a", state, "", func(o *nodeagent.Options) { o.Backends = []backend.Backend{be} })
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
	g.Expect(ruleset()).To(ContainSubstring("ip daddr 198.51.100.0/24 meta l4proto { tcp, udp } th dport 8443 accept"))

	g.Expect(k8s.Delete(ctx, open)).To(Succeed())
	waitGone(t, ns, "open")
	g.Expect(ruleset()).NotTo(ContainSubstring("198.51.100.0/24"))
}
