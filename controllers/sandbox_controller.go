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
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// nodeNameIndex indexes Sandboxes by spec.nodeName, to count each node's load.
const nodeNameIndex = playgroundv1alpha1.SandboxNodeNameField

// SandboxReconciler binds Sandboxes to healthy nodes and summarises their
// state: it writes spec.nodeName once, the Bound, NodeHealthy, Ready and
// Reconciling conditions, and the phase. The node's agent writes
// Provisioned and JobsAdmitted.
type SandboxReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	Options  Options

	// pending holds bindings this process made that the cache may not show
	// yet, so that a burst of new sandboxes spreads instead of piling onto
	// the node that looked emptiest a moment ago.
	mu      sync.Mutex
	pending map[types.NamespacedName]pendingBinding
	// bindMu serialises choosing a node and recording the choice.
	bindMu sync.Mutex
	// recent keeps the manager's parts of the Sandbox statuses applied in
	// the last seconds, so that a pass over a cache that lags them does
	// not apply them again.
	recent recentApplies[managerView]
}

// managerView is the manager's part of a Sandbox's status, as it compares
// it with the cache: transition times apart, which a later pass computes
// anew.
type managerView struct {
	Phase      playgroundv1alpha1.SandboxPhase
	Isolation  playgroundv1alpha1.Isolation
	Generation int64
	Conditions []metav1.Condition
}

func viewOf(phase playgroundv1alpha1.SandboxPhase, iso playgroundv1alpha1.Isolation, generation int64, conds []metav1.Condition) managerView {
	return managerView{Phase: phase, Isolation: iso, Generation: generation, Conditions: pgreconcile.Untimed(conds, managerConditions...)}
}

