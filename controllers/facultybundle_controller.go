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
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/eventseries"
	"github.com/playground-dev/playground/internal/fingerprint"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// Condition and Event reasons of FacultyBundles. Events of a transition use
// the reason of the Ready condition it leads to; FingerprintChanged and
// NodeGone are Events only.
const (
	// ReasonBuilt: Ready=True, every node that needs the bundle has a
	// ready build of the current source.
	ReasonBuilt = playgroundv1alpha1.ReasonBuilt
	// ReasonNotNeeded: Ready=True, no bound Sandbox lists the bundle, so
	// no node has to build it.
	ReasonNotNeeded = "NotNeeded"
	// ReasonBuilding: Ready=False, some node that needs the bundle has no
	// ready build of the current source yet; the message names those
	// nodes with what their agents report. (A node whose build failed
	// makes it Stalled with its reason, BuildFailed, SourceFailed or
	// NoBuildCache.)
	ReasonBuilding = playgroundv1alpha1.ReasonBuilding
	// ReasonSourceNotFound (Stalled): the source ConfigMap does not exist.
	ReasonSourceNotFound = "SourceNotFound"
	// ReasonInvalidSource (Stalled): the source cannot be fingerprinted.
	ReasonInvalidSource = "InvalidSource"
	// ReasonSourceError: reading the source failed; retried.
	ReasonSourceError = "SourceError"
	// ReasonFingerprintChanged: the source's fingerprint changed (or was
	// computed for the first time); nodes build the new one.
	ReasonFingerprintChanged = "FingerprintChanged"
	// ReasonNodeGone: a node's entry of status.nodes was removed because
	// the node is gone (see NodeGoneAfter).
	ReasonNodeGone = "NodeGone"
)

// NodeGoneAfter is how long a node must have neither a Node object nor a
// renewed agent registration before the manager removes its entry from
// the bundles' status.nodes. An agent that is only restarting renews its
// registration long before; one that comes back later reports its entry
// again.
const NodeGoneAfter = 10 * time.Minute

const (
	// bundleConfigMapIndex indexes FacultyBundles by the name of their
	// source ConfigMap (in their namespace).
	bundleConfigMapIndex = "spec.source.configMap.name"
	// sandboxFacultyIndex indexes Sandboxes by the bundles they list.
	sandboxFacultyIndex = "spec.faculties.name"
)

// maxNodesNamed bounds how many nodes a Ready message names, and
// maxNodeMessage how much of each agent's message it quotes: a condition's
// message is for a human, and the full report is in status.nodes.
const (
	maxNodesNamed  = 8
	maxNodeMessage = 512
)

// FacultyBundleReconciler publishes what the manager knows of each
// FacultyBundle: the fingerprint of a ConfigMap source, how many nodes
// have a ready build of the current source, and Ready, True when every
// node that needs the bundle (the nodes of the bound Sandboxes in its
// namespace that list it) has one. The agents build, and each applies its
// own node's entry of status.nodes (field owner AgentNodeFieldOwner); the
// manager never writes those entries, except to remove the entry of a
// node that is gone.
//
// The source ConfigMaps are watched as metadata only and read around the
// cache, so that the manager holds no ConfigMap's data in memory.
type FacultyBundleReconciler struct {
	client.Client
	// APIReader reads the source ConfigMaps and Nodes, which the cache
	// does not hold.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Options   Options
}

