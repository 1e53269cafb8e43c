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
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/bearermirror"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/internal/eventseries"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// Reasons of a WorkerMapping's Ready condition (and of the Events of its
// transitions), and of a Tenant's WorkerReady, which mirrors it.
const (
	// ReasonConflict (Stalled): another mapping routes the same tenant or
	// forwards to the same Service port and path; neither is served.
	ReasonConflict = "Conflict"
	// ReasonTenantNotFound: spec.tenantRef names no Tenant (yet).
	ReasonTenantNotFound = "TenantNotFound"
	// ReasonCatalogMismatch (Stalled): the Tenant's catalog is not workers,
	// so the gateway serves it the sandbox tools and never this mapping.
	ReasonCatalogMismatch = "CatalogMismatch"
	// ReasonServiceNotFound: the destination Service does not exist (yet).
	ReasonServiceNotFound = "ServiceNotFound"
	// ReasonServicePortNotFound (Stalled): the Service has no TCP port of
	// that number, or cannot have endpoints (ExternalName).
	ReasonServicePortNotFound = "ServicePortNotFound"
	// ReasonNoReadyEndpoints: the Service has no ready endpoint for the
	// port in its EndpointSlices.
	ReasonNoReadyEndpoints = "NoReadyEndpoints"
	// ReasonBearerSecretNotFound: the Secret or key of
	// spec.bearerSecretRef is missing; looked for again every
	// bearerRecheck.
	ReasonBearerSecretNotFound = "BearerSecretNotFound"
	// ReasonBearerSecretRefused (Stalled): the Secret of
	// spec.bearerSecretRef is not of type WorkerBearerSecretType, so it
	// was not made for that use (a tenant's credential Secret, say), or
	// its value is no bearer an Authorization header carries (longer than
	// bearermirror.MaxBearerBytes, or not visible ASCII).
	ReasonBearerSecretRefused = "BearerSecretRefused"
	// ReasonBearerNotMirrored: the bearer is valid, but its copy, the
	// only one the gateway reads (WorkerBearerReconciler), is not in
	// place yet; Stalled when there is no room for it and the mapping's
	// own namespace holds the most of its shard.
	ReasonBearerNotMirrored = "BearerNotMirrored"
	// ReasonEndpointsRefused (Stalled): every ready endpoint of the
	// Service is an address the cluster admin's policy refuses (loopback,
	// link-local, a node's or the control plane's, outside the allowed
	// ranges).
	ReasonEndpointsRefused = "EndpointsRefused"
	// ReasonSandboxNotReady: the tenant's Sandbox has no ID yet or is not
	// Ready; the message carries the Sandbox's reason.
	ReasonSandboxNotReady = "SandboxNotReady"
	// ReasonInvalidDestination (Stalled): spec.destination names neither
	// kind (the API server refuses that; a restore may bypass it).
	ReasonInvalidDestination = "InvalidDestination"
	// ReasonNoMapping: a Tenant whose catalog is workers has no mapping.
	ReasonNoMapping = "NoMapping"
	// ReasonWorkerPending: a Tenant's mapping has not reported Ready for
	// its current spec yet.
	ReasonWorkerPending = "WorkerPending"
	// ReasonWorkerError: listing a Tenant's mappings failed; retried.
	ReasonWorkerError = "WorkerError"
)

const (
	// workerMappingIndex indexes WorkerMappings by what they claim
	// (mappingKeys): their tenant and their destination, and by the
	// Service they read, so that conflicts and the watches of Tenants,
	// Sandboxes, Services and EndpointSlices find them without a scan.
	workerMappingIndex = "playground.dev/workermapping-keys"
	// bearerRecheck is how often a missing bearer Secret is looked for
	// again: the bearers' cache (BearerCacheOptions) holds Secrets of
	// type WorkerBearerSecretType only, so the creation of one of another
	// type, which the mapping should report, is not watched.
	bearerRecheck = 10 * time.Second
	// bearerAudit is how often the bearer Secret of a Ready service
	// mapping is checked again, and each shard of the copies of bearers
	// worked out again: what no watch reported (none should) shows then.
	bearerAudit = 10 * time.Minute
	// defaultWorkerPath is the CRD's default of destination paths, for
	// objects that did not go through the API server's defaulting.
	defaultWorkerPath = "/mcp"
)

