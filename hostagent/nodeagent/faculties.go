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
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/faculty"
	"github.com/playground-dev/playground/hostagent/hostpath"
	"github.com/playground-dev/playground/internal/eventseries"
	"github.com/playground-dev/playground/internal/fingerprint"
)

// The agent reads the FacultyBundles its node's Sandboxes list and their
// ConfigMap sources (it watches ConfigMaps' metadata only, and reads one
// when a bundle needs it), and applies its own entry of a bundle's
// status.nodes.
//
// +kubebuilder:rbac:groups=playground.dev,resources=facultybundles,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=facultybundles/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// DefaultFacultyReread is how often a bundle's host path is read again for
// changes (a ConfigMap's changes are watched).
const DefaultFacultyReread = time.Minute

// faculties is the agent's side of FacultyBundles: a reconciler that
// builds, through the node's cache, the bundles its Sandboxes list and
// reports each build in the bundle's status.nodes; and, for the Sandbox
// reconciler, which builds a sandbox gets and how it has them.
//
// A sandbox's bundles are fixed when its processes start: a running
// sandbox keeps the builds it started with (installed, by sandbox ID)
// until it restarts (spec.restartRequest, or its init exiting), and only
// then gets the current ones. The record survives an agent restart in the
// Sandbox's status.faculties, which reattach reads back.
type faculties struct {
	client   client.Client // cached: FacultyBundles, the node's Sandboxes, ConfigMaps' metadata
	reader   client.Reader // the API server, for a ConfigMap's data
	cache    *faculty.Cache
	node     string
	recorder events.EventRecorder
	reread   time.Duration
	// hostPaths are the prefixes under which a bundle's host path is read.
	hostPaths hostpath.Grants
	// queue requeues Sandboxes when a bundle they list changes state.
	queue chan<- event.GenericEvent

	mu        sync.Mutex
	sources   map[types.NamespacedName]bundleSource                // by bundle
	installed map[string][]backend.Faculty                         // by sandbox ID: what its processes run with
	reports   map[string][]playgroundv1alpha1.FacultyInstallStatus // by sandbox ID: its status.faculties
}

// bundleSource is what the agent last read of a bundle's source.
type bundleSource struct {
	generation int64
	version    string    // the ConfigMap's resourceVersion
	readAt     time.Time // host paths: when
	fp         string
	err        error
}

// newFaculties opens the node's build cache (none without opts.Dir) and
// registers the bundle reconciler with mgr.
func newFaculties(mgr manager.Manager, opts Options, queue chan<- event.GenericEvent) (*faculties, error) {
	f := &faculties{
		client:    mgr.GetClient(),
		reader:    mgr.GetAPIReader(),
		node:      opts.NodeName,
		recorder:  eventseries.Recorder(mgr.GetEventRecorder(playgroundv1alpha1.AgentNodeFieldOwner(opts.NodeName))),
		reread:    opts.FacultyReread,
		queue:     queue,
		sources:   map[types.NamespacedName]bundleSource{},
		installed: map[string][]backend.Faculty{},
		reports:   map[string][]playgroundv1alpha1.FacultyInstallStatus{},
	}
	if f.reread <= 0 {
		f.reread = DefaultFacultyReread
	}
	var err error
	if f.hostPaths, err = hostpath.New(opts.FacultyHostPathPrefixes, opts.StateDir, opts.Faculties.Dir); err != nil {
		return nil, fmt.Errorf("nodeagent: %w", err)
	}
	if p := f.hostPaths.Prefixes(); len(p) > 0 {
		opts.Logger.Info("FacultyBundles may take their source from host paths under these prefixes", "prefixes", p)
	}
	if fo := opts.Faculties; fo.Dir != "" {
		if fo.Builder == nil {
			for _, be := range opts.Backends {
				if b := be.Capabilities().Builder; b != nil {
					fo.Builder = b
					break
				}
			}
		}
		if fo.Logger.GetSink() == nil {
			fo.Logger = opts.Logger.WithName("faculties").WithValues("node", opts.NodeName)
		}
		c, err := faculty.New(fo)
		if err != nil {
			return nil, fmt.Errorf("nodeagent: %w", err)
		}
		f.cache = c
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.FacultyBundle{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&playgroundv1alpha1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(bundlesOf)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(f.bundlesReading), builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).
		Named("nodeagent-facultybundle").
		Complete(f)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: %w", err)
	}
	return f, nil
}

