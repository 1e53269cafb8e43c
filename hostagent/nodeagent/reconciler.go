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
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/eventseries"
	"github.com/playground-dev/playground/internal/keyedmutex"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// The agent's rights: its own node's Sandboxes (the finalizer, the status
// fields it owns), its Lease and Events. The Lease rights are namespaced:
// the Role lives in the Leases' namespace.
//
// It patches Sandboxes (its finalizer) and applies their status, never
// updates them, and sets no owner references (so no sandboxes/finalizers);
// it gets, creates and updates its Lease.
//
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=playground.dev,resources=sandboxes/status,verbs=patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=playground-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// maxMessage bounds a condition message built from a backend error.
const maxMessage = 1024

// onNode selects the Sandboxes bound to node, on the API server.
func onNode(node string) fields.Selector {
	return fields.OneTermEqualSelector(playgroundv1alpha1.SandboxNodeNameField, node)
}

// newManager builds the node-local controller manager: its cache holds
// only this node's Sandboxes (filtered by the API server), there is no
// leader election (one agent per node), and the reconciler is registered.
func newManager(opts Options, agent *hostagent.Agent, ids *sandboxids.Registry, endpoint string) (manager.Manager, *sandboxReconciler, error) {
	mgr, err := ctrl.NewManager(opts.Config, ctrl.Options{
		Scheme: Scheme(),
		Logger: opts.Logger.WithName("nodeagent").WithValues("node", opts.NodeName),
		Cache: cache.Options{
			ByObject: map[client.Object]cache.ByObject{
				&playgroundv1alpha1.Sandbox{}: {Field: onNode(opts.NodeName)},
			},
		},
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		PprofBindAddress:       opts.PprofBindAddress,
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// One agent per process in a cluster; tests run several, each a node.
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		GracefulShutdownTimeout: ptr.To(opts.ShutdownGrace),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("nodeagent: %w", err)
	}
	r := &sandboxReconciler{
		client:    mgr.GetClient(),
		reader:    mgr.GetAPIReader(),
		agent:     agent,
		signing:   agent.SigningKeys(),
		snapshots: agent.Snapshots(),
		workers:   agent.Workers(),
		pools:     agent.Pools(),
		sessions:  agent.Sessions(),
		usage:     agent.Usage(),
		idle:      agent.Idleness(),
		ids:       ids,
		node:      opts.NodeName,
		endpoint:  endpoint,
		recorder:  eventseries.Recorder(mgr.GetEventRecorder(playgroundv1alpha1.AgentFieldOwner)),
		images:    newSandboxImages(opts.Images, opts.ImageKeychains),
	}
	r.imagePools = newImagePools(opts.ImagePools, opts.Images, agent.Pools().SetImagePools)
	drift := make(chan event.GenericEvent, 256)
	r.queue = drift
	r.keys = &keyInbox{r: r, queue: drift}
	r.states = newStatePacer(opts.StateWriteInterval, drift)
	if r.faculties, err = newFaculties(mgr, opts, drift); err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(&resync{client: mgr.GetClient(), cache: mgr.GetCache(), r: r, every: opts.ResyncInterval, out: drift}); err != nil {
		return nil, nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.Sandbox{}, builder.WithPredicates(predicate.Or[client.Object](
			// Status writes (the manager's and ours) are not a reason to
			// touch the backend; spec, deletion and finalizers are.
			predicate.GenerationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) ||
					!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers()) ||
					imageResolvedChanged(e)
			}},
		))).
		WatchesRawSource(source.Channel(drift, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers, RateLimiter: sandboxRateLimiter()}).
		Named("nodeagent-sandbox").
		Complete(r)
	if err != nil {
		return nil, nil, fmt.Errorf("nodeagent: %w", err)
	}
	if err := setupSnapshots(mgr, r, opts.SnapshotsPerSandbox); err != nil {
		return nil, nil, fmt.Errorf("nodeagent: %w", err)
	}
	if err := setupWorkers(mgr, r, opts); err != nil {
		return nil, nil, fmt.Errorf("nodeagent: %w", err)
	}
	return mgr, r, nil
}

// sandboxReconciler makes the node's backend match the Sandboxes bound to
// it. It writes, with server-side apply under AgentFieldOwner, only
// status.sandboxID, endpoint, openHandles, restartRequest, faculties,
// usage and signingKey and the Provisioned, Running, JobsAdmitted and
// UsageLimited conditions; the manager derives Ready and the phase from
// Provisioned.
type sandboxReconciler struct {
	client client.Client
	reader client.Reader // the API server itself, for the start-up list
	agent  sandboxKernel
	// signing is the agent's signing-key service.
	signing signingKeys
	// snapshots is the agent's snapshot service.
	snapshots snapshotTaker
	// workers is the agent's worker service.
	workers workerSupervisor
	// pools is the agent's warm-pool service.
	pools warmPools
	// sessions counts the session handles open on a sandbox.
	sessions interface{ OpenHandles(id string) int }
	// usage is the agent's usage service.
	usage usageBook
	// idle is the agent's idle service: when each sandbox sleeps.
	idle interface {
		SetIdlePolicy(id string, p hostagent.IdlePolicy)
	}
	// ids says which sandbox ID each Sandbox of the node has.
	ids      *sandboxids.Registry
	node     string
	endpoint string
	recorder events.EventRecorder
	// faculties decides the bundle builds each sandbox runs with.
	faculties *faculties
	// images holds the image each sandbox runs (images.go).
	images *sandboxImages
	// imagePools chooses the images the warm pools keep sandboxes of
	// (imagepools.go); nil when none is.
	imagePools *imagePools
	// keys holds the signing keys the manager delivered.
	keys *keyInbox
	// queue brings a Sandbox back to the reconciler, and states paces
	// the writes of its Running condition (states.go).
	queue  chan<- event.GenericEvent
	states *statePacer
	// owners serialises the work on one Sandbox name (namespace/name):
	// its reconciliation, and the removal of a pile retained of it.
	owners keyedmutex.Mutex

	// answered holds, by Sandbox (namespace/name), the last restartRequest this agent
	// acted on: the cached status trails the write that records it, and a
	// request must restart the sandbox once, not once per stale read.
	mu       sync.Mutex
	answered map[string]string
}

