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
	"bytes"
	"os"
	"testing"
	"time"
)

// TestHoldTwice: one test may hold twice (netnstest holds for its
// namespaces beside the test's own hold), and the value the machine had
// comes back when the last hold ends, not the first.
func TestHoldTwice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change a sysctl")
	}
	const setting = "/proc/sys/net/netfilter/nf_conntrack_timestamp"
	original, err := os.ReadFile(setting)
	if err != nil {
		t.Skipf("no %s here: %v", setting, err)
	}
	flipped := []byte("1\n")
	if string(original) == "1\n" {
		flipped = []byte("0\n")
	}
	t.Run("holders", func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			HoldIPv4Forwarding(t)
			HoldIPv4Forwarding(t) // blocked for good before holders shared a lock
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a second hold in the same process did not return")
		}
		if err := os.WriteFile(setting, flipped, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if got, _ := os.ReadFile(setting); !bytes.Equal(got, original) {
		t.Errorf("%s is %q after both holds ended, want %q back", setting, got, original)
	}
}
