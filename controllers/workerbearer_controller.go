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
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/bearermirror"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
	"github.com/playground-dev/playground/internal/selfowner"
)

// Index keys of mappingKeys for the copies of bearers: the bearer Secret
// a service mapping names (in its namespace), and its shard (package
// bearermirror), for the mappings that name a bearer.
func bearerKey(secret string) string  { return "bearer/" + secret }
func bearerShardKey(shard int) string { return "bearer-shard/" + strconv.Itoa(shard) }

// bearerIndexKeys are the index values of a mapping that has a service
// destination and a bearer.
func bearerIndexKeys(wm *playgroundv1alpha1.WorkerMapping) []string {
	ref := wm.Spec.BearerSecretRef
	if wm.Spec.Destination.Service == nil || ref == nil {
		return nil
	}
	return []string{bearerKey(ref.Name), bearerShardKey(bearermirror.ShardOf(wm.Namespace, wm.Name))}
}

// BearerCacheOptions narrow the cache of the teams' bearer Secrets to
// the Secrets of type WorkerBearerSecretType: the type a service mapping's
// bearerSecretRef must have, so no other Secret is held.
func BearerCacheOptions() cache.Options {
	return cache.Options{ReaderFailOnMissingInformer: true, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Field:     fields.OneTermEqualSelector("type", playgroundv1alpha1.WorkerBearerSecretType),
			Transform: cache.TransformStripManagedFields(),
		},
	}}
}

// CopyCacheOptions narrow the cache of the copies of bearers to the
// Secrets of type bearermirror.SecretType in the lease namespace.
func CopyCacheOptions(opts Options) cache.Options {
	opts.defaults()
	return cache.Options{ReaderFailOnMissingInformer: true, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{opts.LeaseNamespace: {}},
			Field:      fields.OneTermEqualSelector("type", string(bearermirror.SecretType)),
			Transform:  cache.TransformStripManagedFields(),
		},
	}}
}

// bearerCopies is what the WorkerMapping and WorkerBearer reconcilers
// share: a cache of the teams' bearer Secrets, one of the copies, and the
// namespace of the copies. The manager's own cache holds no Secret but
// credential Secrets (CacheOptions), and a cache has one selector per
// kind: each of these is a cache of its own.
type bearerCopies struct {
	bearers   cache.Cache
	copies    cache.Cache
	namespace string
}

// newBearerCopies makes the caches of bearerCopies and adds them to mgr,
// which starts them.
func newBearerCopies(mgr ctrl.Manager, opts Options) (*bearerCopies, error) {
	opts.defaults()
	newCache := func(o cache.Options) (cache.Cache, error) {
		o.Scheme, o.Mapper, o.HTTPClient = mgr.GetScheme(), mgr.GetRESTMapper(), mgr.GetHTTPClient()
		c, err := cache.New(mgr.GetConfig(), o)
		if err != nil {
			return nil, err
		}
		return c, mgr.Add(c)
	}
	bearers, err := newCache(BearerCacheOptions())
	if err != nil {
		return nil, fmt.Errorf("the cache of bearer Secrets: %w", err)
	}
	copies, err := newCache(CopyCacheOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("the cache of the copies of bearers: %w", err)
	}
	return &bearerCopies{bearers: bearers, copies: copies, namespace: opts.LeaseNamespace}, nil
}

// shard reads the Secret of a shard from the cache (nil when there is
// none, or when it is not of bearermirror.SecretType).
func (b *bearerCopies) shard(ctx context.Context, shard int) (*corev1.Secret, error) {
	var s corev1.Secret
	err := b.copies.Get(ctx, client.ObjectKey{Namespace: b.namespace, Name: bearermirror.SecretName(shard)}, &s)
	if apierrors.IsNotFound(err) || (err == nil && s.Type != bearermirror.SecretType) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the copies of worker bearers %s/%s: %w", b.namespace, bearermirror.SecretName(shard), err)
	}
	return &s, nil
}

// WorkerBearerReconciler copies the internal bearer of each service
// WorkerMapping, from the team's Secret its spec.bearerSecretRef names,
// into the Secrets of package bearermirror in the lease namespace: the
// only Secrets the gateway may read, by name. The gateway, the component
// the internet reaches, then has no right on any team's Secret, nor on
// the installation's others (the agent CA's key).
//
// Each request is one shard: every copy in its Secret is worked out again
// from the mappings of the shard and their Secrets, as the caches have
// them, and the Secret is written when that differs. A copy is made only
// of a Secret of type WorkerBearerSecretType (the only ones its cache
// holds), of a bearer that bearermirror.Bearer accepts; a mapping deleted
// or being deleted, one whose Secret is gone, changed or no longer holds
// the key, loses its copy at the next pass. A rotated bearer is copied as
// soon as the cache sees the Secret change; every shard is also worked
// out again every bearerAudit, and when the manager starts.
type WorkerBearerReconciler struct {
	client.Client
	// Owner owns the Secrets it creates (package selfowner); nil leaves
	// them unowned.
	Owner *selfowner.Owner

	copies *bearerCopies
}

