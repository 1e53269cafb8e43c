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

package agentapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestKeylessRequestUnchanged: a job start without an idempotency key is
// the same on the wire as before the key, so an agent that predates it
// (and refuses unknown fields) serves it; one with a key carries it.
func TestKeylessRequestUnchanged(t *testing.T) {
	b, err := json.Marshal(ExecRequest{Tenant: "ns/a", Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"tenant":"ns/a","command":"true"}` {
		t.Fatalf("a keyless request is %s", b)
	}
	b, _ = json.Marshal(ExecRequest{Tenant: "ns/a", Command: "true", IdempotencyKey: "k-1"})
	if !strings.Contains(string(b), `"idempotency_key":"k-1"`) {
		t.Fatalf("a request with a key is %s", b)
	}
}

func TestCheckIdempotencyKey(t *testing.T) {
	for _, ok := range []string{"", "k", "0b7e2a6c-1f4e-4b9a-9d5c-7a1e2f3b4c5d", "build:42.retry_1", strings.Repeat("a", MaxIdempotencyKeyBytes)} {
		if err := CheckIdempotencyKey(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{" ", "a b", "a\nb", "é", "a/b", strings.Repeat("a", MaxIdempotencyKeyBytes+1)} {
		if err := CheckIdempotencyKey(bad); err == nil || !strings.Contains(err.Error(), "idempotency_key") {
			t.Errorf("%q: %v, want a refusal that names idempotency_key", bad, err)
		}
	}
}