// The binder patches a Sandbox's nodeName and applies its status; it reads
// the agents' registrations only in the lease namespace (see CacheOptions).
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes/status,verbs=patch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxsnapshots,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=playground-system,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile binds and summarises one Sandbox.
func (r *SandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var sbx playgroundv1alpha1.Sandbox
	if err := r.Get(ctx, req.NamespacedName, &sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	agents, err := r.registrations(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.Options.Now()

	justBound := false
	if sbx.Spec.NodeName == "" && sbx.DeletionTimestamp.IsZero() {
		// One binding at a time, from the choice to its record in pending:
		// workers choosing at once would all see the same loads and pile
		// a burst onto one node. Status writes stay concurrent.
		r.bindMu.Lock()
		node, reason, why := r.choose(ctx, &sbx, agents, now)
		if node == "" {
			r.bindMu.Unlock()
			log.V(1).Info("No eligible node", "sandbox", klog.KObj(&sbx), "why", why)
			return ctrl.Result{}, r.applyStatus(ctx, &sbx, assessment{
				phase: playgroundv1alpha1.SandboxPending,
				bound: condition(playgroundv1alpha1.BoundCondition, false, reason, why),
			})
		}
		err := r.bind(ctx, &sbx, node)
		r.bindMu.Unlock()
		if err != nil {
			return ctrl.Result{}, err
		}
		// No Event: the Bound condition says it, and a new tenant's path
		// to Ready records none (each is an API write).
		log.Info("Bound sandbox", "sandbox", klog.KObj(&sbx), "node", node)
		justBound = true
	}

	s := assessSandbox(&sbx, agents, now)
	res := ctrl.Result{}
	if reg, ok := agents[sbx.Spec.NodeName]; ok && reg.Healthy(now) {
		// Nothing announces a lease's expiry: look again just after it.
		res.RequeueAfter = reg.Renewed.Add(reg.Duration).Sub(now) + time.Second
	}
	if wait := awaitingFirstReport(&sbx, s, justBound, now); wait > 0 {
		if res.RequeueAfter == 0 || wait < res.RequeueAfter {
			res.RequeueAfter = wait
		}
		return res, nil
	}
	return res, r.applyStatus(ctx, &sbx, s)
}

// firstReportGrace is how long the manager leaves the status of a Sandbox
// created bound (a Tenant's: Binder.bindAtCreate) to its agent, until the
// agent reports an outcome. Most sandboxes are Provisioned within it, and
// their status goes from empty to Ready in two writes (the agent's
// Provisioned, then the manager's Ready), not three. An agent still
// starting one after 5 s says so (Provisioned False, reason Provisioning),
// which is the progress a user looks for: the manager then adds nothing
// until the agent's outcome, however long the start takes, while the
// agent's registration holds. A healthy agent that says nothing gets the
// manager's Pending status when the grace ends (and then writes no notice
// of its own), and one whose registration lapses gets it at once. A slow
// first start thus costs one write of progress, not two or three.
const firstReportGrace = 10 * time.Second

// untilOutcome is the wait of a sandbox whose agent has said it is
// starting it: until the agent's next write, or its registration lapses
// (Reconcile looks again then).
const untilOutcome = time.Duration(math.MaxInt64)

// awaitingFirstReport is how much longer sbx's status is left to its
// agent; zero or less: write the manager's part now.
func awaitingFirstReport(sbx *playgroundv1alpha1.Sandbox, s assessment, justBound bool, now time.Time) time.Duration {
	if justBound || sbx.Spec.NodeName == "" || !sbx.DeletionTimestamp.IsZero() || sbx.Status.Phase != "" ||
		s.health == nil || s.health.Status != metav1.ConditionTrue {
		return 0
	}
	for _, typ := range managerConditions {
		if meta.FindStatusCondition(sbx.Status.Conditions, typ) != nil {
			return 0 // the manager's part is there: kept up to date
		}
	}
	prov := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	switch {
	case prov == nil:
		return sbx.CreationTimestamp.Add(firstReportGrace).Sub(now)
	case agentStarting(prov):
		return untilOutcome // the agent reports its progress itself
	default:
		return 0 // an outcome
	}
}

// agentStarting says whether prov, a Sandbox's Provisioned condition, is
// its agent's report that a start is under way.
func agentStarting(prov *metav1.Condition) bool {
	return prov != nil && prov.Status == metav1.ConditionFalse && prov.Reason == playgroundv1alpha1.ReasonProvisioning
}

// registrations returns the agents' registrations by node.
func (r *SandboxReconciler) registrations(ctx context.Context) (map[string]agentlease.Registration, error) {
	return agentRegistrations(ctx, r.Client, r.Options.LeaseNamespace)
}

// agentRegistrations returns the agents' registrations in the lease
// namespace, by node.
func agentRegistrations(ctx context.Context, c client.Reader, namespace string) (map[string]agentlease.Registration, error) {
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(namespace), client.MatchingLabels{agentlease.LabelAgent: "true"}); err != nil {
		return nil, fmt.Errorf("listing agent registrations: %w", err)
	}
	regs := make(map[string]agentlease.Registration, len(leases.Items))
	for i := range leases.Items {
		reg, err := agentlease.FromLease(&leases.Items[i])
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Ignoring a malformed agent registration", "lease", klog.KObj(&leases.Items[i]), "err", err)
			continue
		}
		regs[reg.Node] = reg
	}
	return regs, nil
}

// choose picks the eligible node with the fewest sandboxes; ties go to a
// hash of sandbox and node, so that equal nodes share the load. It returns
// "" and why when none is eligible: what the sandbox needs, and what each
// node lacks of it.
func (r *SandboxReconciler) choose(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, agents map[string]agentlease.Registration, now time.Time) (node, reason, why string) {
	if sbx.Spec.FromSnapshot != "" {
		// A fork lands where its snapshot is kept, once it is taken.
		at, why := r.snapshotNode(ctx, sbx)
		if at == "" {
			return "", playgroundv1alpha1.ReasonWaitingForSnapshot, why
		}
		only := map[string]agentlease.Registration{}
		if reg, ok := agents[at]; ok {
			only[at] = reg
		} else {
			return "", playgroundv1alpha1.ReasonNoEligibleNode, fmt.Sprintf("SandboxSnapshot %s is kept on node %s, whose agent is not registered: its forks wait for it", sbx.Spec.FromSnapshot, at)
		}
		agents = only
	}
	type candidate struct {
		node string
		load int
		tie  uint32
	}
	var eligible []candidate
	lacking := map[string]string{}
	healthy := 0
	for node, reg := range agents {
		if !reg.Healthy(now) {
			lacking[node] = "its agent is not renewing its registration"
			continue
		}
		healthy++
		if why := lacks(sbx, reg); why != "" {
			lacking[node] = why
			continue
		}
		h := fnv.New32a()
		key := string(sbx.UID)
		if key == "" { // not created yet (bindAtCreate)
			key = sbx.Namespace + "/" + sbx.Name
		}
		h.Write([]byte(key + "/" + node))
		eligible = append(eligible, candidate{node: node, load: r.load(ctx, node), tie: h.Sum32()})
	}
	if len(eligible) == 0 {
		return "", playgroundv1alpha1.ReasonNoEligibleNode, noEligibleNode(sbx, lacking, len(agents), healthy)
	}
	best := slices.MinFunc(eligible, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.load, b.load), cmp.Compare(a.tie, b.tie), strings.Compare(a.node, b.node))
	})
	return best.node, "", ""
}

