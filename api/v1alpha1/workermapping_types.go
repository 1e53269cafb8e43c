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

// ServiceDestination is a cluster Service, in the WorkerMapping's namespace,
// that speaks MCP over Streamable HTTP.
type ServiceDestination struct {
	// Name is the Service's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// Port is the Service port that serves MCP.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`

	// Path is the HTTP path of the MCP endpoint.
	// +kubebuilder:default="/mcp"
	// +kubebuilder:validation:XValidation:rule="self.matches('^/[A-Za-z0-9/._~-]*$')",message="path must be an HTTP path starting with /, such as /mcp: letters, digits and / . _ ~ -"
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Path string `json:"path,omitempty"`

	// Scheme is http or https.
	// +kubebuilder:validation:Enum=http;https
	// +kubebuilder:default=http
	// +optional
	Scheme string `json:"scheme,omitempty"`
}

// SandboxProcessDestination is a worker process that the host agent starts
// and supervises inside the tenant's sandbox, listening on loopback.
type SandboxProcessDestination struct {
	// Command is the worker's argv, run inside the sandbox without a shell.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +required
	Command []string `json:"command"`

	// Port is the loopback port inside the sandbox the worker listens on.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`

	// Path is the HTTP path of the worker's MCP endpoint.
	// +kubebuilder:default="/mcp"
	// +kubebuilder:validation:XValidation:rule="self.matches('^/[A-Za-z0-9/._~-]*$')",message="path must be an HTTP path starting with /, such as /mcp: letters, digits and / . _ ~ -"
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Path string `json:"path,omitempty"`

	// Env lists environment variables the worker starts with.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Env []EnvVar `json:"env,omitempty"`
}

// WorkerDestination is where a tenant's MCP traffic goes: exactly one of
// service or sandbox.
// +kubebuilder:validation:XValidation:rule="(has(self.service) ? 1 : 0) + (has(self.sandbox) ? 1 : 0) == 1",message="set exactly one destination: service or sandbox"
type WorkerDestination struct {
	// Service forwards to a cluster Service in the same namespace.
	// +optional
	Service *ServiceDestination `json:"service,omitempty"`

	// Sandbox forwards to a worker the host agent supervises inside the
	// tenant's sandbox, on loopback.
	// +optional
	Sandbox *SandboxProcessDestination `json:"sandbox,omitempty"`
}

// WorkerMappingSpec is the desired state of a WorkerMapping.
type WorkerMappingSpec struct {
	// TenantRef names the Tenant, in the same namespace, whose MCP traffic
	// this mapping routes. A tenant has at most one mapping; it cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenantRef is immutable"
	// +required
	TenantRef LocalObjectReference `json:"tenantRef"`

	// Destination is where the tenant's traffic goes: exactly one of service
	// or sandbox. It is fixed here by the
	// operator; no caller can choose it. Two mappings cannot share one.
	// +required
	Destination WorkerDestination `json:"destination"`

	// BearerSecretRef names the Secret key holding the internal bearer token
	// the gateway presents to the worker in place of the client's token.
	// +optional
	BearerSecretRef *SecretKeyReference `json:"bearerSecretRef,omitempty"`

	// Timeout bounds one forwarded request. A request that times out has an
	// unknown outcome at the worker and is not retried.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="timeout must be a duration such as 60s or 5m: a number and a unit (s, m or h; ms), or several"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="timeout must be positive"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// WorkerMappingStatus is the observed state of a WorkerMapping.
type WorkerMappingStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True when the destination resolves and the mapping
	// is the only one for its tenant and destination.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Endpoint is where the gateway forwards, for people to read: the
	// Service's URL, or sandbox://<sandboxID>:<port><path> for a worker in
	// the tenant's sandbox (reached through its node's agent).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// ReadyEndpoints are the URLs of the Service's ready endpoints, from
	// its EndpointSlices, that the gateway spreads requests over (service
	// destinations only).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ReadyEndpoints []string `json:"readyEndpoints,omitempty"`

	// NodeName is the node of the tenant's Sandbox (sandbox destinations
	// only), whose agent supervises the worker: the only agent the
	// installation's admission policy lets write status.worker.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// Worker is the supervised worker process, as the agent of the
	// tenant's sandbox reports it (sandbox destinations only).
	// +optional
	Worker *WorkerProcessStatus `json:"worker,omitempty"`
}

// WorkerProcessStatus is a sandbox worker as its agent supervises it.
type WorkerProcessStatus struct {
	// Running is true while the worker process runs.
	// +optional
	Running bool `json:"running,omitempty"`

	// Restarts counts the times the worker was started again after it
	// exited.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// LastExit says how the worker last ended ("exit status 1", "signal
	// SIGKILL").
	// +optional
	LastExit string `json:"lastExit,omitempty"`

	// LastExitTime is when it last ended.
	// +optional
	LastExitTime *metav1.Time `json:"lastExitTime,omitempty"`

	// Error says why the worker does not start (its binary is not on the
	// PATH, say).
	// +optional
	Error string `json:"error,omitempty"`

	// Output is the end of the worker's output (at most 2 KiB, as a Pod's
	// termination message), as the agent last read it: what
	// `kubectl playground logs` shows. The whole tail stays on the node.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Output string `json:"output,omitempty"`
}

// WorkerMapping routes one tenant to one native MCP worker, for tenants
// whose catalog is "workers".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wm,categories=playground
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.worker.restarts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkerMapping struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec WorkerMappingSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status WorkerMappingStatus `json:"status,omitempty"`
}

// WorkerMappingList is a list of WorkerMappings.
//
// +kubebuilder:object:root=true
type WorkerMappingList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the WorkerMappings.
	Items []WorkerMapping `json:"items"`
}

func init() {
	register(&WorkerMapping{}, &WorkerMappingList{})
}