// sandboxKernel is what the reconciler asks of the kernel's sandboxes
// service (hostagent.Agent, less the services it takes apart).
type sandboxKernel interface {
	Backend(class string) (backend.Backend, bool)
	Backends() []backend.Backend
	Ensure(ctx context.Context, spec backend.Spec) error
	EnsureRestarted(ctx context.Context, spec backend.Spec) (restarted bool, err error)
	Restart(ctx context.Context, spec backend.Spec) error
	Suspend(ctx context.Context, spec backend.Spec) (hostagent.Suspension, error)
	Checkpointed(spec backend.Spec) bool
	Remove(ctx context.Context, id string, keepPile bool) error
	Serves(id string) bool
	Alive(id string) bool
	Pending(sandboxes map[string]string)
	PendingFailed(id string, err error)
	RuntimeOf(id string) (hostagent.Runtime, bool)
	Jobs() *jobs.Manager
}

// warmPools is what the reconciler asks of the kernel's warm-pool
// service (hostagent.Pools).
type warmPools interface {
	ClaimWarm(spec backend.Spec) (id string, ok bool)
	UnclaimWarm(spec backend.Spec, id string)
}

// restartRequested says whether sbx asks for a restart not yet answered.
func (r *sandboxReconciler) restartRequested(sbx *playgroundv1alpha1.Sandbox) bool {
	want := sbx.Spec.RestartRequest
	if want == "" || want == sbx.Status.RestartRequest {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered[ownerOf(sbx)] != want
}

// restartAnswered records that the agent acted on the sandbox's request.
func (r *sandboxReconciler) restartAnswered(sbx *playgroundv1alpha1.Sandbox, request string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered == nil {
		r.answered = map[string]string{}
	}
	r.answered[ownerOf(sbx)] = request
}

// ownerOf is the owner of a Sandbox's sandbox ID in the node's records.
func ownerOf(sbx *playgroundv1alpha1.Sandbox) string { return sbx.Namespace + "/" + sbx.Name }

// idOf is the ID of the Sandbox's sandbox on this node, "" while it has
// none.
func (r *sandboxReconciler) idOf(sbx *playgroundv1alpha1.Sandbox) (string, error) {
	id, _, err := r.ids.Lookup(ownerOf(sbx))
	return id, err
}

// assignID returns the ID of sbx's sandbox on this node, recording one
// when it has none: a warm sandbox's from its backend's pool when one
// fits (its start is done: the Ensure that follows claims it), else a new
// one. A Sandbox with faculties waits for their builds and starts with
// them mounted: never a pooled one. A Sandbox on an image claims one of
// that image's pool only when img, the image the store gave its tenant,
// is set; a blank one never. claimed says that this call took the ID from
// a pool.
func (r *sandboxReconciler) assignID(sbx *playgroundv1alpha1.Sandbox, img *backend.Image) (id string, claimed bool, err error) {
	var warm string
	spec := specOf("", sbx)
	spec.Image = img
	id, used, err := r.ids.AssignFrom(ownerOf(sbx), func() string {
		if len(sbx.Bundles()) == 0 && sbx.Spec.FromSnapshot == "" && (sbx.Spec.Image == nil) == (img == nil) {
			warm, _ = r.pools.ClaimWarm(spec)
		}
		return warm
	})
	if warm != "" && !used {
		r.pools.UnclaimWarm(spec, warm)
	}
	return id, warm != "" && used && err == nil, err
}

// Reconcile provisions (or reattaches) one Sandbox, or destroys it.
func (r *sandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := r.client.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if sbx.Spec.NodeName != r.node { // the cache holds this node's only; be sure
		return ctrl.Result{}, nil
	}
	defer r.owners.Lock(ownerOf(sbx))()
	if !sbx.DeletionTimestamp.IsZero() {
		return pgreconcile.Result(r.reconcileDelete(ctx, sbx))
	}
	if !controllerutil.ContainsFinalizer(sbx, playgroundv1alpha1.SandboxFinalizer) {
		patch := client.MergeFromWithOptions(sbx.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(sbx, playgroundv1alpha1.SandboxFinalizer)
		if err := r.client.Patch(ctx, sbx, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return pgreconcile.Result(r.reconcileNormal(ctx, sbx))
}

func (r *sandboxReconciler) reconcileNormal(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) error {
	log := ctrl.LoggerFrom(ctx)
	if class := backendClass(sbx); !r.offers(class) {
		// A spec problem, not a backend one: retrying cannot help, and the
		// backend class is immutable, so only a new binding would.
		return r.failed(ctx, sbx, "Provision", pgreconcile.Stall(playgroundv1alpha1.ReasonBackendFailed,
			"Node %s offers the %s backends, not %s", r.node, strings.Join(backendNames(r.agent.Backends()), ", "), class))
	}
	// A sandbox not yet started starts on its image's digest, once the
	// manager has resolved it: before it takes an ID (or a warm sandbox).
	if prov := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition); prov == nil || prov.Status != metav1.ConditionTrue {
		if why := imageUnresolved(sbx); why != "" {
			return r.waitForImage(ctx, sbx, why)
		}
	}
	// A new sandbox on an image, where images are pooled, has its image
	// before its ID: the store gives it to the Sandbox's tenant as to any
	// start (a cached private image only once the registry has said,
	// under the tenant's credentials, that it may have it), and only then
	// may a pooled sandbox of it be claimed.
	claimImage, err := r.imageBeforeClaim(ctx, sbx)
	if err != nil {
		return r.imageFailed(ctx, sbx, err)
	}
	// The ID is recorded on the node before anything of the sandbox
	// exists, so that whatever is made under it is found again.
	id, claimed, err := r.assignID(sbx, claimImage.img)
	if err != nil {
		claimImage.drop()
		return r.failed(ctx, sbx, "Provision", fmt.Errorf("choosing the sandbox's ID: %w", err))
	}
	claimImage.keep(r.images, id)
	spec := specOf(id, sbx)

	prev := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	if sbx.Spec.Suspended {
		return r.reconcileSuspended(ctx, sbx, prev)
	}
	wasProvisioned := prev != nil && prev.Status == metav1.ConditionTrue
	if sbx.Spec.FromSnapshot != "" && !wasProvisioned {
		// A fork, first provisioned from its snapshot (a sandbox that
		// exists already ignores it).
		if spec.FromSnapshot, err = r.snapshotFor(ctx, sbx); err != nil {
			return r.waitForSnapshot(ctx, sbx, err)
		}
	}
	// Its init died (killed, out of memory): Ensure starts it again over the
	// same files; the processes it ran are gone. The agent says so when it
	// served the sandbox; a sandbox found dead by a new agent process is
	// seen here, before Ensure.
	restarting := wasProvisioned && !r.agent.Alive(spec.ID)

	restart := wasProvisioned && r.restartRequested(sbx)
	// The image is in the node's store, held while the sandbox exists; a
	// new digest (or none, or a first one) restarts a running sandbox.
	var ranImage string
	if be, ok := r.agent.Backend(backendClass(sbx)); ok && sbx.Spec.Image != nil && !be.Capabilities().Images {
		return r.imageFailed(ctx, sbx, &ImageError{Reason: playgroundv1alpha1.ReasonImageRefused, Refused: true,
			Err: fmt.Errorf("backend %s runs no image on node %s (oci, with runc or gVisor, and vm do): remove spec.image, or use backend oci or vm", backendClass(sbx), r.node)})
	}
	// A running sandbox keeps its condition while its new image is pulled.
	progress := r.pullProgress(ctx, sbx)
	if wasProvisioned {
		progress = nil
	}
	if spec.Image, ranImage, err = r.images.forSandbox(ctx, sbx, spec, progress); err != nil {
		return r.imageFailed(ctx, sbx, err)
	}
	imageChanged := wasProvisioned && ranImage != digestOf(spec.Image)
	// Resumed from a suspension that stopped its processes, it starts
	// again as after a restart; one that kept its memory is restored as
	// it was, with the faculties it ran.
	resumed := prev != nil && prev.Reason == playgroundv1alpha1.ReasonSuspended
	restoring := resumed && r.agent.Checkpointed(spec)
	var restarted bool
	if spec.Faculties, err = r.faculties.forSandbox(ctx, sbx, spec.ID, restart || imageChanged || restarting || (resumed && !restoring), !wasProvisioned); err != nil {
		return r.waitForFaculties(ctx, sbx, err)
	}
	// The signing key is in the pile before the tenant's first call. A
	// cold first start waits for it (the manager delivers it as the
	// Sandbox is bound) and writes it before the start; a later start
	// takes the newest delivered. A warm claim runs already, and waits
	// for nothing: it is reported provisioned at once, and its key goes
	// in after that report (keyLater) or as it is delivered, while the
	// agent holds the sandbox's calls until it is in; having run nothing
	// of its tenant's, it is not paused for it (Untouched). (Written
	// before the report, a key delivered before the claim would spare
	// the status write that says it, and put its write and sync back on
	// the claim's step.)
	named := sbx.Spec.Pile.SigningKey != nil
	keyLater := named && claimed
	if named {
		if sbx.Status.SigningKey == nil {
			// None reported yet: whatever the pile holds is read after
			// Ensure, and the calls wait for it meanwhile.
			r.signing.ExpectSigningKey(spec.ID, true)
			if keyLater {
				// Claimed just now: its first key goes in unpaused.
				r.signing.Untouched(spec.ID)
			}
		}
		if !keyLater {
			key := r.keys.keyOrWait(sbx.UID)
			if key == nil && prev == nil {
				return r.waitForKey(ctx, sbx, r.keyWaitFor(sbx))
			}
			r.signing.SetStartSigningKey(spec.ID, key)
			defer r.signing.SetStartSigningKey(spec.ID, nil)
		}
	} else {
		r.signing.ExpectSigningKey(spec.ID, false)
	}
	ensure := func() {
		if restart || imageChanged {
			err = r.agent.Restart(ctx, spec)
		} else {
			restarted, err = r.agent.EnsureRestarted(ctx, spec)
		}
	}
	if prev == nil {
		r.noticeSlowStart(ctx, sbx, fmt.Sprintf("Provisioning sandbox %s on node %s", spec.ID, r.node), ensure)
	} else {
		ensure()
	}
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down; the next agent picks it up
		}
		return r.failed(ctx, sbx, "Provision", fmt.Errorf("ensuring sandbox %s: %w", spec.ID, err))
	}
	r.faculties.started(spec.ID, spec.Faculties)
	if !wasProvisioned || imageChanged {
		r.imagePools.started(spec.Image)
	}
	r.idle.SetIdlePolicy(spec.ID, idlePolicy(sbx))
	r.usage.SetUsageLimits(spec.ID, usageLimits(sbx))
	// A request made before the sandbox first ran is met by that start.
	sbx.Status.RestartRequest = sbx.Spec.RestartRequest
	r.restartAnswered(sbx, sbx.Spec.RestartRequest)
	switch {
	case imageChanged && !restart:
		log.Info("Restarted the sandbox on its new image", "id", spec.ID, "from", ranImage, "to", digestOf(spec.Image))
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonImageChanged, "Restart",
			"Restarted sandbox %s on node %s on %s (it ran %s): every process in it was killed; its workspace, home and pile are kept", spec.ID, r.node, systemName(spec.Image), systemName(&backend.Image{Digest: ranImage}))
	case restart:
		log.Info("Restarted the sandbox as requested", "id", spec.ID, "request", sbx.Spec.RestartRequest)
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonRestarted, "Restart",
			"Restarted sandbox %s on node %s as requested (%q): every process in it was killed; its files are kept", spec.ID, r.node, sbx.Spec.RestartRequest)
	case restoring && restarted:
		log.Info("Started the sandbox afresh: its memory could not be restored", "id", spec.ID)
		r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonRestarted, "Resume",
			"Sandbox %s on node %s could not be restored from its suspension with its memory (its init's log on the node says why); started it again over its files (the processes it ran are gone)", spec.ID, r.node)
	case (restarting || restarted) && !resumed:
		// A resume starts a sandbox that its suspension stopped: that is
		// said below, as Normal; this is a crash's Warning.
		log.Info("Started the sandbox again: its init had exited", "id", spec.ID)
		r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, playgroundv1alpha1.ReasonRestarted, "Restart",
			"The init of sandbox %s on node %s had exited; started it again over its files (the processes it ran are gone)", spec.ID, r.node)
	}
	if !keyLater {
		if err := r.keyGate(ctx, sbx, spec); err != nil {
			return r.waitForKey(ctx, sbx, err)
		}
	}
	msg := fmt.Sprintf("Sandbox %s is provisioned on node %s", spec.ID, r.node) + r.storageFixed(spec) + r.caveat(spec)
	if err := r.setProvisioned(ctx, sbx, metav1.ConditionTrue, playgroundv1alpha1.ReasonProvisioned, msg); err != nil {
		return err
	}
	if keyLater {
		// Reported: the tenant's Ready goes on while its key goes in.
		log.Info("Provisioned the sandbox from the warm pool; its signing key goes in now", "id", spec.ID)
		if err := r.keyGate(ctx, sbx, spec); err != nil {
			return r.waitForKey(ctx, sbx, err)
		}
		// The key it holds, in its status.
		return r.setProvisioned(ctx, sbx, metav1.ConditionTrue, playgroundv1alpha1.ReasonProvisioned, msg)
	}
	if restoring && !restarted {
		log.Info("Restored the sandbox with its memory: its tenant is no longer suspended", "id", spec.ID)
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonProvisioned, "Resume",
			"Restored sandbox %s on node %s as it was suspended: its processes and jobs go on", spec.ID, r.node)
	} else if resumed {
		log.Info("Started the sandbox again: its tenant is no longer suspended", "id", spec.ID)
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonProvisioned, "Resume",
			"Started sandbox %s again on node %s over its files: its tenant is no longer suspended", spec.ID, r.node)
	}
	if !wasProvisioned && !resumed {
		// No Event: the Provisioned condition says it, and a new
		// tenant's path to Ready records none (each is an API write).
		log.Info("Provisioned the sandbox", "id", spec.ID)
	}
	return nil
}

