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

package signingkey

import (
	"strings"
	"testing"
)

// TestFormat: a generated key is one the pile holds; a Secret's value is
// taken with its final newline or in upper case, and refused when it is
// not a seed's 64 hex digits; the public key is Ed25519's (RFC 8032's
// first test vector) and the fingerprint names it.
func TestFormat(t *testing.T) {
	key, err := Generate()
	if err != nil || Check(key) != nil {
		t.Fatalf("a generated key: %v, %v", Check(key), err)
	}
	const seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	n, err := Normalize([]byte(strings.ToUpper(seed) + "\n"))
	if err != nil || string(n) != seed {
		t.Fatalf("normalised: %q, %v", n, err)
	}
	if got := PublicKey(n); got != "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a" {
		t.Fatalf("public key %s", got)
	}
	if fp := Fingerprint(n); len(fp) != 16 || fp == Fingerprint(key) {
		t.Fatalf("fingerprint %q (another key's %q)", fp, Fingerprint(key))
	}
	for _, bad := range []string{"", seed[:63], seed + "0", strings.Replace(seed, "9", "g", 1), " " + seed} {
		if _, err := Normalize([]byte(bad)); err == nil {
			t.Errorf("Normalize took %q", bad)
		} else if bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
	if Check([]byte(seed+"\n")) == nil || Check([]byte(strings.ToUpper(seed))) == nil {
		t.Error("Check took a key that is not as the pile holds it")
	}
}