// snapshotNode is the node of the Ready SandboxSnapshot sbx starts from,
// or "" and why sbx cannot be bound there yet: the snapshot is missing,
// not Ready, or of a sandbox with another backend or isolation.
func (r *SandboxReconciler) snapshotNode(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) (string, string) {
	name := sbx.Spec.FromSnapshot
	var snap playgroundv1alpha1.SandboxSnapshot
	if err := r.Get(ctx, client.ObjectKey{Namespace: sbx.Namespace, Name: name}, &snap); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Sprintf("SandboxSnapshot %s does not exist in namespace %s: the sandbox starts from it once it is taken", name, sbx.Namespace)
		}
		return "", fmt.Sprintf("reading SandboxSnapshot %s: %v", name, err)
	}
	switch {
	case !snap.DeletionTimestamp.IsZero():
		return "", fmt.Sprintf("SandboxSnapshot %s is being deleted: start from another, or delete this Sandbox", name)
	case snap.Status.Phase != playgroundv1alpha1.SnapshotReady || snap.Status.NodeName == "":
		msg := fmt.Sprintf("SandboxSnapshot %s is not Ready yet: the sandbox starts from it once it is taken", name)
		if c := meta.FindStatusCondition(snap.Status.Conditions, playgroundv1alpha1.ReadyCondition); c != nil && c.Message != "" {
			msg += " (" + c.Message + ")"
		}
		return "", msg
	case snap.Status.Backend != playgroundv1alpha1.BackendClassOf(sbx):
		return "", fmt.Sprintf("SandboxSnapshot %s is of a sandbox of backend %s, and a fork runs on its snapshot's backend: ask for backend %s", name, snap.Status.Backend, snap.Status.Backend)
	case snap.Status.Backend == playgroundv1alpha1.BackendOCI && snap.Status.Isolation != playgroundv1alpha1.IsolationOf(sbx):
		return "", fmt.Sprintf("SandboxSnapshot %s is of a sandbox with %s isolation, and a fork runs with its snapshot's: ask for isolation %s", name, snap.Status.Isolation, snap.Status.Isolation)
	}
	return snap.Status.NodeName, ""
}

// lacks says what of sbx's needs the agent of reg does not offer: its
// backend, its isolation, its network mode, its node selector's labels;
// "" when it offers them all.
func lacks(sbx *playgroundv1alpha1.Sandbox, reg agentlease.Registration) string {
	backend := string(playgroundv1alpha1.BackendClassOf(sbx))
	var missing []string
	if !reg.Offers(backend) {
		offers := strings.Join(reg.Backends, ", ")
		if offers == "" {
			offers = "none"
		}
		missing = append(missing, fmt.Sprintf("the %s backend (it offers %s)", backend, offers))
	} else {
		if iso := string(playgroundv1alpha1.IsolationOf(sbx)); !reg.OffersIsolation(iso) {
			missing = append(missing, iso+" isolation (its agent has no runsc: see --runsc)")
		}
		if mode := string(sbx.Spec.Network.Mode); !reg.OffersNetwork(backend, mode) {
			missing = append(missing, fmt.Sprintf("network %s (its agent runs sandboxes without it: see --network=%s)", mode, mode))
		}
	}
	if labels := reg.Missing(sbx.Spec.NodeSelector); len(labels) > 0 {
		missing = append(missing, "the labels "+strings.Join(labels, ","))
	}
	return strings.Join(missing, " and ")
}

