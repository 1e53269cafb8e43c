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

import "fmt"

// MaxIdempotencyKeyBytes bounds a job_exec's idempotency key: room for a
// UUID or a ULID with a prefix, and no more, since the agent keeps each
// key with its job (in memory and in the sandbox's record of it).
const MaxIdempotencyKeyBytes = 128

// CheckIdempotencyKey refuses a key that is not 1 to
// MaxIdempotencyKeyBytes of letters, digits and - _ . : (a UUID, a ULID,
// "build-42"): a key is logged and quoted in errors, so it carries no
// bytes to escape. The empty key (none) passes.
func CheckIdempotencyKey(key string) error {
	if len(key) > MaxIdempotencyKeyBytes {
		return fmt.Errorf("idempotency_key is %d bytes, over the %d-byte limit: use a UUID or a shorter name of your own", len(key), MaxIdempotencyKeyBytes)
	}
	for i := range len(key) {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return fmt.Errorf("idempotency_key has a character other than letters, digits and - _ . : at byte %d: use a UUID, or a name of those characters", i)
		}
	}
	return nil
}
