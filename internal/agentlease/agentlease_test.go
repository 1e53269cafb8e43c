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

package agentlease

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// TestIsolations: what an agent offers survives its Lease, and an agent
// that publishes no isolations offers container only.
func TestIsolations(t *testing.T) {
	for _, tc := range []struct {
		name       string
		isolations []string
		offers     map[string]bool
	}{
		{"an agent without runsc", []string{"container"}, map[string]bool{"": true, "container": true, "gvisor": false}},
		{"an agent with runsc", []string{"gvisor", "container"}, map[string]bool{"": true, "container": true, "gvisor": true}},
		{"an agent that publishes none", nil, map[string]bool{"": true, "container": true, "gvisor": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lease coordinationv1.Lease
			reg := Registration{Node: "n", Backends: []string{"oci"}, Isolations: tc.isolations, Duration: time.Minute}
			if err := reg.Apply(&lease, time.Now()); err != nil {
				t.Fatal(err)
			}
			if tc.isolations == nil {
				delete(lease.Annotations, AnnotationIsolations)
			}
			got, err := FromLease(&lease)
			if err != nil {
				t.Fatal(err)
			}
			for iso, want := range tc.offers {
				if got.OffersIsolation(iso) != want {
					t.Errorf("offers %q: %v, want %v (annotation %q)", iso, !want, want, lease.Annotations[AnnotationIsolations])
				}
			}
		})
	}
}

func TestNetworks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		networks map[string][]string
		offers   map[[2]string]bool
	}{
		{"an agent with --network=egress", map[string][]string{"oci": {"none", "egress"}, "vm": {"none"}},
			map[[2]string]bool{{"oci", ""}: true, {"oci", "none"}: true, {"oci", "egress"}: true, {"vm", "none"}: true, {"vm", "egress"}: false}},
		{"an agent with --network=none", map[string][]string{"oci": {"none"}},
			map[[2]string]bool{{"oci", "none"}: true, {"oci", "egress"}: false}},
		{"an agent that publishes none", nil,
			map[[2]string]bool{{"oci", "none"}: true, {"oci", "egress"}: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lease coordinationv1.Lease
			reg := Registration{Node: "n", Backends: []string{"oci", "vm"}, Networks: tc.networks, Duration: time.Minute}
			if err := reg.Apply(&lease, time.Now()); err != nil {
				t.Fatal(err)
			}
			if _, ok := lease.Annotations[AnnotationNetworks]; ok != (tc.networks != nil) {
				t.Fatalf("annotation %s present: %v, want %v", AnnotationNetworks, ok, tc.networks != nil)
			}
			got, err := FromLease(&lease)
			if err != nil {
				t.Fatal(err)
			}
			for q, want := range tc.offers {
				if got.OffersNetwork(q[0], q[1]) != want {
					t.Errorf("%s offers network %q: %v, want %v (annotation %q)", q[0], q[1], !want, want, lease.Annotations[AnnotationNetworks])
				}
			}
		})
	}
}

func TestMissingLabels(t *testing.T) {
	reg := Registration{Labels: map[string]string{"zone": "a", "disk": "ssd"}}
	got := reg.Missing(map[string]string{"zone": "b", "disk": "ssd", "gpu": "yes"})
	if want := []string{"gpu=yes", "zone=b"}; !slices.Equal(got, want) {
		t.Fatalf("missing %v, want %v", got, want)
	}
}

// TestMemorySuspend: where an agent's suspension keeps memory survives its
// Lease, and one that publishes nothing keeps it nowhere.
func TestMemorySuspend(t *testing.T) {
	var lease coordinationv1.Lease
	reg := Registration{Node: "n", Backends: []string{"oci"}, MemorySuspend: []string{"oci/gvisor"}, Duration: time.Minute}
	if err := reg.Apply(&lease, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := FromLease(&lease)
	if err != nil {
		t.Fatal(err)
	}
	if !got.KeepsMemory("oci", "gvisor") || got.KeepsMemory("oci", "") || got.KeepsMemory("vm", "gvisor") {
		t.Errorf("read back %v from %q: keeps oci/gvisor only", got.MemorySuspend, lease.Annotations[AnnotationMemorySuspend])
	}
	reg.MemorySuspend = nil
	if err := reg.Apply(&lease, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, err := FromLease(&lease); err != nil || got.KeepsMemory("oci", "gvisor") {
		t.Errorf("an agent that publishes none: %v, %v", got.MemorySuspend, err)
	}
}
