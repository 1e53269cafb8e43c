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
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// workerSupervisor is what the node agent asks of the kernel's worker
// service (hostagent.Workers).
type workerSupervisor interface {
	SetWorker(ctx context.Context, sandboxID string, spec *hostagent.WorkerSpec) error
	WorkerStatus(ctx context.Context, sandboxID string) (backend.WorkerStatus, error)
	WorkerLog(ctx context.Context, sandboxID string, limit int) ([]byte, error)
}

// The agent's rights for native workers: it reads the WorkerMappings of
// its sandboxes' tenants and reports the worker it supervises in their
// status.
//
// +kubebuilder:rbac:groups=playground.dev,resources=workermappings,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=workermappings/status,verbs=patch

// maxWorkerOutput bounds the end of a worker's output the agent copies into
// its mapping's status, as a Pod's termination message is bounded.
const maxWorkerOutput = 2 << 10

// ReasonWorkerRestarted is the Event of a sandbox worker started again
// after it exited.
const ReasonWorkerRestarted = "WorkerRestarted"

// workerReconciler keeps the native worker of each of the node's
// Sandboxes as their tenant's WorkerMapping says (a sandbox destination),
// and reports it in the mapping's status.worker. It reconciles Sandboxes:
// a mapping's change or deletion queues the Sandboxes of its tenant, so an
// agent that starts again also stops the worker of a mapping deleted
// meanwhile.
type workerReconciler struct {
	r     *sandboxReconciler
	every time.Duration
}

func setupWorkers(mgr manager.Manager, r *sandboxReconciler, opts Options) error {
	w := &workerReconciler{r: r, every: opts.ResyncInterval}
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.Sandbox{}).
		Watches(&playgroundv1alpha1.WorkerMapping{}, handler.EnqueueRequestsFromMapFunc(w.sandboxesOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).
		Named("nodeagent-worker").
		Complete(w)
}

// sandboxesOf maps a WorkerMapping to the node's Sandboxes of its tenant.
func (w *workerReconciler) sandboxesOf(ctx context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*playgroundv1alpha1.WorkerMapping)
	if !ok {
		return nil
	}
	var list playgroundv1alpha1.SandboxList
	if err := w.r.client.List(ctx, &list, client.InNamespace(m.Namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range list.Items {
		if s.Spec.TenantRef.Name == m.Spec.TenantRef.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
		}
	}
	return reqs
}

// mappingOf is the WorkerMapping whose worker the sandbox runs: the one
// mapping of its tenant with a sandbox destination that is neither being
// deleted nor stalled (in conflict with another, or for a tenant whose
// catalog is not workers: the manager says so in its conditions). Nil when
// there is none, or more than one.
func (w *workerReconciler) mappingOf(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) (*playgroundv1alpha1.WorkerMapping, error) {
	var list playgroundv1alpha1.WorkerMappingList
	if err := w.r.client.List(ctx, &list, client.InNamespace(sbx.Namespace)); err != nil {
		return nil, err
	}
	var found *playgroundv1alpha1.WorkerMapping
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.TenantRef.Name != sbx.Spec.TenantRef.Name {
			continue
		}
		if found != nil {
			return nil, nil // two: neither is served
		}
		found = m
	}
	if found == nil || found.Spec.Destination.Sandbox == nil || !found.DeletionTimestamp.IsZero() ||
		meta.IsStatusConditionTrue(found.Status.Conditions, playgroundv1alpha1.StalledCondition) {
		return nil, nil
	}
	return found, nil
}

func (w *workerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := w.r.client.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if sbx.Spec.NodeName != w.r.node || !sbx.DeletionTimestamp.IsZero() || sbx.Spec.Suspended ||
		!meta.IsStatusConditionTrue(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition) {
		return ctrl.Result{}, nil // a worker goes with its sandbox; it starts once the sandbox runs
	}
	id, err := w.r.idOf(sbx)
	if err != nil || id == "" {
		return ctrl.Result{}, err
	}
	m, err := w.mappingOf(ctx, sbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if m == nil {
		return ctrl.Result{}, w.r.workers.SetWorker(ctx, id, nil)
	}
	if err := w.r.workers.SetWorker(ctx, id, workerSpecOf(sbx, m)); err != nil {
		return ctrl.Result{}, fmt.Errorf("setting the worker of sandbox %s: %w", id, err)
	}
	// Nothing tells the agent when a worker exits: look again, whatever
	// this report did (a failed one is logged, not backed off: the next
	// look reports afresh). The installation's admission policy lets this
	// node's agent write status.worker only once the manager has recorded
	// the sandbox's node in the mapping: until then there is nothing to do.
	if m.Status.NodeName != w.r.node {
		return ctrl.Result{RequeueAfter: w.every}, nil
	}
	if err := w.report(ctx, id, m); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Reporting the sandbox's worker", "id", id)
	}
	return ctrl.Result{RequeueAfter: w.every}, nil
}