// bundlesOf maps a Sandbox to the bundles it lists.
func bundlesOf(_ context.Context, o client.Object) []reconcile.Request {
	sbx, ok := o.(*playgroundv1alpha1.Sandbox)
	if !ok {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(sbx.Bundles()))
	for _, ref := range sbx.Bundles() {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sbx.Namespace, Name: ref.Name}})
	}
	return reqs
}

// bundlesReading maps a ConfigMap to the bundles of its namespace that
// take their source from it.
func (f *faculties) bundlesReading(ctx context.Context, o client.Object) []reconcile.Request {
	var list playgroundv1alpha1.FacultyBundleList
	if err := f.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, b := range list.Items {
		if cm := b.Spec.Source.ConfigMap; cm != nil && cm.Name == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&b)})
		}
	}
	return reqs
}

// Reconcile builds a bundle that a Sandbox of this node lists and reports
// the build in the bundle's status.nodes entry of this node.
func (f *faculties) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer f.collect(ctx)
	var b playgroundv1alpha1.FacultyBundle
	if err := f.client.Get(ctx, req.NamespacedName, &b); err != nil {
		if apierrors.IsNotFound(err) {
			f.mu.Lock()
			delete(f.sources, req.NamespacedName)
			f.mu.Unlock()
			f.requeueSandboxes(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() || len(f.sandboxesListing(ctx, req.Namespace, req.Name)) == 0 {
		return ctrl.Result{}, nil // not needed on this node
	}
	defer f.requeueSandboxes(ctx, req.Namespace, req.Name)
	var again ctrl.Result
	if b.Spec.Source.HostPath != nil {
		again.RequeueAfter = f.reread
	}
	if f.cache == nil {
		return again, f.report(ctx, &b, "", playgroundv1alpha1.ReasonNoBuildCache, nil, fmt.Sprintf("Node %s's agent has no faculty build cache (it runs without a state directory for it) and builds no bundle", f.node))
	}
	freq, fp, err := f.read(ctx, &b)
	// Whether the node's entry already said so, before this pass wrote:
	// the Built Event is for a build that became ready.
	wasReady := slices.ContainsFunc(b.Status.Nodes, func(n playgroundv1alpha1.BundleNodeStatus) bool {
		return n.NodeName == f.node && n.Ready && n.Fingerprint == fp
	})
	if err != nil {
		msg := truncate(fmt.Sprintf("Cannot read the bundle's source on node %s: %v", f.node, err))
		if changed, rerr := f.reportChanged(ctx, &b, "", playgroundv1alpha1.ReasonSourceFailed, nil, msg); rerr != nil {
			return again, rerr
		} else if changed {
			f.recorder.Eventf(&b, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonSourceFailed, "Build", "%s", msg)
		}
		return again, nil
	}
	if _, state, _ := f.cache.Lookup(fp); state == faculty.Absent || state == faculty.Building {
		if err := f.report(ctx, &b, fp, playgroundv1alpha1.ReasonBuilding, nil, fmt.Sprintf("Building %s on node %s", short(fp), f.node)); err != nil {
			return again, err
		}
	}
	build, err := f.cache.Ensure(ctx, freq)
	var be *faculty.BuildError
	switch {
	case errors.As(err, &be):
		msg := buildFailure(f.node, fp, be)
		changed, rerr := f.reportChanged(ctx, &b, fp, playgroundv1alpha1.ReasonBuildFailed, nil, msg)
		if rerr != nil {
			return again, rerr
		}
		if changed {
			ctrl.LoggerFrom(ctx).Info("Building the faculty bundle failed", "bundle", klog.KObj(&b), "fingerprint", fp, "error", be.Message)
			f.recorder.Eventf(&b, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonBuildFailed, "Build", "%s", msg)
		}
		// Retried once the cache forgets the failure.
		return ctrl.Result{RequeueAfter: max(time.Until(be.At.Add(f.retryAfter())), time.Second)}, nil
	case err != nil:
		return again, err
	}
	changed, err := f.reportChanged(ctx, &b, fp, playgroundv1alpha1.ReasonBuilt, &build.BuiltAt, "")
	if err == nil && changed && !wasReady {
		f.recorder.Eventf(&b, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonBuilt, "Build", "Build %s is ready on node %s", short(fp), f.node)
	}
	return again, err
}

func (f *faculties) retryAfter() time.Duration {
	if f.cache == nil {
		return faculty.DefaultRetryAfter
	}
	return f.cache.RetryAfter()
}

// buildFailure is the status message of a failed build: what failed, and
// the tail of its log.
func buildFailure(node, fp string, be *faculty.BuildError) string {
	msg := fmt.Sprintf("Build %s failed on node %s: %s", short(fp), node, be.Message)
	if log := strings.TrimSpace(strings.ToValidUTF8(be.Log, "\uFFFD")); log != "" {
		// The end of the log says most; the message is bounded.
		if room := maxMessage - len(msg) - 20; room > 0 && len(log) > room {
			log = log[len(log)-room:]
			for !utf8.ValidString(log) { // cut inside a rune
				log = log[1:]
			}
			log = "…" + log
		}
		msg += "; log tail:\n" + log
	}
	return truncate(msg)
}

// report applies this node's entry of the bundle's status.nodes: the
// build of fp, where it stands (reason; ready when Built), and why.
func (f *faculties) report(ctx context.Context, b *playgroundv1alpha1.FacultyBundle, fp, reason string, builtAt *time.Time, msg string) error {
	_, err := f.reportChanged(ctx, b, fp, reason, builtAt, msg)
	return err
}

// reportChanged applies this node's entry, unless it already says so, and
// says whether it wrote.
func (f *faculties) reportChanged(ctx context.Context, b *playgroundv1alpha1.FacultyBundle, fp, reason string, builtAt *time.Time, msg string) (bool, error) {
	ready := reason == playgroundv1alpha1.ReasonBuilt
	for _, n := range b.Status.Nodes {
		if n.NodeName == f.node && n.Fingerprint == fp && n.Ready == ready && n.Reason == reason && n.Message == msg && n.ObservedGeneration == b.Generation &&
			(builtAt == nil) == (n.BuiltAt == nil) && (builtAt == nil || n.BuiltAt.Time.Equal(*builtAt)) {
			return false, nil
		}
	}
	entry := playgroundv1alpha1ac.BundleNodeStatus().
		WithNodeName(f.node).
		WithReady(ready).
		WithReason(reason).
		WithObservedGeneration(b.Generation)
	if fp != "" {
		entry.WithFingerprint(fp)
	}
	if msg != "" {
		entry.WithMessage(msg)
	}
	if builtAt != nil {
		entry.WithBuiltAt(metav1.NewTime(*builtAt))
	}
	apply := playgroundv1alpha1ac.FacultyBundle(b.Name, b.Namespace).WithStatus(playgroundv1alpha1ac.FacultyBundleStatus().WithNodes(entry))
	if err := f.client.Status().Apply(ctx, apply, client.FieldOwner(playgroundv1alpha1.AgentNodeFieldOwner(f.node)), client.ForceOwnership); err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("applying node %s's status of FacultyBundle %s/%s: %w", f.node, b.Namespace, b.Name, err))
	}
	// What b says now, for the next report of this pass to compare with.
	written := playgroundv1alpha1.BundleNodeStatus{NodeName: f.node, Fingerprint: fp, Ready: ready, Reason: reason, Message: msg, ObservedGeneration: b.Generation}
	if builtAt != nil {
		written.BuiltAt = &metav1.Time{Time: *builtAt}
	}
	if i := slices.IndexFunc(b.Status.Nodes, func(n playgroundv1alpha1.BundleNodeStatus) bool { return n.NodeName == f.node }); i >= 0 {
		b.Status.Nodes[i] = written
	} else {
		b.Status.Nodes = append(b.Status.Nodes, written)
	}
	return true, nil
}