// Index keys of mappingKeys.
func tenantKey(name string) string  { return "tenant/" + name }
func serviceKey(name string) string { return "service/" + name }
func destinationKey(d *playgroundv1alpha1.ServiceDestination) string {
	return fmt.Sprintf("destination/service/%s:%d%s", d.Name, d.Port, cmp.Or(d.Path, defaultWorkerPath))
}

// conflictKeys are what a mapping claims alone in its namespace: its
// tenant and, for a Service destination, the Service's port and path. (Two
// sandbox destinations of one tenant already share the tenant.)
func conflictKeys(wm *playgroundv1alpha1.WorkerMapping) []string {
	keys := []string{tenantKey(wm.Spec.TenantRef.Name)}
	if s := wm.Spec.Destination.Service; s != nil {
		keys = append(keys, destinationKey(s))
	}
	return keys
}

// mappingKeys are the index values of a mapping.
func mappingKeys(o client.Object) []string {
	wm := o.(*playgroundv1alpha1.WorkerMapping)
	keys := conflictKeys(wm)
	if s := wm.Spec.Destination.Service; s != nil {
		keys = append(keys, serviceKey(s.Name))
	}
	return append(keys, bearerIndexKeys(wm)...)
}

// indexWorkerMappings registers workerMappingIndex, which the WorkerMapping
// and Tenant reconcilers share.
func indexWorkerMappings(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &playgroundv1alpha1.WorkerMapping{}, workerMappingIndex, mappingKeys)
}

// WorkerMappingReconciler resolves each WorkerMapping's destination and
// reports whether the gateway may serve it: status.endpoint (the Service's
// URL, or sandbox://<sandboxID>:<port><path>), status.readyEndpoints (the
// Service's ready endpoints from its EndpointSlices), and Ready. A mapping
// is Ready when its Tenant's catalog is workers, its destination resolves
// (a Service with ready endpoints and the bearer Secret it names, whose
// copy for the gateway is in place; or the tenant's Sandbox, Ready) and no
// other mapping of the namespace claims its tenant or its destination.
// Conflicting mappings are all reported (Ready False, Stalled, reason
// Conflict, naming the others) and none is Ready: the gateway serves only
// Ready mappings, so it never has to choose.
//
// The agent of the tenant's node writes status.worker (the supervised
// process) under its own field manager; this reconciler's applies never
// list it.
//
// For a sandbox destination, spec.bearerSecretRef is ignored and the Ready
// message says so: the agent mints the worker's internal bearer, writes it
// to the worker's token file and presents it when relaying, so no Secret
// can hold it. Refusing such a mapping would stop a tenant for a field
// that has no effect.
type WorkerMappingReconciler struct {
	client.Client
	// APIReader reads bearer Secrets, which the manager does not cache.
	// Nil means the manager's.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Workers is how many mappings are reconciled at once; 0 means one.
	Workers int
	// Endpoints is the cluster admin's policy of the addresses a Service
	// destination's endpoints may have; the nodes' and the control
	// plane's addresses are refused besides, unless it allows them.
	Endpoints destpolicy.Policy

	// copies are the caches of the bearer Secrets and of their copies,
	// shared with the WorkerBearerReconciler: a mapping with a bearer is
	// Ready once its copy is in place.
	copies *bearerCopies
}

// The WorkerMapping reconciler reads mappings, their Tenants and
// Sandboxes, the Services they name and those Services' EndpointSlices,
// and bearer Secrets (get, around the cache); it applies mappings' status.
// +kubebuilder:rbac:groups=playground.dev,resources=workermappings,verbs=get;list;watch
// +kubebuilder:rbac:groups=playground.dev,resources=workermappings/status,verbs=patch
// +kubebuilder:rbac:groups=playground.dev,resources=tenants;sandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// resolution is what one pass found of a mapping.
type resolution struct {
	// ready is the Ready condition (status, reason, message).
	ready metav1.Condition
	// progressing: not Ready, but on its way without a change to
	// Playground's objects (a Service or a backend to come).
	progressing bool
	// err: a StalledError (a conflict, a catalog mismatch) or a failure
	// to read, retried.
	err            error
	endpoint       string
	readyEndpoints []string
	// nodeName is the node of a sandbox destination's Sandbox: its agent,
	// and only it, reports status.worker.
	nodeName string
	// after asks for another pass, for what no watch reports.
	after time.Duration
}

func notReady(reason string, progressing bool, format string, args ...any) resolution {
	return resolution{ready: metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}, progressing: progressing}
}

func stalled(reason, format string, args ...any) resolution {
	err := pgreconcile.Stall(reason, format, args...)
	return resolution{ready: metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: err.Error()}, err: err}
}

