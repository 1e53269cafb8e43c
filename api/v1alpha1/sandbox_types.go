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
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxPhase is the coarse lifecycle state of a Sandbox.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Detached;Suspended;Failed;Terminating
type SandboxPhase string

const (
	// SandboxPending is a sandbox not yet bound to a node, or not yet
	// picked up by its node's agent.
	SandboxPending SandboxPhase = "Pending"
	// SandboxProvisioning is a sandbox whose backend resources the node's
	// agent is creating.
	SandboxProvisioning SandboxPhase = "Provisioning"
	// SandboxReady is a running sandbox: sessions can open and commands run.
	SandboxReady SandboxPhase = "Ready"
	// SandboxDetached is a provisioned sandbox, storage in place, with no
	// session open.
	SandboxDetached SandboxPhase = "Detached"
	// SandboxSuspended is a sandbox stopped because its Tenant is suspended;
	// its files are kept and it starts again when the suspension is lifted.
	SandboxSuspended SandboxPhase = "Suspended"
	// SandboxFailed is a sandbox the backend refused; the reason is in the
	// Ready condition.
	SandboxFailed SandboxPhase = "Failed"
	// SandboxTerminating is a sandbox being destroyed.
	SandboxTerminating SandboxPhase = "Terminating"
)

// Sandbox condition types beyond Ready. Each has one author: the manager's
// binder writes Bound, NodeHealthy and Ready (and the phase), its key and
// credential deliveries SigningKeyDelivered and EgressCredentialsDelivered;
// the node's agent writes Provisioned, Running, JobsAdmitted and
// UsageLimited (and sandboxID, endpoint, openHandles). Each writes with
// server-side apply under its own field manager, so that none overwrites
// another's conditions.
const (
	// BoundCondition is True once the sandbox is bound to a node.
	BoundCondition = "Bound"
	// NodeHealthyCondition is True while the bound node's agent keeps its
	// registration Lease renewed.
	NodeHealthyCondition = "NodeHealthy"
	// ProvisionedCondition is True once the node's agent created the
	// backend resources and serves the sandbox.
	ProvisionedCondition = "Provisioned"
	// JobsAdmittedCondition, written by the node's agent, is False while
	// the agent starts no background job in the sandbox because a kill
	// there could not be proven (reason ProofLost); a restart of the
	// sandbox (spec.restartRequest) proves it clean and lifts it.
	JobsAdmittedCondition = "JobsAdmitted"
	// UsageLimitedCondition, written by the node's agent for a sandbox
	// with spec.usageLimits, is True while the sandbox has spent a limit
	// of its period (reason CPULimitReached): frozen, and its calls
	// refused, until the period resets; False (WithinLimits) otherwise.
	UsageLimitedCondition = "UsageLimited"
	// SigningKeyDeliveredCondition, written by the manager, which hands
	// the sandbox's node the key spec.signingKey names, is False while it
	// cannot: reason SigningKeyRefused (the Secret cannot be used: the
	// message says why and what to do) or SigningKeyUndelivered (the
	// node's agent did not take it; tried again). It is absent otherwise
	// (delivered, or no key named): a condition on every sandbox would
	// cost a status write each. A sandbox not yet provisioned waits for
	// the key, and its Ready says this condition's cause.
	SigningKeyDeliveredCondition = "SigningKeyDelivered"
	// EgressCredentialsDeliveredCondition, written by the manager, which
	// hands the sandbox's node the credentials of its brokered egress
	// rules, is False while one cannot reach the node: reason
	// EgressCredentialRefused (a rule's Secret cannot be used; requests to
	// its host are answered 503: the message names the host, why and what
	// to do) or EgressCredentialUndelivered (the node's agent did not take
	// them; tried again). Absent otherwise. The sandbox serves meanwhile;
	// its Tenant is not Ready until the credentials are delivered.
	EgressCredentialsDeliveredCondition = "EgressCredentialsDelivered" //nolint:gosec // a condition type, not a credential
	// ImageCredentialsDeliveredCondition, written by the manager, which
	// hands the sandbox's node the credentials of the pull Secrets
	// spec.image names, is False while it cannot: reason
	// ImageCredentialsRefused (a pull Secret cannot be used: the message
	// says which, why and what to do) or ImageCredentialsUndelivered (the
	// node's agent did not take them; tried again). Absent otherwise
	// (delivered, or no pull Secret named). A pull of a private image
	// waits meanwhile; its Tenant is not Ready.
	ImageCredentialsDeliveredCondition = "ImageCredentialsDelivered"
	// RunningCondition, written by the node's agent while it serves the
	// sandbox (provisioned, or suspended through spec.suspended), says
	// whether its processes run: True (reason Running) while they do;
	// False while they are put aside, the reason saying how and why:
	// IdlePaused, IdleSuspended (with its memory) or IdleStopped (without)
	// after spec.idleSuspend's period without calls, the next call waking
	// it; Waking while a call waits for that (said once a wake takes over
	// a second); CPULimitReached, frozen for spec.usageLimits until its
	// period resets; Suspended (with its memory) or Stopped (without)
	// through spec.suspended. Its message says since when, and what the
	// next call does. The phase is the manager's and does not follow it:
	// an idle sandbox stays Ready or Detached, so that a sleep or a wake
	// costs one status write, the agent's, at most one per
	// --state-write-interval per sandbox (docs/operations.md). A move to
	// another node (to come) is a reason of this condition too.
	RunningCondition = "Running"
	// ImageResolvedCondition, written by the manager for a Sandbox with
	// spec.image, is True (reason Resolved) once status.image holds the
	// digest of spec.image.reference; False while it does not: Resolving
	// (under way), PullSecretMissing, Unauthorized, ImageNotFound,
	// RegistryUnavailable (tried again, with backoff) or ImageRefused
	// (its backend runs no image). Its message says what to do. A sandbox
	// not yet provisioned waits for it. Absent without spec.image.
	ImageResolvedCondition = "ImageResolved"
)

