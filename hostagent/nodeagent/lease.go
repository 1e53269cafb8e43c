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
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/selfowner"
)

// heartbeat keeps the node's registration Lease renewed. It reads the
// Lease from the API server, not a cache: the agent watches no Leases.
type heartbeat struct {
	reader       client.Reader
	writer       client.Writer
	node, ns     string
	period       time.Duration
	registration func() agentlease.Registration
	// owner, the agent's ServiceAccount, owns the Lease (package
	// selfowner); nil leaves it unowned.
	owner *selfowner.Owner
}

// run renews the Lease every period until ctx ends, the first time a
// period after the registration Run made. A failed renewal is logged and
// retried at the next tick: two may fail before the Lease lapses. On
// shutdown the Lease is left to expire (see the package doc).
func (h *heartbeat) run(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx)
	// Never done: the poll ends with ctx.
	_ = wait.PollUntilContextCancel(ctx, h.period, false, func(ctx context.Context) (bool, error) {
		if err := h.renew(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Renewing the node's registration Lease", "lease", h.ns+"/"+agentlease.Name(h.node))
		}
		return false, nil
	})
	return nil
}

// renew creates or renews the Lease with the current registration.
func (h *heartbeat) renew(ctx context.Context) error {
	reg := h.registration()
	key := types.NamespacedName{Namespace: h.ns, Name: agentlease.Name(h.node)}
	var lease coordinationv1.Lease
	err := h.reader.Get(ctx, key, &lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
		if err := reg.Apply(&lease, time.Now()); err != nil {
			return err
		}
		h.owner.Own(&lease)
		return h.writer.Create(ctx, &lease)
	case err != nil:
		return err
	}
	if err := reg.Apply(&lease, time.Now()); err != nil {
		return err
	}
	h.owner.Own(&lease)
	return h.writer.Update(ctx, &lease)
}
