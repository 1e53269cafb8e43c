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

// Package agentlease is how a host agent registers itself: one
// coordination.k8s.io Lease per agent, renewed while the agent is healthy,
// carrying what the manager's binder and the gateway need to know of the
// node: its agent API endpoint and the protocol version it speaks, the
// backends it offers, its labels (for node selectors) and whether it
// admits jobs.
//
// An agent is healthy while now < renewTime + leaseDurationSeconds. The
// manager binds sandboxes only to healthy agents and marks the sandboxes
// of an expired one not Ready.
package agentlease

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// DefaultNamespace holds the agents' Leases.
	DefaultNamespace = "playground-system"
	// DefaultDuration is how long a registration lasts without renewal;
	// agents renew every third of it.
	DefaultDuration = 15 * time.Second

	// LabelAgent marks every agent Lease ("true"), for list and watch.
	LabelAgent = "playground.dev/agent"
	// AnnotationEndpoint is the agent API's URL.
	AnnotationEndpoint = "playground.dev/endpoint"
	// AnnotationProtocol is the agent protocol version the agent speaks,
	// MAJOR.MINOR (package hostagent/agentapi); a gateway calls no agent
	// that advertises none.
	AnnotationProtocol = "playground.dev/agent-protocol"
	// AnnotationBackends lists the backend classes offered, comma-separated.
	AnnotationBackends = "playground.dev/backends"
	// AnnotationIsolations lists the isolations offered (a Sandbox's
	// spec.isolation: container, gvisor), comma-separated. An agent that
	// publishes none offers container only.
	AnnotationIsolations = "playground.dev/isolations"
	// AnnotationNetworks is the network modes (a Sandbox's
	// spec.network.mode: none, egress) each backend serves on the node, a
	// JSON object by class. Every backend serves none; an agent that
	// publishes none serves nothing else.
	AnnotationNetworks = "playground.dev/networks"
	// AnnotationBackendNotes is what backends say of how they run on the
	// node (the vm backend's accelerator), a JSON object by class; absent
	// when none says anything.
	AnnotationBackendNotes = "playground.dev/backend-notes"
	// AnnotationMemorySuspend lists where a suspension keeps a sandbox's
	// memory on the node, as backend/isolation pairs (oci/gvisor),
	// comma-separated; elsewhere it stops the sandbox's processes and
	// keeps its files.
	AnnotationMemorySuspend = "playground.dev/memory-suspend"
	// AnnotationNodeLabels is the node's labels as a JSON object.
	AnnotationNodeLabels = "playground.dev/node-labels"
	// AnnotationAdmission is empty while the agent admits jobs, else why not.
	AnnotationAdmission = "playground.dev/admission-halted"
	// AnnotationStarted is when the agent's process started (RFC 3339):
	// a new value is a new process, which holds nothing it was handed in
	// memory (brokered egress credentials).
	AnnotationStarted = "playground.dev/agent-started"
)

// Name is the Lease name of the agent of node.
func Name(node string) string { return "agent-" + node }

// Registration is what an agent publishes about itself.
type Registration struct {
	Node     string
	Endpoint string
	// Protocol is the agent protocol version, MAJOR.MINOR.
	Protocol string
	Backends []string
	// Isolations are the isolations offered; container, which every
	// agent runs, whether listed or not.
	Isolations []string
	// Networks are the network modes each backend serves, by class; every
	// backend serves none, whether listed or not.
	Networks map[string][]string
	// MemorySuspend lists where a suspension keeps a sandbox's memory,
	// as backend/isolation pairs.
	MemorySuspend []string
	// Notes are what backends say of how they run here, by class.
	Notes  map[string]string
	Labels map[string]string
	// AdmissionHalted says why the agent stopped admitting jobs, if it did.
	AdmissionHalted string
	// Started is when the agent's process started.
	Started time.Time
	// Duration and Renewed are the Lease's duration and last renewal.
	Duration time.Duration
	Renewed  time.Time
}

// Healthy reports whether the registration is current at now.
func (r Registration) Healthy(now time.Time) bool {
	return !r.Renewed.IsZero() && now.Before(r.Renewed.Add(r.Duration))
}

// Offers reports whether the agent offers the backend class.
func (r Registration) Offers(backend string) bool {
	for _, b := range r.Backends {
		if b == backend {
			return true
		}
	}
	return false
}

// OffersIsolation reports whether the agent runs sandboxes of isolation
// iso ("" is container, which every agent runs).
func (r Registration) OffersIsolation(iso string) bool {
	if iso == "" || iso == "container" {
		return true
	}
	for _, i := range r.Isolations {
		if i == iso {
			return true
		}
	}
	return false
}

// KeepsMemory reports whether a suspension keeps the memory of a sandbox
// of that backend class and isolation ("" is container) on the node.
func (r Registration) KeepsMemory(backend, iso string) bool {
	if iso == "" {
		iso = "container"
	}
	return slices.Contains(r.MemorySuspend, backend+"/"+iso)
}

// NetworkNone is the network mode every backend serves: loopback only.
const NetworkNone = "none"