// Condition and event reasons of Sandboxes.
const (
	ReasonBound            = "Bound"
	ReasonNoEligibleNode   = "NoEligibleNode"
	ReasonAgentHealthy     = "AgentHealthy"
	ReasonAgentUnavailable = "AgentUnavailable"
	ReasonProvisioning     = "Provisioning"
	ReasonProvisioned      = "Provisioned"
	ReasonBackendFailed    = "BackendFailed"
	// ReasonInsufficientStorage: the node's free disk space is below the
	// reserve its agent keeps, so it provisions no new sandbox.
	ReasonInsufficientStorage = "InsufficientStorage"
	ReasonRestarted           = "Restarted"
	ReasonSuspended           = "Suspended"
	ReasonProofLost           = "ProofLost"
	ReasonJobsAdmitted        = "JobsAdmitted"
	ReasonTerminating         = "Terminating"
	ReasonReady               = "Ready"
	// ReasonWaitingForFaculties: the sandbox waits, not provisioned, for
	// a FacultyBundle it lists to be built on its node; the message names
	// the bundles being built.
	ReasonWaitingForFaculties = "WaitingForFaculties"
	// ReasonFacultyUnavailable: the sandbox waits, not provisioned, for a
	// FacultyBundle it lists that waiting does not bring: its build
	// failed, its source cannot be read on the node, the node builds no
	// bundle, or it does not exist. The message names it, says why and
	// what to do.
	ReasonFacultyUnavailable = "FacultyUnavailable"
	// ReasonWaitingForSigningKey: the sandbox runs but is not reported
	// provisioned until its pile holds the signing key spec.pile.signingKey
	// names, which the manager delivers to its node's agent.
	ReasonWaitingForSigningKey = "WaitingForSigningKey"
	// ReasonSigningKeyRefused (SigningKeyDelivered=False, and a Warning
	// Event): the Secret spec.pile.signingKey names cannot be used (missing, of
	// another type, without a valid key under self.key); the sandbox keeps
	// the key it holds, if any, and one never provisioned waits.
	ReasonSigningKeyRefused = "SigningKeyRefused"
	// ReasonSigningKeyUndelivered (SigningKeyDelivered=False, and a
	// Warning Event): the agent of the sandbox's node did not take its
	// signing key; tried again.
	ReasonSigningKeyUndelivered = "SigningKeyUndelivered"
	// ReasonEgressDenied (an Event): the sandbox's resolver denied a name
	// no egress rule allows, or left out of an answer addresses egress
	// never opens; the note names them.
	ReasonEgressDenied = "EgressDenied"
	// ReasonEgressCredentialRefused (EgressCredentialsDelivered=False,
	// and a Warning Event): the Secret a brokered egress rule names cannot
	// be used (missing, of another type, without its key, not a header
	// value); requests to the host are answered 503 until it can.
	ReasonEgressCredentialRefused = "EgressCredentialRefused" //nolint:gosec // a reason, not a credential
	// ReasonEgressCredentialUndelivered (EgressCredentialsDelivered=False,
	// and a Warning Event): the manager could not hand the sandbox's
	// credentials to its node's agent; it tries again.
	ReasonEgressCredentialUndelivered = "EgressCredentialUndelivered" //nolint:gosec // a reason, not a credential
	// ReasonImageCredentialsRefused (ImageCredentialsDelivered=False, and
	// a Warning Event): a pull Secret spec.image names cannot be handed
	// to the node (missing, of another type, larger than the agent
	// takes); the node keeps the credentials it was given before, if any.
	ReasonImageCredentialsRefused = "ImageCredentialsRefused"
	// ReasonImageCredentialsUndelivered (ImageCredentialsDelivered=False,
	// and a Warning Event): the agent of the sandbox's node did not take
	// its registry credentials; tried again.
	ReasonImageCredentialsUndelivered = "ImageCredentialsUndelivered"
	// ReasonCPULimitReached: the sandbox spent spec.usageLimits.cpuSeconds
	// of its period; its agent froze it until the period resets (the
	// message says when).
	ReasonCPULimitReached = "CPULimitReached"
	// ReasonWithinLimits: the sandbox has not spent its usage limits.
	ReasonWithinLimits = "WithinLimits"

	// Reasons of the ImageResolved condition (and of the Events of its
	// failures).

	// ReasonImageResolved: status.image holds the digest of
	// spec.image.reference.
	ReasonImageResolved = "Resolved"
	// ReasonImageResolving: the manager is resolving spec.image.reference.
	ReasonImageResolving = "Resolving"
	// ReasonPullSecretMissing: a Secret spec.image.pullSecrets names does
	// not exist, or is not of type kubernetes.io/dockerconfigjson.
	ReasonPullSecretMissing = "PullSecretMissing"
	// ReasonImageUnauthorized: the registry refused the credentials of
	// the pull Secrets (or their absence) for the image.
	ReasonImageUnauthorized = "Unauthorized"
	// ReasonImageNotFound: the registry has no such repository, tag or
	// digest.
	ReasonImageNotFound = "ImageNotFound"
	// ReasonRegistryUnavailable: the registry could not be reached, or
	// failed; tried again with backoff.
	ReasonRegistryUnavailable = "RegistryUnavailable"
	// ReasonImageRefused: the sandbox cannot run the image: its backend
	// runs none (jail, lima), or its reference cannot be parsed.
	ReasonImageRefused = "ImageRefused"
	// ReasonImageUnsigned: a TenantPolicy of the namespace requires a
	// signature of the image by one of its keys, and the registry holds
	// no signature of the digest (no sha256-<hex>.sig tag).
	ReasonImageUnsigned = "ImageUnsigned"
	// ReasonImageSignatureInvalid: a TenantPolicy of the namespace
	// requires a signature of the image by one of its keys, and no
	// signature the registry holds is a valid one of the digest by them
	// (by another key, of another digest or repository, malformed, or
	// past the manager's bounds); the message says which keys were tried.
	ReasonImageSignatureInvalid = "ImageSignatureInvalid"
	// ReasonWaitingForImage: the node's agent does not provision the
	// sandbox until the manager has resolved its image to a digest.
	ReasonWaitingForImage = "WaitingForImage"
	// ReasonPullingImage: the node's agent is pulling the sandbox's image
	// into its store; the message says how many bytes of how many.
	ReasonPullingImage = "PullingImage"
	// ReasonImagePullFailed: the node could not pull the image (the
	// registry unreachable or failing, the node's store full); retried
	// with backoff. A layer the store refuses has the store's own reason
	// (Image…, listed in docs/troubleshooting.md).
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonImageDenied: the image is private and cached on the node, and
	// the registry did not confirm, under the tenant's pull credentials,
	// that the tenant may pull it; retried with backoff.
	ReasonImageDenied = "ImageDenied"
	// ReasonImageChanged: the sandbox was restarted on a new image digest
	// (an Event); its workspace, home and pile are kept.
	ReasonImageChanged = "ImageChanged"
	// The node's image store's refusals of a layer, and with it of its
	// image (hostagent/imagestore, docs/troubleshooting.md): a path out of
	// the layer, a link out of it, a write through a symbolic link, an
	// entry of a kind the image spec does not know, a layer past the
	// node's bounds in bytes or in entries, a blob that is not its
	// digest's, a layer that is not a tar. Retrying does not help: another
	// image does.
	ReasonImagePathEscapes    = "ImagePathEscapes"
	ReasonImageLinkEscapes    = "ImageLinkEscapes"
	ReasonImageThroughLink    = "ImageThroughLink"
	ReasonImageUnsupported    = "ImageUnsupportedEntry"
	ReasonImageTooLarge       = "ImageTooLarge"
	ReasonImageTooManyEntries = "ImageTooManyEntries"
	ReasonImageDigestMismatch = "ImageDigestMismatch"
	ReasonImageMalformed      = "ImageMalformed"

	// Reasons of the Running condition (and the Events of its changes),
	// beside CPULimitReached and Suspended above.

	// ReasonRunning: the sandbox's processes run.
	ReasonRunning = "Running"
	// ReasonIdlePaused: frozen after its idle period (spec.idleSuspend
	// mode Pause), its memory kept in RAM; the next call thaws it.
	ReasonIdlePaused = "IdlePaused"
	// ReasonIdleSuspended: suspended after its idle period with its
	// memory (checkpointed to the node's disk); the next call restores it.
	ReasonIdleSuspended = "IdleSuspended"
	// ReasonIdleStopped: suspended after its idle period without its
	// memory (its processes stopped, its files kept); the next call
	// starts it again.
	ReasonIdleStopped = "IdleStopped"
	// ReasonWaking: a call waits for the sandbox to wake from its idle
	// suspension.
	ReasonWaking = "Waking"
	// ReasonStopped: suspended through spec.suspended without its memory:
	// its processes ended, its files kept.
	ReasonStopped = "Stopped"
)

