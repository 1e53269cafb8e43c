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
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
)

// TestTwoBackends: an agent given two backends offers both in its Lease
// and serves Sandboxes of each on the backend their spec.backend names; a
// Sandbox of a class the node does not offer is refused with the list of
// those it does.
func TestTwoBackends(t *testing.T) {
	ctx := context.Background()
	// A test backend in the place of one that cannot run here (Lima is not
	// obtainable): the agent's routing to it, its Lease and its status are
	// the real code paths.
	lima := backendtest.New(string(playgroundv1alpha1.BackendLima), func(_ string, req backend.ExecRequest, sink backend.Sink) (int, error) {
		sink.Write(backend.Stdout, []byte("lima ran: "+req.Command+"\n"))
		return 0, nil
	})
	n := startNode(t, "two-backends", "", "", func(o *nodeagent.Options) { o.Backends = append(o.Backends, lima) })
	ns := newNamespace(t, "two-backends")

	NewWithT(t).Eventually(func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(n.name)}, &lease)).To(Succeed())
		g.Expect(lease.Annotations).To(HaveKeyWithValue(agentlease.AnnotationBackends, "lima,oci"))
	}).WithTimeout(timeout).Should(Succeed())

	createSandbox(t, ns, "on-oci", n.name)
	createSandbox(t, ns, "on-lima", n.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Backend = playgroundv1alpha1.BackendLima })
	createSandbox(t, ns, "on-jail", n.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Backend = playgroundv1alpha1.BackendJail })
	waitProvisioned(t, ns, "on-oci")
	waitProvisioned(t, ns, "on-lima")

	run := func(name, command string) string {
		t.Helper()
		tenant := ns + "/" + name
		h, err := n.client.Open(ctx, tenant, idOf(t, ns, name))
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: command})
		if err != nil {
			t.Fatalf("exec in %s: %v", name, err)
		}
		return string(res.Stdout)
	}
	ociID, limaID := idOf(t, ns, "on-oci"), idOf(t, ns, "on-lima")
	if out := run("on-oci", "echo from a container; cat /proc/1/comm"); out != "from a container\nplayground-sand\n" {
		t.Fatalf("the oci sandbox answered %q", out)
	}
	if out := run("on-lima", "uname"); out != "lima ran: uname\n" {
		t.Fatalf("the lima sandbox answered %q", out)
	}
	if lima.Has(ociID) || len(lima.Ran(ociID)) != 0 || !lima.Has(limaID) || fmt.Sprint(lima.Ran(limaID)) != "[uname]" {
		t.Fatalf("the lima backend holds the oci sandbox, or ran the wrong commands: %v %v", lima.Ran(ociID), lima.Ran(limaID))
	}
	if cs := n.containers(t); !strings.Contains(strings.Join(cs, " "), containerOf(t, ns, "on-oci")) || strings.Contains(strings.Join(cs, " "), containerOf(t, ns, "on-lima")) {
		t.Fatalf("runc runs %v: want the oci sandbox only", cs)
	}

	NewWithT(t).Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "on-jail"))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonBackendFailed))
		g.Expect(c.Message).To(ContainSubstring("offers the oci, lima backends, not jail"))
	}).WithTimeout(timeout).Should(Succeed())

	// Deleting destroys each sandbox on its own backend.
	for _, name := range []string{"on-oci", "on-lima"} {
		if err := k8s.Delete(ctx, &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, ns, name)
	}
	if lima.Has(limaID) {
		t.Fatal("the lima sandbox outlived its Sandbox")
	}
	if cs := n.containers(t); strings.Contains(strings.Join(cs, " "), "pg-"+ociID) {
		t.Fatalf("the oci sandbox outlived its Sandbox: %v", cs)
	}
}