// workerSpecOf is the worker of mapping m in sandbox sbx, with the
// environment the design fixes for it.
func workerSpecOf(sbx *playgroundv1alpha1.Sandbox, m *playgroundv1alpha1.WorkerMapping) *hostagent.WorkerSpec {
	d := m.Spec.Destination.Sandbox
	env := []string{
		"PATH=" + guestapi.DefaultPath,
		"HOME=" + guestapi.TenantHome,
		"USER=" + guestapi.TenantUser,
		"PERSONA=" + sbx.Spec.Persona,
		"PLAYGROUND_TENANT=" + sbx.Namespace + "/" + sbx.Spec.TenantRef.Name,
		"PILE=" + guestapi.PileDir + "/self.pile",
	}
	if sbx.Spec.Pile.SigningKey != nil {
		// In the pile before the sandbox is reported provisioned, which
		// the worker waits for.
		env = append(env, "TRIBLESPACE_KEY="+guestapi.PileDir+"/"+guestapi.SigningKeyFile)
	}
	for _, e := range d.Env {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, e.Name+"=") })
		env = append(env, e.Name+"="+e.Value)
	}
	return &hostagent.WorkerSpec{Argv: slices.Clone(d.Command), Env: env, Port: int(d.Port)}
}

// report applies the worker's state to the mapping's status.worker, when
// it changed, and records a restart as an Event.
func (w *workerReconciler) report(ctx context.Context, id string, m *playgroundv1alpha1.WorkerMapping) error {
	st, err := w.r.workers.WorkerStatus(ctx, id)
	if err != nil {
		return err
	}
	now := playgroundv1alpha1.WorkerProcessStatus{Running: st.Running, Restarts: int32(st.Restarts), LastExit: st.LastExit, Error: st.Error}
	if !st.LastExitTime.IsZero() {
		now.LastExitTime = &metav1.Time{Time: st.LastExitTime.Truncate(time.Second)}
	}
	prev := m.Status.Worker
	if prev != nil && prev.Running == now.Running && prev.Restarts == now.Restarts && prev.LastExit == now.LastExit &&
		prev.Error == now.Error && (prev.LastExitTime == nil) == (now.LastExitTime == nil) &&
		(prev.LastExitTime == nil || prev.LastExitTime.Equal(now.LastExitTime)) {
		return nil
	}
	// The output is read when the worker's state changes (it started,
	// exited, cannot start), as a Pod's termination message is: a chatty
	// worker costs no API writes.
	out, err := w.r.workers.WorkerLog(ctx, id, maxWorkerOutput)
	if err != nil {
		return err
	}
	now.Output = strings.ToValidUTF8(string(out), "\uFFFD")
	for len(now.Output) > maxWorkerOutput {
		_, n := utf8.DecodeRuneInString(now.Output)
		now.Output = now.Output[n:]
	}
	ac := playgroundv1alpha1ac.WorkerProcessStatus().WithRunning(now.Running).WithRestarts(now.Restarts).
		WithLastExit(now.LastExit).WithError(now.Error).WithOutput(now.Output)
	if now.LastExitTime != nil {
		ac.WithLastExitTime(*now.LastExitTime)
	}
	if err := w.r.client.Status().Apply(ctx, playgroundv1alpha1ac.WorkerMapping(m.Name, m.Namespace).
		WithStatus(playgroundv1alpha1ac.WorkerMappingStatus().WithWorker(ac)),
		client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("reporting the worker of %s/%s: %w", m.Namespace, m.Name, err)
	}
	if prev != nil && now.Restarts > prev.Restarts {
		w.r.recorder.Eventf(m, nil, corev1.EventTypeWarning, ReasonWorkerRestarted, "Restart",
			"The worker in sandbox %s on node %s exited (%s) and was started again (%d restarts)", id, w.r.node, now.LastExit, now.Restarts)
	}
	return nil
}