// SandboxNodeNameField is the Sandbox's selectable field that binds it to
// a node: agents watch their own Sandboxes by it, and the binder counts a
// node's load by it.
const SandboxNodeNameField = "spec.nodeName"

// IsolationOf is the isolation a Sandbox asks for: spec.isolation, or
// container when it is not set.
func IsolationOf(s *Sandbox) Isolation {
	if s.Spec.Isolation == "" {
		return IsolationContainer
	}
	return s.Spec.Isolation
}

// BackendClassOf is the backend a Sandbox asks for: spec.backend, or oci
// (the API's default) when it is not set yet.
func BackendClassOf(s *Sandbox) BackendClass {
	if s.Spec.Backend == "" {
		return BackendOCI
	}
	return s.Spec.Backend
}

// SandboxTemplate is what a Tenant asks of its sandbox; the Tenant
// controller copies it into the Sandbox it creates.
// +kubebuilder:validation:XValidation:rule="!has(self.isolation) || !has(self.backend) || self.backend == 'oci'",message="isolation is a choice of backend oci: other backends take none"
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'vm' || !has(self.resources) || !has(self.resources.memory) || !isQuantity(string(self.resources.memory)) || quantity(string(self.resources.memory)).compareTo(quantity('128Mi')) >= 0",message="memory must be at least 128Mi on backend vm: a VM's kernel and init need 128 MiB"
type SandboxTemplate struct {
	// Backend is how the sandbox is isolated: oci (a container, Linux: runc,
	// or gVisor with spec.isolation), vm (a QEMU virtual machine with a
	// kernel of its own, Linux), jail (FreeBSD) or lima (a Lima VM,
	// synchronous commands only). It cannot change once the sandbox exists.
	// +kubebuilder:default=oci
	// +optional
	Backend BackendClass `json:"backend,omitempty"`

	// Isolation is, on backend oci, the boundary between the tenant's
	// processes and the node's kernel: container (the default: a runc
	// container, with namespaces, cgroups and a seccomp filter on the
	// node's kernel) or gvisor (runsc: gVisor's user-space kernel in
	// between, on a node whose agent offers it; the sandbox waits, Pending,
	// until one does). Other backends take none. It cannot change once the
	// sandbox exists. What gVisor adds, costs and lacks (the pile is
	// read-only; past its memory limit the whole sandbox restarts):
	// docs/isolation.md.
	// +optional
	Isolation Isolation `json:"isolation,omitempty"`

	// Resources bounds the sandbox's CPU, memory and process count.
	// +kubebuilder:default={}
	// +optional
	Resources SandboxResources `json:"resources,omitempty"`

	// Storage bounds the writable layer (home, workspace and /tmp); the
	// pile's settings are in spec.pile (of the Tenant, and of the Sandbox).
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// Faculties lists FacultyBundles whose binaries are installed read-only on
	// the sandbox's PATH.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Faculties []FacultyBundleReference `json:"faculties,omitempty"`

	// LoginProfile holds the environment and shell code that `login` shells
	// load; `clean` shells (used by read and write) ignore it.
	// +optional
	LoginProfile LoginProfile `json:"loginProfile,omitempty"`

	// NodeSelector restricts the nodes the sandbox may be bound to, by node
	// label, as a Pod's nodeSelector does.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Network is what the sandbox may reach: nothing (mode none, the
	// default) or the egress list. A change reaches a running sandbox's
	// rules; switching between none and egress takes effect at its next
	// restart.
	// +kubebuilder:default={}
	// +optional
	Network SandboxNetwork `json:"network,omitempty"`

	// IdleSuspend suspends the sandbox after a while without tool calls;
	// the next call resumes it before it is served (the caller sees
	// latency, not an error). Where the node keeps a suspended sandbox's
	// memory (gVisor) its processes go on where they were; elsewhere they
	// are stopped and it starts again over its files. Unset, the sandbox
	// is never suspended for idleness.
	// +optional
	IdleSuspend *IdleSuspend `json:"idleSuspend,omitempty"`

	// FromSnapshot names a SandboxSnapshot, in the same namespace, that the
	// sandbox starts from: its files (home, workspace, /tmp) are a copy of
	// the snapshot's, and where the snapshot holds memory (gVisor) its
	// processes go on from where they were. The sandbox is bound to the
	// snapshot's node, with the snapshot's backend and isolation, once the
	// snapshot is Ready; its pile is its own. Read when the sandbox is
	// first provisioned: deleting the snapshot later does not touch it. It
	// cannot change once the Sandbox exists.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="fromSnapshot must be a SandboxSnapshot's name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	FromSnapshot string `json:"fromSnapshot,omitempty"`

	// Image is the OCI image the sandbox runs as its system, in place of
	// its node's own (which it runs when this is unset). The manager
	// resolves its tag to a digest once and records it in the Sandbox's
	// status.image, so that every start runs the same bytes until the
	// reference changes or a re-resolve is asked for (annotation
	// playground.dev/resolve-image); the sandbox is not provisioned before
	// its digest is known (docs/images.md). Backends jail and lima run no
	// image: the manager says so in the Sandbox's ImageResolved condition
	// (reason ImageRefused) rather than resolve it.
	// +optional
	Image *SandboxImage `json:"image,omitempty"`

	// UsageLimits bound what the sandbox may spend per period, read from
	// the kernel's counters by its node's agent: once a limit is spent
	// the sandbox is frozen (the cgroup freezer: its processes and jobs
	// kept, using no CPU) and the calls that run something in it or reach
	// it (exec, a job's start, poll, input and cancel, read, write, a
	// worker request) are refused with resource_exhausted and the time
	// the period ends, when it thaws (condition UsageLimited). Raising or
	// removing a limit thaws it at once. Unset: no limits. Only the oci
	// backend reads the counters: a sandbox of another backend with
	// limits has those calls refused (unavailable).
	// +optional
	UsageLimits *UsageLimits `json:"usageLimits,omitempty"`
}

