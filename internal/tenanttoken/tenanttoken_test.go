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

package tenanttoken

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// sha16 is the fingerprint computed independently of the package.
func sha16(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])[:16]
}

func TestTokens(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]bool{}
	for range 100 {
		tok, err := Mint()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(Valid(tok)).To(BeTrue(), tok)
		g.Expect(seen).NotTo(HaveKey(tok))
		seen[tok] = true
		g.Expect(Fingerprint(tok)).To(Equal(sha16(tok)))
	}
	valid, _ := Mint()
	for _, tc := range []struct {
		token string
		valid bool
	}{
		{valid, true},
		{"", false},
		{"pgt_", false},
		{strings.TrimPrefix(valid, "pgt_"), false},
		{"pgx_" + strings.TrimPrefix(valid, "pgt_"), false},
		{valid[:len(valid)-1], false},
		{valid + "A", false},
		{valid[:len(valid)-1] + "=", false},
		{valid[:len(valid)-1] + "+", false},
		{"pgt_" + strings.Repeat("A", 43), true},
		{"pgt_" + strings.Repeat("A", 42) + "B", false}, // non-zero padding bits: not canonical
	} {
		g.Expect(Valid(tc.token)).To(Equal(tc.valid), "%q", tc.token)
	}
	// A known vector: the gateway computes the same.
	g.Expect(Fingerprint("pgt_example")).To(Equal(sha16("pgt_example")))
	g.Expect(Fingerprint("pgt_example")).To(HaveLen(16))
}