// provisioningNotice is how long a sandbox's first start runs before the
// agent says, in its status, that it is provisioning it: most start in
// less, even in a burst, and go from bound to provisioned in one write of
// the status (and one of the manager's after it), not three. A start that
// takes longer (a VM, a loaded node) is seen doing so.
const provisioningNotice = 5 * time.Second

// noticeSlowStart runs start, and writes the Provisioned=False condition
// (reason Provisioning, with msg) only if start is still running after
// provisioningNotice. Once start returns, no notice is written: the
// caller's next write (provisioned, or failed) cannot be overtaken.
//
// One report of progress is enough: a sandbox that waited in this agent's
// queue past the manager's grace (a burst) already says, in the manager's
// words, that it waits for this agent, and gets no notice as well. In a
// burst of a thousand that is a write fewer for most sandboxes.
func (r *sandboxReconciler) noticeSlowStart(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, msg string, start func()) {
	var mu sync.Mutex
	done := false
	snapshot := sbx.DeepCopy()
	t := time.AfterFunc(provisioningNotice, func() {
		mu.Lock()
		defer mu.Unlock()
		if done || r.progressReported(ctx, snapshot) {
			return
		}
		if err := r.setProvisioned(ctx, snapshot, metav1.ConditionFalse, playgroundv1alpha1.ReasonProvisioning, msg); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "Saying that the sandbox is being provisioned")
		}
	})
	start()
	t.Stop()
	mu.Lock()
	done = true
	mu.Unlock()
}