// The copies are written with the manager's rights on Secrets (the
// Tenant reconciler's markers: get, list, watch, create, update, delete).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=playground.dev,resources=workermappings,verbs=get;list;watch

// Reconcile works out one shard's Secret again and writes it if it changed.
func (r *WorkerBearerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	shard, ok := bearermirror.ShardOfName(req.Name)
	if !ok || req.Namespace != r.copies.namespace {
		return ctrl.Result{}, nil
	}
	entries, err := r.entries(ctx, shard)
	if err != nil {
		return ctrl.Result{}, err
	}
	var cur corev1.Secret
	err = r.copies.copies.Get(ctx, req.NamespacedName, &cur)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading the copies of worker bearers %s: %w", req, err)
	}
	data, left := bearermirror.Layout(cur.Data, entries)
	log := ctrl.LoggerFrom(ctx)
	if len(left) > 0 {
		// Each mapping left out says so in its status (WorkerMapping
		// reconciler, ReasonBearerNotMirrored).
		log.Info("Worker bearers left out of their shard for want of room", "secret", req.String(), "held", len(data), "leftOut", len(left))
	}
	switch owned := exists && r.Owner.Own(&cur); {
	case !exists && len(data) == 0:
		return ctrl.Result{RequeueAfter: bearerAudit}, nil
	case !exists:
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name, Labels: map[string]string{bearerCopyLabel: bearerCopyValue}},
			Type:       bearermirror.SecretType,
			Data:       data,
		}
		r.Owner.Own(s)
		if err := r.Create(ctx, s); err != nil {
			// AlreadyExists: the cache has not seen it yet (the next pass
			// updates it), or a Secret of that name of another type is
			// in the way, which the copies' cache does not hold.
			return ctrl.Result{}, fmt.Errorf("creating the copies of worker bearers %s (a Secret of that name not of type %s is in the way until it is deleted): %w", req, bearermirror.SecretType, err)
		}
	case !owned && maps.EqualFunc(cur.Data, data, bytes.Equal):
		return ctrl.Result{RequeueAfter: bearerAudit}, nil
	default:
		cur.Data = data
		if err := r.Update(ctx, &cur); err != nil {
			return ctrl.Result{}, fmt.Errorf("updating the copies of worker bearers %s: %w", req, err)
		}
	}
	log.V(1).Info("Copied the worker bearers of a shard", "secret", req.String(), "held", len(data))
	return ctrl.Result{RequeueAfter: bearerAudit}, nil
}

// bearerCopyLabel marks the Secrets of the copies as Playground's.
const (
	bearerCopyLabel = "playground.dev/component"
	bearerCopyValue = "worker-bearers"
)

// entries are the bearers of the mappings of a shard that may be copied.
func (r *WorkerBearerReconciler) entries(ctx context.Context, shard int) ([]bearermirror.Entry, error) {
	var list playgroundv1alpha1.WorkerMappingList
	if err := r.List(ctx, &list, client.MatchingFields{workerMappingIndex: bearerShardKey(shard)}); err != nil {
		return nil, fmt.Errorf("listing the worker mappings of bearer shard %d: %w", shard, err)
	}
	var entries []bearermirror.Entry
	for i := range list.Items {
		wm := &list.Items[i]
		ref := wm.Spec.BearerSecretRef
		if !wm.DeletionTimestamp.IsZero() || ref == nil || wm.Spec.Destination.Service == nil {
			continue
		}
		var s corev1.Secret
		if err := r.copies.bearers.Get(ctx, client.ObjectKey{Namespace: wm.Namespace, Name: ref.Name}, &s); err != nil {
			if apierrors.IsNotFound(err) { // missing, or of another type
				continue
			}
			return nil, fmt.Errorf("reading the bearer Secret %s/%s: %w", wm.Namespace, ref.Name, err)
		}
		if s.Type != playgroundv1alpha1.WorkerBearerSecretType {
			continue
		}
		b, err := bearermirror.Bearer(s.Data[cmp.Or(ref.Key, playgroundv1alpha1.CredentialTokenKey)])
		if err != nil {
			continue // the mapping's status says why (checkBearer)
		}
		entries = append(entries, bearermirror.Entry{Namespace: wm.Namespace, Name: wm.Name, Bearer: b})
	}
	return entries, nil
}

