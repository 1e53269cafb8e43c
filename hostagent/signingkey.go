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

package hostagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/signingkey"
)

// signingKeyHeld is the signing key a sandbox's pile holds, by its fingerprint
// and public key (both "" for none): the key itself is not kept.
type signingKeyHeld struct {
	fingerprint, publicKey string
}

// SetSigningKey makes key (64 lowercase hex digits) the signing key of
// sandbox sandboxID, which must be tenant's, and says which key the
// sandbox holds now: the new one when live, else the previous one until
// its next start. The key is never in an error, a log line or a trace.
func (a *Agent) SetSigningKey(ctx context.Context, tenant, sandboxID string, key []byte) (fingerprint string, live bool, err error) {
	if err := backend.ValidateID(sandboxID); err != nil {
		return "", false, errorf(CodeInvalid, "%v", err)
	}
	if err := signingkey.Check(key); err != nil {
		return "", false, errorf(CodeInvalid, "%v", err)
	}
	a.mu.Lock()
	s, ok := a.sandboxes[sandboxID]
	_, pending := a.pending[sandboxID]
	a.mu.Unlock()
	switch {
	case !ok && pending:
		return "", false, errorf(CodeUnavailable, "sandbox %s is not taken over yet by this agent, which just started: try again", sandboxID)
	case !ok || s.spec.Tenant != tenant:
		return "", false, errorf(CodeNotFound, "no such sandbox for tenant %s on this node", tenant)
	}
	holder := s.be.Capabilities().SigningKeyHolder
	if holder == nil {
		return "", false, errorf(CodeInvalid, "the %s backend of sandbox %s keeps no signing key", s.spec.Backend, sandboxID)
	}
	live, err = holder.InstallSigningKey(ctx, sandboxID, key)
	if errors.Is(err, backend.ErrNotFound) {
		return "", false, errorf(CodeNotFound, "no such sandbox for tenant %s on this node", tenant)
	}
	if err != nil {
		return "", false, errorf(CodeUnavailable, "installing the signing key of sandbox %s: %v", sandboxID, err)
	}
	a.mu.Lock()
	s.key, s.keyReads = nil, s.keyReads+1
	if live {
		// What the sandbox holds now, whether or not the node can read
		// the pile back (a Lima VM's is on a disk only its guest mounts).
		s.key = &signingKeyHeld{fingerprint: signingkey.Fingerprint(key), publicKey: signingkey.PublicKey(key)}
		a.keyArrivedLocked(sandboxID)
	}
	a.mu.Unlock()
	held := a.signingKeyOf(sandboxID)
	return held.fingerprint, live, nil
}

// SigningKey is the fingerprint and public key of the signing key sandbox
// id's pile holds ("" for none, or a sandbox this agent does not serve).
func (a *Agent) SigningKey(id string) (fingerprint, publicKey string) {
	k := a.signingKeyOf(id)
	return k.fingerprint, k.publicKey
}

// signingKeyOf reads, once per start or install, the key sandbox id's
// pile holds. A pile that cannot be read now (its VM is between starts)
// is read again next time.
func (a *Agent) signingKeyOf(id string) signingKeyHeld {
	a.mu.Lock()
	s, ok := a.sandboxes[id]
	if !ok || s.be.Capabilities().SigningKeyHolder == nil {
		a.mu.Unlock()
		return signingKeyHeld{}
	}
	if s.key != nil {
		k := *s.key
		a.mu.Unlock()
		return k
	}
	be, reads := s.be, s.keyReads
	a.mu.Unlock()
	var k signingKeyHeld
	data, err := backend.ReadPileFile(be, id, guestapi.SigningKeyFile)
	switch {
	case err == nil:
		k = signingKeyHeld{fingerprint: signingkey.Fingerprint(data), publicKey: signingkey.PublicKey(data)}
	case !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, os.ErrNotExist):
		return signingKeyHeld{}
	}
	a.mu.Lock()
	if cur, ok := a.sandboxes[id]; ok && cur == s && s.keyReads == reads {
		s.key = &k
	}
	if k.fingerprint != "" {
		a.keyArrivedLocked(id)
	}
	a.mu.Unlock()
	return k
}

