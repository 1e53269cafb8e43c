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
	"sync"
	"sync/atomic"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/keyedmutex"
	"github.com/playground-dev/playground/internal/signingkey"
)

// SigningKeys is the signing-key service: the key to write into a
// sandbox's pile before its next start, the key each pile is known to
// hold, and the calls that wait for a sandbox's expected key. It owns
// that state; the sandboxes it asks about are the sandboxes service's
// (keySandboxes).
type SigningKeys struct {
	sandboxes keySandboxes
	// wait bounds a call's wait for an expected key
	// (Options.SigningKeyWait).
	wait time.Duration

	mu sync.Mutex
	// start are the keys to write into piles before their sandboxes
	// start (SetStartSigningKey), by ID.
	start map[string][]byte
	// held is what each served sandbox's pile is known to hold, by ID:
	// an entry from the sandbox's first record (track) to its removal
	// (forget).
	held map[string]*keyState
	// awaited are the sandboxes whose calls wait for their signing key
	// (ExpectSigningKey), by ID: each channel is closed once the
	// sandbox's pile holds a key.
	awaited map[string]chan struct{}
	// untouched are the sandboxes, among the awaited, that have run
	// nothing of their tenant's (Untouched): their first key goes in
	// without pausing them.
	untouched map[string]bool
	// waiting counts the calls waiting for a signing key now.
	waiting atomic.Int64
	// installs serialise SetSigningKey by sandbox, so that a key another
	// caller has just installed is seen, not installed again.
	installs keyedmutex.Mutex
}

// keySandboxes is what the signing-key service asks of the sandboxes
// service.
type keySandboxes interface {
	served(id string) (sandboxView, bool)
	// pendingTakeover says whether sandbox id is still to be taken over
	// by an agent that just started.
	pendingTakeover(id string) bool
}

func newSigningKeys(sandboxes keySandboxes, wait time.Duration) *SigningKeys {
	return &SigningKeys{sandboxes: sandboxes, wait: wait, start: map[string][]byte{}, held: map[string]*keyState{}, awaited: map[string]chan struct{}{}, untouched: map[string]bool{}}
}

// keyState is what a sandbox's pile is known to hold: key is nil until it
// is read (once per start or install), and reads counts its
// invalidations, so that a read an install overtook is not kept.
type keyState struct {
	key   *signingKeyHeld
	reads int
}

// signingKeyHeld is the signing key a sandbox's pile holds, by its fingerprint
// and public key (both "" for none): the key itself is not kept.
type signingKeyHeld struct {
	fingerprint, publicKey string
}

// SetSigningKey makes key (64 lowercase hex digits) the signing key of
// sandbox sandboxID, which must be tenant's, and says which key the
// sandbox holds now: the new one when live, else the previous one until
// its next start. The key is never in an error, a log line or a trace.
func (k *SigningKeys) SetSigningKey(ctx context.Context, tenant, sandboxID string, key []byte) (fingerprint string, live bool, err error) {
	if err := backend.ValidateID(sandboxID); err != nil {
		return "", false, errorf(agentapi.CodeInvalid, "%v", err)
	}
	if err := signingkey.Check(key); err != nil {
		return "", false, errorf(agentapi.CodeInvalid, "%v", err)
	}
	sbx, ok := k.sandboxes.served(sandboxID)
	switch {
	case !ok && k.sandboxes.pendingTakeover(sandboxID):
		return "", false, errorf(agentapi.CodeUnavailable, "sandbox %s is not taken over yet by this agent, which just started: try again", sandboxID)
	case !ok || sbx.spec.Tenant != tenant:
		return "", false, errorf(agentapi.CodeNotFound, "no such sandbox for tenant %s on this node", tenant)
	}
	holder := sbx.be.Capabilities().SigningKeyHolder
	if holder == nil {
		return "", false, errorf(agentapi.CodeInvalid, "the %s backend of sandbox %s keeps no signing key", sbx.spec.Backend, sandboxID)
	}
	// The manager's delivery and the claim's own pass may bring the same
	// key at once: the second finds it in, and does not install it again
	// (for a running oci sandbox, a pause and a resume).
	defer k.installs.Lock(sandboxID)()
	if fp := signingkey.Fingerprint(key); k.holds(sandboxID, fp) {
		return fp, true, nil
	}
	install := holder.InstallSigningKey
	if k.takeUntouched(sandboxID) {
		install = holder.InstallSigningKeyUntouched
	}
	live, err = install(ctx, sandboxID, key)
	if errors.Is(err, backend.ErrNotFound) {
		return "", false, errorf(agentapi.CodeNotFound, "no such sandbox for tenant %s on this node", tenant)
	}
	if err != nil {
		return "", false, errorf(agentapi.CodeUnavailable, "installing the signing key of sandbox %s: %v", sandboxID, err)
	}
	k.mu.Lock()
	if st, ok := k.held[sandboxID]; ok {
		st.key, st.reads = nil, st.reads+1
		if live {
			// What the sandbox holds now, whether or not the node can
			// read the pile back (a Lima VM's is on a disk only its
			// guest mounts).
			st.key = &signingKeyHeld{fingerprint: signingkey.Fingerprint(key), publicKey: signingkey.PublicKey(key)}
		}
	}
	if live {
		k.arrivedLocked(sandboxID)
	}
	k.mu.Unlock()
	held := k.of(sandboxID)
	return held.fingerprint, live, nil
}

