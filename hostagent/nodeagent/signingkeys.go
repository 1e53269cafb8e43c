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

package nodeagent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
	"github.com/playground-dev/playground/internal/signingkey"
)

// signingKeys is what the node agent asks of the kernel's signing-key
// service (hostagent.SigningKeys).
type signingKeys interface {
	SetSigningKey(ctx context.Context, tenant, sandboxID string, key []byte) (fingerprint string, live bool, err error)
	SigningKey(id string) (fingerprint, publicKey string)
	ExpectSigningKey(id string, expect bool)
	Untouched(id string)
	SetStartSigningKey(id string, key []byte)
}

// keyInbox holds the signing keys the manager delivers, by Sandbox UID,
// in memory only (the pile keeps the installed one across restarts of the
// agent): a Sandbox bound to this node may get its key before its sandbox
// first starts, which then waits for it, or after a warm claim served it,
// whose calls wait for it meanwhile (keyGate). It takes keys only for
// Sandboxes bound to this node, so it holds at most one per sandbox here.
type keyInbox struct {
	r     *sandboxReconciler
	queue chan<- event.GenericEvent

	mu   sync.Mutex
	keys map[types.UID][]byte
	// waiting are the Sandboxes whose last pass found no key to install
	// and waits for one (keyOrWait): a delivery wakes them. The others
	// read the inbox after their Ensure, and need no extra pass.
	waiting map[types.UID]bool
}

// DeliverSigningKey implements agentserver.KeyInbox: it keeps the key of
// a Sandbox of this node and installs it at once in a sandbox that runs.
func (k *keyInbox) DeliverSigningKey(ctx context.Context, req agentapi.SigningKeyRequest) (agentapi.SigningKeyResult, error) {
	key := []byte(req.Key)
	if err := signingkey.Check(key); err != nil {
		return agentapi.SigningKeyResult{}, &agentapi.Error{Code: agentapi.CodeInvalid, Message: err.Error()}
	}
	sbx := &playgroundv1alpha1.Sandbox{}
	err := k.r.client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, sbx)
	if err != nil || string(sbx.UID) != req.UID || sbx.Spec.NodeName != k.r.node || !sbx.DeletionTimestamp.IsZero() {
		// Not in this agent's cache yet, maybe: the manager tries again.
		return agentapi.SigningKeyResult{}, &agentapi.Error{Code: agentapi.CodeNotFound,
			Message: fmt.Sprintf("no Sandbox %s/%s (UID %s) bound to node %s in this agent's view", req.Namespace, req.Name, req.UID, k.r.node)}
	}
	if sbx.Spec.Pile.SigningKey == nil {
		return agentapi.SigningKeyResult{}, &agentapi.Error{Code: agentapi.CodeInvalid,
			Message: fmt.Sprintf("Sandbox %s/%s names no signing key (spec.pile.signingKey)", req.Namespace, req.Name)}
	}
	k.mu.Lock()
	if k.keys == nil {
		k.keys = map[types.UID][]byte{}
	}
	k.keys[sbx.UID] = key
	waiting := k.waiting[sbx.UID]
	delete(k.waiting, sbx.UID)
	k.mu.Unlock()
	k.prune(ctx)

	// The key is in the inbox before the agent is asked whether it
	// serves the sandbox: a pass whose Ensure ends meanwhile reads it
	// after (keyGate), so one of the two installs it.
	id, err := k.r.idOf(sbx)
	if err == nil && id != "" && k.r.agent.Serves(id) {
		fp, live, err := k.r.signing.SetSigningKey(ctx, tenantOf(sbx), id, key)
		if err != nil {
			return agentapi.SigningKeyResult{}, err
		}
		k.requeue(sbx) // its status says which key it holds
		return agentapi.SigningKeyResult{Fingerprint: fp, Live: live}, nil
	}
	if waiting {
		// Not started yet, and its start waits for the key: woken now.
		k.requeue(sbx)
	}
	return agentapi.SigningKeyResult{}, nil
}

// tenantOf is the tenant a Sandbox serves, as the agent names it.
func tenantOf(sbx *playgroundv1alpha1.Sandbox) string {
	return sbx.Namespace + "/" + sbx.Spec.TenantRef.Name
}

func (k *keyInbox) requeue(sbx *playgroundv1alpha1.Sandbox) {
	select {
	case k.queue <- event.GenericEvent{Object: sbx}:
	default: // full: the resync finds it
	}
}

