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

package nodeagent

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
)

// TestSpecOfNetwork: the egress list reaches the backend in mode egress
// only, so that a list alone never opens a network.
func TestSpecOfNetwork(t *testing.T) {
	rules := []playgroundv1alpha1.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{443}}, {CIDR: "203.0.113.7/32"}}
	for _, tc := range []struct {
		network playgroundv1alpha1.SandboxNetwork
		want    []backend.EgressRule
	}{
		{playgroundv1alpha1.SandboxNetwork{}, nil},
		{playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkNone, Egress: rules}, nil},
		{playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress, Egress: rules},
			[]backend.EgressRule{{CIDR: "10.0.0.0/8", Ports: []int32{443}}, {CIDR: "203.0.113.7/32"}}},
	} {
		sbx := &playgroundv1alpha1.Sandbox{}
		sbx.Namespace, sbx.Name = "ns", "s"
		sbx.Spec.Network = tc.network
		if got := specOf("sbx-00000000000000000001", sbx).Egress; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: egress %+v, want %+v", tc.network, got, tc.want)
		}
	}
}

// TestWorkerSigningKeyEnv: a worker gets TRIBLESPACE_KEY beside PILE and
// PERSONA when its Sandbox names a signing key, and none otherwise (a
// path to no file would make triblespace refuse to start).
func TestWorkerSigningKeyEnv(t *testing.T) {
	m := &playgroundv1alpha1.WorkerMapping{}
	m.Spec.Destination.Sandbox = &playgroundv1alpha1.SandboxProcessDestination{Command: []string{"w"}, Port: 1}
	sbx := &playgroundv1alpha1.Sandbox{}
	sbx.Namespace, sbx.Spec.TenantRef.Name, sbx.Spec.Persona = "ns", "t", "p"
	if env := workerSpecOf(sbx, m).Env; slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TRIBLESPACE_KEY=") }) {
		t.Fatalf("a worker without a signing key: %q", env)
	}
	sbx.Spec.Pile.SigningKey = &playgroundv1alpha1.SigningKeySource{SecretName: "k"}
	env := workerSpecOf(sbx, m).Env
	for _, want := range []string{"TRIBLESPACE_KEY=/pile/self.key", "PILE=/pile/self.pile", "PERSONA=p"} {
		if !slices.Contains(env, want) {
			t.Errorf("the worker's environment %q lacks %s", env, want)
		}
	}
}