// progressReported says whether the cache's copy of sbx already reports
// that its first start is under way: the manager's Ready condition is
// there (Pending, waiting for this agent) and no outcome of the agent's.
func (r *sandboxReconciler) progressReported(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) bool {
	cur := &playgroundv1alpha1.Sandbox{}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(sbx), cur); err != nil || cur.UID != sbx.UID {
		return false
	}
	return meta.FindStatusCondition(cur.Status.Conditions, playgroundv1alpha1.ReadyCondition) != nil &&
		meta.FindStatusCondition(cur.Status.Conditions, playgroundv1alpha1.ProvisionedCondition) == nil
}

// failed reports a failed action in a Warning event and the Provisioned
// condition, and returns err for Reconcile to map with internal/reconcile's
// Result. A StalledError (a spec this node cannot serve) carries its reason
// and message and ends the pass: only a change brings the sandbox back.
// Any other error is the backend's (the caller's wrapping says what was
// being done, the message is the backend's error as it was) and is
// retried with backoff: reason InsufficientStorage while the node keeps
// its disk reserve (space may be freed), BackendFailed otherwise.
func (r *sandboxReconciler) failed(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, action string, err error) error {
	var reason, msg string
	var stalled *pgreconcile.StalledError
	switch {
	case errors.As(err, &stalled):
		reason, msg = stalled.Reason, stalled.Message
	case errors.Is(err, backend.ErrInsufficientStorage):
		reason, msg = playgroundv1alpha1.ReasonInsufficientStorage, errors.Unwrap(err).Error()
	default:
		reason, msg = playgroundv1alpha1.ReasonBackendFailed, errors.Unwrap(err).Error()
	}
	msg = truncate(msg)
	r.recorder.Eventf(sbx, nil, corev1.EventTypeWarning, reason, action, "%s", msg)
	if serr := r.setProvisioned(ctx, sbx, metav1.ConditionFalse, reason, msg); serr != nil {
		// Not reported: retried even when stalled.
		return errors.Join(err, fmt.Errorf("reporting the failure: %w", serr))
	}
	return err
}