// noEligibleNode says why no node can take sbx: what it needs, and what
// each node (the first maxNodesNamed by name, as a FacultyBundle's
// Ready message names them) lacks.
func noEligibleNode(sbx *playgroundv1alpha1.Sandbox, lacking map[string]string, registered, healthy int) string {
	needs := []string{fmt.Sprintf("the %s backend", playgroundv1alpha1.BackendClassOf(sbx))}
	if iso := playgroundv1alpha1.IsolationOf(sbx); iso != playgroundv1alpha1.IsolationContainer {
		needs = append(needs, fmt.Sprintf("%s isolation", iso))
	}
	if mode := sbx.Spec.Network.Mode; mode != "" && mode != playgroundv1alpha1.NetworkNone {
		needs = append(needs, fmt.Sprintf("network %s", mode))
	}
	need := strings.Join(needs, " with ")
	if len(sbx.Spec.NodeSelector) > 0 {
		need += " on a node matching " + formatSelector(sbx.Spec.NodeSelector)
	}
	counts := fmt.Sprintf("%d agents registered, %d healthy", registered, healthy)
	if registered == 0 {
		return fmt.Sprintf("No healthy agent offers %s: no agent is registered (%s; agents register with a Lease in their lease namespace); the sandbox waits for one", need, counts)
	}
	nodes := slices.Sorted(maps.Keys(lacking))
	var each []string
	for _, node := range nodes[:min(len(nodes), maxNodesNamed)] {
		if strings.HasPrefix(lacking[node], "its agent") {
			each = append(each, fmt.Sprintf("node %s: %s", node, lacking[node]))
		} else {
			each = append(each, fmt.Sprintf("node %s lacks %s", node, lacking[node]))
		}
	}
	if more := len(nodes) - len(each); more > 0 {
		each = append(each, fmt.Sprintf("and %d more", more))
	}
	return fmt.Sprintf("No healthy agent offers %s (%s): %s; the sandbox waits for one", need, counts, strings.Join(each, "; "))
}

// pendingBinding is a binding this process made, from its choice on.
type pendingBinding struct {
	node  string
	since time.Time
}

// unseenBindingGrace bounds how long a binding whose Sandbox the cache has
// never shown still counts: a create's watch event arrives in well under
// it, and a Sandbox deleted before the cache saw it bound stops counting.
const unseenBindingGrace = time.Minute

// load counts the sandboxes bound to node: those the cache shows, and those
// this process bound (or is creating bound) that the cache does not show
// bound yet, each once. The pending bindings are read before the list, so
// that one the cache shows in between is in the list. It reads the cache's
// own objects, without copies: a burst binds each of its sandboxes after
// listing all those bound before it, and copying them made the burst's
// bindings cost the square of its size.
func (r *SandboxReconciler) load(ctx context.Context, node string) int {
	now := r.Options.Now()
	var unseen []types.NamespacedName
	r.mu.Lock()
	for key, b := range r.pending {
		var cached playgroundv1alpha1.Sandbox
		err := r.Get(ctx, key, &cached, client.UnsafeDisableDeepCopy)
		switch {
		case err == nil && cached.Spec.NodeName != "":
			delete(r.pending, key) // the cache caught up: the list counts it
		case apierrors.IsNotFound(err) && now.Sub(b.since) > unseenBindingGrace:
			delete(r.pending, key) // gone before the cache saw it bound
		case b.node == node:
			unseen = append(unseen, key)
		}
	}
	r.mu.Unlock()
	var list playgroundv1alpha1.SandboxList
	if err := r.List(ctx, &list, client.MatchingFields{nodeNameIndex: node}, client.UnsafeDisableDeepCopy); err != nil {
		return len(unseen)
	}
	n := len(list.Items)
	if len(unseen) > 0 {
		listed := make(map[types.NamespacedName]bool, len(list.Items))
		for i := range list.Items {
			listed[client.ObjectKeyFromObject(&list.Items[i])] = true
		}
		for _, key := range unseen {
			if !listed[key] {
				n++
			}
		}
	}
	return n
}

