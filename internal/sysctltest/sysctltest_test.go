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

package sysctltest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHoldTwice: one test may hold twice (netnstest holds for its
// namespaces beside the test's own hold), and the value the machine had
// comes back when the last hold ends, not the first. It holds a setting of
// its own, a file in a directory of its own: the machine's settings are
// shared with the egress tests of other test processes, which this must
// neither see nor disturb.
func TestHoldTwice(t *testing.T) {
	dir := t.TempDir()
	setting := filepath.Join(dir, "setting")
	if err := os.WriteFile(setting, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	locks := filepath.Join(dir, "locks")
	t.Run("holders", func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			hold(t, locks, []string{setting})
			hold(t, locks, []string{setting}) // blocked for good before holders shared a lock
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a second hold in the same process did not return")
		}
		if err := os.WriteFile(setting, []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if got, _ := os.ReadFile(setting); string(got) != "0\n" {
		t.Errorf("the setting is %q after both holds ended, want %q back", got, "0\n")
	}
}