// The reconciler reads bundles and the Sandboxes that list them, applies
// the bundles' status, watches ConfigMaps (as metadata) and reads those
// that bundles name, reads agents' registrations (as the binder does) and
// Nodes to tell whether a node is gone.
// +kubebuilder:rbac:groups=playground.dev,resources=facultybundles,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=facultybundles/status,verbs=patch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=playground-system,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile publishes the status of one FacultyBundle.
func (r *FacultyBundleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fb playgroundv1alpha1.FacultyBundle
	if err := r.Get(ctx, req.NamespacedName, &fb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fb.DeletionTimestamp.IsZero() {
		// Nothing of the manager's to clean up; the agents report the
		// bundle as gone on the sandboxes that still list it.
		return ctrl.Result{}, nil
	}
	src, srcErr := r.fingerprint(ctx, &fb)
	needed, err := r.neededNodes(ctx, &fb)
	if err != nil {
		return ctrl.Result{}, err
	}
	recheck, pruneErr := r.pruneGoneNodes(ctx, &fb)

	ready, readyNodes := assess(&fb, src, needed)
	err = errors.Join(srcErr, pruneErr)
	if buildFailure(ready.Reason) {
		// Stalled: the same source fails the same way; a change of the
		// source or a node's report brings the bundle back.
		err = errors.Join(err, pgreconcile.Stall(ready.Reason, "%s", ready.Message))
	}
	if applyErr := r.applyStatus(ctx, &fb, src, ready, readyNodes, err); applyErr != nil {
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	res, err := pgreconcile.Result(err)
	if recheck > 0 && err == nil && (res.RequeueAfter == 0 || recheck < res.RequeueAfter) {
		res.RequeueAfter = recheck
	}
	return res, err
}

// source is what the reconciler knows of a bundle's source.
type source struct {
	// fingerprint is the current fingerprint of a ConfigMap source: ""
	// when it is unknown (no such ConfigMap) or for a host path, which
	// each node fingerprints itself.
	fingerprint string
	// hostPath is true for a host-path source.
	hostPath bool
}

// fingerprint computes the fingerprint of a ConfigMap source, exactly as
// the agents do (internal/fingerprint), from a read of the ConfigMap
// around the cache.
func (r *FacultyBundleReconciler) fingerprint(ctx context.Context, fb *playgroundv1alpha1.FacultyBundle) (source, error) {
	ref := fb.Spec.Source.ConfigMap
	if ref == nil {
		return source{hostPath: true}, nil
	}
	var cm corev1.ConfigMap
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: fb.Namespace, Name: ref.Name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return source{}, pgreconcile.Stall(ReasonSourceNotFound,
				"ConfigMap %s not found in namespace %s: create it with the bundle's source files, one key per file (see config/samples/playground_v1alpha1_facultybundle.yaml)",
				ref.Name, fb.Namespace)
		}
		// Keep the published fingerprint until the source can be read.
		return source{fingerprint: fb.Status.Fingerprint}, fmt.Errorf("reading the source ConfigMap %s/%s: %w", fb.Namespace, ref.Name, err)
	}
	var command []string
	if fb.Spec.Build != nil {
		command = fb.Spec.Build.Command
	}
	fp, err := fingerprint.Of(fingerprint.Inputs{
		Files:    fingerprint.ConfigMapFiles(cm.Data, cm.BinaryData),
		Command:  command,
		Binaries: fb.Spec.Binaries,
		Builder:  fingerprint.Builder,
	})
	if err != nil {
		return source{}, pgreconcile.Stall(ReasonInvalidSource, "ConfigMap %s cannot be a source tree: %v", ref.Name, err)
	}
	return source{fingerprint: fp}, nil
}