// sandboxesListing is the node's Sandboxes, not being deleted, that list
// the bundle.
func (f *faculties) sandboxesListing(ctx context.Context, ns, bundle string) []*playgroundv1alpha1.Sandbox {
	var list playgroundv1alpha1.SandboxList
	if err := f.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the node's sandboxes from the cache")
		return nil
	}
	var out []*playgroundv1alpha1.Sandbox
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.NodeName == f.node && s.DeletionTimestamp.IsZero() &&
			slices.ContainsFunc(s.Bundles(), func(r playgroundv1alpha1.FacultyBundleReference) bool { return r.Name == bundle }) {
			out = append(out, s)
		}
	}
	return out
}

// requeueSandboxes queues the node's Sandboxes that list the bundle, for
// the Sandbox reconciler to install (or report) its build.
func (f *faculties) requeueSandboxes(ctx context.Context, ns, bundle string) {
	for _, s := range f.sandboxesListing(ctx, ns, bundle) {
		select {
		case f.queue <- event.GenericEvent{Object: s}:
		case <-ctx.Done():
			return
		}
	}
}

// read reads the bundle's source and returns the build request and its
// fingerprint: the bytes fingerprinted are the bytes built.
func (f *faculties) read(ctx context.Context, b *playgroundv1alpha1.FacultyBundle) (faculty.Request, string, error) {
	key := client.ObjectKeyFromObject(b)
	src := bundleSource{generation: b.Generation, readAt: time.Now()}
	var files []fingerprint.File
	switch {
	case b.Spec.Source.ConfigMap != nil:
		var cm corev1.ConfigMap
		src.err = f.reader.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.Source.ConfigMap.Name}, &cm)
		if apierrors.IsNotFound(src.err) {
			src.err = fmt.Errorf("ConfigMap %s/%s does not exist", b.Namespace, b.Spec.Source.ConfigMap.Name)
		}
		src.version = cm.ResourceVersion
		files = fingerprint.ConfigMapFiles(cm.Data, cm.BinaryData)
	case b.Spec.Source.HostPath != nil:
		files, src.err = f.hostPaths.Read(b.Spec.Source.HostPath.Path)
	default:
		src.err = errors.New("the bundle names no source")
	}
	req := faculty.Request{
		Bundle:   key.String(),
		Files:    files,
		Binaries: slices.Clone(b.Spec.Binaries),
	}
	if bld := b.Spec.Build; bld != nil {
		req.Command = slices.Clone(bld.Command)
		if bld.Timeout != nil {
			req.Timeout = bld.Timeout.Duration
		}
	}
	if src.err == nil {
		src.fp, src.err = req.Fingerprint()
	}
	if ctx.Err() != nil {
		return req, "", ctx.Err()
	}
	f.mu.Lock()
	f.sources[key] = src
	f.mu.Unlock()
	return req, src.fp, src.err
}