func failed(reason string, err error) resolution {
	return resolution{ready: metav1.Condition{Status: metav1.ConditionUnknown, Reason: reason, Message: err.Error()}, err: err, progressing: true}
}

func readyNow(format string, args ...any) resolution {
	return resolution{ready: metav1.Condition{Status: metav1.ConditionTrue, Reason: playgroundv1alpha1.ReasonReady, Message: fmt.Sprintf(format, args...)}}
}

// Reconcile resolves one WorkerMapping and applies its status.
func (r *WorkerMappingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wm := &playgroundv1alpha1.WorkerMapping{}
	if err := r.Get(ctx, req.NamespacedName, wm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	res := r.resolve(ctx, wm)
	if err := r.applyStatus(ctx, wm, res); err != nil {
		return ctrl.Result{}, err
	}
	result, err := pgreconcile.Result(res.err)
	if err == nil && res.after > 0 && (result.RequeueAfter == 0 || res.after < result.RequeueAfter) {
		result.RequeueAfter = res.after
	}
	return result, err
}

// resolve finds the mapping's destination and whether it may be served.
// A conflict is checked first, and overrides what resolves: neither of
// two conflicting mappings is served, whatever else holds.
func (r *WorkerMappingReconciler) resolve(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping) resolution {
	if !wm.DeletionTimestamp.IsZero() {
		return notReady(ReasonDeleting, true, "The mapping is being deleted: the gateway no longer serves it")
	}
	conflict, err := r.conflicts(ctx, wm)
	if err != nil {
		return failed(pgreconcile.ReasonError, err)
	}
	res := r.resolveTenant(ctx, wm)
	if conflict != "" {
		c := stalled(ReasonConflict, "%s", conflict)
		c.endpoint, c.nodeName = res.endpoint, res.nodeName // for people to read; nothing is served
		return c
	}
	return res
}

// conflicts returns why the mapping shares its tenant or destination with
// other mappings of its namespace, or "". A mapping being deleted still
// holds what it claims until it is gone: its worker may still run.
func (r *WorkerMappingReconciler) conflicts(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping) (string, error) {
	var why []string
	for _, key := range conflictKeys(wm) {
		var list playgroundv1alpha1.WorkerMappingList
		if err := r.List(ctx, &list, client.InNamespace(wm.Namespace), client.MatchingFields{workerMappingIndex: key}); err != nil {
			return "", fmt.Errorf("listing the worker mappings of namespace %s: %w", wm.Namespace, err)
		}
		var others []string
		for i := range list.Items {
			o := &list.Items[i]
			if o.Name == wm.Name {
				continue
			}
			name := o.Name
			if !o.DeletionTimestamp.IsZero() {
				name += " (being deleted)"
			}
			others = append(others, name)
		}
		if len(others) == 0 {
			continue
		}
		slices.Sort(others)
		names := "WorkerMapping " + strings.Join(others, ", WorkerMapping ")
		if strings.HasPrefix(key, "tenant/") {
			why = append(why, fmt.Sprintf("%s also routes tenant %s, and a tenant has one mapping", names, wm.Spec.TenantRef.Name))
		} else {
			s := wm.Spec.Destination.Service
			why = append(why, fmt.Sprintf("%s also forwards to Service %s port %d path %s, and two mappings cannot share a destination",
				names, s.Name, s.Port, cmp.Or(s.Path, defaultWorkerPath)))
		}
	}
	if len(why) == 0 {
		return "", nil
	}
	return strings.Join(why, "; ") + ": neither is served until one of them is deleted or changed", nil
}

// resolveTenant checks the mapping's Tenant, then its destination.
func (r *WorkerMappingReconciler) resolveTenant(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping) resolution {
	name := wm.Spec.TenantRef.Name
	t := &playgroundv1alpha1.Tenant{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: wm.Namespace, Name: name}, t); err != nil {
		if apierrors.IsNotFound(err) {
			return notReady(ReasonTenantNotFound, true, "Tenant %s does not exist in namespace %s: create it with spec.catalog: workers, or correct spec.tenantRef", name, wm.Namespace)
		}
		return failed(pgreconcile.ReasonError, fmt.Errorf("reading tenant %s/%s: %w", wm.Namespace, name, err))
	}
	catalog := cmp.Or(string(t.Spec.Catalog), string(playgroundv1alpha1.CatalogSandbox))
	var res resolution
	switch d := wm.Spec.Destination; {
	case d.Service != nil:
		res = r.resolveService(ctx, wm, d.Service)
	case d.Sandbox != nil:
		res = r.resolveSandbox(ctx, wm, t, d.Sandbox)
	default: // the API server refuses it; an object from elsewhere may not
		return stalled(ReasonInvalidDestination, "spec.destination names neither a service nor a sandbox: set exactly one")
	}
	if catalog != string(playgroundv1alpha1.CatalogWorkers) && pgreconcile.Settled(res.err) {
		// Resolved (for people to read), but never served.
		c := stalled(ReasonCatalogMismatch, "Tenant %s is served the %s catalog, so the gateway never forwards it here: set spec.catalog: workers on Tenant %s, or delete this mapping",
			name, catalog, name)
		c.endpoint, c.nodeName = res.endpoint, res.nodeName
		return c
	}
	return res
}

