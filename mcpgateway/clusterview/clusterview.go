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

// Package clusterview is the gateway's read-only view of the cluster: the
// Tenants, indexed by the SHA-256 of their current token that the manager
// publishes in their status, their Sandboxes and, for tenants of the
// workers catalog, their WorkerMappings and the manager's copies of their
// workers' bearers, from informers. Of the Secrets it reads only those
// copies, by name (package bearermirror): no team's Secret. It answers
// "whose token is this?", "where is this tenant's sandbox?" and "where
// does this tenant's worker listen, with which bearer?", and it says when
// it cannot be trusted: before the first sync, and when a watch has been
// broken for longer than a bound. Callers refuse to serve then (fail
// closed).
package clusterview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/bearermirror"
	"github.com/playground-dev/playground/internal/scheme"
)

// DefaultStaleAfter is how long a broken watch is tolerated before the view
// refuses to answer. Within it the reflector's backoff (up to 30 s between
// attempts) normally re-establishes the watch.
const DefaultStaleAfter = 30 * time.Second

// tokenIndex indexes the Tenants by status.credentials.tokenSHA256.
const tokenIndex = "tokenSHA256"

// tenantRefIndex indexes the WorkerMappings by the tenant they route,
// "namespace/name".
const tenantRefIndex = "tenantRef"

// Options configure a View.
type Options struct {
	// Namespace limits the view to one namespace; empty means all.
	Namespace string
	// Name limits Tenants and Sandboxes to objects of this name (stdio mode
	// serves one tenant and may only be allowed to read its own objects).
	Name string
	// Credentials enables Authenticate: bearer tokens are looked up by
	// their hash among the Tenants' status.credentials.tokenSHA256. Stdio
	// mode, authorised by the caller's kubeconfig, does without.
	Credentials bool
	// LeaseNamespace, when set, makes the view track the agents'
	// registrations there, so that the gateway sends its agent token only
	// to an endpoint an agent registered (see Agent).
	LeaseNamespace string
	// Catalog, when set, is the only catalog served: Tenant refuses
	// tenants of another with a WrongCatalogError. Empty serves each
	// tenant the catalog it names.
	Catalog playgroundv1alpha1.Catalog
	// WorkerMappings makes the view track WorkerMappings (see
	// WorkerMapping), for the workers catalog.
	WorkerMappings bool
	// WorkerBearers makes the view track the manager's copies of the
	// service workers' bearers in LeaseNamespace (see WorkerBearer): each
	// Secret of package bearermirror, by name, and no other.
	WorkerBearers bool
	// StaleAfter bounds how long a broken watch is tolerated; zero means
	// DefaultStaleAfter.
	StaleAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives watch errors (never object contents).
	Logger logr.Logger
}

// View is the gateway's cache of Tenants (with their token hashes) and
// Sandboxes.
type View struct {
	opts      Options
	tenants   *tracked
	sandboxes *tracked
	leases    *tracked   // nil without Options.LeaseNamespace
	mappings  *tracked   // nil without Options.WorkerMappings
	bearers   []*tracked // by shard; nil without Options.WorkerBearers
	// reader reads a registration the cache saw lapse again from the API
	// server (Agent); rechecks are its last answers, by node.
	reader   client.Reader
	recheckM sync.Mutex
	rechecks map[string]recheck
}

// recheck is a registration read from the API server at a time.
type recheck struct {
	at  time.Time
	reg agentlease.Registration
	ok  bool
}

// recheckEvery bounds the API server reads of a node's lapsed
// registration: one a second, whatever the calls for its tenants.
const recheckEvery = time.Second

// Identity is the tenant a credential belongs to.
type Identity struct {
	Namespace string
	Name      string
}

// String is the tenant as the host agents know it: "namespace/name".
func (i Identity) String() string { return i.Namespace + "/" + i.Name }