// fingerprintOf is the bundle's current fingerprint on this node, read
// again only when the bundle, its ConfigMap (by the watched metadata) or,
// past the reread interval, its host path may have changed.
func (f *faculties) fingerprintOf(ctx context.Context, b *playgroundv1alpha1.FacultyBundle) (string, error) {
	key := client.ObjectKeyFromObject(b)
	f.mu.Lock()
	src, ok := f.sources[key]
	f.mu.Unlock()
	if ok && src.generation == b.Generation {
		switch {
		case b.Spec.Source.ConfigMap != nil:
			meta := &metav1.PartialObjectMetadata{}
			meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			err := f.client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.Source.ConfigMap.Name}, meta)
			if err == nil && meta.ResourceVersion == src.version || apierrors.IsNotFound(err) && src.version == "" {
				return src.fp, src.err
			}
		case time.Since(src.readAt) < f.reread:
			return src.fp, src.err
		}
	}
	_, fp, err := f.read(ctx, b)
	return fp, err
}

// bundleState is one listed bundle as the Sandbox reconciler sees it.
type bundleState struct {
	build faculty.Build // when ready
	ready bool
	fp    string
	// why the bundle has no ready build, for a message: "is building",
	// "failed to build: …", "does not exist".
	why string
	// broken: waiting does not bring a build (a failure, no such bundle,
	// a source the agent cannot read, no build cache); todo says what
	// does.
	broken bool
	todo   string
}

