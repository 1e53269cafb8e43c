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

// HostPathSource is a directory that exists on every eligible node.
type HostPathSource struct {
	// Path is the directory's absolute path on the node. The agent reads it,
	// and the builder sees a read-only copy, only where the agent's own
	// configuration grants a prefix that holds it (--faculty-host-path-prefix;
	// none by default): a bundle names a path, it does not grant one.
	// +kubebuilder:validation:Pattern=`^[^\x00]*$`
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path must be absolute: a directory of the node, starting with /"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="path must not have '.' or '..' elements"
	// +kubebuilder:validation:MaxLength=4096
	// +required
	Path string `json:"path"`
}

// BundleSource is where a bundle's source tree comes from: exactly one of
// configMap or hostPath.
// +kubebuilder:validation:XValidation:rule="(has(self.configMap) ? 1 : 0) + (has(self.hostPath) ? 1 : 0) == 1",message="set exactly one source: configMap or hostPath"
type BundleSource struct {
	// ConfigMap names a ConfigMap in the same namespace; each key becomes a
	// file at the root of the source tree.
	// +optional
	ConfigMap *LocalObjectReference `json:"configMap,omitempty"`

	// HostPath is a directory on the node.
	// +optional
	HostPath *HostPathSource `json:"hostPath,omitempty"`
}

// BundleBuild is how a bundle is built from its source.
type BundleBuild struct {
	// Command is the build's argv, run in a throwaway builder that sees the
	// source read-only at /src and an empty scratch target at /out.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +required
	Command []string `json:"command"`

	// Timeout bounds the build; the builder is killed past it. At most an
	// hour: a builder holds a CPU, memory and disk of the node while it
	// runs. A node's agent may allow less (its --faculty-max-build-timeout)
	// and then builds with its own maximum, saying so if the build is
	// killed at it.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="timeout must be a duration such as 10m or 1h: a number and a unit (s, m or h; ms, us or ns), or several, as in 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) > duration('0s') && duration(self) <= duration('1h'))",message="timeout must be a positive duration of at most 1h"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// FacultyBundleSpec is the desired state of a FacultyBundle.
type FacultyBundleSpec struct {
	// Source is the bundle's source tree. Its content, not its name or
	// location, determines the fingerprint.
	// +required
	Source BundleSource `json:"source"`

	// Build turns the source into binaries. Without it the binaries are
	// taken from the source tree as they are.
	// +optional
	Build *BundleBuild `json:"build,omitempty"`

	// Binaries is the allowlist of files, from the build's output (or the
	// source without a build), that are staged and installed read-only on
	// the guest PATH. Nothing else is installed.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.all(b, b.matches('^[A-Za-z0-9_+-][A-Za-z0-9._+-]*$'))",message="binaries must be plain file names (letters, digits, '.', '_', '+', '-'; not starting with '.'), not paths"
	// +required
	Binaries []string `json:"binaries"`

	// RetainStale is how many stale builds (fingerprints no longer current)
	// each node keeps for sandboxes that still use them before removing them.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	// +optional
	RetainStale *int32 `json:"retainStale,omitempty"`
}

// BundleNodeStatus is a bundle's build on one node.
type BundleNodeStatus struct {
	// NodeName is the node.
	// +required
	NodeName string `json:"nodeName"`

	// Fingerprint is the content fingerprint of the node's current build.
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`

	// Ready is true when the build completed and is staged.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// Reason says where the node's build stands: Built, Building,
	// BuildFailed (the build command failed: the message holds its log's
	// tail), SourceFailed (the node's agent cannot read the source) or
	// NoBuildCache (the node's agent builds no bundle). A failure is
	// tried again, with the same source, every minute, and at once with a
	// changed one.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message says why a build is not ready.
	// +optional
	Message string `json:"message,omitempty"`

	// BuiltAt is when the current build completed.
	// +optional
	BuiltAt *metav1.Time `json:"builtAt,omitempty"`

	// ObservedGeneration is the bundle's generation this entry describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Reasons of a node's build of a FacultyBundle (status.nodes[].reason,
// and the Events of the node's agent), and of the bundle's Ready.
const (
	// ReasonBuilt: the build of the current source is ready (on a node;
	// on every node that needs the bundle, for Ready).
	ReasonBuilt = "Built"
	// ReasonBuilding: a build is under way (on a node; on some node that
	// needs the bundle, for Ready).
	ReasonBuilding = "Building"
	// ReasonBuildFailed: the build command failed; the message holds the
	// tail of its log. The same source fails the same way: fix the source
	// or build.command.
	ReasonBuildFailed = "BuildFailed"
	// ReasonSourceFailed: the node's agent cannot read the bundle's source
	// (a ConfigMap it cannot find, a host path its configuration does not
	// grant); the message says which.
	ReasonSourceFailed = "SourceFailed"
	// ReasonNoBuildCache: the node's agent runs without a faculty build
	// cache and builds no bundle.
	ReasonNoBuildCache = "NoBuildCache"
)

// FacultyBundleStatus is the observed state of a FacultyBundle.
type FacultyBundleStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True when every node that needs the bundle has a
	// ready build of the current source.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Fingerprint is the content fingerprint of the current source, where
	// the manager can compute it (configMap sources).
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`

	// ReadyNodes is the number of nodes with a ready build of the current
	// source (fingerprint and generation).
	// +optional
	ReadyNodes int32 `json:"readyNodes,omitempty"`

	// Nodes reports the build on each node.
	// +listType=map
	// +listMapKey=nodeName
	// +optional
	Nodes []BundleNodeStatus `json:"nodes,omitempty"`
}

// FacultyBundle is a source tree of tools, fingerprinted by content, built in
// a throwaway builder on each node that needs it, and installed read-only on
// the PATH of the sandboxes that list it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fb,categories=playground
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Nodes-Ready",type=integer,JSONPath=`.status.readyNodes`,description="Nodes with a ready build of the current source"
// +kubebuilder:printcolumn:name="Fingerprint",type=string,JSONPath=`.status.fingerprint`,priority=1,description="Content fingerprint of a ConfigMap source; host-path sources report theirs per node"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FacultyBundle struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec FacultyBundleSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status FacultyBundleStatus `json:"status,omitempty"`
}

// FacultyBundleList is a list of FacultyBundles.
//
// +kubebuilder:object:root=true
type FacultyBundleList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the FacultyBundles.
	Items []FacultyBundle `json:"items"`
}

func init() {
	register(&FacultyBundle{}, &FacultyBundleList{})
}
