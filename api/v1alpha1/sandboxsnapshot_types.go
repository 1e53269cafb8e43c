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
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotPhase is the coarse state of a SandboxSnapshot.
// +kubebuilder:validation:Enum=Pending;Ready;Failed
type SnapshotPhase string

const (
	// SnapshotPending is a snapshot not taken yet: its sandbox is not
	// bound or provisioned, or its node's agent has not taken it.
	SnapshotPending SnapshotPhase = "Pending"
	// SnapshotReady is a snapshot taken and kept on its node: Sandboxes
	// and Tenants of its namespace can start from it.
	SnapshotReady SnapshotPhase = "Ready"
	// SnapshotFailed is a snapshot its node's agent could not take (the
	// Ready condition says why), or whose data its node lost.
	SnapshotFailed SnapshotPhase = "Failed"
)

// Condition reasons of SandboxSnapshots.
const (
	// ReasonSandboxNotFound: the snapshot's sandboxRef names no Sandbox.
	ReasonSandboxNotFound = "SandboxNotFound"
	// ReasonSandboxNotProvisioned: the Sandbox is not provisioned on a
	// node yet; the snapshot is taken once it is.
	ReasonSandboxNotProvisioned = "SandboxNotProvisioned"
	// ReasonTaken: the snapshot is taken and kept on its node.
	ReasonTaken = "Taken"
	// ReasonSnapshotFailed: the node's agent could not take it, or its
	// node lost it.
	ReasonSnapshotFailed = "SnapshotFailed"
	// ReasonWaitingForSnapshot: a Sandbox starting from a snapshot waits
	// for it to be Ready.
	ReasonWaitingForSnapshot = "WaitingForSnapshot"
)

// SnapshotFinalizer is the node agent's finalizer on the SandboxSnapshots
// of its node: it frees the snapshot's disk before the object goes.
const SnapshotFinalizer = "playground.dev/snapshot"

// SandboxSnapshotSpec is what a SandboxSnapshot records.
type SandboxSnapshotSpec struct {
	// SandboxRef names the Sandbox, in the same namespace, whose state is
	// recorded. It cannot change: a snapshot is of one sandbox at one
	// moment.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sandboxRef is immutable: create a new SandboxSnapshot"
	// +required
	SandboxRef LocalObjectReference `json:"sandboxRef"`

	// ExpireAfter deletes the snapshot this long after it was taken
	// (status.takenAt), freeing its disk; forks made from it are not
	// affected. Unset, it is kept until deleted. At least 1m.
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="expireAfter must be a duration such as 24h or 168h (a week): a number and a unit (s, m or h), or several"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1m')",message="expireAfter must be at least 1m"
	// +optional
	ExpireAfter *metav1.Duration `json:"expireAfter,omitempty"`
}

// SandboxSnapshotStatus is where a snapshot is and what it holds. The
// manager writes nodeName, sandboxID, backend and isolation (and the Bound
// condition) from the Sandbox; the node's agent writes the rest.
type SandboxSnapshotStatus struct {
	// Conditions: Bound (the manager found the sandbox and its node) and
	// Ready (the node's agent took the snapshot, and what it kept).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase is the coarse state.
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`

	// NodeName is the node the snapshot is taken and kept on: its
	// sandbox's. Forks of it are bound to the same node.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// SandboxID is the ID of the sandbox it records.
	// +optional
	SandboxID string `json:"sandboxID,omitempty"`

	// Backend and Isolation are the recorded sandbox's: a fork runs with
	// the same.
	// +optional
	Backend BackendClass `json:"backend,omitempty"`
	// +optional
	Isolation Isolation `json:"isolation,omitempty"`

	// SnapshotID names the snapshot's data on its node.
	// +optional
	SnapshotID string `json:"snapshotID,omitempty"`

	// Memory is true when the snapshot holds the sandbox's processes and
	// their memory (gVisor), not only its files: forks go on from where
	// its processes were.
	// +optional
	Memory bool `json:"memory,omitempty"`

	// SizeBytes is the disk the snapshot takes on its node; it counts
	// against the node's free-space reserve like any sandbox's disk.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`

	// Size is SizeBytes for people (the SIZE column): "840 KiB", "12.3
	// MiB", "1.5 GiB".
	// +optional
	Size string `json:"size,omitempty"`

	// TakenAt is when the snapshot was taken.
	// +optional
	TakenAt *metav1.Time `json:"takenAt,omitempty"`
}

// SandboxSnapshot records a sandbox's state at one moment: its writable
// layer (home, workspace, /tmp) and, where the backend keeps memory
// (gVisor), its processes. It is kept on the sandbox's node until deleted
// (or spec.expireAfter passes); a Sandbox or Tenant of the same namespace
// with spec.fromSnapshot starts from it. The pile is not recorded: each
// fork has its own. A snapshot is its namespace's: no other namespace can
// name it, and its data on the node is readable by no sandbox.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbsnap,categories=playground
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=`.spec.sandboxRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Memory",type=boolean,JSONPath=`.status.memory`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="Taken",type=date,JSONPath=`.status.takenAt`
type SandboxSnapshot struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to record.
	// +required
	Spec SandboxSnapshotSpec `json:"spec"`

	// Status is where it is and what it holds.
	// +optional
	Status SandboxSnapshotStatus `json:"status,omitempty"`
}

// SandboxSnapshotList is a list of SandboxSnapshots.
//
// +kubebuilder:object:root=true
type SandboxSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the SandboxSnapshots.
	Items []SandboxSnapshot `json:"items"`
}

func init() {
	register(&SandboxSnapshot{}, &SandboxSnapshotList{})
}

// ByteSize writes n bytes for people, in KiB (rounded up), MiB or GiB with
// one decimal: a snapshot's status.size, and the plugin's sizes.
func ByteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}