// Errors of Authenticate and Tenant. Their messages are safe to show to the
// caller.
var (
	// ErrUnknownToken: no Tenant publishes this token's hash (never issued
	// by the manager, rotated away, its Tenant deleted, or its Secret not
	// the Tenant's own).
	ErrUnknownToken = errors.New("the bearer token is not a current tenant credential: it is wrong, was rotated, or its tenant was deleted; use the token in the tenant's credential Secret")
	// ErrNotReady: the view cannot be trusted right now.
	ErrNotReady = errors.New("the gateway's view of credentials is not current")
)

// SuspendedError refuses a suspended tenant.
type SuspendedError struct{ Tenant Identity }

func (e *SuspendedError) Error() string {
	return fmt.Sprintf("tenant %s is suspended: an operator set spec.suspended on the Tenant; access returns with the same token when it is cleared", e.Tenant)
}

// WrongCatalogError refuses a tenant configured for another catalog than the
// one this gateway serves.
type WrongCatalogError struct {
	Tenant  Identity
	Catalog playgroundv1alpha1.Catalog
}

func (e *WrongCatalogError) Error() string {
	return fmt.Sprintf("tenant %s is configured for the %q catalog, which this gateway does not serve: connect to a gateway of that catalog", e.Tenant, e.Catalog)
}

// CatalogOf is the catalog a Tenant is served (its spec's, sandbox when
// unset).
func CatalogOf(t *playgroundv1alpha1.Tenant) playgroundv1alpha1.Catalog {
	if t.Spec.Catalog == "" {
		return playgroundv1alpha1.CatalogSandbox
	}
	return t.Spec.Catalog
}

// ToolsOf is the tool set t is served (standard when unset).
func ToolsOf(t *playgroundv1alpha1.Tenant) playgroundv1alpha1.ToolSet {
	if t.Spec.Tools == "" {
		return playgroundv1alpha1.ToolSetStandard
	}
	return t.Spec.Tools
}

// New returns a view over the API server of cfg; Start runs it.
func New(cfg *rest.Config, opts Options) (*View, error) {
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("creating a client of the API server: %w", err)
	}
	v := &View{opts: opts, reader: cl, rechecks: map[string]recheck{}}
	var nameSel fields.Selector
	if opts.Name != "" {
		nameSel = fields.OneTermEqualSelector("metadata.name", opts.Name)
	}
	if opts.LeaseNamespace != "" {
		v.leases = v.newTracked("agent registrations", cl, &coordinationv1.Lease{}, func() client.ObjectList { return &coordinationv1.LeaseList{} },
			nil, stripManagedFields)
		lw := v.leases.lw
		lw.namespace = opts.LeaseNamespace
		lw.labels = labels.SelectorFromSet(labels.Set{agentlease.LabelAgent: "true"})
	}
	v.tenants = v.newTracked("Tenants", cl, &playgroundv1alpha1.Tenant{}, func() client.ObjectList { return &playgroundv1alpha1.TenantList{} },
		nameSel, stripManagedFields)
	if err := v.tenants.informer.AddIndexers(toolscache.Indexers{tokenIndex: tokenHashes}); err != nil {
		return nil, err
	}
	v.sandboxes = v.newTracked("Sandboxes", cl, &playgroundv1alpha1.Sandbox{}, func() client.ObjectList { return &playgroundv1alpha1.SandboxList{} },
		nameSel, stripManagedFields)
	if opts.WorkerMappings {
		// All of the namespace's: a mapping's name need not be its tenant's.
		v.mappings = v.newTracked("WorkerMappings", cl, &playgroundv1alpha1.WorkerMapping{}, func() client.ObjectList { return &playgroundv1alpha1.WorkerMappingList{} },
			nil, stripManagedFields)
		if err := v.mappings.informer.AddIndexers(toolscache.Indexers{tenantRefIndex: mappedTenant}); err != nil {
			return nil, err
		}
	}
	if opts.WorkerBearers {
		if opts.LeaseNamespace == "" {
			return nil, errors.New("the copies of worker bearers are read in the lease namespace, and none is set")
		}
		// One informer a Secret: the gateway may list and watch them by
		// name only (resourceNames), which a field selector on the name
		// satisfies.
		for _, name := range bearermirror.SecretNames() {
			t := v.newTracked(fmt.Sprintf("worker bearers (Secret %s/%s)", opts.LeaseNamespace, name), cl, &corev1.Secret{},
				func() client.ObjectList { return &corev1.SecretList{} }, fields.OneTermEqualSelector("metadata.name", name), bearersOnly)
			t.lw.namespace = opts.LeaseNamespace
			v.bearers = append(v.bearers, t)
		}
	}
	return v, nil
}