// MaxImageReferenceLength bounds an image reference: a registry host, a
// repository path, a tag and a digest fit in it with room to spare.
const MaxImageReferenceLength = 512

// MaxImagePullSecrets bounds the pull Secrets of one image.
const MaxImagePullSecrets = 8

// SandboxImage is the OCI image a sandbox runs as its system.
type SandboxImage struct {
	// Reference names the image: its registry's host (with a port, if
	// any), its repository, and a tag, a digest or both, as
	// registry.example.com/team/base:1.4,
	// docker.io/library/python:3.12, or
	// registry.example.com:5000/team/base@sha256:<64 hexadecimal digits>.
	// The registry is always written: a name without it (python:3.12)
	// is refused, so that an allowed-images policy compares whole
	// references. No scheme (https://), spaces or control characters.
	// A tag is resolved to a digest by the manager; a digest is used as
	// it is (with a tag beside it, the tag is only a label).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('://')",message="reference takes no scheme: write registry.example.com/team/image:tag, not https://registry.example.com/team/image:tag"
	// +kubebuilder:validation:XValidation:rule="self.matches('^[!-~]+$')",message="reference must hold no spaces or control characters: an image reference such as registry.example.com/team/image:tag"
	// +kubebuilder:validation:XValidation:rule="self.contains('://') || !self.matches('^[!-~]+$') || self.matches('^(((localhost|[a-zA-Z0-9-]+([.][a-zA-Z0-9-]+)+)(:[0-9]{1,5})?)|[a-zA-Z0-9-]+:[0-9]{1,5})(/[a-z0-9]+([._-]+[a-z0-9]+)*)+(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="reference must be registry/repository[:tag][@sha256:digest], its registry's host first, such as docker.io/library/python:3.12 or registry.example.com:5000/team/base@sha256:<64 lower-case hexadecimal digits>; a name without its registry (python:3.12) is not accepted, and a repository is lower-case letters, digits and . _ - between slashes"
	// +required
	Reference string `json:"reference"`

	// PullSecrets name Secrets of type kubernetes.io/dockerconfigjson in
	// the sandbox's namespace, whose credentials the manager uses to
	// resolve a private image's tag and, later, hands to the agent of
	// the sandbox's node only (agents read no Secrets). At most 8.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	PullSecrets []LocalObjectReference `json:"pullSecrets,omitempty"`

	// PullPolicy is IfNotPresent (the default: a node that holds the
	// image uses its copy, once the registry has said that this tenant
	// may pull it, for a private image) or Always (the node asks the
	// registry for the image's digest at every start of the sandbox).
	// +kubebuilder:default=IfNotPresent
	// +optional
	PullPolicy ImagePullPolicy `json:"pullPolicy,omitempty"`
}

