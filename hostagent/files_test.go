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

package hostagent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

// gvisorFake offers gVisor isolation, as the oci backend with runsc does.
type gvisorFake struct{ *backendtest.Fake }

func (g gvisorFake) Capabilities() backend.Capabilities {
	c := g.Fake.Capabilities()
	c.Isolator = g
	return c
}

func (gvisorFake) Isolations() []string {
	return []string{backend.IsolationContainer, backend.IsolationGVisor}
}

// TestWriteToThePileSaysWhy: write cannot put a file in the pile (it
// replaces files, which the pile refuses), and says so; under gVisor it
// says that the pile is read-only. The sandbox's side (the script finds
// the file's directory in the pile, exit 71) is the gateway's test on
// runc; here the backend answers as that script does.
func TestWriteToThePileSaysWhy(t *testing.T) {
	be := gvisorFake{backendtest.New("oci", func(_ string, req backend.ExecRequest, _ backend.Sink) (int, error) {
		if strings.Contains(req.Command, ".playground-write.") {
			return 71, nil
		}
		return 0, nil
	})}
	a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ isolation, want string }{
		{"", "is in the pile (/pile), which is append-only: write replaces whole files, which the pile refuses"},
		{backend.IsolationGVisor, "is in the pile (/pile), which is read-only under gVisor isolation"},
	} {
		spec := backend.Spec{ID: "sbx-" + tc.isolation + "x", Tenant: "ns/t" + tc.isolation, Isolation: tc.isolation}
		if err := a.Ensure(ctx, spec); err != nil {
			t.Fatal(err)
		}
		h, err := a.Open(ctx, spec.Tenant, spec.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.WriteFile(ctx, spec.Tenant, h.ID, "/pile/x", "", []byte("y"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"/pile/x"`) {
			t.Errorf("isolation %q: %v, want %q", tc.isolation, err, tc.want)
		}
	}
}