// prune forgets the keys of Sandboxes no longer bound here.
func (k *keyInbox) prune(ctx context.Context) {
	var list playgroundv1alpha1.SandboxList
	if err := k.r.client.List(ctx, &list); err != nil {
		return
	}
	here := map[types.UID]bool{}
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == k.r.node {
			here[list.Items[i].UID] = true
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid := range k.keys {
		if !here[uid] {
			delete(k.keys, uid)
		}
	}
	for uid := range k.waiting {
		if !here[uid] {
			delete(k.waiting, uid)
		}
	}
}

func (k *keyInbox) keyOf(uid types.UID) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[uid]
}

// keyOrWait is keyOf, and marks a Sandbox without a key as waiting for
// one, so that its delivery brings it back (at once, in one step with
// the read, so that no delivery goes unnoticed between the two).
func (k *keyInbox) keyOrWait(uid types.UID) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := k.keys[uid]
	if key == nil {
		if k.waiting == nil {
			k.waiting = map[types.UID]bool{}
		}
		k.waiting[uid] = true
	}
	return key
}

// keyWait is how often a sandbox waiting for its signing key looks again
// (a delivery wakes it at once), and keyPatience how long it waits before
// its status says that it does.
const (
	keyWait     = 2 * time.Second
	keyPatience = 10 * time.Second
)

// errWaitingForKey: a sandbox whose Sandbox names a signing key is not
// reported provisioned until its pile holds one.
type errWaitingForKey struct{ msg string }

func (e *errWaitingForKey) Error() string { return e.msg }

// keyGate installs the key delivered for sbx in its sandbox id, which
// Ensure has just made to run, when the pile does not hold it yet, and
// says whether the sandbox holds one: a Sandbox that names a key waits
// until its pile holds one, reported provisioned only then, except a
// warm claim, reported at once, whose calls the agent holds meanwhile
// (ExpectSigningKey). A newer key delivered later replaces it live, or
// at the next start. A first key that the backend can only bring in at a
// start restarts the sandbox, which has served nothing yet.
func (r *sandboxReconciler) keyGate(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, spec backend.Spec) error {
	if sbx.Spec.Pile.SigningKey == nil {
		return nil
	}
	held, _ := r.signing.SigningKey(spec.ID)
	key := r.keys.keyOf(sbx.UID)
	if key == nil && held == "" {
		key = r.keys.keyOrWait(sbx.UID)
	}
	if key != nil && signingkey.Fingerprint(key) != held {
		_, live, err := r.signing.SetSigningKey(ctx, spec.Tenant, spec.ID, key)
		if err != nil {
			return err
		}
		if !live && held == "" {
			if err := r.agent.Restart(ctx, spec); err != nil {
				return err
			}
		}
		held, _ = r.signing.SigningKey(spec.ID)
	}
	if held != "" {
		return nil
	}
	return r.keyWaitFor(sbx)
}

// keyWaitFor says that sbx waits for its signing key.
func (r *sandboxReconciler) keyWaitFor(sbx *playgroundv1alpha1.Sandbox) error {
	return &errWaitingForKey{fmt.Sprintf("Waiting for the signing key of Secret %s: the manager delivers it to node %s's agent, which writes it into the pile before the sandbox serves",
		sbx.Spec.Pile.SigningKey.SecretName, r.node)}
}

// waitForKey reports a sandbox that waits for its signing key: quietly at
// first (it usually comes within a second of the start), in its status
// once keyPatience has passed since it was bound.
func (r *sandboxReconciler) waitForKey(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, err error) error {
	w, ok := err.(*errWaitingForKey)
	if !ok {
		return err
	}
	prev := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	if time.Since(sbx.CreationTimestamp.Time) > keyPatience && (prev == nil || prev.Reason != playgroundv1alpha1.ReasonWaitingForSigningKey) {
		if serr := r.setProvisioned(ctx, sbx, metav1.ConditionFalse, playgroundv1alpha1.ReasonWaitingForSigningKey, w.msg); serr != nil {
			return serr
		}
	}
	return pgreconcile.Wait(keyWait, "%s", w.msg)
}

// signingKeyStatus is status.signingKey of sandbox id: the key its pile
// holds, nil for none.
func (r *sandboxReconciler) signingKeyStatus(id string) *playgroundv1alpha1.SigningKeyStatus {
	fp, pub := r.signing.SigningKey(id)
	if fp == "" {
		return nil
	}
	return &playgroundv1alpha1.SigningKeyStatus{Fingerprint: fp, PublicKey: pub}
}
