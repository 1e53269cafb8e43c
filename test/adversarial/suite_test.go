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

package adversarial

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/controlplane"
)

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
)

// TestMain runs the attacks of this package against one real API server
// with the installation's admission policies (config/admission) in force.
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, func(c *controlplane.ControlPlane) (func(), error) {
		cp, k8s = c, c.Client
		return nil, cp.CreateNamespaces(context.Background(), agentlease.DefaultNamespace)
	}))
}