// resolveService resolves a Service destination: its URL, and the ready
// endpoints of the port in its EndpointSlices.
func (r *WorkerMappingReconciler) resolveService(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping, d *playgroundv1alpha1.ServiceDestination) resolution {
	svc := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: wm.Namespace, Name: d.Name}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return notReady(ReasonServiceNotFound, true, "Service %s does not exist in namespace %s: create it, or correct spec.destination.service.name", d.Name, wm.Namespace)
		}
		return failed(pgreconcile.ReasonError, fmt.Errorf("reading service %s/%s: %w", wm.Namespace, d.Name, err))
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return stalled(ReasonServicePortNotFound, "Service %s is of type ExternalName and has no endpoints to forward to: name a Service that selects the worker's pods or has EndpointSlices", d.Name)
	}
	port, ok := servicePort(svc, d.Port)
	if !ok {
		return stalled(ReasonServicePortNotFound, "Service %s has no TCP port %d (its ports: %s): correct spec.destination.service.port or the Service", d.Name, d.Port, describePorts(svc))
	}
	scheme, path := cmp.Or(d.Scheme, "http"), cmp.Or(d.Path, defaultWorkerPath)
	var slicesOf discoveryv1.EndpointSliceList
	if err := r.List(ctx, &slicesOf, client.InNamespace(wm.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: d.Name}); err != nil {
		return failed(pgreconcile.ReasonError, fmt.Errorf("listing the endpoint slices of service %s/%s: %w", wm.Namespace, d.Name, err))
	}
	all, refused := readyEndpoints(port, slicesOf.Items, scheme, path, r.endpointCheck(ctx))
	if len(all) == 0 && len(refused) > 0 {
		return stalled(ReasonEndpointsRefused, "The gateway forwards to none of the ready endpoints of Service %s: %s; a worker's endpoints must be its pods' addresses (the cluster admin's policy: the manager's and the gateway's --worker-endpoint-allow-cidr and --worker-endpoint-deny-cidr)",
			d.Name, describeRefused(refused))
	}
	res := notReady(ReasonNoReadyEndpoints, true,
		"Service %s has no ready endpoint for port %d in its EndpointSlices (label %s=%s): the gateway has nowhere to forward until a backend is ready",
		d.Name, d.Port, discoveryv1.LabelServiceName, d.Name)
	res.endpoint = fmt.Sprintf("%s://%s.%s.svc:%d%s", scheme, d.Name, wm.Namespace, d.Port, path)
	if len(all) == 0 {
		return res
	}
	res.readyEndpoints = all
	if len(all) > maxReadyEndpoints {
		res.readyEndpoints = all[:maxReadyEndpoints]
	}
	if ref := wm.Spec.BearerSecretRef; ref != nil {
		bearer, bad := r.checkBearer(ctx, wm.Namespace, ref)
		if bad == nil {
			bad = r.checkCopied(ctx, wm, bearer)
		}
		if bad != nil {
			bad.endpoint = res.endpoint
			var stall *pgreconcile.StalledError
			if !errors.As(bad.err, &stall) {
				bad.readyEndpoints = res.readyEndpoints // on their way to be served
			}
			return *bad
		}
	}
	ok2 := readyNow("Forwarding to %d ready %s of Service %s", len(all), plural(len(all), "endpoint", "endpoints"), d.Name)
	if len(all) > maxReadyEndpoints {
		ok2.ready.Message = fmt.Sprintf("Forwarding to the first %d of the %d ready endpoints of Service %s (status lists at most %d)", maxReadyEndpoints, len(all), d.Name, maxReadyEndpoints)
	}
	if len(refused) > 0 {
		ok2.ready.Message += fmt.Sprintf(" and to none of the %d it refuses (%s)", len(refused), describeRefused(refused))
	}
	if wm.Spec.BearerSecretRef != nil {
		ok2.ready.Message += fmt.Sprintf(", presenting the bearer of Secret %s", wm.Spec.BearerSecretRef.Name)
		ok2.after = bearerAudit
	}
	ok2.endpoint, ok2.readyEndpoints = res.endpoint, res.readyEndpoints
	return ok2
}