// holds says whether sandbox id's pile is known to hold the key of
// fingerprint fp (installed or read since its last start).
func (k *SigningKeys) holds(id, fp string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, ok := k.held[id]
	return ok && st.key != nil && st.key.fingerprint == fp
}

// SigningKey is the fingerprint and public key of the signing key sandbox
// id's pile holds ("" for none, or a sandbox this agent does not serve).
func (k *SigningKeys) SigningKey(id string) (fingerprint, publicKey string) {
	held := k.of(id)
	return held.fingerprint, held.publicKey
}

// of reads, once per start or install, the key sandbox id's pile holds.
// A pile that cannot be read now (its VM is between starts) is read again
// next time.
func (k *SigningKeys) of(id string) signingKeyHeld {
	sbx, ok := k.sandboxes.served(id)
	if !ok || sbx.be.Capabilities().SigningKeyHolder == nil {
		return signingKeyHeld{}
	}
	k.mu.Lock()
	st, ok := k.held[id]
	if !ok {
		k.mu.Unlock()
		return signingKeyHeld{} // removed meanwhile
	}
	if st.key != nil {
		held := *st.key
		k.mu.Unlock()
		return held
	}
	reads := st.reads
	k.mu.Unlock()
	var held signingKeyHeld
	data, err := backend.ReadPileFile(sbx.be, id, guestapi.SigningKeyFile)
	switch {
	case err == nil:
		held = signingKeyHeld{fingerprint: signingkey.Fingerprint(data), publicKey: signingkey.PublicKey(data)}
	case !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, os.ErrNotExist):
		return signingKeyHeld{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur, ok := k.held[id]; ok && cur == st && st.reads == reads {
		st.key = &held
	}
	if held.fingerprint != "" {
		k.arrivedLocked(id)
	}
	return held
}

// ExpectSigningKey says whether sandbox id's calls wait for its signing
// key: while expect holds and its pile holds none, a session's opening
// and a worker's start wait for one (up to Options.SigningKeyWait), so
// that no call of its tenant's runs before the key is in. A sandbox the
// agent knows to hold a key waits for nothing. The node agent expects
// the key of a sandbox whose Sandbox names one and that has reported
// none yet: a warm claim serves before the manager's delivery reaches it
// (docs/operations.md, "Signing keys").
func (k *SigningKeys) ExpectSigningKey(id string, expect bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !expect {
		k.arrivedLocked(id)
		return
	}
	if _, waiting := k.awaited[id]; waiting {
		return
	}
	if st, ok := k.held[id]; ok && st.key != nil && st.key.fingerprint != "" {
		return
	}
	k.awaited[id] = make(chan struct{})
}

// arrivedLocked ends the wait of sandbox id's calls for its signing key:
// it holds one now (or is gone, or expects none). The caller holds k.mu.
func (k *SigningKeys) arrivedLocked(id string) {
	if ch, ok := k.awaited[id]; ok {
		close(ch)
		delete(k.awaited, id)
	}
	delete(k.untouched, id)
}

// Untouched says that sandbox id, just claimed from a warm pool, has run
// nothing of its tenant's, and that its calls wait for its signing key
// (ExpectSigningKey): the first key then goes in without pausing the
// sandbox (SigningKeyHolder.InstallSigningKeyUntouched), which a running
// sandbox otherwise pays (three runtime processes for oci). Until that
// key is in no call of its tenant's runs, so nothing of the tenant's can
// take hold of the file meanwhile.
func (k *SigningKeys) Untouched(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, waiting := k.awaited[id]; waiting {
		k.untouched[id] = true
	}
}

// takeUntouched says whether sandbox id is untouched and its calls still
// wait for its key, and forgets it: one install only goes in unpaused,
// and one that runs beside it pauses the sandbox as any.
func (k *SigningKeys) takeUntouched(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, waiting := k.awaited[id]
	untouched := k.untouched[id] && waiting
	delete(k.untouched, id)
	return untouched
}

// waitFor waits, up to Options.SigningKeyWait, until sandbox id (the
// tenant's; tenant "" for any) holds its expected signing key, and says
// why the call cannot go on if it still does not.
func (k *SigningKeys) waitFor(ctx context.Context, tenant, id string) error {
	k.mu.Lock()
	ch := k.awaited[id]
	k.mu.Unlock()
	if ch == nil {
		return nil
	}
	if sbx, ok := k.sandboxes.served(id); tenant != "" && (!ok || sbx.spec.Tenant != tenant) {
		return nil // not the tenant's: answered as such further on
	}
	k.waiting.Add(1)
	defer k.waiting.Add(-1)
	t := time.NewTimer(k.wait)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	return errorf(agentapi.CodeUnavailable, "the signing key of sandbox %s is not in it yet (the manager delivers it to this node's agent, which installs it before the sandbox serves a call; waited %s): retry in a few seconds, and if it persists see the Sandbox's SigningKeyDelivered condition and the Tenant's status", id, k.wait)
}

// waitingCalls is the number of calls waiting for a signing key now.
func (k *SigningKeys) waitingCalls() int64 { return k.waiting.Load() }

// SetStartSigningKey makes key the signing key written into sandbox id's
// pile when Ensure provisions or starts it next, before its start, so
// that no process of it runs without the key; nil forgets it.
func (k *SigningKeys) SetStartSigningKey(id string, key []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key == nil {
		delete(k.start, id)
		return
	}
	k.start[id] = key
}

// installStartKey writes the key SetStartSigningKey gave for sandbox id,
// which does not run, into its pile, and says which it is (nil: none).
func (k *SigningKeys) installStartKey(ctx context.Context, be backend.Backend, id string) (*signingKeyHeld, error) {
	k.mu.Lock()
	key := k.start[id]
	k.mu.Unlock()
	holder := be.Capabilities().SigningKeyHolder
	if key == nil || holder == nil {
		return nil, nil
	}
	if _, err := holder.InstallSigningKey(ctx, id, key); err != nil {
		return nil, fmt.Errorf("writing the signing key of sandbox %s before its start: %w", id, err)
	}
	return &signingKeyHeld{fingerprint: signingkey.Fingerprint(key), publicKey: signingkey.PublicKey(key)}, nil
}

// track begins what the service knows of sandbox id's pile, as the
// sandboxes service makes its record: key is what its start installed
// (nil: to be read).
func (k *SigningKeys) track(id string, key *signingKeyHeld) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held[id] = &keyState{key: key}
	if key != nil {
		k.arrivedLocked(id)
	}
}

// started notes an Ensure of sandbox id, tracked: restarted, its pile is
// read again; a key installed before its start (installStartKey) is what
// it holds now.
func (k *SigningKeys) started(id string, key *signingKeyHeld, restarted bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st, ok := k.held[id]; ok && (restarted || key != nil) {
		st.key, st.reads = key, st.reads+1
	}
	if key != nil {
		k.arrivedLocked(id)
	}
}

// forget drops what the service knows of sandbox id's pile, removed: its
// waiting calls find it gone.
func (k *SigningKeys) forget(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.held, id)
	k.arrivedLocked(id)
}