// neededNodes returns, sorted, the nodes of the Sandboxes in the bundle's
// namespace that list it and are bound (and not being deleted).
func (r *FacultyBundleReconciler) neededNodes(ctx context.Context, fb *playgroundv1alpha1.FacultyBundle) ([]string, error) {
	var list playgroundv1alpha1.SandboxList
	if err := r.List(ctx, &list, client.InNamespace(fb.Namespace), client.MatchingFields{sandboxFacultyIndex: fb.Name}); err != nil {
		return nil, fmt.Errorf("listing the sandboxes that list bundle %s: %w", klog.KObj(fb), err)
	}
	var nodes []string
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.NodeName != "" && s.DeletionTimestamp.IsZero() && !slices.Contains(nodes, s.Spec.NodeName) {
			nodes = append(nodes, s.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	return nodes, nil
}

// pruneGoneNodes removes the entries of status.nodes of nodes that are
// gone: no Node object, and no agent registration renewed within
// NodeGoneAfter. Nothing else would ever update or remove them (each is
// owned by its node's agent), and they would count in readyNodes. Both
// signs are needed: `playground-dev` and the tests run agents without Node
// objects, and a Lease outlives its node (agents leave it to expire).
//
// The entries belong to the agents' field managers, so an apply of the
// manager's cannot remove them: a JSON patch does, each removal guarded by
// a test of the entry's node name, so that a concurrent change of the list
// makes the patch fail instead of removing another entry.
//
// Nothing announces that a registration has lapsed for NodeGoneAfter: it
// returns when to look again (0 for never), the moment the first
// registration of a node with an entry would.
func (r *FacultyBundleReconciler) pruneGoneNodes(ctx context.Context, fb *playgroundv1alpha1.FacultyBundle) (time.Duration, error) {
	if len(fb.Status.Nodes) == 0 {
		return 0, nil
	}
	agents, err := agentRegistrations(ctx, r.Client, r.Options.LeaseNamespace)
	if err != nil {
		return 0, err
	}
	now := r.Options.Now()
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value,omitempty"`
	}
	var ops []op
	var gone []string
	var recheck time.Duration
	for i := len(fb.Status.Nodes) - 1; i >= 0; i-- {
		node := fb.Status.Nodes[i].NodeName
		if reg, ok := agents[node]; ok {
			if lapse := reg.Renewed.Add(reg.Duration).Add(NodeGoneAfter).Sub(now); lapse > 0 {
				if recheck == 0 || lapse+time.Second < recheck {
					recheck = lapse + time.Second
				}
				continue
			}
		}
		err := r.APIReader.Get(ctx, types.NamespacedName{Name: node}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}})
		switch {
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			return 0, fmt.Errorf("reading node %s: %w", node, err)
		}
		path := fmt.Sprintf("/status/nodes/%d", i)
		ops = append(ops, op{Op: "test", Path: path + "/nodeName", Value: node}, op{Op: "remove", Path: path})
		gone = append(gone, node)
	}
	if len(ops) == 0 {
		return recheck, nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return 0, err
	}
	if err := r.Status().Patch(ctx, fb, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(playgroundv1alpha1.FacultyBundleControllerFieldOwner)); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			// An agent changed the list meanwhile: look again.
			return 0, pgreconcile.Wait(time.Second, "status.nodes changed while removing the entries of gone nodes %s", strings.Join(gone, ", "))
		}
		return 0, fmt.Errorf("removing the entries of gone nodes %s from bundle %s: %w", strings.Join(gone, ", "), klog.KObj(fb), err)
	}
	for _, node := range gone {
		ctrl.LoggerFrom(ctx).Info("Removed the build report of a gone node", "bundle", klog.KObj(fb), "node", node)
		// Related to the node, so that each node's Event is its own.
		r.Recorder.Eventf(fb, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeNormal, ReasonNodeGone, "Prune",
			"Removed the build report of node %s: it has no Node object and its agent has not renewed its registration for %s", node, NodeGoneAfter)
	}
	fb.Status.Nodes = slices.DeleteFunc(fb.Status.Nodes, func(n playgroundv1alpha1.BundleNodeStatus) bool { return slices.Contains(gone, n.NodeName) })
	return recheck, nil
}

// current reports whether a node's entry is a ready build of the bundle's
// current spec and, for a ConfigMap source, of its current fingerprint.
func current(fb *playgroundv1alpha1.FacultyBundle, src source, n *playgroundv1alpha1.BundleNodeStatus) bool {
	if !n.Ready || n.ObservedGeneration != fb.Generation {
		return false
	}
	return src.hostPath || (src.fingerprint != "" && n.Fingerprint == src.fingerprint)
}

