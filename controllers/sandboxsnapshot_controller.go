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
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// SnapshotReconciler is the manager's side of SandboxSnapshots: it binds
// each to its sandbox's node (status.nodeName, sandboxID, backend and
// isolation, once, from the Sandbox, with the Bound condition), derives
// the phase from the Ready condition its node's agent writes, and deletes
// a snapshot whose spec.expireAfter has passed. The agent of the node
// takes the snapshot and frees its disk (its finalizer).
type SnapshotReconciler struct {
	client.Client
	Options Options
}

// snapshotIndex indexes SandboxSnapshots by spec.sandboxRef.name.
const snapshotIndex = "spec.sandboxRef.name"

// snapshotConditions are the manager's conditions of a SandboxSnapshot.
var snapshotConditions = []string{playgroundv1alpha1.BoundCondition}

// +kubebuilder:rbac:groups=playground.dev,resources=sandboxsnapshots,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxsnapshots/status,verbs=patch

// Reconcile binds, summarises or expires one SandboxSnapshot.
func (r *SnapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var snap playgroundv1alpha1.SandboxSnapshot
	if err := r.Get(ctx, req.NamespacedName, &snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !snap.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // its agent frees its disk
	}
	if after := snap.Spec.ExpireAfter; after != nil && snap.Status.TakenAt != nil {
		left := snap.Status.TakenAt.Add(after.Duration).Sub(r.Options.Now())
		if left <= 0 {
			ctrl.LoggerFrom(ctx).Info("Deleting an expired snapshot", "snapshot", klog.KObj(&snap), "takenAt", snap.Status.TakenAt.Time)
			return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, &snap, client.Preconditions{UID: &snap.UID}))
		}
		res, err := r.bind(ctx, &snap)
		if err == nil && (res.RequeueAfter == 0 || left < res.RequeueAfter) {
			res.RequeueAfter = left
		}
		return res, err
	}
	return r.bind(ctx, &snap)
}

// bind writes what the manager owns of snap's status.
func (r *SnapshotReconciler) bind(ctx context.Context, snap *playgroundv1alpha1.SandboxSnapshot) (ctrl.Result, error) {
	st := snap.Status
	bound := condition(playgroundv1alpha1.BoundCondition, true, playgroundv1alpha1.ReasonBound, "")
	if st.NodeName == "" {
		// Bound once: the snapshot is kept where it was taken, whatever
		// becomes of its sandbox.
		var sbx playgroundv1alpha1.Sandbox
		err := r.Get(ctx, client.ObjectKey{Namespace: snap.Namespace, Name: snap.Spec.SandboxRef.Name}, &sbx)
		switch {
		case apierrors.IsNotFound(err):
			bound = condition(playgroundv1alpha1.BoundCondition, false, playgroundv1alpha1.ReasonSandboxNotFound,
				fmt.Sprintf("Sandbox %s does not exist in namespace %s: create it, or correct spec.sandboxRef", snap.Spec.SandboxRef.Name, snap.Namespace))
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("reading sandbox %s of snapshot %s: %w", snap.Spec.SandboxRef.Name, klog.KObj(snap), err)
		case sbx.Spec.NodeName == "" || sbx.Status.SandboxID == "":
			bound = condition(playgroundv1alpha1.BoundCondition, false, playgroundv1alpha1.ReasonSandboxNotProvisioned,
				fmt.Sprintf("Sandbox %s is not provisioned on a node yet: the snapshot is taken once it is", sbx.Name))
		default:
			st.NodeName, st.SandboxID = sbx.Spec.NodeName, sbx.Status.SandboxID
			st.Backend, st.Isolation = playgroundv1alpha1.BackendClassOf(&sbx), sbx.Status.Isolation
		}
	}
	if bound.Status == metav1.ConditionTrue {
		bound.Message = fmt.Sprintf("Taken and kept on node %s, of sandbox %s", st.NodeName, st.SandboxID)
	}
	conds := slices.Clone(snap.Status.Conditions)
	meta.SetStatusCondition(&conds, bound)
	phase := playgroundv1alpha1.SnapshotPending
	if ready := meta.FindStatusCondition(snap.Status.Conditions, playgroundv1alpha1.ReadyCondition); ready != nil {
		switch {
		case ready.Status == metav1.ConditionTrue:
			phase = playgroundv1alpha1.SnapshotReady
		case ready.Reason == playgroundv1alpha1.ReasonSnapshotFailed:
			phase = playgroundv1alpha1.SnapshotFailed
		}
	}
	if phase == snap.Status.Phase && st.NodeName == snap.Status.NodeName && pgreconcile.ConditionsHold(snap.Status.Conditions, conds, snapshotConditions...) {
		return ctrl.Result{}, nil
	}
	status := playgroundv1alpha1ac.SandboxSnapshotStatus().
		WithConditions(pgreconcile.ApplyConditions(conds, snapshotConditions...)...).
		WithPhase(phase)
	if st.NodeName != "" {
		status.WithNodeName(st.NodeName).WithSandboxID(st.SandboxID).WithBackend(st.Backend)
		if st.Isolation != "" {
			status.WithIsolation(st.Isolation)
		}
	}
	err := r.Status().Apply(ctx, playgroundv1alpha1ac.SandboxSnapshot(snap.Name, snap.Namespace).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.SnapshotControllerFieldOwner), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("applying the status of snapshot %s: %w", klog.KObj(snap), err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler; a Sandbox's changes (bound,
// provisioned) reach the snapshots that name it.
func (r *SnapshotReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &playgroundv1alpha1.SandboxSnapshot{}, snapshotIndex, func(o client.Object) []string {
		return []string{o.(*playgroundv1alpha1.SandboxSnapshot).Spec.SandboxRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.SandboxSnapshot{}).
		Watches(&playgroundv1alpha1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.snapshotsOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Workers}).
		Named("sandboxsnapshot").
		Complete(r)
}

// snapshotsOf maps a Sandbox to the snapshots of it not bound yet.
func (r *SnapshotReconciler) snapshotsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list playgroundv1alpha1.SandboxSnapshotList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{snapshotIndex: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Status.NodeName == "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