// ImagePullPolicy says when a node asks the registry for an image.
// +kubebuilder:validation:Enum=IfNotPresent;Always
type ImagePullPolicy string

// The pull policies of an image.
const (
	PullIfNotPresent ImagePullPolicy = "IfNotPresent"
	PullAlways       ImagePullPolicy = "Always"
)

// ResolveImageAnnotation is the annotation that, on a Sandbox or a Tenant
// (which the manager copies to its Sandbox), asks the manager to resolve the Sandbox's image
// tag again: set it to any new value (a date, say) and the tag's digest
// now is recorded, once, with the value in status.image.resolveRequest.
// It picks up a tag moved since without changing the spec.
const ResolveImageAnnotation = "playground.dev/resolve-image"

// SandboxImageStatus is the image the manager resolved for a sandbox.
type SandboxImageStatus struct {
	// Reference is spec.image.reference as it was resolved.
	// +optional
	Reference string `json:"reference,omitempty"`

	// Digest is the digest the reference resolved to (sha256:...): of
	// the image's manifest, or of its index for an image of several
	// platforms (the node picks its own). The sandbox runs exactly this.
	// +optional
	Digest string `json:"digest,omitempty"`

	// ResolvedAt is when the reference was resolved.
	// +optional
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`

	// ResolveRequest is the playground.dev/resolve-image annotation the
	// resolution answered.
	// +optional
	ResolveRequest string `json:"resolveRequest,omitempty"`

	// SignedBy are the keys whose signature of Digest the manager
	// verified, each TENANTPOLICY/KEY, for the TenantPolicies of the
	// namespace that name signing keys (spec.sandbox.imageSignatures).
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	SignedBy []string `json:"signedBy,omitempty"`
}

// UsageLimits bound a sandbox's spend per period (docs/operations.md,
// "Usage").
type UsageLimits struct {
	// Period is how long spending counts before it starts again from
	// zero; periods are aligned to the Unix epoch, so 24h starts at
	// midnight UTC. At least 10s.
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="period must be a duration such as 24h or 1h30m: a number and a unit (s, m or h), or several"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('10s')",message="period must be at least 10s"
	// +optional
	Period metav1.Duration `json:"period,omitempty"`

	// CPUSeconds is the CPU time the sandbox's processes may use per
	// period (its cgroup's CPU counter, over every restart of the
	// sandbox). When it is spent the sandbox is frozen, whatever runs in
	// it, within the agent's --usage-limit-overshoot (1 CPU-second by
	// default) past it: a command running then ends its call with
	// resource_exhausted and is killed when the sandbox thaws; a job is
	// kept, frozen, and goes on then.
	// +kubebuilder:validation:Minimum=1
	// +optional
	CPUSeconds *int64 `json:"cpuSeconds,omitempty"`
}

// IdleMode is how an idle sandbox is put aside.
// +kubebuilder:validation:Enum=Suspend;Pause
type IdleMode string

const (
	// IdleModeSuspend frees the sandbox's memory and CPU: checkpointed to the
	// node's disk with its memory where the node can (gVisor), its
	// processes stopped elsewhere. A resume takes a fraction of a second.
	IdleModeSuspend IdleMode = "Suspend"
	// IdleModePause freezes the sandbox's processes (the cgroup freezer): no
	// CPU, its memory kept in RAM, resumed in milliseconds; for short
	// idles. Where the backend cannot freeze, the sandbox is suspended.
	IdleModePause IdleMode = "Pause"
)

// IdleSuspend is when a sandbox is suspended for idleness.
type IdleSuspend struct {
	// Mode is Suspend (the default: memory and CPU freed) or Pause
	// (frozen, memory kept in RAM, resumed in milliseconds).
	// +kubebuilder:default=Suspend
	// +optional
	Mode IdleMode `json:"mode,omitempty"`

	// After is how long the sandbox goes without a tool call (exec, read,
	// write, a job's start, poll or cancel, a session opened) before it
	// is suspended; at least 10s. A call in progress keeps it awake.
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="after must be a duration such as 30s, 15m or 1h30m: a number and a unit (s, m or h), or several"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('10s')",message="after must be at least 10s"
	// +required
	After metav1.Duration `json:"after"`

	// WithRunningJobs suspends the sandbox even while jobs run in it.
	// Where its memory is kept they go on after the resume; elsewhere they
	// end, as a suspension ends them. By default a running job keeps the
	// sandbox awake.
	// +optional
	WithRunningJobs bool `json:"withRunningJobs,omitempty"`
}

// NetworkMode selects a sandbox's networking.
// +kubebuilder:validation:Enum=none;egress
type NetworkMode string

const (
	// NetworkNone gives the sandbox a loopback interface only.
	NetworkNone NetworkMode = "none"
	// NetworkEgress gives the sandbox a route out, through NAT on its node,
	// to the addresses and ports of the egress list and nowhere else: not
	// the node, not its agent, not cloud metadata or other link-local
	// addresses. The node's agent must run with --network=egress.
	NetworkEgress NetworkMode = "egress"
)

// SandboxNetwork is a sandbox's networking.
// +kubebuilder:validation:XValidation:rule="has(self.mode) && self.mode == 'egress' ? has(self.egress) && size(self.egress) > 0 : !has(self.egress) || size(self.egress) == 0",message="egress lists what mode egress may reach: it is required with mode egress and refused with mode none"
type SandboxNetwork struct {
	// Mode is none (loopback only) or egress.
	// +kubebuilder:default=none
	// +optional
	Mode NetworkMode `json:"mode,omitempty"`

	// Egress lists what the sandbox may connect to in mode egress.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Egress []EgressRule `json:"egress,omitempty"`
}

// EgressRule allows connections to a network, or to the addresses
// a host name resolves to, on some TCP and UDP ports or on all of them.
// +kubebuilder:validation:XValidation:rule="has(self.cidr) != has(self.host)",message="give exactly one of cidr (a network such as 10.0.0.0/8) and host (a name such as pypi.org, or *.example.com)"
// +kubebuilder:validation:XValidation:rule="!has(self.checkServerName) || !self.checkServerName || (has(self.host) && has(self.ports) && size(self.ports) > 0)",message="checkServerName checks TLS connections to a host on its ports: give host and ports with it"
// +kubebuilder:validation:XValidation:rule="!has(self.credential) || (has(self.host) && !self.host.startsWith('*.') && has(self.ports) && size(self.ports) > 0)",message="a credential is added to HTTPS requests to one host: give an exact host (no wildcard) and its ports with it"
type EgressRule struct {
	// CIDR is a network, such as 10.0.0.0/8, or 203.0.113.7/32 for one
	// address; an IPv6 one (2001:db8::/32) opens something only on nodes
	// that give sandboxes IPv6. Its host bits must be zero.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="cidr must be a network address with a prefix length, such as 10.0.0.0/8 or 2001:db8::/32"
	// +optional
	CIDR string `json:"cidr,omitempty"`

	// Host is a DNS name (pypi.org), or a wildcard for the names under a
	// domain (*.githubusercontent.com: one or more labels before it, not
	// the domain itself). The sandbox resolves names through a resolver
	// its node's agent runs for it, which answers only the names its rules
	// allow and opens exactly the addresses it answered, for the answer's
	// time to live (docs/isolation.md). Lower case.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^([*][.])?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?[.])*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$')",message="host must be a DNS name in lower case, such as pypi.org, or a wildcard such as *.example.com for the names under a domain: no scheme (https://), port, path or capitals"
	// +optional
	Host string `json:"host,omitempty"`

	// CheckServerName, with host and ports, lets through only TLS
	// connections that name the host in their ClientHello (SNI), checked
	// at the node without terminating TLS: a connection to one of its
	// addresses (which a CDN may share) that names another host, or
	// none, is refused (docs/isolation.md). TCP only on those ports.
	// +optional
	CheckServerName bool `json:"checkServerName,omitempty"`

	// Ports are the TCP and UDP ports allowed; empty allows every port
	// and protocol.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +optional
	Ports []int32 `json:"ports,omitempty"`

	// Credential, with an exact host and its ports, has the node add a
	// header to each HTTPS request the sandbox makes to the host, its
	// value from a Secret of the Tenant's namespace: the credential never
	// exists in the sandbox. The node ends the TLS of these connections
	// with a certificate from a CA of the sandbox's own, which the
	// sandbox trusts; every other host stays end-to-end TLS
	// (docs/isolation.md).
	// +optional
	Credential *EgressCredential `json:"credential,omitempty"`
}

// EgressCredential is a header the node sets on a sandbox's requests to
// a host.
type EgressCredential struct {
	// Header is the request header the node sets, replacing whatever the
	// sandbox sends under that name.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][-A-Za-z0-9]*$')",message="header must be an HTTP header's name, such as Authorization or X-Api-Key: letters, digits and '-'"
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() != 'host'",message="the Host header names the server: it cannot carry a credential"
	// +kubebuilder:default=Authorization
	// +optional
	Header string `json:"header,omitempty"`

	// SecretRef names a Secret in the Tenant's namespace, of type
	// playground.dev/egress-credential, and its key (default token) whose
	// value is the header's, whole (for example "Bearer sk-..."). The
	// manager reads it and hands it to the agent of the sandbox's node
	// only, which keeps it in memory; a change reaches the node within a
	// minute.
	// +required
	SecretRef SecretKeyReference `json:"secretRef"`
}

// SandboxSpec is the desired state of a Sandbox.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.nodeName) || (has(self.nodeName) && self.nodeName == oldSelf.nodeName)",message="nodeName is set once: the sandbox's storage lives on that node"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.backend) || (has(self.backend) && self.backend == oldSelf.backend)",message="backend cannot change once set: create a new Sandbox instead"
// +kubebuilder:validation:XValidation:rule="(has(self.isolation) ? self.isolation : 'container') == (has(oldSelf.isolation) ? oldSelf.isolation : 'container')",message="isolation cannot change once the sandbox exists: create a new Sandbox instead"
// +kubebuilder:validation:XValidation:rule="!has(self.pile) || !has(self.pile.shared) || !has(self.faculties) || self.faculties.all(f, f.name != self.pile.shared.name)",message="a FacultyBundle is either a faculty or the shared pile, not both"
// +kubebuilder:validation:XValidation:rule="has(self.fromSnapshot) == has(oldSelf.fromSnapshot) && (!has(self.fromSnapshot) || self.fromSnapshot == oldSelf.fromSnapshot)",message="fromSnapshot cannot change once the sandbox exists: create a new Sandbox instead"
type SandboxSpec struct {
	// TenantRef names the Tenant, in the same namespace, that this sandbox
	// serves. It cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenantRef is immutable"
	// +required
	TenantRef LocalObjectReference `json:"tenantRef"`

	// Persona is the identity the tenant's shells present, exported as
	// PERSONA in login shells.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9 ._@+-]*$')",message="persona must start with a letter or digit and hold only letters, digits, spaces and . _ @ + -"
	// +optional
	Persona string `json:"persona,omitempty"`

	SandboxTemplate `json:",inline"`

	// NodeName is the node the sandbox is bound to. The manager sets it when
	// it binds the sandbox; set it yourself to pin the sandbox to a node.
	// Once set it cannot change: the sandbox's storage lives on that node.
	// The binding is kept in spec, not status, so that a backup restored
	// without status still finds its workspace.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="nodeName must be a node's name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// Suspended stops the sandbox's processes and keeps its files; clearing
	// it starts the sandbox again. The Tenant controller copies the
	// Tenant's spec.suspended here.
	// +optional
	Suspended bool `json:"suspended,omitempty"`

	// RestartRequest asks the node's agent to restart the sandbox: every
	// process in it is killed, its running jobs end, and it starts again
	// over the same files. Set it to any new value (a date, say); the
	// agent reports the value it acted on in status.restartRequest. A
	// restart lifts a halt of job admission (condition JobsAdmitted).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RestartRequest string `json:"restartRequest,omitempty"`

	// Pile is the tenant's pile: the Tenant controller copies it from the
	// Tenant's spec.pile (its signing key as the Secret and fingerprint
	// the Tenant's status names).
	// +kubebuilder:default={}
	// +optional
	Pile SandboxPile `json:"pile,omitempty"`
}

// SandboxPile is a sandbox's pile: every setting of it, in one place.
type SandboxPile struct {
	PileStorage `json:",inline"`

	// SigningKey names the Secret whose key the sandbox's pile holds as
	// /pile/self.key.
	// +optional
	SigningKey *SigningKeySource `json:"signingKey,omitempty"`

	// Shared names a FacultyBundle in the same namespace whose staged
	// files are mounted read-only at /pile/shared. A change applies at
	// the sandbox's next restart, as a faculty's does.
	// +optional
	Shared *FacultyBundleReference `json:"shared,omitempty"`
}

// SigningKeySource is where a sandbox's signing key comes from.
type SigningKeySource struct {
	// SecretName names a Secret in the Sandbox's namespace, of type
	// playground.dev/signing-key, holding the key under "self.key". The
	// manager reads it and hands the key to the agent of the sandbox's
	// node only, which writes it into the pile.
	// +kubebuilder:validation:MaxLength=253
	// +required
	SecretName string `json:"secretName"`

	// Fingerprint is the key's fingerprint when the Tenant controller last
	// read the Secret; a change brings the new key to the sandbox at once.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-f]{16}$')",message="fingerprint must be 16 lower-case hexadecimal digits, as the Tenant controller writes it"
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`
}

