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

package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	pgreconcile "github.com/playground-dev/playground/internal/reconcile"
)

// The manager's deliveries to a node (signing keys, egress and registry
// credentials)
// say in a condition of the Sandbox, not only in an Event, what keeps
// them from the sandbox. Each condition is present only while False: a
// sandbox whose delivery went well costs no status write for it.

// deliveryConditions are the Sandbox conditions of the manager's
// deliveries, each applied under its own field manager.
var deliveryConditions = []string{
	playgroundv1alpha1.SigningKeyDeliveredCondition,
	playgroundv1alpha1.EgressCredentialsDeliveredCondition,
	playgroundv1alpha1.ImageCredentialsDeliveredCondition,
}

// refusal is the first of sbx's delivery conditions that is False, or
// nil.
func refusal(sbx *playgroundv1alpha1.Sandbox) *metav1.Condition {
	for _, typ := range deliveryConditions {
		if c := meta.FindStatusCondition(sbx.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionFalse {
			return c
		}
	}
	return nil
}

// waitsForKey is the SigningKeyDelivered condition of a sandbox that
// waits for its signing key and cannot be given it, or nil: one whose
// agent reports prov is not provisioned yet, or waits for the key (a
// backend failure, a suspension, a wait for faculties say their own
// cause). An egress credential is no reason to wait: a sandbox starts
// without it.
func waitsForKey(sbx *playgroundv1alpha1.Sandbox, prov *metav1.Condition) *metav1.Condition {
	if prov != nil && prov.Reason != playgroundv1alpha1.ReasonProvisioning && prov.Reason != playgroundv1alpha1.ReasonWaitingForSigningKey {
		return nil
	}
	if c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.SigningKeyDeliveredCondition); c != nil && c.Status == metav1.ConditionFalse {
		return c
	}
	return nil
}

// maxDeliveryMessage bounds a delivery condition's message: one line per
// refused rule would otherwise grow with the egress list.
const maxDeliveryMessage = 4096

// maxEventNote keeps an Event's note within the 1 KiB the events API takes.
const maxEventNote = 1000

// setDelivery applies, under owner, the delivery condition typ of sbx:
// False with reason and message, or (reason "") none. It writes nothing
// when sbx's status already says so, and reports whether it wrote.
func setDelivery(ctx context.Context, c client.Client, sbx *playgroundv1alpha1.Sandbox, owner, typ, reason, message string) (bool, error) {
	conds := slices.Clone(sbx.Status.Conditions)
	if reason == "" {
		if !meta.RemoveStatusCondition(&conds, typ) {
			return false, nil
		}
	} else if !meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: metav1.ConditionFalse,
		Reason: reason, Message: truncate(message, maxDeliveryMessage), ObservedGeneration: sbx.Generation}) {
		return false, nil
	}
	// An apply that lists none of the owner's conditions removes them.
	status := playgroundv1alpha1ac.SandboxStatus().WithConditions(pgreconcile.ApplyConditions(conds, typ)...)
	if err := c.Status().Apply(ctx, playgroundv1alpha1ac.Sandbox(sbx.Name, sbx.Namespace).WithStatus(status),
		client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("applying the %s condition of sandbox %s: %w", typ, klog.KObj(sbx), err)
	}
	sbx.Status.Conditions = conds
	return true, nil
}

// undeliveredGrace is how long a delivery to a node's agent may keep
// failing before the Sandbox's condition says so: an agent that restarts,
// or is slow in a burst, takes it at a retry, and a condition written and
// removed for it would be two status writes for nothing.
const undeliveredGrace = 30 * time.Second

// failing remembers, by Sandbox, since when its deliveries fail.
type failing struct {
	mu    sync.Mutex
	since map[types.UID]time.Time
}

// persists records a failed delivery to sandbox uid at now, and says
// whether its deliveries have failed for undeliveredGrace.
func (f *failing) persists(uid types.UID, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since == nil {
		f.since = map[types.UID]time.Time{}
	}
	first, ok := f.since[uid]
	if !ok {
		f.since[uid] = now
		return false
	}
	return now.Sub(first) >= undeliveredGrace
}

// clear forgets the failures of sandbox uid: it was delivered, or is gone.
func (f *failing) clear(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.since, uid)
}

// upperFirst and lowerFirst change the case of a message's first letter,
// to begin or continue a sentence with it.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