// assess derives Ready and readyNodes from the agents' entries and the
// nodes that need the bundle.
//
// With no node needing it, Ready is True (reason NotNeeded): the bundle is
// as its spec asks (nothing has to be built until a sandbox lists it), so
// `kubectl wait --for=condition=Ready` and kstatus-based tools see it
// settle instead of waiting for ever on a bundle no sandbox uses yet. A
// source problem (missing ConfigMap) still makes it False, through the
// Stalled error of the pass.
func assess(fb *playgroundv1alpha1.FacultyBundle, src source, needed []string) (metav1.Condition, int32) {
	entries := map[string]*playgroundv1alpha1.BundleNodeStatus{}
	var readyNodes int32
	for i := range fb.Status.Nodes {
		n := &fb.Status.Nodes[i]
		entries[n.NodeName] = n
		if current(fb, src, n) {
			readyNodes++
		}
	}
	if len(needed) == 0 {
		msg := "No bound Sandbox lists this bundle; a node builds it when a sandbox on it does"
		if readyNodes > 0 {
			msg += fmt.Sprintf(" (%d nodes have a ready build of the current source)", readyNodes)
		}
		return condition(playgroundv1alpha1.ReadyCondition, true, ReasonNotNeeded, msg), readyNodes
	}
	var waiting, failed []string
	failure := ""
	for _, node := range needed {
		n, ok := entries[node]
		switch {
		case !ok:
			waiting = append(waiting, "node "+node+": its agent has not reported a build yet")
		case current(fb, src, n):
		case n.ObservedGeneration != fb.Generation:
			waiting = append(waiting, fmt.Sprintf("node %s: its agent has not reported on generation %d yet", node, fb.Generation))
		case !n.Ready && buildFailure(n.Reason):
			failed = append(failed, "node "+node+": "+truncate(n.Message, maxNodeMessage))
			// A build failure says most: it is the one to fix first.
			if failure == "" || n.Reason == playgroundv1alpha1.ReasonBuildFailed {
				failure = n.Reason
			}
		case !n.Ready:
			why := n.Message
			if why == "" {
				why = "not ready"
			}
			waiting = append(waiting, "node "+node+": "+truncate(why, maxNodeMessage))
		default:
			waiting = append(waiting, fmt.Sprintf("node %s: has build %s, not the current %s yet", node, short(n.Fingerprint), short(src.fingerprint)))
		}
	}
	if len(failed) > 0 {
		msg := fmt.Sprintf("Cannot be built on %d of %d nodes that need it, and waiting does not help: %s. %s; a node tries a changed source at once, the same one again after its agent's --faculty-retry-after",
			len(failed), len(needed), strings.Join(nameFirst(failed), "; "), failureAdvice(failure))
		if len(waiting) > 0 {
			msg += fmt.Sprintf(" (not built yet on %d more: %s)", len(waiting), strings.Join(nameFirst(waiting), "; "))
		}
		return condition(playgroundv1alpha1.ReadyCondition, false, failure, msg), readyNodes
	}
	if len(waiting) == 0 {
		return condition(playgroundv1alpha1.ReadyCondition, true, ReasonBuilt,
			fmt.Sprintf("Built on every node that needs it (%d): %s", len(needed), nameSome(needed))), readyNodes
	}
	msg := fmt.Sprintf("Not built on %d of %d nodes that need it: ", len(waiting), len(needed))
	return condition(playgroundv1alpha1.ReadyCondition, false, ReasonBuilding, msg+strings.Join(nameFirst(waiting), "; ")), readyNodes
}

// buildFailure says whether a node's report of reason is a failure that
// waiting does not mend.
func buildFailure(reason string) bool {
	switch reason {
	case playgroundv1alpha1.ReasonBuildFailed, playgroundv1alpha1.ReasonSourceFailed, playgroundv1alpha1.ReasonNoBuildCache:
		return true
	}
	return false
}

