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

package workers

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/internal/tokenfile"
)

// KeySize is the size of a session key: AES-256.
const KeySize = 32

// keyRecheck is how often, at most, a key file is re-read.
const keyRecheck = 2 * time.Second

// Keys are the keys sessions are sealed with: the first seals, every one
// opens, so that a rotation puts the new key first and keeps the previous
// one below it until sessions sealed with it have ended. It is safe for
// concurrent use.
type Keys struct {
	log  logr.Logger
	path string          // "" without a file
	file *tokenfile.File // nil until the file has been read

	mu        sync.Mutex
	aeads     []cipher.AEAD
	generated cipher.AEAD // kept when a file appears later
	checked   time.Time
}

// LoadKeys reads the key file at path: one key a line, each 32 bytes in
// base64 (standard or URL alphabet, padded or not), the sealing key first.
// The file is re-read when it changes (a mounted Secret is updated in
// place); a file that goes bad keeps the previous keys. Without a path,
// or without a file there (an optional Secret not created), a random key
// is generated and a warning logged: sessions then survive neither a
// restart nor a trip to another replica.
func LoadKeys(path string, log logr.Logger) (*Keys, error) {
	k := &Keys{log: log, path: path}
	if path != "" {
		f, err := tokenfile.Open(path, 0)
		switch {
		case err == nil:
			aeads, err := parseKeys(f.Tokens())
			if err != nil {
				return nil, fmt.Errorf("session key file %s: %w", path, err)
			}
			k.file, k.aeads, k.checked = f, aeads, time.Now()
			return k, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	var key [KeySize]byte
	_, _ = rand.Read(key[:])
	a, err := newAEAD(key[:])
	if err != nil {
		return nil, err
	}
	k.aeads, k.generated, k.checked = []cipher.AEAD{a}, a, time.Now()
	if path == "" {
		log.Info("No --session-key-file: sealing worker sessions with a key generated at start; they survive neither a restart nor a trip to another replica (docs/workers.md)")
	} else {
		log.Info("The session key file does not exist: sealing worker sessions with a key generated at start; they survive neither a restart nor a trip to another replica until it is created (docs/workers.md)", "file", path)
	}
	return k, nil
}

// StaticKeys returns keys that never change, the first sealing (tests).
func StaticKeys(keys ...[]byte) (*Keys, error) {
	k := &Keys{log: logr.Discard()}
	for _, key := range keys {
		a, err := newAEAD(key)
		if err != nil {
			return nil, err
		}
		k.aeads = append(k.aeads, a)
	}
	if len(k.aeads) == 0 {
		return nil, errors.New("no session key")
	}
	return k, nil
}

func parseKeys(lines []string) ([]cipher.AEAD, error) {
	if len(lines) == 0 {
		return nil, errors.New("holds no key: want one key a line, 32 bytes in base64, the sealing key first")
	}
	var aeads []cipher.AEAD
	for i, line := range lines {
		key, err := decodeKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		a, err := newAEAD(key)
		if err != nil {
			return nil, err
		}
		aeads = append(aeads, a)
	}
	return aeads, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("the key is %d bytes, want %d (e.g. head -c 32 /dev/urandom | base64)", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("the key is not base64: want %d random bytes in base64 (e.g. head -c 32 /dev/urandom | base64)", KeySize)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("a session key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// current returns the keys, re-reading the file when it is due.
func (k *Keys) current() []cipher.AEAD {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.path == "" || time.Since(k.checked) < keyRecheck {
		return k.aeads
	}
	k.checked = time.Now()
	var changed bool
	var err error
	if k.file == nil { // generated at start: has the file appeared?
		if k.file, err = tokenfile.Open(k.path, 0); err == nil {
			changed = true
		} else if errors.Is(err, os.ErrNotExist) {
			return k.aeads
		}
	} else {
		changed, err = k.file.Reload(false)
	}
	if err != nil {
		k.log.Error(err, "Re-reading the session key file; keeping the previous keys", "file", k.path)
		return k.aeads
	}
	if !changed {
		return k.aeads
	}
	aeads, err := parseKeys(k.file.Tokens())
	if err != nil {
		k.log.Error(err, "Re-reading the session key file; keeping the previous keys", "file", k.path)
		return k.aeads
	}
	if k.generated != nil {
		aeads = append(aeads, k.generated) // sessions sealed before the file came
	}
	k.aeads = aeads
	k.log.Info("Reloaded the session keys", "file", k.path, "keys", len(aeads))
	return k.aeads
}

// Session is what a public session ID seals: the worker's session, where
// it lives, and when the public session began.
type Session struct {
	// Upstream is the worker's Mcp-Session-Id.
	Upstream string
	// Endpoint is the key of the endpoint the worker's session lives on
	// (Endpoint.Key).
	Endpoint string
	// Issued is when the gateway sealed it (second resolution).
	Issued time.Time
}

// Bounds of what a sealed session carries, so that a public ID stays well
// within a header line.
const (
	maxUpstreamID  = 512
	maxEndpointKey = 1024
	sealVersion    = 1
)

var errBadSession = errors.New("not a session of this gateway")

// binding ties a sealed session to the tenant and the mapping it was
// opened for: the additional data of the AEAD, so that it opens for
// neither another tenant nor a mapping recreated under the same name.
func binding(tenant, mappingUID string) []byte {
	return []byte("playground.dev/worker-session/v1\x00" + tenant + "\x00" + mappingUID)
}

// Seal returns the public session ID of s, bound to tenant and mappingUID.
func (k *Keys) Seal(tenant, mappingUID string, s Session) (string, error) {
	if s.Upstream == "" || len(s.Upstream) > maxUpstreamID || len(s.Endpoint) > maxEndpointKey {
		return "", fmt.Errorf("the worker's session ID is %d bytes, want 1 to %d", len(s.Upstream), maxUpstreamID)
	}
	for i := range len(s.Upstream) {
		if c := s.Upstream[i]; c < 0x21 || c > 0x7e {
			return "", errors.New("the worker's session ID holds a character other than visible ASCII, which MCP forbids")
		}
	}
	plain := make([]byte, 0, 1+8+binary.MaxVarintLen64+len(s.Endpoint)+len(s.Upstream))
	plain = append(plain, sealVersion)
	plain = binary.BigEndian.AppendUint64(plain, uint64(s.Issued.Unix()))
	plain = binary.AppendUvarint(plain, uint64(len(s.Endpoint)))
	plain = append(plain, s.Endpoint...)
	plain = append(plain, s.Upstream...)
	a := k.current()[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	_, _ = rand.Read(nonce)
	sealed := a.Seal(nonce, nonce, plain, binding(tenant, mappingUID))
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Open returns the session a public ID seals, if it was sealed by one of
// the keys for this tenant and mapping.
func (k *Keys) Open(tenant, mappingUID, public string) (Session, error) {
	if len(public) > base64.RawURLEncoding.EncodedLen(64+maxUpstreamID+maxEndpointKey) {
		return Session{}, errBadSession
	}
	raw, err := base64.RawURLEncoding.DecodeString(public)
	if err != nil {
		return Session{}, errBadSession
	}
	ad := binding(tenant, mappingUID)
	for _, a := range k.current() {
		if len(raw) < a.NonceSize()+a.Overhead() {
			return Session{}, errBadSession
		}
		plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], ad)
		if err != nil {
			continue
		}
		return decodeSession(plain)
	}
	return Session{}, errBadSession
}

func decodeSession(p []byte) (Session, error) {
	if len(p) < 9 || p[0] != sealVersion {
		return Session{}, errBadSession
	}
	issued := int64(binary.BigEndian.Uint64(p[1:9]))
	p = p[9:]
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return Session{}, errBadSession
	}
	p = p[w:]
	return Session{Endpoint: string(p[:n]), Upstream: string(p[n:]), Issued: time.Unix(issued, 0)}, nil
}
