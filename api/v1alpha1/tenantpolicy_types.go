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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantPolicy condition types and reasons. The ceilings of a policy are
// enforced at admission, by the installation's ValidatingAdmissionPolicy
// playground-tenant-policy (config/admission/tenant-policy.yaml), which
// evaluates every TenantPolicy against each Tenant and Sandbox written in
// a namespace it selects; the manager reports, on the Tenants, what the
// admission policy cannot see (docs/security.md, "Ceilings the platform
// owns").
const (
	// PolicyCompliantCondition, on a Tenant of a namespace that a
	// TenantPolicy selects, is False (reason PolicyExceeded) when the
	// Tenant asks for more than a policy allows a sandbox: a Tenant written
	// before the ceiling was tightened. A Tenant that no policy selects
	// has none. (A ceiling of the namespace is reported where it acts: on
	// SandboxReady and Stalled, reason NamespaceCeilingExceeded.)
	PolicyCompliantCondition = "PolicyCompliant"

	// ReasonWithinPolicy: PolicyCompliant=True, the Tenant is within
	// every TenantPolicy that selects its namespace.
	ReasonWithinPolicy = "WithinPolicy"
	// ReasonPolicyExceeded: PolicyCompliant=False, the Tenant asks for
	// more than a TenantPolicy allows a sandbox (tightened after the
	// Tenant was written); its sandbox runs on as it is, and a change of
	// the fields over the ceiling is refused at apply until they are
	// within it. The message is the admission policy's.
	ReasonPolicyExceeded = "PolicyExceeded"
	// ReasonNamespaceCeilingExceeded (Stalled; SandboxReady=False when
	// there is no Sandbox): the Tenant's sandbox would take its namespace
	// past a TenantPolicy's ceiling of the namespace (sandboxes, CPU,
	// memory, storage): the manager creates no Sandbox for it, or keeps its
	// Sandbox's resources and storage as they were.
	ReasonNamespaceCeilingExceeded = "NamespaceCeilingExceeded"
	// ReasonPolicyCheckFailed: PolicyCompliant=Unknown, the manager could
	// not check the Tenant against the policies (the dry run of it failed
	// for another reason than a ceiling); retried.
	ReasonPolicyCheckFailed = "PolicyCheckFailed"
	// ReasonEnforced: a TenantPolicy's Ready=True, it is observed; the
	// message counts the namespaces it selects.
	ReasonEnforced = "Enforced"
)

// TenantPolicySpec is what a platform team allows the Tenants and
// Sandboxes of the namespaces it selects. Every ceiling is optional: one
// left out bounds nothing. A list of allowed values, when given, allows
// those values only.
type TenantPolicySpec struct {
	// NamespaceSelector selects the namespaces the policy bounds, by their
	// labels, which a namespace's admin cannot change (labelling a
	// namespace is a cluster-scoped write). {} selects every namespace.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0))",message="each matchExpression's operator is In or NotIn, with values, or Exists or DoesNotExist, without"
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// Sandbox bounds each sandbox: a Tenant's spec.sandbox, a Sandbox's
	// spec.
	// +optional
	Sandbox SandboxCeilings `json:"sandbox,omitempty"`

	// AllowedToolSets are the tool sets (a Tenant's spec.tools) its
	// Tenants may ask for; unset, any.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	AllowedToolSets []ToolSet `json:"allowedToolSets,omitempty"`

	// AllowedCatalogs are the catalogs (a Tenant's spec.catalog) its
	// Tenants may ask for; unset, any.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	AllowedCatalogs []Catalog `json:"allowedCatalogs,omitempty"`

	// Namespace bounds what the sandboxes of each selected namespace hold
	// together. These are checked by the manager, not at admission (which
	// sees one object at a time): a Tenant whose sandbox would pass one
	// gets no Sandbox (or keeps its Sandbox's resources and storage as
	// they were), and says so (Stalled, reason NamespaceCeilingExceeded).
	// +optional
	Namespace NamespaceCeilings `json:"namespace,omitempty"`
}

