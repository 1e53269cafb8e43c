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
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// childChangedPriority is the queue priority of a pass that a change of an
// object's child asks for (a Tenant's Sandbox that became Ready). In a
// burst the queue holds the first passes of every new object; a pass that
// can finish an object already under way goes before them, so that the
// objects become Ready in about the order they came, each soon after its
// child, instead of all of them after the last first pass. The work is the
// same; only its order changes.
const childChangedPriority = 10

// onChildChange enqueues what h does, at childChangedPriority, for the
// updates that change a child (a new resourceVersion); its creates,
// deletes and resyncs keep their priority. The queue must take priorities
// (controller-runtime's default queue does); otherwise h is left as is.
func onChildChange(h handler.EventHandler) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: h.Create,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if ok && changed(e.ObjectOld, e.ObjectNew) {
				q = withPriority{pq, childChangedPriority}
			}
			h.Update(ctx, e, q)
		},
		DeleteFunc:  h.Delete,
		GenericFunc: h.Generic,
	}
}

func changed(old, cur client.Object) bool {
	return old != nil && cur != nil && old.GetResourceVersion() != cur.GetResourceVersion()
}

// withPriority adds at priority what is added without one.
type withPriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (q withPriority) Add(r reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, r) }

func (q withPriority) AddAfter(r reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, r)
}

func (q withPriority) AddRateLimited(r reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, r)
}

func (q withPriority) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = &q.priority
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}
