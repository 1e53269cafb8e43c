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

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// snapshotTaker is what the node agent asks of the kernel's snapshot
// service (hostagent.Snapshots).
type snapshotTaker interface {
	Snapshot(ctx context.Context, spec backend.Spec, snapID string) (backend.SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, class, snapID string) error
	Snapshots() (map[string][]string, error)
}

// +kubebuilder:rbac:groups=playground.dev,resources=sandboxsnapshots,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxsnapshots/status,verbs=patch

// snapshotReconciler takes the SandboxSnapshots the manager bound to this
// node (status.nodeName) and frees their disk when they are deleted (its
// finalizer). It writes, under AgentFieldOwner, status.snapshotID, memory,
// sizeBytes, takenAt and the Ready condition; the manager derives the
// phase from Ready.
type snapshotReconciler struct {
	*sandboxReconciler
	// perSandbox bounds the snapshots kept of one sandbox.
	perSandbox int
}

// snapshotRetry is when a snapshot that could not be taken is tried again.
const snapshotRetry = 30 * time.Second

func (r *snapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	snap := &playgroundv1alpha1.SandboxSnapshot{}
	if err := r.client.Get(ctx, req.NamespacedName, snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if snap.Status.NodeName != r.node {
		return ctrl.Result{}, nil
	}
	if !snap.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, snap)
	}
	if ready := meta.FindStatusCondition(snap.Status.Conditions, playgroundv1alpha1.ReadyCondition); snap.Status.SnapshotID != "" && ready != nil && ready.Status == metav1.ConditionTrue {
		return ctrl.Result{}, nil // taken
	}
	if !controllerutil.ContainsFinalizer(snap, playgroundv1alpha1.SnapshotFinalizer) {
		// Before anything is on the disk, so that nothing is left there.
		patch := client.MergeFromWithOptions(snap.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(snap, playgroundv1alpha1.SnapshotFinalizer)
		if err := r.client.Patch(ctx, snap, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	sbx := &playgroundv1alpha1.Sandbox{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: snap.Namespace, Name: snap.Spec.SandboxRef.Name}, sbx)
	if apierrors.IsNotFound(err) || err == nil && sbx.Spec.NodeName != r.node {
		return ctrl.Result{}, r.setReady(ctx, snap, nil, fmt.Errorf("sandbox %s is not on node %s (deleted before its snapshot was taken?)", snap.Spec.SandboxRef.Name, r.node))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	id, err := r.idOf(sbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if id == "" || id != snap.Status.SandboxID {
		return ctrl.Result{}, r.setReady(ctx, snap, nil, fmt.Errorf("sandbox %s of node %s is not the one the snapshot names (%s): it was re-created", sbx.Name, r.node, snap.Status.SandboxID))
	}
	if kept, err := r.keptOf(ctx, id); err != nil {
		return ctrl.Result{}, err
	} else if kept >= r.perSandbox {
		if err := r.setReady(ctx, snap, nil, fmt.Errorf("node %s keeps %d snapshots of sandbox %s already, the most it keeps of one sandbox (the agent's --snapshots-per-sandbox): delete one", r.node, kept, id)); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: snapshotRetry}, nil
	}
	snapID := string(snap.UID)
	info, err := r.snapshots.Snapshot(ctx, specOf(id, sbx), snapID)
	if err != nil {
		if ctx.Err() != nil {
			return ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Error(err, "Taking a snapshot", "snapshot", klog.KObj(snap))
		if werr := r.setReady(ctx, snap, nil, err); werr != nil {
			return ctrl.Result{}, werr
		}
		return ctrl.Result{RequeueAfter: snapshotRetry}, nil
	}
	snap.Status.SnapshotID, snap.Status.Memory, snap.Status.SizeBytes = snapID, info.Memory, info.Bytes
	now := metav1.Now()
	snap.Status.TakenAt = &now
	what := "its files and its processes' memory"
	if !info.Memory {
		what = "its files only: " + info.Note
	}
	r.recorder.Eventf(snap, sbx, corev1.EventTypeNormal, playgroundv1alpha1.ReasonTaken, "Snapshot",
		"Took a snapshot of sandbox %s on node %s (%s)", id, r.node, what)
	return ctrl.Result{}, r.setReady(ctx, snap, &info, nil)
}

// setReady applies what the agent owns of snap's status: taken (info),
// or why not (err).
func (r *snapshotReconciler) setReady(ctx context.Context, snap *playgroundv1alpha1.SandboxSnapshot, info *backend.SnapshotInfo, err error) error {
	c := metav1.Condition{Type: playgroundv1alpha1.ReadyCondition, ObservedGeneration: snap.Generation}
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, playgroundv1alpha1.ReasonSnapshotFailed, truncate(err.Error())
	case info.Memory:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, playgroundv1alpha1.ReasonTaken,
			fmt.Sprintf("Kept on node %s: the sandbox's files and its processes' memory; forks go on from where its processes were", r.node)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, playgroundv1alpha1.ReasonTaken,
			truncate(fmt.Sprintf("Kept on node %s: the sandbox's files only (%s); forks start their processes afresh", r.node, info.Note))
	}
	conds := slices.Clone(snap.Status.Conditions)
	meta.SetStatusCondition(&conds, c)
	status := playgroundv1alpha1ac.SandboxSnapshotStatus().
		WithConditions(pgreconcile.ApplyConditions(conds, playgroundv1alpha1.ReadyCondition)...)
	if err == nil {
		status.WithSnapshotID(snap.Status.SnapshotID).WithMemory(snap.Status.Memory).
			WithSizeBytes(snap.Status.SizeBytes).WithSize(playgroundv1alpha1.ByteSize(snap.Status.SizeBytes)).WithTakenAt(*snap.Status.TakenAt)
	}
	aerr := r.client.Status().Apply(ctx, playgroundv1alpha1ac.SandboxSnapshot(snap.Name, snap.Namespace).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership)
	if apierrors.IsNotFound(aerr) {
		return nil
	}
	return aerr
}

// keptOf counts the snapshots this node keeps of sandbox id: taken, not
// deleted.
func (r *snapshotReconciler) keptOf(ctx context.Context, id string) (int, error) {
	var list playgroundv1alpha1.SandboxSnapshotList
	if err := r.client.List(ctx, &list); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		s := &list.Items[i]
		if s.Status.NodeName == r.node && s.Status.SandboxID == id && s.Status.SnapshotID != "" && s.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n, nil
}

// release frees a deleted snapshot's disk and lets the object go.
func (r *snapshotReconciler) release(ctx context.Context, snap *playgroundv1alpha1.SandboxSnapshot) error {
	if !controllerutil.ContainsFinalizer(snap, playgroundv1alpha1.SnapshotFinalizer) {
		return nil
	}
	// Whatever an attempt wrote is under the object's UID, taken or not.
	if err := r.snapshots.DeleteSnapshot(ctx, string(snap.Status.Backend), string(snap.UID)); err != nil {
		return fmt.Errorf("deleting snapshot %s from node %s: %w", klog.KObj(snap), r.node, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted a snapshot", "snapshot", klog.KObj(snap))
	patch := client.MergeFromWithOptions(snap.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(snap, playgroundv1alpha1.SnapshotFinalizer)
	return client.IgnoreNotFound(r.client.Patch(ctx, snap, patch))
}

// snapshotFor is the on-node ID of the Ready snapshot sbx starts from, or
// why sbx waits (errWaitingForSnapshot).
func (r *sandboxReconciler) snapshotFor(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) (string, error) {
	snap := &playgroundv1alpha1.SandboxSnapshot{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: sbx.Namespace, Name: sbx.Spec.FromSnapshot}, snap)
	switch {
	case apierrors.IsNotFound(err):
		return "", &errWaitingForSnapshot{fmt.Sprintf("SandboxSnapshot %s does not exist in namespace %s", sbx.Spec.FromSnapshot, sbx.Namespace)}
	case err != nil:
		return "", err
	case snap.Status.NodeName != r.node:
		return "", &errWaitingForSnapshot{fmt.Sprintf("SandboxSnapshot %s is not kept on node %s", snap.Name, r.node)}
	case snap.Status.Phase != playgroundv1alpha1.SnapshotReady || snap.Status.SnapshotID == "":
		return "", &errWaitingForSnapshot{fmt.Sprintf("SandboxSnapshot %s is not Ready yet", snap.Name)}
	}
	return snap.Status.SnapshotID, nil
}

// errWaitingForSnapshot: a fork waits for its snapshot.
type errWaitingForSnapshot struct{ msg string }

func (e *errWaitingForSnapshot) Error() string { return e.msg }

// waitForSnapshot says, in the Provisioned condition, why sbx waits for
// its snapshot, and looks again later.
func (r *sandboxReconciler) waitForSnapshot(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, err error) error {
	var w *errWaitingForSnapshot
	if !errors.As(err, &w) {
		return err
	}
	if serr := r.setProvisioned(ctx, sbx, metav1.ConditionFalse, playgroundv1alpha1.ReasonWaitingForSnapshot,
		w.msg+": the sandbox starts from it once it is"); serr != nil {
		return serr
	}
	return pgreconcile.Wait(snapshotRetry, "%s", w.msg)
}

// sweepSnapshots deletes, once the agent's cache has synced, the
// snapshots on the node's disk that no SandboxSnapshot kept on this node
// names: left when an object went while no agent ran (its finalizer
// removed by hand, a node forgotten and come back), they would hold the
// node's disk with nothing to free it.
type sweepSnapshots struct {
	r     *sandboxReconciler
	cache interface {
		WaitForCacheSync(context.Context) bool
	}
}

func (s *sweepSnapshots) Start(ctx context.Context) error {
	if !s.cache.WaitForCacheSync(ctx) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx).WithName("snapshot-sweep")
	// The disk first: a snapshot is written only after its object is in
	// the cache, so every one found here that an object names is in the
	// list read after it, and one taken meanwhile is not found here.
	onDisk, err := s.r.snapshots.Snapshots()
	if err != nil {
		log.Error(err, "Listing the node's snapshots; they are not swept")
		return nil
	}
	var list playgroundv1alpha1.SandboxSnapshotList
	if err := s.r.client.List(ctx, &list); err != nil {
		log.Error(err, "Listing the SandboxSnapshots; the node's snapshots are not swept")
		return nil
	}
	named := map[string]bool{}
	for i := range list.Items {
		if list.Items[i].Status.NodeName == s.r.node {
			named[string(list.Items[i].UID)] = true
		}
	}
	for class, ids := range onDisk {
		for _, id := range ids {
			if named[id] {
				continue
			}
			if err := s.r.snapshots.DeleteSnapshot(ctx, class, id); err != nil {
				log.Error(err, "Deleting a snapshot no SandboxSnapshot names", "backend", class, "snapshot", id)
				continue
			}
			log.Info("Deleted a snapshot no SandboxSnapshot names", "backend", class, "snapshot", id)
		}
	}
	return nil
}

// setupSnapshots registers the snapshot reconciler (the SandboxSnapshots
// bound to this node) and the sweep of the snapshots none names.
func setupSnapshots(mgr ctrl.Manager, r *sandboxReconciler, perSandbox int) error {
	if err := mgr.Add(&sweepSnapshots{r: r, cache: mgr.GetCache()}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.SandboxSnapshot{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.(*playgroundv1alpha1.SandboxSnapshot).Status.NodeName == r.node
		}))).
		Named("nodeagent-snapshot").
		Complete(&snapshotReconciler{sandboxReconciler: r, perSandbox: perSandbox})
}
