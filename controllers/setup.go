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
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/destpolicy"
	"github.com/playground-dev/playground/internal/eventseries"
	"github.com/playground-dev/playground/internal/selfowner"
)

// Options configure the manager's reconcilers.
type Options struct {
	// LeaseNamespace holds the agents' registration Leases.
	LeaseNamespace string
	// Now is the clock for lease expiry; nil means time.Now.
	Now func() time.Time
	// Workers is how many Tenants, and how many Sandboxes, are reconciled
	// at once; 0 means DefaultWorkers. Each object is only ever reconciled
	// by one worker at a time.
	Workers int
	// AgentUsers are the agents' ServiceAccount user names, whose CSRs for
	// their node's serving certificate the manager signs; default the
	// agent ServiceAccount of the deployment, playground-agent in the
	// lease namespace.
	AgentUsers []string
	// AgentCertLifetime bounds the agents' serving certificates; 0 means
	// DefaultAgentCertLifetime.
	AgentCertLifetime time.Duration
	// WorkerEndpoints is the cluster admin's policy of where the gateway
	// may forward a workers tenant: the addresses a Service destination's
	// endpoints may have (package destpolicy). The nodes' and the control
	// plane's addresses are refused besides, unless it allows them.
	WorkerEndpoints destpolicy.Policy
	// Owner, the manager's own ServiceAccount, owns what the manager
	// creates that no manifest lists (the agent CA's Secret and ConfigMap,
	// the leader-election Lease), so that uninstalling removes them; nil
	// outside a cluster.
	Owner *selfowner.Owner
	// Agents reach the agents' API, to deliver brokered egress
	// credentials, registry credentials and signing keys; nil: the manager delivers nothing
	// (the controller tests, which run no agent), and still says in a
	// Sandbox's conditions which Secret cannot be used.
	Agents AgentClients
	// Images configure how the manager reaches image registries, to
	// resolve a Sandbox's spec.image to a digest.
	Images ImageOptions
}

// DefaultWorkers lets a burst of Tenants overlap their round trips to the
// API server instead of queueing behind one another.
const DefaultWorkers = 16

func (o *Options) defaults() {
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = agentlease.DefaultNamespace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if len(o.AgentUsers) == 0 {
		o.AgentUsers = []string{"system:serviceaccount:" + o.LeaseNamespace + ":playground-agent"}
	}
	if o.AgentCertLifetime <= 0 {
		o.AgentCertLifetime = DefaultAgentCertLifetime
	}
}

// CacheOptions narrow the manager's informers to what the reconcilers
// read: agent registrations only from the lease namespace, and of the
// cluster's Secrets only Playground's credential Secrets (the tenant label
// and the credential type, both set by the Tenant reconciler). Two caches
// of their own hold the worker bearers' Secrets (BearerCacheOptions) and
// their copies for the gateway (CopyCacheOptions), so that no other Secret
// is ever held in the manager's memory. A reconciler that must see a
// Secret without them reads it with the API reader (as the Tenant
// reconciler does for a Secret squatting on a credential's name, and the
// agent CA for its Secret). Of the CertificateSigningRequests, only those
// for the Playground signer are cached.
func CacheOptions(opts Options) cache.Options {
	opts.defaults()
	tenantLabel, err := labels.NewRequirement(playgroundv1alpha1.TenantLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{opts.LeaseNamespace: {}}},
		&corev1.Secret{}: {
			Label: labels.NewSelector().Add(*tenantLabel),
			Field: fields.OneTermEqualSelector("type", playgroundv1alpha1.CredentialSecretType),
		},
		&certificatesv1.CertificateSigningRequest{}: {Field: fields.OneTermEqualSelector("spec.signerName", agentpki.SignerName)},
		&corev1.Service{}: {Transform: cache.TransformStripManagedFields()},
		// Of the Nodes, only their addresses are read (a worker's
		// endpoint may not be one): the rest, images and all, is not kept.
		&corev1.Node{}:               {Transform: nodeAddressesOnly},
		&discoveryv1.EndpointSlice{}: {Transform: cache.TransformStripManagedFields()},
	}}
}

// nodeAddressesOnly keeps of a Node its name, identity and addresses.
func nodeAddressesOnly(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Generation: n.Generation, DeletionTimestamp: n.DeletionTimestamp},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

// Setup registers every reconciler of the manager with mgr, and the
// manager's metrics (metrics.go) on controller-runtime's registry.
func Setup(mgr ctrl.Manager, opts Options) error {
	opts.defaults()
	if err := registerMetrics(mgr); err != nil {
		return err
	}
	// The Tenant and WorkerMapping reconcilers both find mappings by it.
	if err := indexWorkerMappings(context.Background(), mgr); err != nil {
		return err
	}
	copies, err := newBearerCopies(mgr, opts)
	if err != nil {
		return err
	}
	if err := (&WorkerMappingReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("workermapping-controller")), Workers: opts.Workers, Endpoints: opts.WorkerEndpoints, copies: copies}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&WorkerBearerReconciler{Client: mgr.GetClient(), Owner: opts.Owner, copies: copies}).SetupWithManager(mgr); err != nil {
		return err
	}
	// One binder: the Tenant reconciler binds the Sandboxes it creates with
	// it, so that both spread a burst by the same count of bindings.
	binder := &SandboxReconciler{Client: mgr.GetClient(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("sandbox-controller")), Options: opts}
	if err := (&TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("tenant-controller")), Workers: opts.Workers, Binder: binder}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := binder.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&TenantPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&SnapshotReconciler{Client: mgr.GetClient(), Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&FacultyBundleReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("facultybundle-controller")), Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&EgressCredentialReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("egresscredential-controller")), Agents: opts.Agents, Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&SigningKeyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("signingkey-controller")), Agents: opts.Agents, Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ImageCredentialReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("imagecredential-controller")), Agents: opts.Agents, Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ImageReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("image-controller")), Options: opts}).SetupWithManager(mgr); err != nil {
		return err
	}
	ca := &AgentCA{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: opts.LeaseNamespace, Now: opts.Now, Owner: opts.Owner}
	if err := mgr.Add(ca); err != nil {
		return err
	}
	return (&AgentCertReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: eventseries.Recorder(mgr.GetEventRecorder("agentcert-controller")),
		CA: ca, AgentUsers: opts.AgentUsers, Lifetime: opts.AgentCertLifetime, Now: opts.Now,
	}).SetupWithManager(mgr)
}