// bindAtCreate binds want, a Sandbox about to be created, as Reconcile
// would bind it once created: to the node choose picks, with the agent's
// finalizer (which the agent would add first thing), so that the create
// carries both and neither is a write of its own. The binding counts in
// the node's load from the choice on (the creates run at once; holding
// bindMu across each made a burst's creates one at a time, six a second
// on P5's loaded machine), so bindings chosen meanwhile still spread. It
// returns the func to call with whether the create succeeded. Without an
// eligible node want stays unbound, and the binder binds it (or says why
// not) once it exists.
func (r *SandboxReconciler) bindAtCreate(ctx context.Context, want *playgroundv1alpha1.Sandbox) func(created bool) {
	r.bindMu.Lock()
	defer r.bindMu.Unlock()
	agents, err := r.registrations(ctx)
	node := ""
	if err == nil {
		node, _, _ = r.choose(ctx, want, agents, r.Options.Now())
	}
	if node == "" {
		return func(bool) {}
	}
	key := client.ObjectKeyFromObject(want)
	r.recordBinding(key, node)
	want.Spec.NodeName = node
	controllerutil.AddFinalizer(want, playgroundv1alpha1.SandboxFinalizer)
	return func(created bool) {
		if !created {
			r.mu.Lock()
			delete(r.pending, key)
			r.mu.Unlock()
			return
		}
		ctrl.LoggerFrom(ctx).Info("Bound sandbox at its creation", "sandbox", klog.KObj(want), "node", node)
	}
}

// bind sets spec.nodeName once; the API server refuses any later change.
func (r *SandboxReconciler) bind(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, node string) error {
	patch := client.MergeFromWithOptions(sbx.DeepCopy(), client.MergeFromWithOptimisticLock{})
	sbx.Spec.NodeName = node
	if err := r.Patch(ctx, sbx, patch); err != nil {
		return fmt.Errorf("binding sandbox %s to node %s: %w", klog.KObj(sbx), node, err)
	}
	r.recordBinding(client.ObjectKeyFromObject(sbx), node)
	return nil
}

// recordBinding counts a binding the cache may not show yet (see load).
func (r *SandboxReconciler) recordBinding(key types.NamespacedName, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[types.NamespacedName]pendingBinding{}
	}
	r.pending[key] = pendingBinding{node: node, since: r.Options.Now()}
}

// assessment is what the manager owns of a Sandbox's status, as
// assessSandbox derives it; applyStatus summarises it with
// internal/reconcile.
type assessment struct {
	phase playgroundv1alpha1.SandboxPhase
	bound metav1.Condition
	// health and ready are unset while the sandbox is unbound.
	health *metav1.Condition
	ready  *metav1.Condition
}

