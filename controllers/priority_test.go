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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// TestSandboxChangeGoesFirst: in a burst, a Tenant whose Sandbox changed
// (became Ready) is reconciled before the Tenants queued before it for
// their first pass, so that it is Ready soon after its sandbox; a resync
// of a Sandbox (nothing changed) waits its turn.
func TestSandboxChangeGoesFirst(t *testing.T) {
	gvk := playgroundv1alpha1.GroupVersion.WithKind("Tenant")
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gvk, meta.RESTScopeNamespace)
	h := onChildChange(handler.EnqueueRequestForOwner(Scheme(), mapper, &playgroundv1alpha1.Tenant{}, handler.OnlyControllerOwner()))

	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	sandboxOf := func(tenant, rv string) *playgroundv1alpha1.Sandbox {
		return &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: tenant, ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: tenant, UID: types.UID(tenant), Controller: ptr.To(true)}}}}
	}
	for _, name := range []string{"new-1", "new-2", "new-3"} {
		q.Add(req(name)) // first passes of new Tenants, as their creates enqueue them
	}
	ctx := context.Background()
	h.Update(ctx, event.UpdateEvent{ObjectOld: sandboxOf("resynced", "5"), ObjectNew: sandboxOf("resynced", "5")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: sandboxOf("ready", "7"), ObjectNew: sandboxOf("ready", "8")}, q)

	deadline := time.Now().Add(10 * time.Second)
	for q.Len() < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // adds reach the queue through a buffer
	}
	if n := q.Len(); n != 5 {
		t.Fatalf("the queue holds %d requests, want 5", n)
	}
	var got []string
	for range 5 {
		r, _, shutdown := q.GetWithPriority()
		if shutdown {
			t.Fatal("the queue shut down")
		}
		got = append(got, r.Name)
		q.Done(r)
	}
	want := []string{"ready", "new-1", "new-2", "new-3", "resynced"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("reconciled in the order %v, want %v", got, want)
		}
	}
}
