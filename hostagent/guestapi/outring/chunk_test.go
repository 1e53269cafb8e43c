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

package outring

import (
	"testing"
)

func TestRuneCut(t *testing.T) {
	p := []byte("ab€c𝄞") // € at 2..4, 𝄞 at 6..9
	at := func(i int) byte { return p[i] }
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 2, 5: 5, 6: 6, 7: 6, 8: 6, 9: 6} {
		if got := runeCut(n, at); got != want {
			t.Errorf("runeCut(%d) = %d, want %d", n, got, want)
		}
	}
	// No boundary to retreat to: the cut stays.
	q := []byte("\x82\x82\x82\x82\x82")
	if got := runeCut(4, func(i int) byte { return q[i] }); got != 4 {
		t.Errorf("runeCut in continuation bytes = %d, want 4", got)
	}
}