// maxReadyEndpoints is the CRD's bound of status.readyEndpoints.
const maxReadyEndpoints = 64

// servicePort returns the Service's TCP port of that number.
func servicePort(svc *corev1.Service, port int32) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Port == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

func describePorts(svc *corev1.Service) string {
	if len(svc.Spec.Ports) == 0 {
		return "none"
	}
	var out []string
	for _, p := range svc.Spec.Ports {
		s := fmt.Sprintf("%d/%s", p.Port, cmp.Or(string(p.Protocol), "TCP"))
		if p.Name != "" {
			s += " (" + p.Name + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// readyEndpoints returns, sorted and without repeats, the URLs
// <scheme>://<ip>:<targetPort><path> of the ready endpoints of the Service
// port sp in the slices of list that check permits, and the refusals of
// those it does not. A slice names its ports as the Service does
// (ServicePort.Name, "" for a single unnamed port) and gives the target
// port's number, which for a named targetPort may differ from slice to
// slice: each slice's own number is used. A slice port without a number
// falls back to a numeric targetPort. An endpoint is ready when its ready
// condition is true or unset (EndpointConditions: nil means ready).
// FQDN slices carry no address to dial and are skipped.
func readyEndpoints(sp corev1.ServicePort, list []discoveryv1.EndpointSlice, scheme, path string, check func(string) error) ([]string, []error) {
	seen := map[string]bool{}
	refusedSeen := map[string]bool{}
	var refused []error
	for i := range list {
		s := &list[i]
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var target int32
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name != sp.Name || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
				continue
			}
			if p.Port != nil {
				target = *p.Port
			} else if sp.TargetPort.IntValue() > 0 {
				target = int32(sp.TargetPort.IntValue())
			}
		}
		if target == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				if err := check(addr); err != nil {
					if !refusedSeen[addr] {
						refusedSeen[addr] = true
						refused = append(refused, err)
					}
					continue
				}
				seen[scheme+"://"+net.JoinHostPort(addr, strconv.Itoa(int(target)))+path] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	slices.Sort(out)
	return out, refused
}

// describeRefused lists refused endpoints for a message, the first few.
func describeRefused(refused []error) string {
	const shown = 3
	var parts []string
	for i, err := range refused {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(refused)-shown))
			break
		}
		parts = append(parts, err.Error())
	}
	return strings.Join(parts, "; ")
}

// endpointCheck returns the check of an endpoint's address: the admin's
// policy, with the addresses of the cluster's nodes and of its control
// plane (the kubernetes Service's cluster IPs and endpoints) refused
// besides, as the cache has them now.
func (r *WorkerMappingReconciler) endpointCheck(ctx context.Context) func(string) error {
	var internal map[netip.Addr]string
	load := func() {
		internal = map[netip.Addr]string{}
		var nodes corev1.NodeList
		if err := r.List(ctx, &nodes); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the nodes' addresses")
		}
		for _, n := range nodes.Items {
			for _, a := range n.Status.Addresses {
				if ip, err := netip.ParseAddr(a.Address); err == nil {
					internal[ip.Unmap()] = "the address of node " + n.Name
				}
			}
		}
		var api corev1.Service
		if err := r.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, &api); err == nil {
			for _, c := range append([]string{api.Spec.ClusterIP}, api.Spec.ClusterIPs...) {
				if ip, err := netip.ParseAddr(c); err == nil {
					internal[ip.Unmap()] = "the control plane's (the kubernetes Service's cluster IP)"
				}
			}
		}
		var apiSlices discoveryv1.EndpointSliceList
		if err := r.List(ctx, &apiSlices, client.InNamespace(metav1.NamespaceDefault), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err == nil {
			for _, s := range apiSlices.Items {
				for _, ep := range s.Endpoints {
					for _, a := range ep.Addresses {
						if ip, err := netip.ParseAddr(a); err == nil {
							internal[ip.Unmap()] = "the control plane's (an endpoint of the kubernetes Service)"
						}
					}
				}
			}
		}
	}
	return func(addr string) error {
		return r.Endpoints.CheckHost(addr, func(a netip.Addr) (string, bool) {
			if internal == nil {
				load()
			}
			why, ok := internal[a]
			return why, ok
		})
	}
}