func condition(typ string, ok bool, reason, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

// assessSandbox derives the manager's conditions and the phase of a bound
// sandbox from its node's registration and the agent's Provisioned.
func assessSandbox(sbx *playgroundv1alpha1.Sandbox, agents map[string]agentlease.Registration, now time.Time) assessment {
	node := sbx.Spec.NodeName
	s := assessment{bound: condition(playgroundv1alpha1.BoundCondition, true, playgroundv1alpha1.ReasonBound, "Bound to node "+node)}
	reg, registered := agents[node]
	switch {
	case !registered:
		c := condition(playgroundv1alpha1.NodeHealthyCondition, false, playgroundv1alpha1.ReasonAgentUnavailable,
			fmt.Sprintf("No agent is registered for node %s; the sandbox's storage is there, so it waits for that node's agent", node))
		s.health = &c
	case !reg.Healthy(now):
		c := condition(playgroundv1alpha1.NodeHealthyCondition, false, playgroundv1alpha1.ReasonAgentUnavailable,
			fmt.Sprintf("The agent of node %s has not renewed its registration since %s; sessions cannot reach the sandbox until it does", node, reg.Renewed.UTC().Format(time.RFC3339)))
		s.health = &c
	default:
		c := condition(playgroundv1alpha1.NodeHealthyCondition, true, playgroundv1alpha1.ReasonAgentHealthy, "The agent of node "+node+" is registered and renewing")
		s.health = &c
	}

	prov := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	switch {
	case !sbx.DeletionTimestamp.IsZero():
		s.phase = playgroundv1alpha1.SandboxTerminating
	case prov == nil:
		s.phase = playgroundv1alpha1.SandboxPending
	case prov.Status == metav1.ConditionTrue && sbx.Status.OpenHandles == 0:
		s.phase = playgroundv1alpha1.SandboxDetached
	case prov.Status == metav1.ConditionTrue:
		s.phase = playgroundv1alpha1.SandboxReady
	case prov.Reason == playgroundv1alpha1.ReasonBackendFailed:
		s.phase = playgroundv1alpha1.SandboxFailed
	case prov.Reason == playgroundv1alpha1.ReasonTerminating:
		s.phase = playgroundv1alpha1.SandboxTerminating
	case prov.Reason == playgroundv1alpha1.ReasonSuspended:
		s.phase = playgroundv1alpha1.SandboxSuspended
	default:
		s.phase = playgroundv1alpha1.SandboxProvisioning
	}

	var ready metav1.Condition
	switch {
	case !sbx.DeletionTimestamp.IsZero():
		ready = condition(playgroundv1alpha1.ReadyCondition, false, playgroundv1alpha1.ReasonTerminating, "The sandbox is being destroyed")
	case s.health.Status != metav1.ConditionTrue:
		ready = condition(playgroundv1alpha1.ReadyCondition, false, s.health.Reason, s.health.Message)
	case waitsForKey(sbx, prov) != nil:
		// The key it waits for cannot come: say why, not that it waits.
		c := waitsForKey(sbx, prov)
		ready = condition(playgroundv1alpha1.ReadyCondition, false, c.Reason, c.Message)
	case waitsForImage(sbx, prov) != nil:
		// Its image cannot be resolved: say why, not that it waits.
		c := waitsForImage(sbx, prov)
		ready = condition(playgroundv1alpha1.ReadyCondition, false, c.Reason, c.Message)
	case prov == nil:
		ready = condition(playgroundv1alpha1.ReadyCondition, false, playgroundv1alpha1.ReasonProvisioning, "Waiting for the agent of node "+node+" to provision the sandbox")
	case prov.Status != metav1.ConditionTrue:
		ready = condition(playgroundv1alpha1.ReadyCondition, false, prov.Reason, prov.Message)
	default:
		// Ready is what the sandbox serves, not whether its processes
		// run this moment: a sleep or a wake is the agent's Running
		// condition alone, not a write of the manager's too.
		ready = condition(playgroundv1alpha1.ReadyCondition, true, playgroundv1alpha1.ReasonReady, "The sandbox is provisioned on node "+node+" and serves calls (its Running condition says whether its processes run now)")
	}
	s.ready = &ready
	return s
}

// applyStatus writes the manager's part of the status with server-side
// apply: the phase, the observed generation, Bound, NodeHealthy (once
// bound), and Ready with the Reconciling and Stalled that
// internal/reconcile derives from it. Each condition keeps its transition
// time while its status holds.
func (r *SandboxReconciler) applyStatus(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, s assessment) error {
	ready := s.ready
	if ready == nil {
		c := condition(playgroundv1alpha1.ReadyCondition, false, s.bound.Reason, s.bound.Message)
		ready = &c
	}
	conds := slices.Clone(sbx.Status.Conditions)
	for _, c := range []*metav1.Condition{&s.bound, s.health} {
		if c != nil {
			c.ObservedGeneration = sbx.Generation
			meta.SetStatusCondition(&conds, *c)
		}
	}
	// Suspended is where the sandbox is meant to be, not on its way.
	progressing := ready.Status != metav1.ConditionTrue && s.phase != playgroundv1alpha1.SandboxSuspended
	pgreconcile.Summarize(&conds, sbx.Generation, *ready, progressing, nil)
	iso := isolationStatus(sbx)
	if statusHolds(sbx, s.phase, iso, conds) {
		return nil
	}
	now := time.Now()
	cached, want := viewOf(sbx.Status.Phase, sbx.Status.Isolation, sbx.Status.ObservedGeneration, sbx.Status.Conditions), viewOf(s.phase, iso, sbx.Generation, conds)
	if r.recent.repeats(sbx.UID, cached, want, now) {
		return nil
	}
	status := playgroundv1alpha1ac.SandboxStatus().
		WithObservedGeneration(sbx.Generation).
		WithPhase(s.phase).
		WithConditions(pgreconcile.ApplyConditions(conds, managerConditions...)...)
	if iso != "" {
		status.WithIsolation(iso)
	}
	err := r.Status().Apply(ctx, playgroundv1alpha1ac.Sandbox(sbx.Name, sbx.Namespace).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.SandboxControllerFieldOwner), client.ForceOwnership)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating the status of sandbox %s: %w", klog.KObj(sbx), err)
	}
	if err == nil {
		r.recent.applied(sbx.UID, cached, want, now)
	}
	return nil
}