// SigningKeyStatus identifies a signing key without revealing it.
type SigningKeyStatus struct {
	// Fingerprint is the first 16 hex digits of the SHA-256 of the key's
	// public key.
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`

	// PublicKey is the key's Ed25519 public key, in hex: what verifies
	// what the tenant signs.
	// +optional
	PublicKey string `json:"publicKey,omitempty"`
}

// FacultyInstallStatus reports one faculty bundle installed in a sandbox.
type FacultyInstallStatus struct {
	// Name is the FacultyBundle's name.
	// +required
	Name string `json:"name"`

	// Fingerprint is the content fingerprint of the installed build.
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`

	// State is Installed (the build with this fingerprint is on the
	// sandbox's PATH), Pending (its first build is not ready) or Stale (a
	// newer build failed or is not ready yet, or the bundle is gone; the
	// sandbox keeps the build it has).
	// +optional
	State FacultyState `json:"state,omitempty"`

	// Message says why a bundle is Pending or Stale.
	// +optional
	Message string `json:"message,omitempty"`
}

// FacultyState is how a sandbox has one of its faculty bundles.
// +kubebuilder:validation:Enum=Installed;Pending;Stale
type FacultyState string

// The states of a sandbox's faculty bundle.
const (
	FacultyInstalled FacultyState = "Installed"
	FacultyPending   FacultyState = "Pending"
	FacultyStale     FacultyState = "Stale"
)