// reconcileSuspended stops the sandbox of a suspended tenant: its processes
// and jobs end, its files stay.
func (r *sandboxReconciler) reconcileSuspended(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, prev *metav1.Condition) error {
	id, err := r.ids.Assign(ownerOf(sbx))
	if err != nil {
		return r.failed(ctx, sbx, "Suspend", fmt.Errorf("choosing the sandbox's ID: %w", err))
	}
	spec := specOf(id, sbx)
	spec.Image = r.images.current(id)
	sus, err := r.agent.Suspend(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return r.failed(ctx, sbx, "Suspend", fmt.Errorf("suspending sandbox %s: %w", spec.ID, err))
	}
	var msg string
	if sus.KeptMemory {
		// Restored as it was, it runs the faculties it ran.
		msg = fmt.Sprintf("Sandbox %s is suspended on node %s with its memory: its processes and jobs are saved on the node's disk and go on where they were, not started again, when spec.suspended is cleared", spec.ID, r.node)
	} else {
		r.faculties.stopped(spec.ID)
		msg = fmt.Sprintf("Sandbox %s is stopped on node %s because its tenant is suspended; its files are kept and it starts again when spec.suspended is cleared, its processes and jobs not kept", spec.ID, r.node)
		if sus.Note != "" {
			msg += " (" + sus.Note + ")"
		}
	}
	if prev == nil || prev.Reason != playgroundv1alpha1.ReasonSuspended {
		ctrl.LoggerFrom(ctx).Info("Stopped the sandbox: its tenant is suspended", "id", spec.ID)
		r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonSuspended, "Suspend", "%s", msg)
	}
	return r.setProvisioned(ctx, sbx, metav1.ConditionFalse, playgroundv1alpha1.ReasonSuspended, msg)
}

// storageFixed says, for the Provisioned message, when the spec asks for
// other disk limits than the sandbox was provisioned with: they are fixed
// on the node, and a spec change does not resize the images.
func (r *sandboxReconciler) storageFixed(spec backend.Spec) string {
	be, _ := r.agent.Backend(spec.Backend)
	rep := be.Capabilities().StorageReporter
	if rep == nil {
		return ""
	}
	have, err := rep.Storage(spec.ID)
	if err != nil {
		return ""
	}
	want := spec.Storage
	differs := func(w, h int64) bool { return w != 0 && w != h }
	if !differs(want.LayerBytes, have.LayerBytes) && !differs(want.LayerInodes, have.LayerInodes) &&
		!differs(want.PileBytes, have.PileBytes) && !differs(want.PileInodes, have.PileInodes) {
		return ""
	}
	return fmt.Sprintf("; its storage keeps the limits it was provisioned with (writable layer %s and %d inodes, pile %s and %d inodes), not its spec's: limits are fixed on the node, create a new Sandbox for others",
		resource.NewQuantity(have.LayerBytes, resource.BinarySI), have.LayerInodes, resource.NewQuantity(have.PileBytes, resource.BinarySI), have.PileInodes)
}

func (r *sandboxReconciler) reconcileDelete(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) error {
	if !controllerutil.ContainsFinalizer(sbx, playgroundv1alpha1.SandboxFinalizer) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	id, err := r.idOf(sbx)
	if err != nil {
		return r.failed(ctx, sbx, "Destroy", fmt.Errorf("finding the sandbox's ID: %w", err))
	}
	if id == "" { // never provisioned on this node: nothing to destroy
		return r.removeFinalizer(ctx, sbx)
	}
	keepPile := sbx.Spec.Pile.ReclaimPolicy != playgroundv1alpha1.ReclaimDelete
	pile := "deleted"
	if keepPile {
		pile = "retained"
	}
	msg := fmt.Sprintf("Destroying sandbox %s on node %s; its pile is %s", id, r.node, pile)
	if err := r.setProvisioned(ctx, sbx, metav1.ConditionFalse, playgroundv1alpha1.ReasonTerminating, msg); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := r.agent.Remove(ctx, id, keepPile); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return r.failed(ctx, sbx, "Destroy", fmt.Errorf("destroying sandbox %s: %w", id, err))
	}
	r.images.release(id)
	// A retained pile keeps its record: a Sandbox re-created under the
	// same name finds it. Nothing else of the sandbox is left to find.
	if !keepPile {
		if err := r.ids.Release(ownerOf(sbx)); err != nil {
			return r.failed(ctx, sbx, "Destroy", err)
		}
	}
	r.mu.Lock()
	delete(r.answered, ownerOf(sbx))
	r.mu.Unlock()
	r.states.forget(sbx.UID)
	r.faculties.stopped(id)
	log.Info("Destroyed the sandbox", "id", id, "pile", pile)
	r.recorder.Eventf(sbx, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonTerminating, "Destroy",
		"Destroyed sandbox %s on node %s; its pile is %s", id, r.node, pile)
	return r.removeFinalizer(ctx, sbx)
}

