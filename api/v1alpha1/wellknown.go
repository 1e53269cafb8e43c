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

package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// Finalizers, labels and Secret conventions shared by the manager, the
// agents and the gateway.
const (
	// TenantFinalizer guards a Tenant until its Sandbox and Secret are gone.
	TenantFinalizer = "playground.dev/tenant"
	// SandboxFinalizer guards a Sandbox until its node's agent destroyed the
	// backend resources (and the pile, with spec.pile.reclaimPolicy Delete).
	SandboxFinalizer = "playground.dev/sandbox"

	// TenantLabel names, on a Sandbox or credential Secret, the Tenant (in
	// the same namespace) it belongs to.
	TenantLabel = "playground.dev/tenant"

	// CredentialSecretType is the type of the Secrets holding tenant
	// tokens. With TenantLabel it selects the only Secrets the manager
	// caches; the gateway reads no Secrets.
	CredentialSecretType = "playground.dev/tenant-token"
	// CredentialTokenKey is the key of the token in a credential Secret.
	CredentialTokenKey = "token"

	// WorkerBearerSecretType is the type a Secret must have for a
	// WorkerMapping's bearerSecretRef: the gateway presents a worker's
	// internal bearer only from a Secret made for that use, never from
	// another Secret of the namespace (a tenant's credential, say).
	WorkerBearerSecretType = "playground.dev/worker-bearer"

	// EgressCredentialSecretType is the type a Secret must have for a
	// brokered egress rule's credential: the manager hands a node only a
	// Secret made for that use, never another of the namespace (a
	// tenant's token, a worker's bearer), which a rule could otherwise
	// send to a host of its choosing.
	EgressCredentialSecretType = "playground.dev/egress-credential"

	// SigningKeySecretType is the type a Secret must have to be a tenant's
	// signing key, whether the manager generated it or the platform team
	// manages it: the manager installs in a sandbox only a Secret made for
	// that use, never another of the namespace.
	SigningKeySecretType = "playground.dev/signing-key"
	// SigningKeySecretKey is the key of the signing key in its Secret:
	// 64 hexadecimal digits, the seed of an Ed25519 key, as `trible pile
	// signing-key init` writes self.key.
	SigningKeySecretKey = "self.key"
)

// Field managers: the names Playground's components write under, so that
// an object's managedFields say who owns what. A Sandbox's status has two
// owners, each applying (server-side, with the apply configurations of
// applyconfiguration/) every status field it owns on every write and no
// other: an owner's field it leaves out of an apply is removed.
const (
	// TenantControllerFieldOwner writes Tenants' finalizer and whole status,
	// the credential Secrets, and the Sandboxes' spec except nodeName.
	TenantControllerFieldOwner = "playground-tenant-controller"
	// SandboxControllerFieldOwner is the manager's Sandbox reconciler (the
	// binder): a Sandbox's status.phase, status.observedGeneration and the
	// Bound, NodeHealthy, Ready, Reconciling and Stalled conditions.
	SandboxControllerFieldOwner = "playground-manager"
	// AgentFieldOwner is the agent of the Sandbox's node: its
	// status.sandboxID, endpoint, openHandles, restartRequest, faculties,
	// usage and signingKey, and the Provisioned, JobsAdmitted and
	// UsageLimited conditions; and status.worker
	// of the WorkerMapping whose worker runs in that Sandbox.
	AgentFieldOwner = "playground-agent"
	// FacultyBundleControllerFieldOwner is the manager's FacultyBundle
	// reconciler: every field of a bundle's status except nodes.
	FacultyBundleControllerFieldOwner = "playground-facultybundle-controller"
	// WorkerMappingControllerFieldOwner is the manager's WorkerMapping
	// reconciler: a mapping's status except worker.
	WorkerMappingControllerFieldOwner = "playground-workermapping-controller"
	// SnapshotControllerFieldOwner is the manager's SandboxSnapshot
	// reconciler: a snapshot's status.phase, nodeName, sandboxID, backend,
	// isolation and Bound condition. The agent of its node writes the rest
	// under AgentFieldOwner.
	SnapshotControllerFieldOwner = "playground-snapshot-controller"
	// TenantPolicyFieldOwner is the manager's TenantPolicy reconciler: a
	// policy's whole status.
	TenantPolicyFieldOwner = "playground-tenantpolicy-controller"
	// SigningKeyFieldOwner is the manager's delivery of signing keys: a
	// Sandbox's SigningKeyDelivered condition.
	SigningKeyFieldOwner = "playground-signingkey-controller"
	// EgressCredentialFieldOwner is the manager's delivery of brokered
	// egress credentials: a Sandbox's EgressCredentialsDelivered
	// condition.
	EgressCredentialFieldOwner = "playground-egresscredential-controller"
	// ImageCredentialsFieldOwner is the manager's delivery of registry
	// credentials: a Sandbox's ImageCredentialsDelivered condition.
	ImageCredentialsFieldOwner = "playground-imagecredentials-controller"
	// ImageFieldOwner is the manager's image resolver: a Sandbox's
	// status.image and ImageResolved condition.
	ImageFieldOwner = "playground-image-controller"
	// ManifestFieldOwner applies the manifests of `playground-dev`.
	ManifestFieldOwner = "playground"
)

// AgentNodeFieldOwner is the field manager under which the agent of node
// writes its own entry of a FacultyBundle's status.nodes: one per node, so
// that an agent's apply, which lists only its own entry, removes no other
// node's.
func AgentNodeFieldOwner(node string) string { return AgentFieldOwner + "/" + node }

// CredentialSecretName is the name of a Tenant's credential Secret.
func CredentialSecretName(tenant string) string { return tenant + "-token" }

// SigningKeySecretName is the name of the Secret the manager generates a
// Tenant's signing key into, when the Tenant names none of its own.
func SigningKeySecretName(tenant string) string { return tenant + "-signing-key" }

// TokenSHA256 is how a token's hash is written in
// status.credentials.tokenSHA256: its SHA-256 in lowercase hex.
func TokenSHA256(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// UseVerb is the custom RBAC verb on tenants that lets a Kubernetes user
// act as the tenant (stdio mode).
const UseVerb = "use"

// TenantUseAttributes is the access that lets a Kubernetes user act as
// the tenant name of namespace: the verb use on the Tenant, and nothing
// else. (Reading the tenant's credential Secret is not enough: the
// gateway and the manager may read Secrets cluster-wide, and their
// identities must never pass for a tenant's.) The stdio gateway and the
// agents ask for the same.
func TenantUseAttributes(namespace, name string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Namespace: namespace, Verb: UseVerb, Group: GroupVersion.Group, Resource: "tenants", Name: name}
}