// Start runs the informers until ctx ends. It does not wait for them to
// sync: Ready says when they have.
func (v *View) Start(ctx context.Context) {
	for _, t := range v.all() {
		go t.informer.RunWithContext(ctx)
	}
}

// WaitForSync waits until every informer has synced or ctx ends.
func (v *View) WaitForSync(ctx context.Context) bool {
	var synced []toolscache.InformerSynced
	for _, t := range v.all() {
		synced = append(synced, t.informer.HasSynced)
	}
	return toolscache.WaitForCacheSync(ctx.Done(), synced...)
}

func (v *View) all() []*tracked {
	ts := []*tracked{v.tenants, v.sandboxes}
	if v.leases != nil {
		ts = append(ts, v.leases)
	}
	if v.mappings != nil {
		ts = append(ts, v.mappings)
	}
	return append(ts, v.bearers...)
}

// Ready returns nil when the view can be trusted: every informer has synced
// and none has had its watch broken for longer than Options.StaleAfter. The
// error wraps ErrNotReady and says why, for operators and for a 503 body.
func (v *View) Ready() error {
	now := v.opts.Now()
	for _, t := range v.all() {
		if !t.informer.HasSynced() {
			return fmt.Errorf("%w: the %s have not been listed from the API server yet", ErrNotReady, t.what)
		}
		if since, down := t.downSince(); down && now.Sub(since) > v.opts.StaleAfter {
			return fmt.Errorf("%w: the watch of %s has been broken since %s", ErrNotReady, t.what, since.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// Authenticate returns the tenant whose current credential is token, if the
// tenant may be served. The token is looked up by its SHA-256 among the
// hashes the manager published in the Tenants' status, where only the
// manager writes; the token itself is neither kept nor logged. (A lookup by
// hash needs no constant-time comparison: how long it takes says something
// about the hash of the presented token at most, and the hash of a token
// of 256 random bits leads to no token.)
func (v *View) Authenticate(token string) (Identity, error) {
	if !v.opts.Credentials {
		return Identity{}, errors.New("this view has no credentials")
	}
	if err := v.Ready(); err != nil {
		return Identity{}, err
	}
	if token == "" {
		return Identity{}, ErrUnknownToken
	}
	sum := sha256.Sum256([]byte(token))
	objs, err := v.tenants.informer.GetIndexer().ByIndex(tokenIndex, hex.EncodeToString(sum[:]))
	if err != nil || len(objs) == 0 {
		return Identity{}, ErrUnknownToken
	}
	if len(objs) > 1 {
		// The manager mints every token afresh; two Tenants with one hash
		// were written by someone else, and the token is neither's.
		var names []string
		for _, o := range objs {
			names = append(names, toolscache.MetaObjectToName(o.(*playgroundv1alpha1.Tenant)).String())
		}
		v.opts.Logger.Info("Refusing a token whose hash several Tenants publish", "tenants", names)
		return Identity{}, ErrUnknownToken
	}
	t := objs[0].(*playgroundv1alpha1.Tenant)
	id := Identity{Namespace: t.Namespace, Name: t.Name}
	if _, err := v.Tenant(id); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// Tenant returns the tenant if it may be served now: it exists, is not
// being deleted, is not suspended and, with Options.Catalog, uses that
// catalog. A missing or deleted tenant is ErrUnknownToken, as its
// credential no longer counts.
func (v *View) Tenant(id Identity) (*playgroundv1alpha1.Tenant, error) {
	if err := v.Ready(); err != nil {
		return nil, err
	}
	obj, ok, err := v.tenants.informer.GetStore().GetByKey(id.String())
	if err != nil || !ok {
		return nil, ErrUnknownToken
	}
	t := obj.(*playgroundv1alpha1.Tenant)
	switch {
	case t.DeletionTimestamp != nil:
		return nil, ErrUnknownToken
	case t.Spec.Suspended:
		return nil, &SuspendedError{Tenant: id}
	case v.opts.Catalog != "" && CatalogOf(t) != v.opts.Catalog:
		return nil, &WrongCatalogError{Tenant: id, Catalog: CatalogOf(t)}
	}
	return t, nil
}

// Sandbox returns the tenant's Sandbox: the one of the same name in the same
// namespace that names the tenant as its owner. The object is shared with
// the cache: do not modify it.
func (v *View) Sandbox(id Identity) (*playgroundv1alpha1.Sandbox, bool) {
	obj, ok, err := v.sandboxes.informer.GetStore().GetByKey(id.String())
	if err != nil || !ok {
		return nil, false
	}
	s := obj.(*playgroundv1alpha1.Sandbox)
	if s.Spec.TenantRef.Name != id.Name {
		return nil, false
	}
	return s, true
}

// Agent returns the registration of the agent of node (its endpoint, its
// protocol version), if it is current. A Sandbox's status.endpoint is
// trusted only when it matches the registered endpoint: whoever could
// write a Sandbox's status could otherwise steer the gateway's agent token
// to a server of theirs.
//
// The cache decides, but a registration whose renewal it has not seen in
// time is read again from the API server (at most once a second per node)
// before the node is called gone: after the API server restarts, client-go
// waits up to a minute before it lists and watches again (its backoff
// grows with each broken watch), and meanwhile the cache would stop every
// tenant of a healthy node. Without an answer from the API server, the
// node is gone, as the cache says.
func (v *View) Agent(ctx context.Context, node string) (agentlease.Registration, bool) {
	if v.leases == nil {
		return agentlease.Registration{}, false
	}
	obj, ok, err := v.leases.informer.GetStore().GetByKey(v.opts.LeaseNamespace + "/" + agentlease.Name(node))
	if err == nil && ok {
		if reg, ok := v.current(obj.(*coordinationv1.Lease), node); ok {
			return reg, true
		}
	}
	return v.recheckAgent(ctx, node)
}

// current is lease's registration of node, if it is current now.
func (v *View) current(lease *coordinationv1.Lease, node string) (agentlease.Registration, bool) {
	reg, err := agentlease.FromLease(lease)
	if err != nil || reg.Node != node || !reg.Healthy(v.opts.Now()) {
		return agentlease.Registration{}, false
	}
	return reg, true
}

// recheckAgent reads node's Lease from the API server, or answers as the
// read less than recheckEvery ago did.
func (v *View) recheckAgent(ctx context.Context, node string) (agentlease.Registration, bool) {
	if v.reader == nil {
		return agentlease.Registration{}, false
	}
	v.recheckM.Lock()
	defer v.recheckM.Unlock()
	now := v.opts.Now()
	if r, ok := v.rechecks[node]; ok && now.Sub(r.at) < recheckEvery && !now.Before(r.at) {
		if r.ok && r.reg.Healthy(now) {
			return r.reg, true
		}
		return agentlease.Registration{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, recheckEvery)
	defer cancel()
	var lease coordinationv1.Lease
	r := recheck{at: now}
	if err := v.reader.Get(ctx, client.ObjectKey{Namespace: v.opts.LeaseNamespace, Name: agentlease.Name(node)}, &lease); err == nil {
		r.reg, r.ok = v.current(&lease, node)
	}
	// Keep the map as small as the nodes whose registrations lapsed lately.
	for n, old := range v.rechecks {
		if now.Sub(old.at) >= recheckEvery {
			delete(v.rechecks, n)
		}
	}
	v.rechecks[node] = r
	return r.reg, r.ok
}

// WorkerMapping returns the tenant's WorkerMapping if it may be served: the
// only one whose spec.tenantRef names the tenant, Ready for its current
// generation. Otherwise the error says, to the tenant, what is missing
// and whom to ask. The object is shared with the cache: do not modify it.
func (v *View) WorkerMapping(id Identity) (*playgroundv1alpha1.WorkerMapping, error) {
	if v.mappings == nil {
		return nil, errors.New("this gateway does not track WorkerMappings")
	}
	objs, err := v.mappings.informer.GetIndexer().ByIndex(tenantRefIndex, id.String())
	if err != nil {
		return nil, err
	}
	switch len(objs) {
	case 0:
		return nil, &MappingError{Tenant: id, Reason: MappingMissing,
			Message: fmt.Sprintf("no WorkerMapping in namespace %s names tenant %s in spec.tenantRef: ask the operator to create one (docs/workers.md)", id.Namespace, id.Name)}
	case 1:
	default:
		names := make([]string, 0, len(objs))
		for _, o := range objs {
			names = append(names, o.(*playgroundv1alpha1.WorkerMapping).Name)
		}
		slices.Sort(names)
		return nil, &MappingError{Tenant: id, Reason: MappingConflict,
			Message: fmt.Sprintf("%d WorkerMappings name tenant %s (%s) and none is served: ask the operator to delete all but one", len(objs), id, strings.Join(names, ", "))}
	}
	m := objs[0].(*playgroundv1alpha1.WorkerMapping)
	ready := apimeta.FindStatusCondition(m.Status.Conditions, playgroundv1alpha1.ReadyCondition)
	switch {
	case m.DeletionTimestamp != nil:
		return nil, &MappingError{Tenant: id, Reason: MappingNotReady,
			Message: fmt.Sprintf("your WorkerMapping %s/%s is being deleted; ask the operator if that is unexpected", m.Namespace, m.Name)}
	case ready == nil || ready.ObservedGeneration != m.Generation:
		return nil, &MappingError{Tenant: id, Reason: MappingNotReady,
			Message: fmt.Sprintf("your WorkerMapping %s/%s has not been reconciled since it last changed: retry in a few seconds; if it persists ask the operator to check that the manager runs", m.Namespace, m.Name)}
	case ready.Status != metav1.ConditionTrue:
		return nil, &MappingError{Tenant: id, Reason: MappingNotReady,
			Message: fmt.Sprintf("your WorkerMapping %s/%s is not Ready (%s: %s): ask the operator to check it (kubectl describe workermapping -n %s %s)", m.Namespace, m.Name, ready.Reason, ready.Message, m.Namespace, m.Name)}
	}
	return m, nil
}

// WorkerBearer returns the bearer the manager copied for the mapping name
// of namespace, the only bearer the gateway presents to its worker: the
// manager copies a bearer only from a Secret of type
// playground.dev/worker-bearer, and the gateway reads no other Secret.
// False when there is none (yet, or any longer).
func (v *View) WorkerBearer(namespace, name string) (string, bool) {
	if v.bearers == nil {
		return "", false
	}
	shard := bearermirror.ShardOf(namespace, name)
	obj, ok, err := v.bearers[shard].informer.GetStore().GetByKey(v.opts.LeaseNamespace + "/" + bearermirror.SecretName(shard))
	if err != nil || !ok {
		return "", false
	}
	s, ok := obj.(*corev1.Secret)
	if !ok || s.Type != bearermirror.SecretType {
		return "", false
	}
	b, ok := s.Data[bearermirror.Key(namespace, name)]
	if !ok || len(b) == 0 {
		return "", false
	}
	return string(b), true
}

// bearersOnly keeps of a Secret of the copies of bearers what the view
// reads: its name, type and data.
func bearersOnly(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Type:       s.Type,
		Data:       s.Data,
	}, nil
}

// Reasons of a MappingError.
const (
	MappingMissing  = "missing"
	MappingConflict = "conflict"
	MappingNotReady = "not_ready"
)

// MappingError says why a tenant's WorkerMapping cannot be served; its
// message is for the tenant.
type MappingError struct {
	Tenant  Identity
	Reason  string
	Message string
}

func (e *MappingError) Error() string { return e.Message }

// mappedTenant indexes a WorkerMapping by the tenant it routes.
func mappedTenant(obj any) ([]string, error) {
	m, ok := obj.(*playgroundv1alpha1.WorkerMapping)
	if !ok || m.Spec.TenantRef.Name == "" {
		return nil, nil
	}
	return []string{m.Namespace + "/" + m.Spec.TenantRef.Name}, nil
}

// tokenHashes indexes a Tenant by the token hash its status publishes, when
// it is well formed (the CRD's pattern says so too).
func tokenHashes(obj any) ([]string, error) {
	t, ok := obj.(*playgroundv1alpha1.Tenant)
	if !ok {
		return nil, nil
	}
	h := t.Status.Credentials.TokenSHA256
	if len(h) != hex.EncodedLen(sha256.Size) {
		return nil, nil
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, nil
		}
	}
	return []string{h}, nil
}

func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// tracked is an informer whose list and watch calls are observed, so that
// the view knows when its watch is broken: from a failed list or watch, or a
// watch stream that ended, until the next watch starts.
type tracked struct {
	what     string
	lw       *listWatcher
	informer toolscache.SharedIndexInformer
	now      func() time.Time
	log      logr.Logger

	mu    sync.Mutex
	down  bool
	since time.Time
}

func (v *View) newTracked(what string, cl client.WithWatch, example client.Object, newList func() client.ObjectList,
	sel fields.Selector, transform toolscache.TransformFunc) *tracked {
	t := &tracked{what: what, now: v.opts.Now, log: v.opts.Logger}
	lw := &listWatcher{t: t, cl: cl, newList: newList, namespace: v.opts.Namespace, fields: sel}
	t.lw = lw
	t.informer = toolscache.NewSharedIndexInformerWithOptions(lw, example, toolscache.SharedIndexInformerOptions{ObjectDescription: what, Indexers: toolscache.Indexers{}})
	_ = t.informer.SetTransform(transform)
	_ = t.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		t.markDown()
		t.log.Info("Watch failed; retrying", "resource", what, "err", err)
	})
	return t
}

func (t *tracked) markDown() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.down {
		t.down, t.since = true, t.now()
	}
}

func (t *tracked) markUp() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.down, t.since = false, time.Time{}
}