// failureAdvice says what to do about a failure of reason.
func failureAdvice(reason string) string {
	switch reason {
	case playgroundv1alpha1.ReasonBuildFailed:
		return "Fix the source or spec.build.command (status.nodes holds each node's build log's tail)"
	case playgroundv1alpha1.ReasonSourceFailed:
		return "Fix the source the message names: create the ConfigMap, or have the cluster admin grant the host path's prefix (agent.faculties.hostPathPrefixes) or move the tools to a ConfigMap"
	default:
		return "The cluster admin gives the node's agent a faculty build cache (its state directory), or the sandboxes that list the bundle move to nodes that build"
	}
}

// nameFirst keeps the first maxNodesNamed of what nodes report.
func nameFirst(reports []string) []string {
	if len(reports) <= maxNodesNamed {
		return reports
	}
	return append(reports[:maxNodesNamed:maxNodesNamed], fmt.Sprintf("and %d more", len(reports)-maxNodesNamed))
}

// applyStatus writes the manager's part of the bundle's status with
// server-side apply under FacultyBundleControllerFieldOwner: Ready (with
// the Reconciling and Stalled that internal/reconcile derives from it and
// err), the fingerprint, readyNodes, and the observed generation once the
// pass settled. It never lists status.nodes, which the agents own entry by
// entry. An unchanged status is not written again. Events go out for a
// new fingerprint and for a Ready reason that changed.
func (r *FacultyBundleReconciler) applyStatus(ctx context.Context, fb *playgroundv1alpha1.FacultyBundle, src source, ready metav1.Condition, readyNodes int32, err error) error {
	conds := slices.Clone(fb.Status.Conditions)
	progressing := ready.Status != metav1.ConditionTrue
	pgreconcile.Summarize(&conds, fb.Generation, ready, progressing, err)
	observed := fb.Status.ObservedGeneration
	if pgreconcile.Settled(err) {
		observed = fb.Generation
	}
	if bundleStatusHolds(fb, src.fingerprint, readyNodes, observed, conds) {
		return nil
	}
	status := playgroundv1alpha1ac.FacultyBundleStatus().
		WithReadyNodes(readyNodes).
		WithConditions(pgreconcile.ApplyConditions(conds, bundleConditions...)...)
	if observed != 0 {
		status.WithObservedGeneration(observed)
	}
	if src.fingerprint != "" {
		status.WithFingerprint(src.fingerprint)
	}
	applyErr := r.Status().Apply(ctx, playgroundv1alpha1ac.FacultyBundle(fb.Name, fb.Namespace).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.FacultyBundleControllerFieldOwner), client.ForceOwnership)
	if apierrors.IsNotFound(applyErr) {
		return nil
	}
	if applyErr != nil {
		return fmt.Errorf("updating the status of bundle %s: %w", klog.KObj(fb), applyErr)
	}

	log := ctrl.LoggerFrom(ctx)
	// The events API folds Events of the same reason and action about the
	// same object into one series that keeps the first note: the notes say
	// nothing that a later Event of the series would make untrue (the
	// values are in status and in the log).
	if src.fingerprint != "" && src.fingerprint != fb.Status.Fingerprint {
		log.Info("Fingerprinted bundle source", "bundle", klog.KObj(fb), "fingerprint", src.fingerprint, "previous", fb.Status.Fingerprint)
		r.Recorder.Eventf(fb, nil, corev1.EventTypeNormal, ReasonFingerprintChanged, "Fingerprint",
			"The source has a new fingerprint (status.fingerprint): nodes that need the bundle build it, and running sandboxes switch to it at their next restart")
	}
	now := meta.FindStatusCondition(conds, playgroundv1alpha1.ReadyCondition)
	before := meta.FindStatusCondition(fb.Status.Conditions, playgroundv1alpha1.ReadyCondition)
	if now != nil && (before == nil || before.Reason != now.Reason) {
		switch now.Reason {
		case ReasonBuilt:
			r.Recorder.Eventf(fb, nil, corev1.EventTypeNormal, now.Reason, "Build", "Every node that needs the bundle has a ready build of its current source")
		case ReasonSourceNotFound, ReasonInvalidSource:
			r.Recorder.Eventf(fb, nil, corev1.EventTypeWarning, now.Reason, "Fingerprint", "%s", now.Message)
		}
	}
	return nil
}