// removeFinalizer lets a deleted Sandbox go. The pass has just written
// the Sandbox's status, so the object in hand is out of date: a conflict
// reads it again and retries at once, rather than waiting out the
// queue's backoff with the sandbox already destroyed.
func (r *sandboxReconciler) removeFinalizer(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) error {
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.reader.Get(ctx, client.ObjectKeyFromObject(sbx), sbx); err != nil {
				return err
			}
		}
		first = false
		if !controllerutil.ContainsFinalizer(sbx, playgroundv1alpha1.SandboxFinalizer) {
			return nil
		}
		patch := client.MergeFromWithOptions(sbx.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(sbx, playgroundv1alpha1.SandboxFinalizer)
		return r.client.Patch(ctx, sbx, patch)
	})
	return client.IgnoreNotFound(err)
}

// sandboxRateLimiter paces the retries of a Sandbox's failed passes: the
// default's exponential backoff grows to a quarter of an hour, which a
// sandbox that failed many times (a backend it cannot have) then waits
// out even for its deletion. A minute at most keeps a failing node
// readable and a deletion prompt.
func sandboxRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, time.Minute),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// caveat is what the sandbox's backend warns of on this node (a VM under
// emulation), as a sentence to append, or "".
func (r *sandboxReconciler) caveat(spec backend.Spec) string {
	be, ok := r.agent.Backend(spec.Backend)
	if !ok {
		return ""
	}
	if d := be.Capabilities().Describer; d != nil {
		if note, caveat := d.Describe(); caveat {
			return ". Note: " + note
		}
	}
	return ""
}

// agentConditions are the condition types the agent owns in a Sandbox's
// status; the manager owns the others.
var agentConditions = []string{
	playgroundv1alpha1.ProvisionedCondition, playgroundv1alpha1.RunningCondition,
	playgroundv1alpha1.JobsAdmittedCondition, playgroundv1alpha1.UsageLimitedCondition,
}

// setProvisioned applies the agent's status fields: the Provisioned
// condition with reason and message, Running, JobsAdmitted, UsageLimited,
// and sandboxID, endpoint, openHandles, restartRequest and faculties (as
// the last pass decided them) as the agent sees them now. It writes
// nothing when they are already so, and a change of Running alone waits
// for its pacing (states.go). Each condition keeps its transition time
// while its status holds.
func (r *sandboxReconciler) setProvisioned(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, status metav1.ConditionStatus, reason, message string) error {
	id, err := r.idOf(sbx)
	if err != nil {
		return err
	}
	handles := int32(r.sessions.OpenHandles(id))
	conds := slices.Clone(sbx.Status.Conditions)
	prevProv := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	provChanged := prevProv == nil || prevProv.Status != status || prevProv.Reason != reason
	changed := meta.SetStatusCondition(&conds, metav1.Condition{
		Type:               playgroundv1alpha1.ProvisionedCondition,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: sbx.Generation,
	})
	jobs := r.jobsAdmitted(id)
	jobs.ObservedGeneration = sbx.Generation
	if meta.SetStatusCondition(&conds, jobs) {
		changed = true
	}
	if limited := r.usageLimited(id); limited != nil {
		limited.ObservedGeneration = sbx.Generation
		if meta.SetStatusCondition(&conds, *limited) {
			changed = true
		}
	} else if meta.RemoveStatusCondition(&conds, playgroundv1alpha1.UsageLimitedCondition) {
		changed = true
	}
	facs := r.faculties.reported(id, sbx.Status.Faculties)
	usage, usageDue := r.usageStatus(id, sbx.Status.Usage)
	key := r.signingKeyStatus(id)
	others := changed || usageDue || sbx.Status.SandboxID != id || sbx.Status.Endpoint != r.endpoint || sbx.Status.OpenHandles != handles ||
		!equality.Semantic.DeepEqual(facs, sbx.Status.Faculties) || !equality.Semantic.DeepEqual(key, sbx.Status.SigningKey)
	// The runtime state: written with the rest, or alone once its pacing
	// lets it; until then the status keeps what it says.
	was := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.RunningCondition)
	running := r.running(id, status, reason)
	stateChanged := !sameRunning(was, running)
	now := time.Now()
	if stateChanged && !others {
		if wait := r.states.wait(sbx.UID, now); wait > 0 {
			r.states.later(sbx, wait)
			return nil
		}
	}
	if running != nil {
		running.ObservedGeneration = sbx.Generation
		meta.SetStatusCondition(&conds, *running)
	} else {
		meta.RemoveStatusCondition(&conds, playgroundv1alpha1.RunningCondition)
	}
	if !others && !stateChanged {
		return nil
	}
	// Every field the agent owns, every time: one left out would be removed.
	applied := playgroundv1alpha1ac.SandboxStatus().
		WithSandboxID(id).
		WithEndpoint(r.endpoint).
		WithOpenHandles(handles).
		WithRestartRequest(sbx.Status.RestartRequest).
		WithConditions(pgreconcile.ApplyConditions(conds, agentConditions...)...).
		WithFaculties(applyFaculties(facs)...)
	if usage != nil {
		applied = applied.WithUsage(pgreconcile.ApplyUsage(usage))
	}
	if key != nil {
		applied = applied.WithSigningKey(playgroundv1alpha1ac.SigningKeyStatus().WithFingerprint(key.Fingerprint).WithPublicKey(key.PublicKey))
	}
	if err := r.client.Status().Apply(ctx, playgroundv1alpha1ac.Sandbox(sbx.Name, sbx.Namespace).WithStatus(applied),
		client.FieldOwner(playgroundv1alpha1.AgentFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the status of sandbox %s/%s: %w", sbx.Namespace, sbx.Name, err)
	}
	if stateChanged {
		r.states.wrote(sbx.UID, now)
		r.reportState(ctx, sbx, was, running, provChanged)
	}
	sbx.Status.Conditions, sbx.Status.Faculties, sbx.Status.Usage, sbx.Status.SigningKey = conds, facs, usage, key
	sbx.Status.SandboxID, sbx.Status.Endpoint, sbx.Status.OpenHandles = id, r.endpoint, handles
	return nil
}