// SandboxStatus is the observed state of a Sandbox, reported by the agent
// on its node and by the manager's binder.
type SandboxStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready summarises; Bound and Provisioned detail the
	// steps; Running says whether its processes run now (asleep for
	// idleness, frozen for its usage limit, suspended).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase is the coarse lifecycle state.
	// +optional
	Phase SandboxPhase `json:"phase,omitempty"`

	// Isolation is the isolation the sandbox runs with on backend oci:
	// spec.isolation, or container when the spec names none; empty on
	// other backends, which offer no choice. The manager writes it, so
	// that the default shows as what it is.
	// +optional
	Isolation Isolation `json:"isolation,omitempty"`

	// SandboxID is the stable identity of the sandbox, chosen at random by
	// the agent of its node when it first provisions it and recorded on
	// that node: the same across agent restarts, sessions and backups
	// restored without status, and revealing nothing of its tenant.
	// open_session returns it.
	// +optional
	SandboxID string `json:"sandboxID,omitempty"`

	// Endpoint is the address of the agent API that serves this sandbox.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// OpenHandles is the number of session handles open on the sandbox.
	// +optional
	OpenHandles int32 `json:"openHandles,omitempty"`

	// RestartRequest is the spec.restartRequest the agent last acted on.
	// +optional
	RestartRequest string `json:"restartRequest,omitempty"`

	// Faculties lists the faculty bundles installed in the sandbox.
	// +listType=map
	// +listMapKey=name
	// +optional
	Faculties []FacultyInstallStatus `json:"faculties,omitempty"`

	// Usage is what the sandbox has spent, as its node's agent reads it
	// from the kernel's counters.
	// +optional
	Usage *UsageStatus `json:"usage,omitempty"`

	// SigningKey is the key the sandbox's pile holds at /pile/self.key, as
	// its node's agent reads it; the Sandbox is Ready only once it holds
	// one, when spec.pile.signingKey names one.
	// +optional
	SigningKey *SigningKeyStatus `json:"signingKey,omitempty"`

	// Image is the image spec.image resolved to, written by the manager:
	// the reference, its digest and when. A sandbox with spec.image is
	// provisioned only once this names its reference.
	// +optional
	Image *SandboxImageStatus `json:"image,omitempty"`
}