// resolve says where a sandbox's bundle stands on this node, without
// building.
func (f *faculties) resolve(ctx context.Context, ns, name string) bundleState {
	var b playgroundv1alpha1.FacultyBundle
	if err := f.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return bundleState{why: fmt.Sprintf("does not exist in namespace %s", ns), broken: true,
				todo: "create it, or remove it from the Tenant's spec.sandbox.faculties"}
		}
		return bundleState{why: fmt.Sprintf("cannot be read: %v", err)}
	}
	if f.cache == nil {
		return bundleState{why: fmt.Sprintf("cannot be built: node %s's agent has no faculty build cache", f.node), broken: true,
			todo: "the cluster admin gives the agent a state directory for its build cache"}
	}
	fp, err := f.fingerprintOf(ctx, &b)
	if err != nil {
		return bundleState{why: "has a source the agent cannot read: " + firstLine(err.Error()), broken: true,
			todo: fmt.Sprintf("fix its source (kubectl describe facultybundle %s says more)", name)}
	}
	build, state, be := f.cache.Lookup(fp)
	switch state {
	case faculty.Ready:
		return bundleState{build: build, ready: true, fp: fp}
	case faculty.Failed:
		return bundleState{fp: fp, why: fmt.Sprintf("failed to build (%s): %s", short(fp), firstLine(be.Message)), broken: true,
			todo: fmt.Sprintf("fix its source or spec.build.command (kubectl get facultybundle %s -o yaml shows the build log's tail in status.nodes); a changed source is built at once", name)}
	}
	return bundleState{fp: fp, why: fmt.Sprintf("is building (%s)", short(fp))}
}

// errWaitingForFaculties: a sandbox not yet started has a bundle with no
// ready build on the node; the message says which and why, and the
// reason whether waiting helps (WaitingForFaculties) or does not
// (FacultyUnavailable).
type errWaitingForFaculties struct{ reason, msg string }

func (e *errWaitingForFaculties) Error() string { return e.msg }

