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

import "strconv"

// FormatBytes writes a byte count as a Kubernetes quantity does (the form
// a Sandbox's spec gives it in): with the largest binary suffix that
// divides it, Ki to Ei, else in bytes. Messages about a spec's limits use
// it, so that memory: 1Ki reads 1Ki, not 1024.
func FormatBytes(n int64) string {
	suffixes := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	unit := ""
	for _, s := range suffixes {
		if n == 0 || n%1024 != 0 {
			break
		}
		n /= 1024
		unit = s
	}
	return strconv.FormatInt(n, 10) + unit
}
