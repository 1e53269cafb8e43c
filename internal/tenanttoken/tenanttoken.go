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

// Package tenanttoken is the form of a tenant's token: minted by the
// manager, checked before it is trusted, and identified in status by a
// fingerprint that does not reveal it.
package tenanttoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

const (
	// prefix marks Playground tenant tokens, for secret scanners.
	prefix = "pgt_"
	// randomBytes is the token's entropy: 256 bits.
	randomBytes = 32
)

// Mint returns a new tenant token: "pgt_" and 256 random bits in unpadded
// base64url.
func Mint() (string, error) {
	b := make([]byte, randomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Valid reports whether s has the form Mint returns.
func Valid(s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(randomBytes) {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	return err == nil && len(b) == randomBytes
}

// Fingerprint identifies a token without revealing it: the first 16 hex
// digits of the SHA-256 of the token as stored (prefix included).
func Fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}