// forSandbox decides the builds a sandbox runs with and reports how it has
// each bundle it lists (for setProvisioned). startsAnew says that the
// sandbox's processes start now (it is provisioned, or restarted, or its
// init died): it gets each bundle's ready build, or keeps the one it had
// when the new one is not ready. Otherwise it keeps what it runs with.
// A sandbox never started (mayWait) with a bundle that has no build at all
// waits: the error says for which.
func (f *faculties) forSandbox(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, id string, startsAnew, mayWait bool) ([]backend.Faculty, error) {
	f.mu.Lock()
	had, known := f.installed[id]
	had = slices.Clone(had)
	f.mu.Unlock()
	startsAnew = startsAnew || !known
	var install []backend.Faculty
	if !startsAnew {
		install = had // every build its processes have, listed or no longer
	}
	var reports []playgroundv1alpha1.FacultyInstallStatus
	var waiting, broken []string
	for _, ref := range sbx.Bundles() {
		shared := sbx.Spec.Pile.Shared != nil && ref.Name == sbx.Spec.Pile.Shared.Name
		cur := f.resolve(ctx, sbx.Namespace, ref.Name)
		prevIdx := slices.IndexFunc(had, func(fc backend.Faculty) bool { return fc.Name == ref.Name })
		var prev *backend.Faculty
		if prevIdx >= 0 {
			prev = &had[prevIdx]
		}
		rep := playgroundv1alpha1.FacultyInstallStatus{Name: ref.Name}
		switch {
		case !startsAnew && prev == nil:
			rep.State = playgroundv1alpha1.FacultyPending
			if cur.ready {
				rep.Message = fmt.Sprintf("Build %s is ready; the sandbox gets it when it restarts (spec.restartRequest, or if its init exits)", short(cur.fp))
			} else {
				rep.Message = fmt.Sprintf("The bundle %s; the sandbox gets its build when it restarts after the build is ready", cur.why)
			}
		case !startsAnew:
			rep.Fingerprint = prev.Fingerprint
			if cur.ready && cur.fp == prev.Fingerprint {
				rep.State = playgroundv1alpha1.FacultyInstalled
				break
			}
			rep.State = playgroundv1alpha1.FacultyStale
			rep.Message = staleMessage(prev.Fingerprint, cur, "until it restarts (spec.restartRequest, or if its init exits)")
		case cur.ready:
			fc := cur.build.Faculty(ref.Name)
			fc.SharedPile = shared
			install = append(install, fc)
			rep.Fingerprint, rep.State = cur.fp, playgroundv1alpha1.FacultyInstalled
		case prev != nil && f.stillBuilt(prev.Fingerprint):
			install = append(install, *prev)
			rep.Fingerprint, rep.State = prev.Fingerprint, playgroundv1alpha1.FacultyStale
			rep.Message = staleMessage(prev.Fingerprint, cur, "while the bundle has no ready build")
		case cur.broken:
			rep.State = playgroundv1alpha1.FacultyPending
			rep.Message = "The bundle " + cur.why + ": " + cur.todo
			broken = append(broken, fmt.Sprintf("FacultyBundle %s %s: %s", ref.Name, cur.why, cur.todo))
		default:
			rep.State = playgroundv1alpha1.FacultyPending
			rep.Message = "The bundle " + cur.why
			waiting = append(waiting, fmt.Sprintf("FacultyBundle %s %s", ref.Name, cur.why))
		}
		reports = append(reports, rep)
	}
	f.mu.Lock()
	f.reports[id] = reports
	f.mu.Unlock()
	switch {
	case !mayWait:
	case len(broken) > 0:
		msg := "Not started: waiting does not bring faculty bundles it lists to node " + f.node + ": " + strings.Join(broken, "; ")
		if len(waiting) > 0 {
			msg += " (and " + strings.Join(waiting, "; ") + ")"
		}
		return nil, &errWaitingForFaculties{reason: playgroundv1alpha1.ReasonFacultyUnavailable, msg: truncate(msg)}
	case len(waiting) > 0:
		return nil, &errWaitingForFaculties{reason: playgroundv1alpha1.ReasonWaitingForFaculties,
			msg: truncate("Waiting for faculty bundles to be built on node " + f.node + ": " + strings.Join(waiting, "; "))}
	}
	return install, nil
}

// staleMessage says why a sandbox runs an older build than the bundle's
// current one, and how long it keeps it.
func staleMessage(have string, cur bundleState, until string) string {
	switch {
	case cur.ready:
		return fmt.Sprintf("The sandbox runs build %s; build %s of the bundle's current source is ready and replaces it when the sandbox restarts (spec.restartRequest, or if its init exits)", short(have), short(cur.fp))
	default:
		return fmt.Sprintf("The sandbox keeps build %s %s: the bundle %s", short(have), until, cur.why)
	}
}

// stillBuilt says whether the cache still has the build.
func (f *faculties) stillBuilt(fp string) bool {
	if f.cache == nil {
		return false
	}
	_, state, _ := f.cache.Lookup(fp)
	return state == faculty.Ready
}

// started records the builds a sandbox's processes now run with.
func (f *faculties) started(id string, install []backend.Faculty) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installed[id] = slices.Clone(install)
}

// stopped forgets a sandbox's builds: it was suspended or destroyed, and
// gets the current builds when it starts again.
func (f *faculties) stopped(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.installed, id)
	delete(f.reports, id)
}

// reported is the status.faculties of the sandbox as the last pass decided
// it, or as its status has it when no pass did.
func (f *faculties) reported(id string, have []playgroundv1alpha1.FacultyInstallStatus) []playgroundv1alpha1.FacultyInstallStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.reports[id]; ok {
		return r
	}
	return have
}

