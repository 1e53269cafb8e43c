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

package keyedlimit

import (
	"fmt"
	"testing"
)

// TestOneKeysFloodSpendsItsOwnBucket: a key past its burst is refused, and
// another key is not; memory stays within max keys whatever the flood.
func TestOneKeysFloodSpendsItsOwnBucket(t *testing.T) {
	l := New(0.001, 5, 100)
	allowed := 0
	for range 1000 {
		if l.Allow("attacker") {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("the flooding key was allowed %d events, want its burst of 5", allowed)
	}
	if !l.Exhausted("attacker") || l.Exhausted("someone") {
		t.Fatalf("Exhausted: attacker %v, someone %v", l.Exhausted("attacker"), l.Exhausted("someone"))
	}
	if !l.Allow("someone") {
		t.Fatal("another key was refused")
	}
	for i := range 10000 {
		l.Allow(fmt.Sprintf("k%d", i))
	}
	if n := l.Len(); n > 100 {
		t.Fatalf("the limiter remembers %d keys, more than its 100", n)
	}
}

func TestSource(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3:4567":                   "10.1.2.3",
		"[::ffff:10.1.2.3]:80":            "10.1.2.3",
		"[2001:db8:1:2:3:4:5:6]:443":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1%eth0]:443": "2001:db8:1:2::/64",
		"@":                               "@", // a Unix socket's peer
	} {
		if got := Source(in); got != want {
			t.Errorf("Source(%q) = %q, want %q", in, got, want)
		}
	}
}