// checkBearer returns the bearer of the mapping's Secret or, when it
// cannot be presented, the resolution that says why. It reads around the
// caches, so that it can say why a Secret is not a bearer's. Only a Secret
// made for the use, of type WorkerBearerSecretType, is presented: a
// mapping may name any Secret of its namespace, and a tenant's credential
// Secret is no worker's bearer. Its value must be what bearermirror.Bearer
// accepts: the gateway presents the copy the WorkerBearerReconciler makes
// of it (checkCopied).
func (r *WorkerMappingReconciler) checkBearer(ctx context.Context, ns string, ref *playgroundv1alpha1.SecretKeyReference) (string, *resolution) {
	key := cmp.Or(ref.Key, playgroundv1alpha1.CredentialTokenKey)
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			miss := notReady(ReasonBearerSecretNotFound, true, "Secret %s, named by spec.bearerSecretRef, does not exist in namespace %s: create it, of type %s, with the worker's bearer token under key %s (looked for again every %s)",
				ref.Name, ns, playgroundv1alpha1.WorkerBearerSecretType, key, bearerRecheck)
			miss.after = bearerRecheck
			return "", &miss
		}
		f := failed(pgreconcile.ReasonError, fmt.Errorf("reading the bearer secret %s/%s: %w", ns, ref.Name, err))
		return "", &f
	}
	if s.Type != playgroundv1alpha1.WorkerBearerSecretType {
		bad := stalled(ReasonBearerSecretRefused, "Secret %s, named by spec.bearerSecretRef, is of type %q, not %s: the gateway presents only a Secret made to be a worker's bearer; create one of that type (kubectl create secret generic NAME --type=%s --from-literal=%s=...) and name it",
			ref.Name, s.Type, playgroundv1alpha1.WorkerBearerSecretType, playgroundv1alpha1.WorkerBearerSecretType, key)
		return "", &bad
	}
	bearer, err := bearermirror.Bearer(s.Data[key])
	switch {
	case errors.Is(err, bearermirror.ErrNoBearer):
		miss := notReady(ReasonBearerSecretNotFound, true, "Secret %s, named by spec.bearerSecretRef, has no key %s (or it is empty): put the worker's bearer token there, or correct spec.bearerSecretRef.key (looked for again every %s)",
			ref.Name, key, bearerRecheck)
		miss.after = bearerRecheck
		return "", &miss
	case err != nil:
		bad := stalled(ReasonBearerSecretRefused, "The value of key %s of Secret %s, named by spec.bearerSecretRef, is no bearer the gateway presents: %s; put the worker's bearer token there (white space around it is ignored)",
			key, ref.Name, err)
		return "", &bad
	}
	return bearer, nil
}

// resolveSandbox resolves a sandbox destination through the Tenant's
// Sandbox: its endpoint names the sandbox's ID, and it is Ready while the
// Sandbox is (the agent of its node supervises the worker and reports it
// in status.worker).
func (r *WorkerMappingReconciler) resolveSandbox(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping, t *playgroundv1alpha1.Tenant, d *playgroundv1alpha1.SandboxProcessDestination) resolution {
	if t.Status.SandboxRef == nil {
		return notReady(ReasonSandboxNotReady, true, "Waiting for Tenant %s to create its Sandbox", t.Name)
	}
	sbx := &playgroundv1alpha1.Sandbox{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: wm.Namespace, Name: t.Status.SandboxRef.Name}, sbx); err != nil {
		if apierrors.IsNotFound(err) {
			return notReady(ReasonSandboxNotReady, true, "Waiting for Sandbox %s of Tenant %s to be created", t.Status.SandboxRef.Name, t.Name)
		}
		return failed(pgreconcile.ReasonError, fmt.Errorf("reading sandbox %s/%s: %w", wm.Namespace, t.Status.SandboxRef.Name, err))
	}
	id := cmp.Or(sbx.Status.SandboxID, t.Status.SandboxID)
	if id == "" {
		return notReady(ReasonSandboxNotReady, true, "Waiting for the agent of Sandbox %s to provision it", sbx.Name)
	}
	endpoint := "sandbox://" + net.JoinHostPort(id, strconv.Itoa(int(d.Port))) + cmp.Or(d.Path, defaultWorkerPath)
	var res resolution
	if c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		reason, msg := ReasonSandboxPending, "it has not reported Ready yet"
		if c != nil {
			reason, msg = c.Reason, c.Message
		}
		// A suspended sandbox is where its tenant asks it to be.
		res = notReady(ReasonSandboxNotReady, reason != playgroundv1alpha1.ReasonSuspended, "Sandbox %s is not Ready (%s: %s)", sbx.Name, reason, msg)
	} else {
		res = readyNow("The agent of node %s supervises the worker in sandbox %s, on loopback port %d", sbx.Spec.NodeName, id, d.Port)
		if wm.Spec.BearerSecretRef != nil {
			res.ready.Message += fmt.Sprintf("; spec.bearerSecretRef (Secret %s) is ignored: the agent mints a sandbox worker's bearer and gives it to the worker in its token file", wm.Spec.BearerSecretRef.Name)
		}
	}
	res.endpoint, res.nodeName = endpoint, sbx.Spec.NodeName
	return res
}