// fromStatus is, at reattach, the builds a running sandbox has: those its
// status.faculties reports installed (or kept, stale) that the cache on
// disk still holds. They are not built again.
func (f *faculties) fromStatus(sbx *playgroundv1alpha1.Sandbox) []backend.Faculty {
	if f.cache == nil {
		return nil
	}
	var out []backend.Faculty
	for _, s := range sbx.Status.Faculties {
		if s.Fingerprint == "" || s.State == playgroundv1alpha1.FacultyPending {
			continue
		}
		if b, state, _ := f.cache.Lookup(s.Fingerprint); state == faculty.Ready {
			out = append(out, b.Faculty(s.Name))
		}
	}
	return out
}

// collect removes stale builds no sandbox of the node runs and that are
// no bundle's current build here, beyond each bundle's retainStale.
func (f *faculties) collect(ctx context.Context) {
	if f.cache == nil {
		return
	}
	var list playgroundv1alpha1.FacultyBundleList
	if err := f.client.List(ctx, &list); err != nil {
		return
	}
	keep := make(map[string]int, len(list.Items))
	for _, b := range list.Items {
		n := 2
		if b.Spec.RetainStale != nil {
			n = int(*b.Spec.RetainStale)
		}
		keep[client.ObjectKeyFromObject(&b).String()] = n
	}
	inUse := map[string]bool{}
	f.mu.Lock()
	for _, fcs := range f.installed {
		for _, fc := range fcs {
			inUse[fc.Fingerprint] = true
		}
	}
	for key, src := range f.sources {
		if _, ok := keep[key.String()]; ok && src.fp != "" {
			inUse[src.fp] = true
		}
	}
	f.mu.Unlock()
	if _, err := f.cache.Collect(inUse, keep); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Removing stale faculty builds")
	}
}

// registerFacultyMetrics exports the build cache's metrics as
// registerMetrics does the agent's; it returns the unregistration.
func registerFacultyMetrics(c *faculty.Cache, node string, log logr.Logger) func() {
	if c == nil {
		return func() {}
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"node": node}, metrics.Registry)
	col := c.Collector()
	if err := reg.Register(col); err != nil {
		log.Error(err, "Not exporting the faculty build metrics")
		return func() {}
	}
	return func() { reg.Unregister(col) }
}

// short is a fingerprint's first 12 digits, for messages.
func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// waitForFaculties reports a sandbox that waits for its bundles' builds:
// Provisioned=False, reason WaitingForFaculties (being built) or
// FacultyUnavailable (waiting does not help: a Warning), and an Event when
// the message changes. The bundle reconciler queues the sandbox again when
// a bundle's state changes.
func (r *sandboxReconciler) waitForFaculties(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, err error) error {
	var w *errWaitingForFaculties
	if !errors.As(err, &w) {
		return err
	}
	prev := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	if prev == nil || prev.Reason != w.reason || prev.Message != w.msg {
		if w.reason == playgroundv1alpha1.ReasonFacultyUnavailable {
			r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonFacultyUnavailable, "Provision", "%s", w.msg)
		} else {
			r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonWaitingForFaculties, "Provision", "%s", w.msg)
		}
	}
	return r.setProvisioned(ctx, sbx, metav1.ConditionFalse, w.reason, w.msg)
}

// applyFaculties is status.faculties as an apply configuration.
func applyFaculties(in []playgroundv1alpha1.FacultyInstallStatus) []*playgroundv1alpha1ac.FacultyInstallStatusApplyConfiguration {
	out := make([]*playgroundv1alpha1ac.FacultyInstallStatusApplyConfiguration, 0, len(in))
	for _, s := range in {
		a := playgroundv1alpha1ac.FacultyInstallStatus().WithName(s.Name).WithState(s.State)
		if s.Fingerprint != "" {
			a.WithFingerprint(s.Fingerprint)
		}
		if s.Message != "" {
			a.WithMessage(s.Message)
		}
		out = append(out, a)
	}
	return out
}
