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
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/agentlease"
)

// nodeDelivery is what the manager's hand-overs of a Sandbox's secrets
// to its node (the signing key, the registry credentials) share: the
// node's agent is found from its Lease; a hand-over that agent process
// already has is not made again (what is compared is a fingerprint,
// never the secret); a failure is said only once it persists; and the
// Sandbox's condition says what keeps the secret from its node.
type nodeDelivery struct {
	// delivered is what each Sandbox (by UID) was last given, and the
	// agent process it went to.
	mu        sync.Mutex
	delivered map[types.UID]keyDelivery
	// failing says since when deliveries to a Sandbox's node fail.
	failing failing
}

type keyDelivery struct {
	fingerprint string
	agent       time.Time
}

// deliveryKind says which delivery it is.
type deliveryKind struct {
	// condition is the Sandbox condition, applied as fieldOwner;
	// undelivered its reason when the node's agent does not take what it
	// is handed, and action the Events' action.
	condition, fieldOwner, undelivered, action string
}

// deliveryDeps are the delivery's kind and the reconciler's clients it
// uses.
type deliveryDeps struct {
	deliveryKind
	client         client.Client
	recorder       recorder.EventRecorder
	agents         AgentClients
	leaseNamespace string
}

// handOver is what a Sandbox's node is to be given.
type handOver struct {
	// fingerprint identifies it without holding it; "" is nothing left to
	// give: the node is told to drop what it holds, then the Sandbox is
	// forgotten.
	fingerprint string
	// what names it in a message: "the sandbox's signing key".
	what string
	// send hands it to the node's agent.
	send func(ctx context.Context, c *agentapi.Client) error
}

// fetch reads the Sandbox req names: nil when it is gone or going, and
// then forgotten (the node's agent drops what it was given itself when it
// sees the deletion).
func (d *nodeDelivery) fetch(ctx context.Context, c client.Client, req ctrl.Request) (*playgroundv1alpha1.Sandbox, error) {
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := c.Get(ctx, req.NamespacedName, sbx); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !sbx.DeletionTimestamp.IsZero() {
		d.forget(sbx.UID)
		return nil, nil
	}
	return sbx, nil
}

// last is what sandbox uid was last given, if anything.
func (d *nodeDelivery) last(uid types.UID) (keyDelivery, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, ok := d.delivered[uid]
	return k, ok
}

// forget drops what is known of sandbox uid: it is gone, or has nothing
// left to be given.
func (d *nodeDelivery) forget(uid types.UID) {
	d.mu.Lock()
	delete(d.delivered, uid)
	d.mu.Unlock()
	d.failing.clear(uid)
}

// report sets the Sandbox's condition (False with reason and msg, or none
// for reason ""), and records a Warning Event when it turns to a refusal
// or its message changes.
func (d *nodeDelivery) report(ctx context.Context, deps deliveryDeps, sbx *playgroundv1alpha1.Sandbox, reason, msg string) error {
	changed, err := setDelivery(ctx, deps.client, sbx, deps.fieldOwner, deps.condition, reason, msg)
	if changed && reason != "" {
		deps.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, deps.action, "%s", truncate(msg, maxEventNote))
	}
	return err
}

// toNode hands h to the agent of sbx's node, unless that agent process
// has it already, and says in sbx's condition what keeps it from the
// node; done is the result when nothing failed (a refresh, or none).
func (d *nodeDelivery) toNode(ctx context.Context, deps deliveryDeps, sbx *playgroundv1alpha1.Sandbox, h handOver, done ctrl.Result) (ctrl.Result, error) {
	node := sbx.Spec.NodeName
	if node == "" || deps.agents == nil {
		// Bound later: its spec changes then. (A manager without a way
		// to reach the agents delivers nothing, and says only what
		// cannot be used.)
		return done, d.report(ctx, deps, sbx, "", "")
	}
	lease := &coordinationv1.Lease{}
	if err := deps.client.Get(ctx, client.ObjectKey{Namespace: deps.leaseNamespace, Name: agentlease.Name(node)}, lease); err != nil {
		if apierrors.IsNotFound(err) { // no agent yet: its Lease's creation brings the Sandbox back
			return done, d.report(ctx, deps, sbx, "", "")
		}
		return ctrl.Result{}, err
	}
	reg, err := agentlease.FromLease(lease)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Lease of node %s's agent: %w", node, err)
	}
	if reg.Endpoint == "" {
		return done, d.report(ctx, deps, sbx, "", "") // registered later: its Lease changes then
	}
	if last, ok := d.last(sbx.UID); ok && last.fingerprint == h.fingerprint && last.agent.Equal(reg.Started) {
		return done, d.report(ctx, deps, sbx, "", "")
	}
	if err := d.send(ctx, deps, node, reg.Endpoint, h); err != nil {
		log.FromContext(ctx).Info("Cannot deliver "+h.what+"; trying again", "node", node, "error", err.Error())
		// An agent whose cache lags (not found), or that restarts, takes
		// it at a retry: only a failure that persists is said.
		reason, msg := "", ""
		if d.failing.persists(sbx.UID, time.Now()) && agentapi.CodeOf(err) != agentapi.CodeNotFound {
			reason = deps.undelivered
			msg = fmt.Sprintf("The agent of node %s does not take %s (tried again): %v", node, h.what, err)
		}
		if rerr := d.report(ctx, deps, sbx, reason, msg); rerr != nil {
			return ctrl.Result{}, errors.Join(err, rerr)
		}
		return ctrl.Result{}, err
	}
	d.failing.clear(sbx.UID)
	if h.fingerprint == "" {
		d.forget(sbx.UID) // told to drop it: nothing more to say
		return ctrl.Result{}, d.report(ctx, deps, sbx, "", "")
	}
	d.mu.Lock()
	if d.delivered == nil {
		d.delivered = map[types.UID]keyDelivery{}
	}
	d.delivered[sbx.UID] = keyDelivery{fingerprint: h.fingerprint, agent: reg.Started}
	d.mu.Unlock()
	return done, d.report(ctx, deps, sbx, "", "")
}

func (d *nodeDelivery) send(ctx context.Context, deps deliveryDeps, node, endpoint string, h handOver) error {
	c, err := deps.agents.Client(ctx, node, endpoint)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return h.send(ctx, c)
}

// setupDelivery registers a delivery's reconciler: a Sandbox is
// reconciled when its spec or node change, and every Sandbox of a node
// whose agent started anew (it keeps what it was given in memory) that
// wants the delivery.
func setupDelivery(mgr ctrl.Manager, name string, r reconcile.Reconciler, c client.Reader, o Options, wants func(*playgroundv1alpha1.Sandbox) bool) error {
	sandboxChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox), e.ObjectNew.(*playgroundv1alpha1.Sandbox)
		return o.Generation != n.Generation || o.Spec.NodeName != n.Spec.NodeName || !n.DeletionTimestamp.IsZero()
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&playgroundv1alpha1.Sandbox{}, builder.WithPredicates(sandboxChanged)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(sandboxesOfNode(c, o.LeaseNamespace, wants)),
			builder.WithPredicates(agentStarted)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Workers}).
		Complete(r)
}
