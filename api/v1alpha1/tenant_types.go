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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Catalog is the set of MCP tools a tenant is served.
// +kubebuilder:validation:Enum=sandbox;workers
type Catalog string

const (
	// CatalogSandbox serves Playground's eight sandbox tools.
	CatalogSandbox Catalog = "sandbox"
	// CatalogWorkers forwards to the tenant's native MCP worker (see
	// WorkerMapping) and serves its catalogue instead.
	CatalogWorkers Catalog = "workers"
)

// ToolSet is the set of sandbox tools a tenant of the sandbox catalog is
// served.
// +kubebuilder:validation:Enum=standard;extended
type ToolSet string

const (
	// ToolSetStandard serves the eight sandbox tools, exactly.
	ToolSetStandard ToolSet = "standard"
	// ToolSetExtended serves the eight with more options (jobs on a
	// terminal or with their input open; reads and writes of byte ranges
	// and whole-file digests) and the tools beside them: job_input,
	// job_resize, job_screen and job_list (docs/tools.md).
	ToolSetExtended ToolSet = "extended"
)

// Tenant condition types beyond Ready.
const (
	// CredentialsReadyCondition is True when the tenant's token is minted and
	// accepted; False while suspended.
	CredentialsReadyCondition = "CredentialsReady"
	// SandboxReadyCondition mirrors the Ready condition of the tenant's
	// Sandbox; it is False too while the sandbox serves without what the
	// manager could not deliver to it (its SigningKeyDelivered or
	// EgressCredentialsDelivered condition says why).
	SandboxReadyCondition = "SandboxReady"
	// SandboxRunningCondition mirrors the Running condition of the
	// tenant's Sandbox (whether its processes run, or sleep for idleness,
	// are frozen for its usage limit or suspended, and what the next call
	// does); absent while the Sandbox has none.
	SandboxRunningCondition = "SandboxRunning"
	// WorkerReadyCondition, on tenants whose catalog is workers, mirrors
	// the Ready condition of the tenant's WorkerMapping.
	WorkerReadyCondition = "WorkerReady"
)

// CredentialsSpec controls the tenant's bearer token.
type CredentialsSpec struct {
	// RotationRequest asks for a new token: set it to any new value (a date,
	// a counter) and the controller mints a new token into the Secret. The
	// previous token is refused from the next request on.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	RotationRequest string `json:"rotationRequest,omitempty"`
}

// TenantSpec is the desired state of a Tenant.
// +kubebuilder:validation:XValidation:rule="!has(self.pile) || !has(self.pile.shared) || !has(self.sandbox) || !has(self.sandbox.faculties) || self.sandbox.faculties.all(f, f.name != self.pile.shared.name)",message="a FacultyBundle is either a faculty or the shared pile, not both"
type TenantSpec struct {
	// Persona is the identity the tenant's shells present, exported as
	// PERSONA in login shells. Defaults to the Tenant's name.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9 ._@+-]*$')",message="persona must start with a letter or digit and hold only letters, digits, spaces and . _ @ + -"
	// +optional
	Persona string `json:"persona,omitempty"`

	// Sandbox is the template of the tenant's sandbox. Changes reach the
	// Sandbox where they can (resources, faculties, login profile); backend
	// and node binding are fixed once the sandbox exists.
	// +kubebuilder:default={}
	// +optional
	Sandbox SandboxTemplate `json:"sandbox,omitempty"`

	// Catalog is the set of MCP tools the tenant is served: sandbox (the
	// eight sandbox tools) or workers (its native MCP worker, through a
	// WorkerMapping).
	// +kubebuilder:default=sandbox
	// +optional
	Catalog Catalog `json:"catalog,omitempty"`

	// Tools is the set of sandbox tools the tenant is served, when its
	// catalog is sandbox: standard (the eight) or extended (the eight
	// with terminals, input to running jobs and files in ranges, and the
	// tools that go with them). A client sees a change at its next
	// session (a stateful session keeps the tools it began with).
	// +kubebuilder:default=standard
	// +optional
	Tools ToolSet `json:"tools,omitempty"`

	// Credentials controls the tenant's bearer token.
	// +optional
	Credentials CredentialsSpec `json:"credentials,omitempty"`

	// Pile is the tenant's pile, its append-only storage at /pile: its
	// bounds, whether it outlives the sandbox, its signing key and the
	// shared pile mounted in it. The manager copies it to the Sandbox.
	// +kubebuilder:default={}
	// +optional
	Pile TenantPile `json:"pile,omitempty"`

	// Suspended revokes the tenant's access from the next request on and
	// stops its sandbox's processes (its running jobs end); its files are
	// kept. Clearing it restores access with the same token and starts the
	// sandbox again over the same files.
	// +optional
	Suspended bool `json:"suspended,omitempty"`
}

// TenantPile is a tenant's pile: every setting of it, in one place.
type TenantPile struct {
	PileStorage `json:",inline"`

	// SigningKey is where the tenant's signing key comes from.
	// +optional
	SigningKey SigningKeySpec `json:"signingKey,omitempty"`

	// Shared names a FacultyBundle, in the Tenant's namespace, whose staged
	// files are a shared pile: mounted read-only at /pile/shared in the
	// tenant's sandbox, the same bytes in every sandbox that lists it. For
	// a pile the platform team alone updates, its source is a host path
	// under a prefix the cluster admin grants (docs/faculties.md). Like a
	// faculty, a new build reaches the sandbox at its next restart.
	// +optional
	Shared *FacultyBundleReference `json:"shared,omitempty"`
}