// workerMappingConditions are the condition types of a mapping's status
// that this reconciler owns.
var workerMappingConditions = []string{
	playgroundv1alpha1.ReadyCondition, playgroundv1alpha1.ReconcilingCondition, playgroundv1alpha1.StalledCondition,
}

// applyStatus applies the reconciler's part of the status (conditions,
// observed generation, endpoint, ready endpoints; never status.worker,
// the agent's) when it changed, and records the Events of Ready's
// transitions.
func (r *WorkerMappingReconciler) applyStatus(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping, res resolution) error {
	conds := slices.Clone(wm.Status.Conditions)
	pgreconcile.Summarize(&conds, wm.Generation, res.ready, res.progressing, res.err)
	observed := wm.Status.ObservedGeneration
	if pgreconcile.Settled(res.err) {
		observed = wm.Generation
	}
	if observed == wm.Status.ObservedGeneration && wm.Status.Endpoint == res.endpoint && wm.Status.NodeName == res.nodeName &&
		slices.Equal(wm.Status.ReadyEndpoints, res.readyEndpoints) && pgreconcile.ConditionsHold(wm.Status.Conditions, conds, workerMappingConditions...) {
		return nil
	}
	status := playgroundv1alpha1ac.WorkerMappingStatus().
		WithConditions(pgreconcile.ApplyConditions(conds, workerMappingConditions...)...)
	if observed != 0 {
		status.WithObservedGeneration(observed)
	}
	if res.endpoint != "" {
		status.WithEndpoint(res.endpoint)
	}
	if len(res.readyEndpoints) > 0 {
		status.WithReadyEndpoints(res.readyEndpoints...)
	}
	if res.nodeName != "" {
		status.WithNodeName(res.nodeName)
	}
	err := r.Status().Apply(ctx, playgroundv1alpha1ac.WorkerMapping(wm.Name, wm.Namespace).WithStatus(status),
		client.FieldOwner(playgroundv1alpha1.WorkerMappingControllerFieldOwner), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying the status of worker mapping %s: %w", klog.KObj(wm), err)
	}
	r.recordTransition(ctx, wm, meta.FindStatusCondition(wm.Status.Conditions, playgroundv1alpha1.ReadyCondition),
		meta.FindStatusCondition(conds, playgroundv1alpha1.ReadyCondition), res.endpoint)
	return nil
}

// recordTransition logs Ready's transitions and records them as Events:
// becoming Ready (Normal), ceasing to be (Warning, with the new reason),
// and any new conflict.
func (r *WorkerMappingReconciler) recordTransition(ctx context.Context, wm *playgroundv1alpha1.WorkerMapping, before, after *metav1.Condition, endpoint string) {
	if after == nil {
		return
	}
	wasReady := before != nil && before.Status == metav1.ConditionTrue
	wasConflict := before != nil && before.Reason == ReasonConflict
	log := ctrl.LoggerFrom(ctx)
	switch {
	case after.Status == metav1.ConditionTrue && !wasReady:
		log.Info("Worker mapping is Ready", "endpoint", endpoint)
		r.Recorder.Eventf(wm, nil, corev1.EventTypeNormal, playgroundv1alpha1.ReasonReady, "Resolve", "Ready: %s (%s)", after.Message, endpoint)
	case after.Status != metav1.ConditionTrue && (wasReady || (after.Reason == ReasonConflict && !wasConflict)):
		log.Info("Worker mapping is not Ready", "reason", after.Reason, "message", after.Message)
		r.Recorder.Eventf(wm, nil, corev1.EventTypeWarning, after.Reason, "Resolve", "Not served: %s", after.Message)
	}
}

