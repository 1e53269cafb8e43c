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

package backendtest

import (
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// CheckCapabilities fails t for each optional behaviour whose interface be
// implements but that its Capabilities leave out: the agent looks for a
// behaviour in Capabilities alone, so one left out is never used. A
// behaviour may be a value other than be (the job holder of the backends
// that run the guest's init, guestexec.Holder). be may be a zero value, if
// its Capabilities need no more.
func CheckCapabilities(t testing.TB, be backend.Backend) {
	t.Helper()
	c := be.Capabilities()
	for _, b := range []struct {
		name        string
		implemented bool
		named       any
	}{
		{"Prober", is[backend.Prober](be), c.Prober},
		{"StartCounter", is[backend.StartCounter](be), c.StartCounter},
		{"Dialer", is[backend.Dialer](be), c.Dialer},
		{"JobHolder", is[backend.JobHolder](be), c.JobHolder},
		{"OOMCounter", is[backend.OOMCounter](be), c.OOMCounter},
		{"ForkCounter", is[backend.ForkCounter](be), c.ForkCounter},
		{"WorkerSupervisor", is[backend.WorkerSupervisor](be), c.WorkerSupervisor},
		{"StorageReporter", is[backend.StorageReporter](be), c.StorageReporter},
		{"PileReader", is[backend.PileReader](be), c.PileReader},
		{"Describer", is[backend.Describer](be), c.Describer},
		{"Isolator", is[backend.Isolator](be), c.Isolator},
		{"WarmPool", is[backend.WarmPool](be), c.WarmPool},
		{"Builder", is[backend.Builder](be), c.Builder},
		{"Pauser", is[backend.Pauser](be), c.Pauser},
		{"Snapshotter", is[backend.Snapshotter](be), c.Snapshotter},
		{"SigningKeyHolder", is[backend.SigningKeyHolder](be), c.SigningKeyHolder},
		{"UsageMeter", is[backend.UsageMeter](be), c.UsageMeter},
		{"EgressBroker", is[backend.EgressBroker](be), c.EgressBroker},
		{"EgressMeter", is[backend.EgressMeter](be), c.EgressMeter},
	} {
		if b.implemented && b.named == nil {
			t.Errorf("%s implements backend.%s but its Capabilities leave it out", be.Name(), b.name)
		}
	}
}

func is[I any](be backend.Backend) bool {
	_, ok := be.(I)
	return ok
}