// ExpectSigningKey says whether sandbox id's calls wait for its signing
// key: while expect holds and its pile holds none, a session's opening
// and a worker's start wait for one (up to Options.SigningKeyWait), so
// that no call of its tenant's runs before the key is in. A sandbox the
// agent knows to hold a key waits for nothing. The node agent expects
// the key of a sandbox whose Sandbox names one and that has reported
// none yet: a warm claim serves before the manager's delivery reaches it
// (docs/operations.md, "Signing keys").
func (a *Agent) ExpectSigningKey(id string, expect bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !expect {
		a.keyArrivedLocked(id)
		return
	}
	if _, waiting := a.keyAwaited[id]; waiting {
		return
	}
	if s, ok := a.sandboxes[id]; ok && s.key != nil && s.key.fingerprint != "" {
		return
	}
	if a.keyAwaited == nil {
		a.keyAwaited = map[string]chan struct{}{}
	}
	a.keyAwaited[id] = make(chan struct{})
}

// keyArrivedLocked ends the wait of sandbox id's calls for its signing
// key: it holds one now (or is gone, or expects none).
func (a *Agent) keyArrivedLocked(id string) {
	if ch, ok := a.keyAwaited[id]; ok {
		close(ch)
		delete(a.keyAwaited, id)
	}
}

// waitSigningKey waits, up to Options.SigningKeyWait, until sandbox id
// (the tenant's; tenant "" for any) holds its expected signing key, and
// says why the call cannot go on if it still does not.
func (a *Agent) waitSigningKey(ctx context.Context, tenant, id string) error {
	a.mu.Lock()
	ch := a.keyAwaited[id]
	if s, ok := a.sandboxes[id]; tenant != "" && (!ok || s.spec.Tenant != tenant) {
		ch = nil // not the tenant's: answered as such further on
	}
	a.mu.Unlock()
	if ch == nil {
		return nil
	}
	a.keyWaiting.Add(1)
	defer a.keyWaiting.Add(-1)
	t := time.NewTimer(a.opts.SigningKeyWait)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	return errorf(CodeUnavailable, "the signing key of sandbox %s is not in it yet (the manager delivers it to this node's agent, which installs it before the sandbox serves a call; waited %s): retry in a few seconds, and if it persists see the Sandbox's SigningKeyDelivered condition and the Tenant's status", id, a.opts.SigningKeyWait)
}

// SetStartSigningKey makes key the signing key written into sandbox id's
// pile when Ensure provisions or starts it next, before its start, so
// that no process of it runs without the key; nil forgets it.
func (a *Agent) SetStartSigningKey(id string, key []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if key == nil {
		delete(a.startKeys, id)
		return
	}
	if a.startKeys == nil {
		a.startKeys = map[string][]byte{}
	}
	a.startKeys[id] = key
}

// installStartKey writes the key SetStartSigningKey gave for sandbox id,
// which does not run, into its pile, and says which it is (nil: none).
func (a *Agent) installStartKey(ctx context.Context, be backend.Backend, id string) (*signingKeyHeld, error) {
	a.mu.Lock()
	key := a.startKeys[id]
	a.mu.Unlock()
	holder := be.Capabilities().SigningKeyHolder
	if key == nil || holder == nil {
		return nil, nil
	}
	if _, err := holder.InstallSigningKey(ctx, id, key); err != nil {
		return nil, fmt.Errorf("writing the signing key of sandbox %s before its start: %w", id, err)
	}
	return &signingKeyHeld{fingerprint: signingkey.Fingerprint(key), publicKey: signingkey.PublicKey(key)}, nil
}
