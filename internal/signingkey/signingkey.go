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

// Package signingkey is the format of a tenant's pile signing key, as
// triblespace reads it from /pile/self.key (TRIBLESPACE_KEY): exactly 64
// hexadecimal digits, the seed of an Ed25519 key, with nothing around them.
// The key itself goes only into Secrets and the pile; what may be shown
// (status, Events, logs) is its public key and fingerprint.
package signingkey

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Len is the length of a key: the hex digits of a 32-byte seed.
const Len = 2 * ed25519.SeedSize

// Generate is a new key from the system's random source.
func Generate() ([]byte, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("signingkey: reading random bytes: %w", err)
	}
	key := make([]byte, Len)
	hex.Encode(key, seed)
	return key, nil
}

// Normalize is the key a Secret holds, ready for the pile: a value written
// from a file loses its final newline, and upper-case digits become lower.
// An error says what is wrong, never what the value is.
func Normalize(value []byte) ([]byte, error) {
	v := strings.ToLower(strings.TrimRight(string(value), "\r\n"))
	if len(v) != Len {
		return nil, fmt.Errorf("the key is %d characters long, not the %d hexadecimal digits of an Ed25519 seed", len(v), Len)
	}
	if _, err := hex.DecodeString(v); err != nil {
		return nil, fmt.Errorf("the key is not %d hexadecimal digits (an Ed25519 seed, as `trible pile signing-key init` writes it)", Len)
	}
	return []byte(v), nil
}

// Check says whether key is a key exactly as the pile holds it (what
// Normalize makes of a Secret's value), never quoting it.
func Check(key []byte) error {
	if n, err := Normalize(key); err != nil || !bytes.Equal(n, key) {
		return fmt.Errorf("the signing key is not %d lowercase hexadecimal digits", Len)
	}
	return nil
}

// PublicKey is key's Ed25519 public key in lowercase hex; key must be
// valid (Normalize).
func PublicKey(key []byte) string {
	seed, err := hex.DecodeString(string(key))
	if err != nil || len(seed) != ed25519.SeedSize {
		return ""
	}
	return hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
}

// Fingerprint names key without revealing it: the first 16 hex digits of
// the SHA-256 of its public key; "" for an invalid key.
func Fingerprint(key []byte) string {
	pub := PublicKey(key)
	if pub == "" {
		return ""
	}
	raw, _ := hex.DecodeString(pub)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}
