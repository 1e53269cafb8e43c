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

package chunkstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"sync"

	"github.com/restic/chunker"
)

// KeySize is the size of a tenant's key: 32 random bytes, the tenant's
// own, that the store derives each of its keys from.
const KeySize = 32

// Tenant is whose snapshots a call reads or writes: an opaque ID, the name
// of the tenant's directory in the bucket (the manager uses the Tenant's
// UID, which says nothing of its name or namespace), and the tenant's key.
// Chunks are shared between the snapshots of one tenant and never across
// tenants: their names are keyed by the tenant's key, and their contents
// are encrypted with it.
type Tenant struct {
	ID  string
	Key []byte
}

var tenantIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// keys are a tenant's keys, derived from its key with HKDF-SHA256 so that
// none serves two purposes.
type keys struct {
	id string
	// aead encrypts chunks and manifests (AES-256-GCM).
	aead cipher.AEAD
	// nameKey keys the HMAC-SHA256 that names a chunk after its plaintext.
	nameKey []byte
	// pol is the polynomial of the tenant's content-defined chunker: its
	// own, so that where chunks are cut says nothing of a file across
	// tenants (restic derives one per repository for the same reason).
	pol chunker.Pol

	hmacs sync.Pool
}

func deriveKeys(t Tenant) (*keys, error) {
	if !tenantIDPattern.MatchString(t.ID) {
		return nil, fmt.Errorf("chunkstore: tenant ID %q is not 1 to 63 lower-case letters, digits and dashes", t.ID)
	}
	if len(t.Key) != KeySize {
		return nil, fmt.Errorf("chunkstore: tenant %s's key is %d bytes, not %d: make one with NewKey", t.ID, len(t.Key), KeySize)
	}
	derive := func(purpose string, n int) ([]byte, error) {
		return hkdf.Key(sha256.New, t.Key, nil, "playground.dev/chunkstore/v1 "+purpose, n)
	}
	encKey, err := derive("encryption", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(encKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nameKey, err := derive("chunk names", 32)
	if err != nil {
		return nil, err
	}
	polKey, err := derive("chunker polynomial", 32)
	if err != nil {
		return nil, err
	}
	// The polynomial is drawn from an endless stream under a derived key
	// until one is irreducible, as chunker.RandomPolynomial draws from
	// crypto/rand: the same key always gives the same one.
	pol, err := chunker.DerivePolynomial(&keyStream{mac: hmac.New(sha256.New, polKey)})
	if err != nil {
		return nil, err
	}
	k := &keys{id: t.ID, aead: aead, nameKey: nameKey, pol: pol}
	k.hmacs.New = func() any { return hmac.New(sha256.New, k.nameKey) }
	return k, nil
}

// NewKey makes a tenant's key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	return k
}

// keyStream is HMAC-SHA256(key, counter) for counter 0, 1, 2…: an endless
// stream that only the key's holder can compute.
type keyStream struct {
	mac     hash.Hash
	counter uint64
	buf     []byte
}

func (s *keyStream) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		s.mac.Reset()
		s.mac.Write(binary.BigEndian.AppendUint64(nil, s.counter))
		s.counter++
		s.buf = s.mac.Sum(nil)
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// chunkName is the name of a chunk: the keyed hash of its plaintext, so
// that a chunk is stored once per tenant and its name says nothing of its
// contents to whoever lacks the key.
func (k *keys) chunkName(data []byte) string {
	h := k.hmacs.Get().(hash.Hash)
	h.Reset()
	h.Write(data)
	sum := h.Sum(nil)
	k.hmacs.Put(h)
	return hex.EncodeToString(sum)
}

// sealVersion is the first byte of every object the store writes: the
// format of what follows (a nonce, then AES-256-GCM's ciphertext and tag).
const sealVersion = 1

// sealOverhead is what sealing adds to a plaintext.
const sealOverhead = 1 + 12 + 16

// seal encrypts plaintext, bound to what it is (ad: "chunk <name>" or
// "manifest <snapshot>", not where it lies, so that the store's prefix can
// move), so that one object put in another's place does not open.
func (k *keys) seal(plaintext []byte, ad string) []byte {
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails
	out := make([]byte, 0, 1+len(nonce)+len(plaintext)+k.aead.Overhead())
	out = append(append(out, sealVersion), nonce...)
	return k.aead.Seal(out, nonce, plaintext, []byte(ad))
}

var errNotAuthentic = errors.New("it does not decrypt under this tenant's key: it is corrupted, or not this tenant's")

func (k *keys) open(sealed []byte, ad string) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < 1+n+k.aead.Overhead() {
		return nil, fmt.Errorf("it is %d bytes, too short to be sealed", len(sealed))
	}
	if sealed[0] != sealVersion {
		return nil, fmt.Errorf("its format is %d, not %d", sealed[0], sealVersion)
	}
	plain, err := k.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(ad))
	if err != nil {
		return nil, errNotAuthentic
	}
	return plain, nil
}
