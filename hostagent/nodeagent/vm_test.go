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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/backend/vm"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
)

// TestVMSandbox: an agent with the vm backend offers it in its Lease with
// its accelerator (TCG here), runs a Sandbox of backend vm on a kernel of
// its own, says in the Sandbox's Provisioned condition that TCG is for
// development, and, restarted, serves the same VM with its files.
func TestVMSandbox(t *testing.T) {
	kernel, modules, root := os.Getenv("PLAYGROUND_VM_KERNEL"), os.Getenv("PLAYGROUND_VM_MODULES"), os.Getenv("PLAYGROUND_VM_ROOT")
	if kernel == "" || modules == "" || root == "" {
		t.Skip("PLAYGROUND_VM_KERNEL, PLAYGROUND_VM_MODULES and PLAYGROUND_VM_ROOT are not set: run eval \"$(hack/vm-image.sh)\" first (make test does)")
	}
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "vm")
	stateDir := ocitest.StateDir(t)
	newVM := func() (*vm.Backend, error) {
		return vm.New(ctx, vm.Options{
			StateDir: filepath.Join(stateDir, "vm"), GuestBinary: ocitest.GuestBinary(t),
			Kernel: kernel, Modules: modules, Root: root, Accel: vm.AccelTCG,
		})
	}
	t.Cleanup(func() {
		// After the agents stopped (and closed their backends), before the
		// state directory goes: a backend of its own destroys the VMs, so
		// that no QEMU outlives the test.
		be, err := newVM()
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ents, _ := os.ReadDir(filepath.Join(stateDir, "vm", "sandboxes"))
		for _, e := range ents {
			if err := be.Destroy(sctx, e.Name(), false); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	withVM := func(o *nodeagent.Options) {
		be, err := newVM()
		g.Expect(err).NotTo(HaveOccurred())
		o.Backends = append(o.Backends, be)
	}
	first := startNode(t, "vm-a", stateDir, "", withVM)
	g.Eventually(func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(first.name)}, &lease)).To(Succeed())
		g.Expect(lease.Annotations).To(HaveKeyWithValue(agentlease.AnnotationBackends, "oci,vm"))
		g.Expect(lease.Annotations).To(HaveKeyWithValue(agentlease.AnnotationBackendNotes, ContainSubstring("TCG emulation, for development only")))
	}).WithTimeout(timeout).Should(Succeed())

	createSandbox(t, ns, "guest", first.name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.Backend = playgroundv1alpha1.BackendVM })
	// A boot under TCG takes seconds of emulation: more on a loaded machine.
	var sbx *playgroundv1alpha1.Sandbox
	g.Eventually(func(g Gomega) {
		sbx = getSandbox(g, ns, "guest")
		g.Expect(meta.IsStatusConditionTrue(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)).To(BeTrue())
	}).WithTimeout(4 * time.Minute).Should(Succeed())
	c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	g.Expect(c.Message).To(ContainSubstring("TCG emulation, for development only"))

	tenant, id := ns+"/guest", sbx.Status.SandboxID
	run := func(n *node, command string) (string, error) {
		h, err := n.client.Open(ctx, tenant, id)
		if err != nil {
			return "", err
		}
		defer n.client.Close(ctx, tenant, h.ID)
		res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: command})
		return string(res.Stdout), err
	}
	var host unix.Utsname
	g.Expect(unix.Uname(&host)).To(Succeed())
	out, err := run(first, "echo kept >> file; cat file; uname -r")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(And(HavePrefix("kept\n"), Not(ContainSubstring(unix.ByteSliceToString(host.Release[:])))),
		"the sandbox runs on a kernel of its own")

	first.stop()
	second := startNode(t, first.name, stateDir, "", withVM)
	g.Eventually(func() (string, error) { return run(second, "cat file") }).WithTimeout(time.Minute).Should(Equal("kept\n"),
		"the restarted agent serves the same VM, its files kept")

	// The VM dies (QEMU killed, as by the node's OOM killer): the agent
	// boots it again over its disks and says so in an Event. What the
	// guest had synced is there; what it had not may not be, as after a
	// power cut (docs/isolation.md, vm backend).
	_, err = run(second, "sync")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile(filepath.Join(stateDir, "vm", "sandboxes", id, "qemu.pid"))
	g.Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	e := waitEvent(t, ns, "guest", corev1.EventTypeWarning, playgroundv1alpha1.ReasonRestarted)
	g.Expect(e.Note).To(ContainSubstring(id))
	g.Eventually(func() (string, error) { return run(second, "cat file") }).WithTimeout(4*time.Minute).Should(Equal("kept\n"),
		"the VM booted again over its disk")

	// Suspended through its spec, the VM keeps its memory: no QEMU of it
	// on the node meanwhile, and after the resume a counter that lived
	// only in memory goes on, its PID unchanged, not started again.
	_, err = run(second, counter)
	g.Expect(err).NotTo(HaveOccurred())
	count := func() (int, error) {
		out, err := run(second, "cat /tmp/count 2>/dev/null || echo 0")
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(out))
	}
	g.Eventually(count).WithTimeout(time.Minute).Should(BeNumerically(">", 5))
	counterPID, err := run(second, "cat /tmp/counter.pid")
	g.Expect(err).NotTo(HaveOccurred())
	b, err = os.ReadFile(filepath.Join(stateDir, "vm", "sandboxes", id, "qemu.pid"))
	g.Expect(err).NotTo(HaveOccurred())
	qemu := strings.TrimSpace(string(b))
	updateSandbox(t, ns, "guest", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Suspended = true })
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "guest"))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonSuspended))
		g.Expect(c.Message).To(ContainSubstring("with its memory"))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	_, err = os.Stat("/proc/" + qemu)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "no QEMU of the suspended VM on the node: %v", err)
	updateSandbox(t, ns, "guest", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Suspended = false })
	g.Eventually(func() (string, error) { return run(second, "cat /tmp/counter.pid") }).WithTimeout(2*time.Minute).Should(Equal(counterPID),
		"the VM is restored, not booted: its counter's PID")
	before, err := count()
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(count).WithTimeout(time.Minute).Should(BeNumerically(">", before+3), "the counter goes on")
	g.Expect(waitEvent(t, ns, "guest", corev1.EventTypeNormal, playgroundv1alpha1.ReasonProvisioned).Note).To(ContainSubstring("Restored"))
}
