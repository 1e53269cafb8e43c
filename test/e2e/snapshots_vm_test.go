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

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/backend/vm"
)

// TestVMSnapshotAndFork: the same flow on a vm tenant (TCG here): its
// snapshot holds its disk (not its memory, which the status says), and a
// Tenant that starts from it boots over a copy of the snapshot's files on
// the same node, its changes its own.
func TestVMSnapshotAndFork(t *testing.T) {
	kernel, modules, root := os.Getenv("PLAYGROUND_VM_KERNEL"), os.Getenv("PLAYGROUND_VM_MODULES"), os.Getenv("PLAYGROUND_VM_ROOT")
	if kernel == "" || modules == "" || root == "" {
		t.Skip("PLAYGROUND_VM_KERNEL, PLAYGROUND_VM_MODULES and PLAYGROUND_VM_ROOT are not set: run eval \"$(hack/vm-image.sh)\" first (make test does)")
	}
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	stateDir := ocitest.StateDir(t)
	newVM := func() (*vm.Backend, error) {
		return vm.New(ctx, vm.Options{StateDir: filepath.Join(stateDir, "vm"), GuestBinary: ocitest.GuestBinary(t),
			Kernel: kernel, Modules: modules, Root: root, Accel: vm.AccelTCG})
	}
	t.Cleanup(func() {
		// After the agent stopped, before the state directory goes: no
		// QEMU outlives the test.
		be, err := newVM()
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ents, _ := os.ReadDir(filepath.Join(stateDir, "vm", "sandboxes"))
		for _, e := range ents {
			_ = be.Destroy(sctx, e.Name(), false)
		}
	})
	vmb, err := newVM()
	g.Expect(err).NotTo(HaveOccurred())
	n := &node{name: "vm-snap-1", labels: pool("vm-snap"), stateDir: stateDir, backends: []backend.Backend{ociBackend(t, stateDir), vmb}}
	startNode(t, n)
	ns := newNamespace(t)
	onVM := func(tn *playgroundv1alpha1.Tenant) {
		inPool("vm-snap")(tn)
		tn.Spec.Sandbox.Backend = playgroundv1alpha1.BackendVM
	}
	applyTenant(t, ns, "vsource", onVM)
	_, src := waitReadyWithin(t, ns, "vsource", 4*time.Minute)
	shell(t, src, "echo base > ~/note; mkdir -p /workspace/repo; echo code > /workspace/repo/main.go")

	snap := &playgroundv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vbase"},
		Spec:       playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "vsource"}},
	}
	g.Expect(k8sClient.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap)).To(Succeed())
		g.Expect(snap.Status.Phase).To(Equal(playgroundv1alpha1.SnapshotReady), "%+v", snap.Status.Conditions)
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Expect(snap.Status.Memory).To(BeFalse())
	g.Expect(meta.FindStatusCondition(snap.Status.Conditions, playgroundv1alpha1.ReadyCondition).Message).To(ContainSubstring("files only"))
	g.Expect(snap.Status.Backend).To(Equal(playgroundv1alpha1.BackendVM))

	applyTenant(t, ns, "vfork", func(tn *playgroundv1alpha1.Tenant) {
		onVM(tn)
		tn.Spec.Sandbox.FromSnapshot = "vbase"
	})
	_, f := waitReadyWithin(t, ns, "vfork", 4*time.Minute)
	g.Expect(f.Spec.NodeName).To(Equal(n.name))
	g.Expect(shell(t, f, "cat ~/note /workspace/repo/main.go; stat -c %U ~/note; echo fork > ~/mine")).To(Equal("base\ncode\nsandbox\n"))
	g.Expect(shell(t, src, "cat ~/mine 2>/dev/null; true")).To(BeEmpty())
	g.Expect(k8sClient.Delete(ctx, snap)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap))
	}, settle, 100*time.Millisecond).Should(BeTrue())
	g.Expect(shell(t, f, "cat ~/mine")).To(Equal("fork\n"))
}