// bundleConditions are the condition types the manager owns in a
// FacultyBundle's status: all of them.
var bundleConditions = []string{
	playgroundv1alpha1.ReadyCondition, playgroundv1alpha1.ReconcilingCondition, playgroundv1alpha1.StalledCondition,
}

// bundleStatusHolds says whether fb's status already shows what
// applyStatus would apply, so that the apply can be skipped: every agent's
// report brings the bundle back here.
func bundleStatusHolds(fb *playgroundv1alpha1.FacultyBundle, fp string, readyNodes int32, observed int64, conds []metav1.Condition) bool {
	st := &fb.Status
	return st.Fingerprint == fp && st.ReadyNodes == readyNodes && st.ObservedGeneration == observed &&
		pgreconcile.ConditionsHold(st.Conditions, conds, bundleConditions...)
}

// short is a fingerprint as messages quote it: its first 12 hex digits.
func short(fp string) string {
	if fp == "" {
		return "(unknown)"
	}
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// nameSome joins up to maxNodesNamed names.
func nameSome(names []string) string {
	if len(names) <= maxNodesNamed {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxNodesNamed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNodesNamed)
}

// SetupWithManager registers the reconciler. A bundle comes back when it
// changes (its spec, or an agent's report in status.nodes), when its
// source ConfigMap changes (watched as metadata only: its resourceVersion
// says that it changed, and the reconciler reads it around the cache),
// and when a Sandbox that lists it is bound, changes its list or goes.
func (r *FacultyBundleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = eventseries.Recorder(mgr.GetEventRecorder("facultybundle-controller"))
	}
	r.Options.defaults()
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &playgroundv1alpha1.FacultyBundle{}, bundleConfigMapIndex, func(o client.Object) []string {
		if cm := o.(*playgroundv1alpha1.FacultyBundle).Spec.Source.ConfigMap; cm != nil {
			return []string{cm.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &playgroundv1alpha1.Sandbox{}, sandboxFacultyIndex, func(o client.Object) []string {
		var names []string
		for _, f := range o.(*playgroundv1alpha1.Sandbox).Bundles() {
			names = append(names, f.Name)
		}
		return names
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.FacultyBundle{}).
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.bundlesOfConfigMap)).
		Watches(&playgroundv1alpha1.Sandbox{}, sandboxBundles{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Workers}).
		Named("facultybundle").
		Complete(r)
}

// bundlesOfConfigMap maps a ConfigMap to the bundles of its namespace
// whose source it is.
func (r *FacultyBundleReconciler) bundlesOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	var list playgroundv1alpha1.FacultyBundleList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{bundleConfigMapIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the bundles of a ConfigMap", "configMap", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// sandboxBundles enqueues the bundles a Sandbox lists, before and after a
// change, when what makes a node need them changes: the list, the binding
// (both in spec, so the generation) or the sandbox's deletion. Status
// changes, the most frequent, are ignored.
type sandboxBundles struct{}

func (sandboxBundles) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueFaculties(q, e.Object)
}

func (sandboxBundles) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.ObjectOld.GetGeneration() == e.ObjectNew.GetGeneration() &&
		e.ObjectOld.GetDeletionTimestamp().IsZero() == e.ObjectNew.GetDeletionTimestamp().IsZero() {
		return
	}
	enqueueFaculties(q, e.ObjectOld)
	enqueueFaculties(q, e.ObjectNew)
}

func (sandboxBundles) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueFaculties(q, e.Object)
}

func (sandboxBundles) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueFaculties(q, e.Object)
}

func enqueueFaculties(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	s, ok := o.(*playgroundv1alpha1.Sandbox)
	if !ok {
		return
	}
	for _, f := range s.Bundles() {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: f.Name}})
	}
}