// jobsAdmitted is the JobsAdmitted condition of a sandbox as the agent's
// job manager sees it now.
func (r *sandboxReconciler) jobsAdmitted(id string) metav1.Condition {
	st := r.agent.Jobs().AdmissionStatus(id)
	if !st.Halted {
		return metav1.Condition{Type: playgroundv1alpha1.JobsAdmittedCondition, Status: metav1.ConditionTrue,
			Reason: playgroundv1alpha1.ReasonJobsAdmitted, Message: "Background jobs are admitted"}
	}
	return metav1.Condition{Type: playgroundv1alpha1.JobsAdmittedCondition, Status: metav1.ConditionFalse,
		Reason: playgroundv1alpha1.ReasonProofLost,
		Message: truncate(fmt.Sprintf("No background job starts in this sandbox since %s: %s. Restart the sandbox to kill every process in it and lift this (kubectl playground tenant restart, or set spec.restartRequest)",
			st.Since.UTC().Format(time.RFC3339), st.Reason))}
}

// reattachment is one sandbox an agent that starts takes over.
type reattachment struct {
	sbx  *playgroundv1alpha1.Sandbox
	spec backend.Spec
}

// pendingReattach lists the sandboxes this node provisioned before (those
// carrying the finalizer), which the agent takes over so that a restart
// keeps their IDs, files and processes, and tells the agent they are on
// their way (Agent.Pending).
func (r *sandboxReconciler) pendingReattach(ctx context.Context) ([]reattachment, error) {
	log := ctrl.LoggerFrom(ctx)
	var list playgroundv1alpha1.SandboxList
	if err := r.reader.List(ctx, &list, client.MatchingFieldsSelector{Selector: onNode(r.node)}); err != nil {
		return nil, fmt.Errorf("listing the sandboxes of node %s: %w", r.node, err)
	}
	var out []reattachment
	pending := map[string]string{}
	for i := range list.Items {
		sbx := &list.Items[i]
		if !sbx.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(sbx, playgroundv1alpha1.SandboxFinalizer) ||
			!r.offers(backendClass(sbx)) {
			continue
		}
		id, err := r.idOf(sbx)
		if err == nil && id == "" && sbx.Status.SandboxID == "" {
			// Bound with the finalizer at its creation, not provisioned
			// yet: the reconciler provisions it.
			continue
		}
		if err != nil || id == "" {
			log.Error(err, "A sandbox provisioned here has no ID on record; the reconciler provisions it anew", "sandbox", klog.KObj(sbx))
			continue
		}
		// A running sandbox keeps the builds it has, as its status says.
		spec := specOf(id, sbx)
		spec.Faculties = r.faculties.fromStatus(sbx)
		if spec.Image, err = r.images.reattach(sbx, id); err != nil {
			// Not on the node (its store was cleared): the reconciler
			// pulls it and starts the sandbox again on it.
			log.Error(err, "A sandbox's image is not in the node's store; the reconciler pulls it", "sandbox", klog.KObj(sbx))
			pending[id] = spec.Tenant
			continue
		}
		// Its image is in use on the node, as before the restart.
		r.imagePools.started(spec.Image)
		out = append(out, reattachment{sbx: sbx, spec: spec})
		pending[id] = spec.Tenant
	}
	r.agent.Pending(pending)
	return out, nil
}

// reattachAll takes over the sandboxes of pendingReattach, workers at once,
// each within timeout: a sandbox whose take-over hangs (its processes hold
// everything it has, its VM does not answer) holds no other, and holds the
// reconciler, which then reports and retries it, no longer than timeout.
func (r *sandboxReconciler) reattachAll(ctx context.Context, todo []reattachment, workers int, timeout time.Duration) error {
	log := ctrl.LoggerFrom(ctx)
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, max(workers, 1))
		done atomic.Int32
	)
	for _, ra := range todo {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ensure := r.agent.Ensure
			if ra.sbx.Spec.Suspended {
				ensure = func(ctx context.Context, spec backend.Spec) error {
					_, err := r.agent.Suspend(ctx, spec)
					return err
				}
			}
			sctx, cancel := context.WithTimeout(ctx, timeout)
			err := ensure(sctx, ra.spec)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if sctx.Err() != nil {
					err = fmt.Errorf("taking sandbox %s over did not end within %s: %w", ra.spec.ID, timeout, err)
				}
				r.agent.PendingFailed(ra.spec.ID, err)
				log.Error(err, "Reattaching a sandbox failed; the reconciler reports it and retries", "sandbox", klog.KObj(ra.sbx))
				return
			}
			if !ra.sbx.Spec.Suspended {
				r.faculties.started(ra.spec.ID, ra.spec.Faculties)
			}
			done.Add(1)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	log.Info("Reattached the node's sandboxes", "reattached", done.Load(), "of", len(todo))
	return nil
}

