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
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestFormatBytes: a byte count reads as the quantity a spec gives, and
// parses back to itself.
func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "1", 1000: "1000", 1024: "1Ki", 1536: "1536", 32 << 20: "32Mi", 1 << 30: "1Gi", 3 << 40: "3Ti", -1024: "-1Ki", 1 << 62: "4Ei"} {
		got := FormatBytes(n)
		if got != want {
			t.Errorf("FormatBytes(%d) = %s, want %s", n, got, want)
		}
		if q := resource.MustParse(got); q.Value() != n {
			t.Errorf("%s parses to %d, not %d", got, q.Value(), n)
		}
	}
}