// UsageStatus is what a sandbox has spent (docs/operations.md, "Usage"),
// in units a bill is made of: milliseconds of CPU and of jobs' run time,
// MiB-seconds of memory. Written by its node's agent at most once a
// minute, and at once when a limit is reached or resets.
type UsageStatus struct {
	// CPUMilliseconds is the CPU time its processes used, over its
	// restarts, since its agent began keeping account.
	CPUMilliseconds int64 `json:"cpuMilliseconds"`

	// MemoryPeakBytes is the most memory it held since it last started.
	MemoryPeakBytes int64 `json:"memoryPeakBytes"`

	// MemoryMiBSeconds is the memory it held over time: MiB held times
	// seconds held, read every --usage-interval.
	MemoryMiBSeconds int64 `json:"memoryMiBSeconds"`

	// StorageBytes is the disk its files (home, workspace, /tmp) and its
	// pile take.
	StorageBytes int64 `json:"storageBytes"`

	// JobMilliseconds is the time its background jobs ran, summed over
	// jobs: each from its start to its end (or now), less the time the
	// sandbox was suspended or frozen.
	JobMilliseconds int64 `json:"jobMilliseconds"`

	// PeriodStart is when the current period of spec.usageLimits began,
	// and PeriodCPUMilliseconds the CPU time spent in it.
	// +optional
	PeriodStart *metav1.Time `json:"periodStart,omitempty"`
	// +optional
	PeriodCPUMilliseconds int64 `json:"periodCPUMilliseconds,omitempty"`

	// ExhaustedUntil, when set, is when the limit the sandbox has spent
	// resets; until then it is frozen and the calls that run something in
	// it or reach it are refused.
	// +optional
	ExhaustedUntil *metav1.Time `json:"exhaustedUntil,omitempty"`

	// SampleTime is when the figures were read.
	SampleTime metav1.Time `json:"sampleTime"`
}

// Sandbox is one persistent shell-and-file environment of a tenant, bound to
// one node. Deleting it destroys the backend resources on that node; the
// tenant's pile storage follows spec.pile.reclaimPolicy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbx,categories=playground
// +kubebuilder:selectablefield:JSONPath=".spec.nodeName"
// +kubebuilder:selectablefield:JSONPath=".spec.tenantRef.name"
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[?(@.type=="Running")].reason`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.spec.backend`
// +kubebuilder:printcolumn:name="Isolation",type=string,JSONPath=`.status.isolation`,priority=1
// +kubebuilder:printcolumn:name="Idle",type=string,JSONPath=`.spec.idleSuspend.after`,priority=1
// +kubebuilder:printcolumn:name="Idle Mode",type=string,JSONPath=`.spec.idleSuspend.mode`,priority=1
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.sandboxID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec SandboxSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxList is a list of Sandboxes.
//
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Sandboxes.
	Items []Sandbox `json:"items"`
}

func init() {
	register(&Sandbox{}, &SandboxList{})
}

// Bundles are the FacultyBundles the Sandbox's sandbox mounts: its
// faculties, then its shared pile.
func (s *Sandbox) Bundles() []FacultyBundleReference {
	if s.Spec.Pile.Shared == nil {
		return s.Spec.Faculties
	}
	return append(slices.Clone(s.Spec.Faculties), *s.Spec.Pile.Shared)
}