// SetupWithManager registers the reconciler: a request per shard, from a
// change of its Secret, of a mapping's spec (or its creation or
// deletion), of a bearer Secret a mapping of it names, and one for every
// shard when the manager starts (what changed while none ran).
func (r *WorkerBearerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.copies == nil {
		return fmt.Errorf("the worker bearer reconciler has no caches of bearers")
	}
	request := func(shard int) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: r.copies.namespace, Name: bearermirror.SecretName(shard)}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("workerbearer").
		WatchesRawSource(crsource.Kind(r.copies.copies, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		Watches(&playgroundv1alpha1.WorkerMapping{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{request(bearermirror.ShardOf(o.GetNamespace(), o.GetName()))}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(crsource.Kind(r.copies.bearers, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
			var list playgroundv1alpha1.WorkerMappingList
			if err := r.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingFields{workerMappingIndex: bearerKey(s.Name)}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing the worker mappings of a bearer Secret", "secret", s.Namespace+"/"+s.Name)
				return nil
			}
			var reqs []reconcile.Request
			for i := range list.Items {
				if req := request(bearermirror.ShardOf(list.Items[i].Namespace, list.Items[i].Name)); !slices.Contains(reqs, req) {
					reqs = append(reqs, req)
				}
			}
			return reqs
		}))).
		WatchesRawSource(crsource.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			for i := range bearermirror.Shards {
				q.Add(request(i))
			}
			return nil
		})).
		Complete(r)
}

// copiesChanged enqueues the mappings whose copy came or went in a
// shard's Secret: Ready waits for it (checkCopied).
func (r *WorkerMappingReconciler) copiesChanged() handler.TypedEventHandler[*corev1.Secret, reconcile.Request] {
	changed := func(ctx context.Context, name string, before, after map[string][]byte, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		shard, ok := bearermirror.ShardOfName(name)
		if !ok {
			return
		}
		keys := map[string]bool{}
		for k := range before {
			if _, ok := after[k]; !ok {
				keys[k] = true
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok {
				keys[k] = true
			}
		}
		if len(keys) == 0 {
			return
		}
		var list playgroundv1alpha1.WorkerMappingList
		if err := r.List(ctx, &list, client.MatchingFields{workerMappingIndex: bearerShardKey(shard)}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the worker mappings of a bearer shard", "shard", shard)
			return
		}
		for i := range list.Items {
			if keys[bearermirror.Key(list.Items[i].Namespace, list.Items[i].Name)] {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
	}
	return handler.TypedFuncs[*corev1.Secret, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*corev1.Secret], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			changed(ctx, e.Object.Name, nil, e.Object.Data, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*corev1.Secret], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			changed(ctx, e.ObjectNew.Name, e.ObjectOld.Data, e.ObjectNew.Data, q)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*corev1.Secret], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			changed(ctx, e.Object.Name, e.Object.Data, nil, q)
		},
	}
}

// checkCopied returns, while the gateway cannot present the mapping's
// bearer, the resolution that says why (nil once it can): the gateway
// reads it only from its copy (WorkerBearerReconciler).
func (r *WorkerMappingReconciler) checkCopied(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping, bearer string) *resolution {
	shard := bearermirror.ShardOf(wm.Namespace, wm.Name)
	s, err := r.copies.shard(ctx, shard)
	if err != nil {
		f := failed(pgreconcile.ReasonError, err)
		return &f
	}
	key := bearermirror.Key(wm.Namespace, wm.Name)
	var data map[string][]byte
	if s != nil {
		data = s.Data
	}
	if _, ok := data[key]; ok {
		return nil
	}
	name := r.copies.namespace + "/" + bearermirror.SecretName(shard)
	used := bearermirror.Used(data)
	if used+bearermirror.EntryBytes(key, bearer) <= bearermirror.MaxShardBytes {
		res := notReady(ReasonBearerNotMirrored, true, "Waiting for the manager to copy the bearer of Secret %s into Secret %s, the only place the gateway reads it from",
			wm.Spec.BearerSecretRef.Name, name)
		return &res
	}
	largest, bytes := bearermirror.Largest(data)
	if largest != wm.Namespace {
		res := notReady(ReasonBearerNotMirrored, true, "Waiting for the manager to copy the bearer of Secret %s into Secret %s, the only place the gateway reads it from: it is full, and namespace %s, which holds the most of it (%d bytes), gives way",
			wm.Spec.BearerSecretRef.Name, name, largest, bytes)
		return &res
	}
	res := stalled(ReasonBearerNotMirrored, "The gateway's copies of worker bearers have no room for this mapping's: Secret %s, where the gateway reads it, holds %d of its %d bytes, and this namespace holds the most of it (%d bytes), so its mappings give way first: delete mappings of this namespace, or use shorter bearers (docs/workers.md, \"Bearers\")",
		name, used, bearermirror.MaxShardBytes, bytes)
	return &res
}