// SigningKeySpec says where a tenant's signing key, /pile/self.key in its
// sandbox (TRIBLESPACE_KEY for its worker), comes from.
// +kubebuilder:validation:XValidation:rule="!(has(self.secretName) && has(self.rotationRequest))",message="rotationRequest rotates a generated key: a key from secretName is rotated by changing the Secret"
type SigningKeySpec struct {
	// SecretName names a Secret in the Tenant's namespace, of type
	// playground.dev/signing-key, holding the key under "self.key" (64
	// hexadecimal digits, as `trible pile signing-key init` writes it): a
	// key the platform team manages. A change of the Secret reaches the
	// sandbox within a minute. Unset, the manager generates a key once,
	// into Secret <tenant>-signing-key, and keeps it.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// RotationRequest asks for a new generated key: set it to any new
	// value (a date, a counter) and the manager generates one into the
	// Secret; the previous key's fingerprint is kept in status.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	RotationRequest string `json:"rotationRequest,omitempty"`
}

// TenantSigningKeyStatus describes the tenant's signing key without
// revealing it.
type TenantSigningKeyStatus struct {
	SigningKeyStatus `json:",inline"`

	// SecretName names the Secret that holds the key.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// Generated is true for a key the manager generated.
	// +optional
	Generated bool `json:"generated,omitempty"`

	// RotationRequest is the spec.pile.signingKey.rotationRequest the
	// generated key answers.
	// +optional
	RotationRequest string `json:"rotationRequest,omitempty"`

	// SandboxFingerprint is the fingerprint of the key the sandbox's pile
	// holds now: it differs from fingerprint while a new key is on its
	// way to the sandbox.
	// +optional
	SandboxFingerprint string `json:"sandboxFingerprint,omitempty"`

	// PreviousFingerprints are the fingerprints of the keys this one
	// replaced, the most recent first (at most 8).
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	PreviousFingerprints []string `json:"previousFingerprints,omitempty"`
}

// CredentialsStatus describes the tenant's current token without revealing it.
type CredentialsStatus struct {
	// SecretRef names the Secret, in the Tenant's namespace, that holds the
	// token under the key "token".
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Fingerprint identifies the current token without revealing it: the
	// first 16 hex digits of its SHA-256. Compare it with a token you hold
	// to tell which one is current.
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`

	// TokenSHA256 is the full SHA-256 of the current token, in lowercase
	// hex: what the MCP gateway authenticates bearer tokens against, so
	// that it never reads Secrets. Only the Tenant controller writes it,
	// and only for a token it minted into a Secret this Tenant controls;
	// it is empty while there is none (a Secret conflict, deletion). It
	// reveals nothing of the token, which has 256 random bits.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	TokenSHA256 string `json:"tokenSHA256,omitempty"`

	// RotationRequest is the spec.credentials.rotationRequest the current
	// token was minted for.
	// +optional
	RotationRequest string `json:"rotationRequest,omitempty"`

	// IssuedAt is when the current token was minted.
	// +optional
	IssuedAt *metav1.Time `json:"issuedAt,omitempty"`
}

// TenantStatus is the observed state of a Tenant.
type TenantStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready summarises; CredentialsReady and SandboxReady
	// detail it; SandboxRunning says whether the sandbox's processes run
	// now.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Credentials describes the current token: where it is and its fingerprint.
	// +optional
	Credentials CredentialsStatus `json:"credentials,omitempty"`

	// SandboxRef names the tenant's Sandbox.
	// +optional
	SandboxRef *LocalObjectReference `json:"sandboxRef,omitempty"`

	// Isolation is the isolation the tenant's sandbox runs with on backend
	// oci (its Sandbox's status.isolation: container by default); empty on
	// other backends.
	// +optional
	Isolation Isolation `json:"isolation,omitempty"`

	// SandboxID is the stable ID of the tenant's sandbox, as its node's
	// agent chose it; published once the sandbox is Ready (the Sandbox's
	// status has it from the start of its provisioning).
	// +optional
	SandboxID string `json:"sandboxID,omitempty"`

	// Usage is what the tenant's sandbox has spent, copied from the
	// Sandbox's status (at most once a minute, and at once when a limit
	// is reached or resets).
	// +optional
	Usage *UsageStatus `json:"usage,omitempty"`

	// SigningKey describes the tenant's signing key: where it is, its
	// fingerprint and public key, the one its sandbox holds, and the
	// fingerprints of the keys it replaced.
	// +optional
	SigningKey *TenantSigningKeyStatus `json:"signingKey,omitempty"`
}

// Tenant is who may use a sandbox, and with what: a persona, a sandbox
// template, the MCP catalog served and a bearer token minted into a Secret.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tn,categories=playground
// +kubebuilder:printcolumn:name="Catalog",type=string,JSONPath=`.spec.catalog`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspended`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[?(@.type=="SandboxRunning")].reason`
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=`.status.sandboxRef.name`
// +kubebuilder:printcolumn:name="Tools",type=string,JSONPath=`.spec.tools`,priority=1
// +kubebuilder:printcolumn:name="Isolation",type=string,JSONPath=`.status.isolation`,priority=1
// +kubebuilder:printcolumn:name="Idle",type=string,JSONPath=`.spec.sandbox.idleSuspend.after`,priority=1
// +kubebuilder:printcolumn:name="Idle Mode",type=string,JSONPath=`.spec.sandbox.idleSuspend.mode`,priority=1
// +kubebuilder:printcolumn:name="Fingerprint",type=string,JSONPath=`.status.credentials.fingerprint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +kubebuilder:default={}
	// +optional
	Spec TenantSpec `json:"spec,omitempty"`

	// Status is the observed state.
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
//
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Tenants.
	Items []Tenant `json:"items"`
}

func init() {
	register(&Tenant{}, &TenantList{})
}
