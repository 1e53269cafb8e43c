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
)

// Condition types shared by the kinds of this API. Every kind reports Ready;
// Reconciling and Stalled follow kstatus, so that GitOps tools can wait on
// the objects.
const (
	// ReadyCondition summarises an object: True when it serves its purpose.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while a controller works towards the spec.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when progress needs a change by a human.
	StalledCondition = "Stalled"
)

// BackendClass names the way a sandbox is isolated on its node.
// +kubebuilder:validation:Enum=oci;vm;jail;lima
type BackendClass string

const (
	// BackendOCI is a persistent OCI container run by runc (Linux).
	BackendOCI BackendClass = "oci"
	// BackendVM is a QEMU virtual machine per sandbox, with a kernel of its
	// own (Linux): KVM where the node has it, else TCG emulation, which is
	// for development only. Only agents that offer it are bound to it.
	BackendVM BackendClass = "vm"
	// BackendJail is a FreeBSD jail.
	BackendJail BackendClass = "jail"
	// BackendLima is a Lima virtual machine per sandbox, driven through
	// limactl (built to limactl's contract: see docs/lima.md).
	BackendLima BackendClass = "lima"
)

// Isolation is, on backend oci, the boundary between a sandbox's
// processes and its node's kernel.
// +kubebuilder:validation:Enum=container;gvisor
type Isolation string

const (
	// IsolationContainer is a runc container: namespaces, cgroups and a
	// seccomp filter, on the node's kernel. The default.
	IsolationContainer Isolation = "container"
	// IsolationGVisor runs the sandbox under gVisor (runsc): a user-space
	// kernel between the tenant's processes and the node's. Only agents
	// that offer it (their Lease says so) are bound such sandboxes.
	IsolationGVisor Isolation = "gvisor"
)

// ReclaimPolicy says what happens to a tenant's pile storage when its
// sandbox is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the pile directory on the node after deletion.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete removes the pile directory with the sandbox.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// SandboxResources bounds what one sandbox may use on its node. The oci
// backend enforces them as cgroup limits on the sandbox's container.
type SandboxResources struct {
	// CPU is the CPU time the sandbox may use, in cores (for example "500m"
	// or "2"), enforced as a CFS quota; at least 10m, the least quota the
	// kernel grants (1 ms in each 100 ms period).
	// +kubebuilder:default="1"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('10m')) >= 0",message="cpu must be at least 10m: the least CPU quota the kernel grants a sandbox is 1 ms in each 100 ms period"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="cpu must be a quantity of cores, such as 500m or 2"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Memory is the most memory the sandbox's processes may use together
	// (for example "512Mi"); past it the kernel's OOM killer acts inside the
	// sandbox only. At least 32Mi, what a sandbox's init needs (128Mi on
	// backend vm, for the VM's kernel too).
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('32Mi')) >= 0",message="memory must be at least 32Mi: a sandbox's init needs 32 MiB"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="memory must be a quantity of bytes, such as 512Mi or 2Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// PIDs is the most processes and threads that may exist in the sandbox
	// at once.
	// +kubebuilder:default=1024
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	PIDs *int64 `json:"pids,omitempty"`
}

// StorageSpec bounds the sandbox's writable layer on its node (home,
// workspace and /tmp), in bytes and in inodes, by the kernel (on the oci
// backend it is an ext4 filesystem of its own: a full one gets ENOSPC
// inside the sandbox, and nothing outside it notices). The limits are
// fixed when the sandbox is provisioned on its node: later changes do not
// resize it (the agent says so in the Provisioned condition). Sizes below
// 32Mi are refused here; the oci backend also refuses more than one inode
// per 4Ki of size. The tenant's pile is bounded in spec.pile. See
// docs/isolation.md. (Quantities are int-or-string: their length is
// bounded so that the API server can bound the cost of their CEL rules.)
type StorageSpec struct {
	// Size is the most bytes the writable layer (home, workspace and /tmp
	// together) may hold, filesystem overhead included (about 3%), for
	// example "4Gi"; at least 32Mi, the least filesystem the backends make.
	// +kubebuilder:default="4Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('32Mi')) >= 0",message="size must be at least 32Mi: the writable layer is a filesystem of its own, and 32 MiB is the least one holds its journal and metadata"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="size must be a quantity of bytes, such as 512Mi or 4Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// Inodes is the most files, directories and symlinks the writable layer
	// may hold (ext4 rounds it up to fill its inode tables).
	// +kubebuilder:default=262144
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=4294967295
	// +optional
	Inodes *int64 `json:"inodes,omitempty"`
}

// PileStorage is the tenant's pile on its sandbox's node, the sandbox's
// append-only storage at /pile: its bounds, in bytes and inodes, enforced
// by the kernel as the writable layer's are and, as theirs, fixed when
// the sandbox is provisioned on its node; and whether it outlives the
// sandbox.
type PileStorage struct {
	// Size is the most bytes the pile may hold, for example "512Mi"; at
	// least 32Mi, the least filesystem the backends make.
	// +kubebuilder:default="512Mi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('32Mi')) >= 0",message="pile size must be at least 32Mi: the pile is a filesystem of its own, and 32 MiB is the least one holds its journal and metadata"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="pile size must be a quantity of bytes, such as 512Mi or 4Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// Inodes is the most files and directories the pile may hold.
	// +kubebuilder:default=4096
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=4294967295
	// +optional
	Inodes *int64 `json:"inodes,omitempty"`

	// ReclaimPolicy says whether the pile outlives the sandbox: Retain
	// (the default) keeps it on the node, Delete removes it together with
	// the sandbox. The writable layer always goes with the sandbox. It may
	// change at any time: the policy in force when the sandbox is deleted
	// is the one followed.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// LoginProfile holds the defaults that `login` shells load and `clean`
// shells do not.
type LoginProfile struct {
	// Env lists environment variables that login shells start with.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// Script is shell code that login shells source before the command, for
	// example aliases or a PATH extension. It runs with the tenant's
	// privileges inside the sandbox.
	// +kubebuilder:validation:MaxLength=16384
	// +optional
	Script string `json:"script,omitempty"`
}

// EnvVar is one environment variable of a login profile.
type EnvVar struct {
	// Name is the variable's name: letters, digits and underscores, not
	// starting with a digit.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="name must be a shell variable's name: letters, digits and underscores, not starting with a digit"
	// +kubebuilder:validation:MaxLength=128
	// +required
	Name string `json:"name"`

	// Value is the variable's value.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Value string `json:"value,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name is the object's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// SecretKeyReference names one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Key is the key within the Secret's data.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="key must be a key of a Secret's data: letters, digits, '-', '_' and '.'"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=token
	// +optional
	Key string `json:"key,omitempty"`
}

// FacultyBundleReference names a FacultyBundle in the same namespace whose
// binaries are installed on the sandbox's PATH.
type FacultyBundleReference struct {
	// Name is the FacultyBundle's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}