// isolationStatus is the isolation a Sandbox runs with, as its status
// reports it: on backend oci its spec's, the default filled in; on other
// backends, which offer no choice, none.
func isolationStatus(sbx *playgroundv1alpha1.Sandbox) playgroundv1alpha1.Isolation {
	if playgroundv1alpha1.BackendClassOf(sbx) != playgroundv1alpha1.BackendOCI {
		return ""
	}
	return playgroundv1alpha1.IsolationOf(sbx)
}

// managerConditions are the condition types the manager owns in a
// Sandbox's status (the agent owns Provisioned and JobsAdmitted).
var managerConditions = []string{
	playgroundv1alpha1.BoundCondition, playgroundv1alpha1.ReadyCondition,
	playgroundv1alpha1.NodeHealthyCondition, playgroundv1alpha1.ReconcilingCondition,
	playgroundv1alpha1.StalledCondition,
}

// statusHolds says whether sbx's status already shows what applyStatus
// would apply (conds holding the manager's conditions as it would apply
// them), so that the apply can be skipped. Every event of a sandbox, and
// every lease period, brings it back here; sending an unchanged apply each
// time cost the API server about five requests per sandbox when a thousand
// tenants were created at once. A condition the manager would drop
// (Reconciling, once Ready) counts as a change.
func statusHolds(sbx *playgroundv1alpha1.Sandbox, phase playgroundv1alpha1.SandboxPhase, iso playgroundv1alpha1.Isolation, conds []metav1.Condition) bool {
	return sbx.Status.Phase == phase && sbx.Status.Isolation == iso && sbx.Status.ObservedGeneration == sbx.Generation &&
		pgreconcile.ConditionsHold(sbx.Status.Conditions, conds, managerConditions...)
}

func formatSelector(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for k, v := range sel {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// SetupWithManager registers the reconciler. Agent registrations trigger
// it: a new or returning agent, or one whose offer changed, may take
// unbound sandboxes and turns its own sandboxes' conditions.
func (r *SandboxReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &playgroundv1alpha1.Sandbox{}, nodeNameIndex, func(o client.Object) []string {
		if n := o.(*playgroundv1alpha1.Sandbox).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &playgroundv1alpha1.Sandbox{}, fromSnapshotIndex, func(o client.Object) []string {
		if n := o.(*playgroundv1alpha1.Sandbox).Spec.FromSnapshot; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return err
	}
	leaseChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, err := agentlease.FromLease(e.ObjectOld.(*coordinationv1.Lease))
			if err != nil {
				return true
			}
			// A plain renewal of a healthy agent changes nothing here.
			return !old.Healthy(r.Options.Now()) || !maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations())
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.Sandbox{}).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.sandboxesOfLease),
			builder.WithPredicates(leaseChanged, predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetNamespace() == r.Options.LeaseNamespace && o.GetLabels()[agentlease.LabelAgent] == "true"
			}))).
		Watches(&playgroundv1alpha1.SandboxSnapshot{}, handler.EnqueueRequestsFromMapFunc(r.forksOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Workers}).
		Named("sandbox").
		Complete(r)
}

// fromSnapshotIndex indexes Sandboxes by spec.fromSnapshot.
const fromSnapshotIndex = "spec.fromSnapshot"

// forksOf maps a SandboxSnapshot to the unbound Sandboxes that start from
// it: they are bound once it is Ready.
func (r *SandboxReconciler) forksOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list playgroundv1alpha1.SandboxList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{fromSnapshotIndex: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// sandboxesOfLease maps an agent's registration to the sandboxes it may
// concern: its node's, and every unbound one.
func (r *SandboxReconciler) sandboxesOfLease(ctx context.Context, o client.Object) []reconcile.Request {
	reg, err := agentlease.FromLease(o.(*coordinationv1.Lease))
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, node := range []string{reg.Node, ""} {
		var list playgroundv1alpha1.SandboxList
		opts := []client.ListOption{client.MatchingFields{nodeNameIndex: node}, client.UnsafeDisableDeepCopy}
		if node == "" {
			opts = opts[1:]
		}
		if err := r.List(ctx, &list, opts...); err != nil {
			continue
		}
		for i := range list.Items {
			if node == "" && list.Items[i].Spec.NodeName != "" {
				continue
			}
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