// SetupWithManager registers the reconciler. Its inputs are watched: the
// mapping and the mappings it may conflict with, its Tenant, the Tenant's
// Sandbox, the Service it names and that Service's EndpointSlices, its
// bearer Secret when it is of type WorkerBearerSecretType (another is
// looked for again, see bearerRecheck) and the copy of its bearer.
func (r *WorkerMappingReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.copies == nil {
		return errors.New("the worker mapping reconciler has no caches of bearers")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = eventseries.Recorder(mgr.GetEventRecorder("workermapping-controller"))
	}
	tenantChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*playgroundv1alpha1.Tenant), e.ObjectNew.(*playgroundv1alpha1.Tenant)
		return o.Spec.Catalog != n.Spec.Catalog || o.Status.SandboxID != n.Status.SandboxID ||
			(o.Status.SandboxRef == nil) != (n.Status.SandboxRef == nil) || !n.DeletionTimestamp.IsZero()
	}}
	sandboxChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox), e.ObjectNew.(*playgroundv1alpha1.Sandbox)
		oc := meta.FindStatusCondition(o.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		nc := meta.FindStatusCondition(n.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		sameReady := (oc == nil) == (nc == nil) && (oc == nil || (oc.Status == nc.Status && oc.Reason == nc.Reason && oc.Message == nc.Message))
		// Open handles change with every session: not this reconciler's concern.
		return !sameReady || o.Status.SandboxID != n.Status.SandboxID || o.Spec.NodeName != n.Spec.NodeName
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&playgroundv1alpha1.WorkerMapping{}).
		Watches(&playgroundv1alpha1.WorkerMapping{}, handler.EnqueueRequestsFromMapFunc(r.partners)).
		Watches(&playgroundv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.mappingsOf(ctx, o.GetNamespace(), tenantKey(o.GetName()))
		}), builder.WithPredicates(tenantChanged)).
		Watches(&playgroundv1alpha1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.mappingsOf(ctx, o.GetNamespace(), tenantKey(o.(*playgroundv1alpha1.Sandbox).Spec.TenantRef.Name))
		}), builder.WithPredicates(sandboxChanged)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.mappingsOf(ctx, o.GetNamespace(), serviceKey(o.GetName()))
		})).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			svc := o.GetLabels()[discoveryv1.LabelServiceName]
			if svc == "" {
				return nil
			}
			return r.mappingsOf(ctx, o.GetNamespace(), serviceKey(svc))
		})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.serviceMappings), builder.WithPredicates(nodeAddressesChanged)).
		WatchesRawSource(crsource.Kind(r.copies.bearers, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
			return r.mappingsOf(ctx, s.Namespace, bearerKey(s.Name))
		}))).
		WatchesRawSource(crsource.Kind(r.copies.copies, &corev1.Secret{}, r.copiesChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Named("workermapping").
		Complete(r)
}

// nodeAddressesChanged passes a Node's creation, deletion and a change of
// its addresses: what the endpoints of a mapping are checked against.
var nodeAddressesChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
	return !slices.Equal(o.Status.Addresses, n.Status.Addresses)
}}

// serviceMappings returns every mapping with a Service destination: a
// node's addresses may be among its endpoints.
func (r *WorkerMappingReconciler) serviceMappings(ctx context.Context, _ client.Object) []reconcile.Request {
	var list playgroundv1alpha1.WorkerMappingList
	if err := r.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing worker mappings")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.Destination.Service != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// mappingsOf returns the mappings of namespace ns indexed under key.
func (r *WorkerMappingReconciler) mappingsOf(ctx context.Context, ns, key string) []reconcile.Request {
	var list playgroundv1alpha1.WorkerMappingList
	if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{workerMappingIndex: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing worker mappings", "namespace", ns, "key", key)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// partners maps a mapping to the others that claim its tenant or
// destination: its creation, change (called with the old object and the
// new) or deletion starts or ends their conflict.
func (r *WorkerMappingReconciler) partners(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, key := range conflictKeys(o.(*playgroundv1alpha1.WorkerMapping)) {
		for _, req := range r.mappingsOf(ctx, o.GetNamespace(), key) {
			if req.Name != o.GetName() {
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// plural is one or many, as n says.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