// SandboxCeilings bound each sandbox of a namespace.
type SandboxCeilings struct {
	// Max bounds its resources and storage.
	// +optional
	Max SandboxMax `json:"max,omitempty"`

	// UsageLimit, when set, requires every sandbox to have a usage limit
	// (spec.usageLimits.cpuSeconds) of at most this much CPU time per
	// period.
	// +optional
	UsageLimit *UsageLimitCeiling `json:"usageLimit,omitempty"`

	// AllowedBackends are the backends a sandbox may ask for; unset, any.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=set
	// +optional
	AllowedBackends []BackendClass `json:"allowedBackends,omitempty"`

	// AllowedIsolations are the isolations a sandbox of backend oci may
	// ask for (unset isolation is container); unset, any. Other backends
	// take no isolation: allowedBackends bounds them.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	AllowedIsolations []Isolation `json:"allowedIsolations,omitempty"`

	// Network bounds what a sandbox may reach.
	// +optional
	Network NetworkCeilings `json:"network,omitempty"`

	// AllowedImages are the images a sandbox may run (spec.image.reference),
	// each a registry, a path under it or a repository: an entry ending in
	// / allows every reference that starts with it
	// (registry.example.com/team/ allows registry.example.com/team/base:1
	// and registry.example.com/team/ml/cuda@sha256:..., not
	// registry.example.com/teammate/x); an entry without it is one
	// repository, with any tag or digest (docker.io/library/python allows
	// docker.io/library/python:3.12, not docker.io/library/python-evil).
	// References are compared as written, registry first (an image's
	// reference always names its registry). Unset, any image; a sandbox
	// without an image (its node's own system) is always allowed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.all(p, p.contains('/') && p.matches('^(((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?)|[a-zA-Z0-9-]+:[0-9]{1,5})(/[a-z0-9]+([._-]+[a-z0-9]+)*)*/?$'))",message="allowedImages must be registries or repositories, registry first, such as registry.example.com/ (the whole registry), registry.example.com/team/ (a path under it) or docker.io/library/python (one repository): no scheme, tag or digest"
	// +listType=set
	// +optional
	AllowedImages []string `json:"allowedImages,omitempty"`

	// ImageSignatures, when set, requires the image of every sandbox
	// (spec.image) to carry a cosign signature by one of its keys: the
	// manager checks it when it resolves the image to a digest (and at
	// each re-resolve), and a sandbox whose digest has no valid signature
	// is not run (ImageResolved=False, reason ImageUnsigned or
	// ImageSignatureInvalid, naming the keys tried). The signature is
	// cosign's, by key, stored beside the image in its repository under
	// the tag sha256-<hex>.sig. A sandbox resolved before the policy said
	// so keeps its digest until its next resolution (docs/images.md,
	// "Signatures"). A sandbox without an image is always allowed.
	// +optional
	ImageSignatures *ImageSignaturePolicy `json:"imageSignatures,omitempty"`
}

// ImageSignaturePolicy names the keys an image's signature must be by.
type ImageSignaturePolicy struct {
	// Keys are the public keys trusted to sign images: a signature by
	// any one of them will do.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +required
	Keys []ImageSigningKey `json:"keys"`

	// Required, true by default, refuses an image without a valid
	// signature by one of Keys. False only reports: such an image runs,
	// its ImageResolved condition says it is not signed by a trusted key,
	// and status.image.signedBy names the key that did verify it, if one
	// did (a way to see which images are signed before requiring it).
	// +kubebuilder:default=true
	// +optional
	Required *bool `json:"required,omitempty"`
}

// ImageSigningKey is one public key trusted to sign images.
type ImageSigningKey struct {
	// Name names the key in conditions and in status.image.signedBy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="name must be lower-case letters, digits, '-' and '.', beginning and ending with a letter or digit (as release-2026 or ci.signer)"
	// +required
	Name string `json:"name"`

	// PublicKey is the key in PEM (-----BEGIN PUBLIC KEY-----, as cosign
	// generate-key-pair writes cosign.pub): ECDSA, Ed25519 or RSA. The
	// key, not a certificate: keyless signatures are not checked yet.
	// +kubebuilder:validation:MaxLength=8192
	// +kubebuilder:validation:XValidation:rule="self.contains('-----BEGIN PUBLIC KEY-----') && self.contains('-----END PUBLIC KEY-----')",message="publicKey must be a public key in PEM, from -----BEGIN PUBLIC KEY----- to -----END PUBLIC KEY----- (cosign.pub as cosign generate-key-pair writes it)"
	// +required
	PublicKey string `json:"publicKey"`
}

// SandboxMax is the most one sandbox may ask for.
type SandboxMax struct {
	// CPU is the most spec.resources.cpu, in cores.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="cpu must be a quantity of cores, such as 500m or 2"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Memory is the most spec.resources.memory.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="memory must be a quantity of bytes, such as 512Mi or 2Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// PIDs is the most spec.resources.pids.
	// +kubebuilder:validation:Minimum=16
	// +optional
	PIDs *int64 `json:"pids,omitempty"`

	// StorageSize is the most spec.storage.size (the writable layer).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="storageSize must be a quantity of bytes, such as 512Mi or 4Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	StorageSize *resource.Quantity `json:"storageSize,omitempty"`

	// StorageInodes is the most spec.storage.inodes.
	// +kubebuilder:validation:Minimum=256
	// +optional
	StorageInodes *int64 `json:"storageInodes,omitempty"`

	// PileSize is the most spec.pile.size (of a Tenant or a Sandbox).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="pileSize must be a quantity of bytes, such as 512Mi or 4Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	PileSize *resource.Quantity `json:"pileSize,omitempty"`

	// PileInodes is the most spec.pile.inodes (of a Tenant or a Sandbox).
	// +kubebuilder:validation:Minimum=256
	// +optional
	PileInodes *int64 `json:"pileInodes,omitempty"`
}