// OffersNetwork says whether the agent's backend serves network mode
// (empty: none).
func (r Registration) OffersNetwork(backend, mode string) bool {
	if mode == "" || mode == NetworkNone {
		return true
	}
	for _, m := range r.Networks[backend] {
		if m == mode {
			return true
		}
	}
	return false
}

// Missing lists the labels of selector that the node lacks or has with
// another value, as key=value, sorted.
func (r Registration) Missing(selector map[string]string) []string {
	var missing []string
	for k, v := range selector {
		if got, ok := r.Labels[k]; !ok || got != v {
			missing = append(missing, k+"="+v)
		}
	}
	sort.Strings(missing)
	return missing
}

// Matches reports whether the node's labels satisfy a node selector.
func (r Registration) Matches(selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := r.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Apply writes the registration into lease, renewed at now.
func (r Registration) Apply(lease *coordinationv1.Lease, now time.Time) error {
	labels, err := json.Marshal(r.Labels)
	if err != nil {
		return err
	}
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[LabelAgent] = "true"
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	backends := append([]string(nil), r.Backends...)
	sort.Strings(backends)
	lease.Annotations[AnnotationEndpoint] = r.Endpoint
	lease.Annotations[AnnotationProtocol] = r.Protocol
	lease.Annotations[AnnotationBackends] = strings.Join(backends, ",")
	isolations := append([]string(nil), r.Isolations...)
	sort.Strings(isolations)
	lease.Annotations[AnnotationIsolations] = strings.Join(isolations, ",")
	lease.Annotations[AnnotationNodeLabels] = string(labels)
	if len(r.MemorySuspend) > 0 {
		keeps := append([]string(nil), r.MemorySuspend...)
		sort.Strings(keeps)
		lease.Annotations[AnnotationMemorySuspend] = strings.Join(keeps, ",")
	} else {
		delete(lease.Annotations, AnnotationMemorySuspend)
	}
	if len(r.Networks) > 0 {
		networks := make(map[string][]string, len(r.Networks))
		for class, modes := range r.Networks {
			networks[class] = append([]string(nil), modes...)
			sort.Strings(networks[class])
		}
		data, err := json.Marshal(networks)
		if err != nil {
			return err
		}
		lease.Annotations[AnnotationNetworks] = string(data)
	} else {
		delete(lease.Annotations, AnnotationNetworks)
	}
	if len(r.Notes) > 0 {
		notes, err := json.Marshal(r.Notes)
		if err != nil {
			return err
		}
		lease.Annotations[AnnotationBackendNotes] = string(notes)
	} else {
		delete(lease.Annotations, AnnotationBackendNotes)
	}
	lease.Annotations[AnnotationAdmission] = r.AdmissionHalted
	if !r.Started.IsZero() {
		lease.Annotations[AnnotationStarted] = r.Started.UTC().Format(time.RFC3339Nano)
	}
	holder := r.Node
	seconds := int32(r.Duration / time.Second)
	renewed := metav1.NewMicroTime(now)
	lease.Spec.HolderIdentity = &holder
	lease.Spec.LeaseDurationSeconds = &seconds
	lease.Spec.RenewTime = &renewed
	if lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &renewed
	}
	return nil
}

// FromLease reads a registration from an agent's Lease.
func FromLease(lease *coordinationv1.Lease) (Registration, error) {
	r := Registration{
		Endpoint:        lease.Annotations[AnnotationEndpoint],
		Protocol:        lease.Annotations[AnnotationProtocol],
		AdmissionHalted: lease.Annotations[AnnotationAdmission],
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return r, fmt.Errorf("lease %s/%s has no holder", lease.Namespace, lease.Name)
	}
	r.Node = *lease.Spec.HolderIdentity
	if t, err := time.Parse(time.RFC3339Nano, lease.Annotations[AnnotationStarted]); err == nil {
		r.Started = t
	}
	if b := lease.Annotations[AnnotationBackends]; b != "" {
		r.Backends = strings.Split(b, ",")
	}
	if i := lease.Annotations[AnnotationIsolations]; i != "" {
		r.Isolations = strings.Split(i, ",")
	}
	if m := lease.Annotations[AnnotationMemorySuspend]; m != "" {
		r.MemorySuspend = strings.Split(m, ",")
	}
	if n := lease.Annotations[AnnotationNetworks]; n != "" {
		if err := json.Unmarshal([]byte(n), &r.Networks); err != nil {
			return r, fmt.Errorf("lease %s/%s: networks: %w", lease.Namespace, lease.Name, err)
		}
	}
	if n := lease.Annotations[AnnotationBackendNotes]; n != "" {
		if err := json.Unmarshal([]byte(n), &r.Notes); err != nil {
			return r, fmt.Errorf("lease %s/%s: backend notes: %w", lease.Namespace, lease.Name, err)
		}
	}
	if l := lease.Annotations[AnnotationNodeLabels]; l != "" && l != "null" {
		if err := json.Unmarshal([]byte(l), &r.Labels); err != nil {
			return r, fmt.Errorf("lease %s/%s: node labels: %w", lease.Namespace, lease.Name, err)
		}
	}
	if lease.Spec.LeaseDurationSeconds != nil {
		r.Duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	if lease.Spec.RenewTime != nil {
		r.Renewed = lease.Spec.RenewTime.Time
	}
	return r, nil
}
