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

package backend

import (
	"maps"
	"slices"
	"testing"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// TestEtcFilesAreTheGuests: the /etc files the agent generates are the
// ones a VM's guest lets it replace (guestapi.EtcNames), no more, no less.
func TestEtcFilesAreTheGuests(t *testing.T) {
	got := slices.Sorted(maps.Keys(EtcFiles(Spec{ID: "sb"}, guestapi.NoNetworkResolv)))
	want := slices.Sorted(slices.Values(guestapi.EtcNames))
	if !slices.Equal(got, want) {
		t.Errorf("EtcFiles makes %q, the guest replaces %q", got, want)
	}
}