// UsageLimitCeiling is the most CPU time a sandbox's usage limit may allow
// per period. A sandbox's own period must divide it (periods are aligned
// to the Unix epoch, so each of the policy's periods then holds a whole
// number of the sandbox's), and its limit, times that number, must be at
// most MaxCPUSeconds: 100 CPU-seconds per 1h is 2400 per 24h.
type UsageLimitCeiling struct {
	// MaxCPUSeconds is the most CPU time a sandbox may be allowed per
	// period.
	// +kubebuilder:validation:Minimum=1
	// +required
	MaxCPUSeconds int64 `json:"maxCPUSeconds"`

	// Period is the period MaxCPUSeconds is counted over; at least 10s.
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="period must be a duration such as 24h or 1h30m: a number and a unit (s, m or h), or several"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('10s')",message="period must be at least 10s"
	// +optional
	Period metav1.Duration `json:"period,omitempty"`
}

// NetworkCeilings bound what a sandbox may reach.
type NetworkCeilings struct {
	// AllowedModes are the network modes (spec.network.mode) a sandbox may
	// ask for; unset, any.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	AllowedModes []NetworkMode `json:"allowedModes,omitempty"`

	// AllowedEgress, when set, bounds the egress list: each rule's host
	// must be one of its hosts (or under one of its wildcards), each
	// rule's cidr within one of its cidrs. A list left out allows no rule
	// of its kind. Unset, any rule.
	// +optional
	AllowedEgress *EgressCeilings `json:"allowedEgress,omitempty"`
}

// EgressCeilings are the hosts and networks a sandbox's egress rules may
// name.
type EgressCeilings struct {
	// Hosts are DNS names (pypi.org), which allow a rule of that host, or
	// wildcards (*.example.com), which allow a rule of any name under the
	// domain (a.example.com, *.a.example.com, *.example.com) but not of
	// the domain itself.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(h, h.matches('^([*][.])?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?[.])*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'))",message="hosts must be DNS names in lower case, such as pypi.org, or wildcards such as *.example.com: no scheme (https://), port, path or capitals"
	// +listType=set
	// +optional
	Hosts []string `json:"hosts,omitempty"`

	// CIDRs are networks (10.0.0.0/8, 2001:db8::/32): a rule's cidr must
	// lie within one of them.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c) && cidr(c) == cidr(c).masked())",message="cidrs must be network addresses with a prefix length, such as 10.0.0.0/8 or 2001:db8::/32"
	// +listType=set
	// +optional
	CIDRs []string `json:"cidrs,omitempty"`
}

// NamespaceCeilings bound what the sandboxes of one namespace hold
// together: every Sandbox of the namespace counts, whoever created it.
type NamespaceCeilings struct {
	// MaxSandboxes is the most Sandboxes the namespace may hold (each
	// Tenant has one).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxSandboxes *int32 `json:"maxSandboxes,omitempty"`

	// MaxCPU is the most CPU its sandboxes may ask for together.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="maxCPU must be a quantity of cores, such as 500m or 16"
	// +optional
	MaxCPU *resource.Quantity `json:"maxCPU,omitempty"`

	// MaxMemory is the most memory its sandboxes may ask for together.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="maxMemory must be a quantity of bytes, such as 512Mi or 64Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	MaxMemory *resource.Quantity `json:"maxMemory,omitempty"`

	// MaxStorage is the most disk its sandboxes may ask for together:
	// their writable layers and piles.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="maxStorage must be a quantity of bytes, such as 512Mi or 1Ti (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	MaxStorage *resource.Quantity `json:"maxStorage,omitempty"`
}

// TenantPolicyStatus is what the manager observed of a TenantPolicy.
type TenantPolicyStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready says the policy is observed, and how many
	// namespaces it selects.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Namespaces is how many namespaces the policy selects.
	// +optional
	Namespaces int32 `json:"namespaces,omitempty"`
}

// TenantPolicy is a platform team's ceiling on what the Tenants and
// Sandboxes of the namespaces it selects may ask for: resources and
// storage per sandbox, a required usage limit, the backends, isolations,
// network modes, egress hosts and networks, tool sets and catalogs
// allowed, and what a namespace's sandboxes may hold together. It is
// cluster-scoped, so a namespace's admin can neither change it nor
// unselect the namespace. A write that asks for more is refused at apply,
// naming the policy and the ceiling; a Tenant over a ceiling tightened
// after it was written is reported in its PolicyCompliant condition.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tpol,categories=playground
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Namespaces",type=integer,JSONPath=`.status.namespaces`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TenantPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the policy allows.
	// +required
	Spec TenantPolicySpec `json:"spec"`

	// Status is what the manager observed.
	// +optional
	Status TenantPolicyStatus `json:"status,omitempty"`
}

// TenantPolicyList is a list of TenantPolicies.
//
// +kubebuilder:object:root=true
type TenantPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the TenantPolicies.
	Items []TenantPolicy `json:"items"`
}

func init() {
	register(&TenantPolicy{}, &TenantPolicyList{})
}
