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

package jail

import (
	"testing"

	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

// TestCapabilities: the capability set names every optional behaviour the
// backend has, since the agent looks for none elsewhere. (Without the
// guest binary it holds no jobs, by design: TestNoGuestBinaryNoProof.)
func TestCapabilities(t *testing.T) {
	backendtest.CheckCapabilities(t, &Backend{guestDir: "/var/db/playground/bin/guest"})
}
