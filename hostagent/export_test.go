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

package hostagent

import (
	"context"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// EnsureOpen starts sandbox spec on a and opens a session on it for the
// sandbox's tenant, as a gateway would before a call; it fails t if
// either fails. (Exported for this directory's tests, both packages.)
func EnsureOpen(ctx context.Context, t testing.TB, a *Agent, spec backend.Spec) Handle {
	t.Helper()
	if err := a.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	h, err := a.Sessions().Open(ctx, spec.Tenant, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
