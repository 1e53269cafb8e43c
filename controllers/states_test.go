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

package controllers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// TestRunningIsTheAgentsAlone: a sleep of a tenant's sandbox, as its agent
// reports it (the Running condition, in its own status apply), is that one
// write of the Sandbox's status: the manager's phase and Ready do not
// follow it, and the manager's reconcile of the Sandbox writes nothing.
// The Tenant mirrors it (SandboxRunning, the State column of kubectl get
// tenants) with the isolation its sandbox runs with, and mirrors the wake
// back.
func TestRunningIsTheAgentsAlone(t *testing.T) {
	ns := newNamespace(t)
	node := "states-" + rand.String(5)
	registerAgent(t, node, nil, time.Minute)
	const name = "sleeper"
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{})
	eventually(t, func(g Gomega) { g.Expect(getSandbox(g, ns, name).Spec.NodeName).To(Equal(node)) })

	// The agent's report, as the node agent applies it: every field it
	// owns.
	report := func(status metav1.ConditionStatus, reason, msg string) {
		cur := getSandbox(NewWithT(t), ns, name)
		now := metav1.Now()
		ac := playgroundv1alpha1ac.Sandbox(name, ns).WithStatus(playgroundv1alpha1ac.SandboxStatus().
			WithSandboxID("sbx-00000000000000000042").WithEndpoint("https://"+node+":9443").WithOpenHandles(0).
			WithConditions(
				metav1ac.Condition().WithType(playgroundv1alpha1.ProvisionedCondition).WithStatus(metav1.ConditionTrue).
					WithReason(playgroundv1alpha1.ReasonProvisioned).WithMessage("provisioned").WithObservedGeneration(cur.Generation).WithLastTransitionTime(now),
				metav1ac.Condition().WithType(playgroundv1alpha1.RunningCondition).WithStatus(status).
					WithReason(reason).WithMessage(msg).WithObservedGeneration(cur.Generation).WithLastTransitionTime(now)))
		if err := k8sClient.Status().Apply(context.Background(), ac, client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	mirrored := func(reason, msg string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			tn := getTenant(g, ns, name)
			c := tenantCondition(tn, playgroundv1alpha1.SandboxRunningCondition)
			g.Expect([]string{c.Reason, c.Message}).To(Equal([]string{reason, msg}))
			g.Expect(tn.Status.Isolation).To(Equal(playgroundv1alpha1.IsolationContainer), "the isolation its sandbox runs with")
			sbx := getSandbox(g, ns, name)
			g.Expect(sbx.Status.Phase).To(Equal(playgroundv1alpha1.SandboxDetached))
			g.Expect(conditionOf(sbx, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		})
	}
	const runs, sleeps = "Its processes run on node x", "Suspended at 2026-01-01T00:00:00Z after 30s without calls (spec.idleSuspend) with its memory"
	report(metav1.ConditionTrue, playgroundv1alpha1.ReasonRunning, runs)
	mirrored(playgroundv1alpha1.ReasonRunning, runs)
	settled := getSandbox(NewWithT(t), ns, name)

	// The same reconciler as the manager's, over a client that counts
	// its status writes.
	direct, err := client.NewWithWatch(restConfig, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int32
	counting := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			writes.Add(1)
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	r := &SandboxReconciler{Client: counting, Options: Options{}}
	r.Options.defaults()

	report(metav1.ConditionFalse, playgroundv1alpha1.ReasonIdleSuspended, sleeps)
	mirrored(playgroundv1alpha1.ReasonIdleSuspended, sleeps)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(settled)}); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("the manager wrote the status of a sandbox that went to sleep %d times", n)
	}
	g := NewWithT(t)
	after := getSandbox(g, ns, name)
	g.Expect(conditionOf(after, playgroundv1alpha1.ReadyCondition)).To(Equal(conditionOf(settled, playgroundv1alpha1.ReadyCondition)), "Ready follows no sleep")

	report(metav1.ConditionTrue, playgroundv1alpha1.ReasonRunning, runs)
	mirrored(playgroundv1alpha1.ReasonRunning, runs)
}