// specOf is what the backend needs of a Sandbox whose sandbox has the ID.
// idlePolicy is the Sandbox's spec.idleSuspend as the agent takes it.
func idlePolicy(sbx *playgroundv1alpha1.Sandbox) hostagent.IdlePolicy {
	if sbx.Spec.IdleSuspend == nil {
		return hostagent.IdlePolicy{}
	}
	is := sbx.Spec.IdleSuspend
	return hostagent.IdlePolicy{After: is.After.Duration, WithRunningJobs: is.WithRunningJobs, Pause: is.Mode == playgroundv1alpha1.IdleModePause}
}

func specOf(id string, sbx *playgroundv1alpha1.Sandbox) backend.Spec {
	spec := backend.Spec{
		ID:          id,
		Tenant:      sbx.Namespace + "/" + sbx.Spec.TenantRef.Name,
		Backend:     backendClass(sbx),
		Isolation:   string(sbx.Spec.Isolation),
		Persona:     sbx.Spec.Persona,
		LoginScript: sbx.Spec.LoginProfile.Script,
	}
	res := sbx.Spec.Resources
	if res.CPU != nil {
		spec.Resources.CPUMillis = res.CPU.MilliValue()
	}
	if res.Memory != nil {
		spec.Resources.MemoryBytes = res.Memory.Value()
	}
	if res.PIDs != nil {
		spec.Resources.PIDs = *res.PIDs
	}
	st := sbx.Spec.Storage
	if st.Size != nil {
		spec.Storage.LayerBytes = st.Size.Value()
	}
	if st.Inodes != nil {
		spec.Storage.LayerInodes = *st.Inodes
	}
	if p := sbx.Spec.Pile; p.Size != nil {
		spec.Storage.PileBytes = p.Size.Value()
	}
	if p := sbx.Spec.Pile; p.Inodes != nil {
		spec.Storage.PileInodes = *p.Inodes
	}
	for _, e := range sbx.Spec.LoginProfile.Env {
		spec.LoginEnv = append(spec.LoginEnv, backend.EnvVar{Name: e.Name, Value: e.Value})
	}
	// The API server refuses a list without mode egress; the mode is
	// checked again here so that a list alone never opens a network.
	if sbx.Spec.Network.Mode == playgroundv1alpha1.NetworkEgress {
		for _, r := range sbx.Spec.Network.Egress {
			spec.Egress = append(spec.Egress, backend.EgressRule{CIDR: r.CIDR, Host: r.Host, Ports: slices.Clone(r.Ports), CheckServerName: r.CheckServerName, Brokered: r.Credential != nil})
		}
	}
	return spec
}

func backendClass(sbx *playgroundv1alpha1.Sandbox) string {
	return string(playgroundv1alpha1.BackendClassOf(sbx))
}

// truncate bounds s to maxMessage bytes on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// resync compares, every interval, what the agent serves with the cached
// Sandboxes' status and queues the ones that drifted: session handles open
// and close without any API event, and a status may be lost or edited.
type resync struct {
	client client.Reader
	cache  cache.Cache
	r      *sandboxReconciler
	every  time.Duration
	out    chan<- event.GenericEvent
}

func (s *resync) Start(ctx context.Context) error {
	if !s.cache.WaitForCacheSync(ctx) {
		return nil
	}
	wait.UntilWithContext(ctx, s.queueDrifted, s.every)
	return nil
}

// queueDrifted queues the Sandboxes whose status drifted from what the
// agent serves.
func (s *resync) queueDrifted(ctx context.Context) {
	var list playgroundv1alpha1.SandboxList
	if err := s.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the node's sandboxes from the cache")
		return
	}
	for i := range list.Items {
		sbx := &list.Items[i]
		if !s.drifted(sbx) {
			continue
		}
		select {
		case s.out <- event.GenericEvent{Object: sbx}:
		default: // full: the next pass tries again
		}
	}
}

func (s *resync) drifted(sbx *playgroundv1alpha1.Sandbox) bool {
	if sbx.Spec.NodeName != s.r.node || !sbx.DeletionTimestamp.IsZero() {
		return false
	}
	c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	switch {
	case c == nil:
		// Provisioned here before (the finalizer says so) but the status
		// was lost: report again.
		return controllerutil.ContainsFinalizer(sbx, playgroundv1alpha1.SandboxFinalizer)
	case c.Status != metav1.ConditionTrue:
		return false // in progress or failing: the reconciler's backoff owns it
	}
	id, err := s.r.idOf(sbx)
	if err != nil || id == "" {
		return true // its reconciler says why
	}
	halted := s.r.agent.Jobs().AdmissionStatus(id).Halted
	return c.ObservedGeneration != sbx.Generation || sbx.Status.SandboxID != id ||
		halted != meta.IsStatusConditionFalse(sbx.Status.Conditions, playgroundv1alpha1.JobsAdmittedCondition) ||
		sbx.Status.Endpoint != s.r.endpoint || sbx.Status.OpenHandles != int32(s.r.sessions.OpenHandles(id)) ||
		!s.r.agent.Alive(id) || s.r.usageDue(id, sbx.Status.Usage) || usageLimitedDrifted(sbx, s.r.usageLimited(id)) ||
		!equality.Semantic.DeepEqual(s.r.signingKeyStatus(id), sbx.Status.SigningKey) || s.r.stateDue(sbx, id, c)
}

// stateDue says whether sbx's status does not say the runtime state of its
// sandbox id, and its pacing lets it be written now: a change whose
// notice was dropped, or whose paced write was.
func (r *sandboxReconciler) stateDue(sbx *playgroundv1alpha1.Sandbox, id string, prov *metav1.Condition) bool {
	was := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.RunningCondition)
	return !sameRunning(was, r.running(id, prov.Status, prov.Reason)) && r.states.wait(sbx.UID, time.Now()) == 0
}

// offers says whether this node's agent has a backend of the class.
func (r *sandboxReconciler) offers(class string) bool {
	_, ok := r.agent.Backend(class)
	return ok
}