func (t *tracked) downSince() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.since, t.down
}

// listWatcher lists and watches one kind through a controller-runtime
// client and reports every outcome to its tracked informer.
type listWatcher struct {
	t         *tracked
	cl        client.WithWatch
	newList   func() client.ObjectList
	namespace string
	fields    fields.Selector
	labels    labels.Selector
}

var _ toolscache.ListerWatcherWithContext = (*listWatcher)(nil)

func (lw *listWatcher) options(o metav1.ListOptions) []client.ListOption {
	if lw.fields != nil {
		o.FieldSelector = lw.fields.String()
	}
	if lw.labels != nil {
		o.LabelSelector = lw.labels.String()
	}
	opts := []client.ListOption{&client.ListOptions{Raw: &o}}
	if lw.namespace != "" {
		opts = append(opts, client.InNamespace(lw.namespace))
	}
	return opts
}

func (lw *listWatcher) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	list := lw.newList()
	if err := lw.cl.List(ctx, list, lw.options(o)...); err != nil {
		lw.t.markDown()
		return nil, err
	}
	return list, nil
}

func (lw *listWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.cl.Watch(ctx, lw.newList(), lw.options(o)...)
	if err != nil {
		lw.t.markDown()
		return nil, err
	}
	lw.t.markUp()
	return newObservedWatch(w, lw.t.markDown), nil
}

func (lw *listWatcher) List(o metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), o)
}

func (lw *listWatcher) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), o)
}

// IsWatchListSemanticsUnSupported makes the reflector list and then watch,
// the two calls this wrapper observes, rather than stream the list.
func (lw *listWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// observedWatch forwards a watch's events and calls ended when the stream
// ends by itself (not by Stop): from then until the next watch starts, the
// view is not being kept current.
type observedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newObservedWatch(inner watch.Interface, ended func()) *observedWatch {
	w := &observedWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		in := inner.ResultChan()
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					select {
					case <-w.stop:
					default:
						ended()
					}
					return
				}
				select {
				case w.out <- ev:
				case <-w.stop:
					return
				}
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *observedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

func (w *observedWatch) ResultChan() <-chan watch.Event { return w.out }
