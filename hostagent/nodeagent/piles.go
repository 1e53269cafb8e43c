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
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// pileKeeper answers for the piles the node retains of Sandboxes that
// are gone (reclaim policy Retain): a retained pile is a record of the
// node's sandbox IDs (sandboxids) whose Sandbox is not bound to this node
// any more, kept with the pile's files so that a Sandbox created again
// under the same name takes it up. It lists them, and removes one with
// its record, as a deletion under reclaim policy Delete would have.
type pileKeeper struct {
	r   *sandboxReconciler
	log logr.Logger
}

// RetainedPiles implements agentserver.PileKeeper.
func (p *pileKeeper) RetainedPiles(ctx context.Context, namespace string) (agentapi.Piles, error) {
	here, err := p.sandboxesHere(ctx, namespace)
	if err != nil {
		return agentapi.Piles{}, err
	}
	out := agentapi.Piles{Node: p.r.node, Piles: []agentapi.RetainedPile{}}
	for _, rec := range p.r.ids.Records() {
		ns, name, _ := strings.Cut(rec.Owner, "/")
		if (namespace != "" && ns != namespace) || here[rec.Owner] {
			continue
		}
		out.Piles = append(out.Piles, agentapi.RetainedPile{Namespace: ns, Name: name, SandboxID: rec.ID})
	}
	return out, nil
}

// sandboxesHere are the Sandboxes bound to this node in namespace (""
// every one), as namespace/name, read from the API server: the cache may
// not have one just created.
func (p *pileKeeper) sandboxesHere(ctx context.Context, namespace string) (map[string]bool, error) {
	var list playgroundv1alpha1.SandboxList
	if err := p.r.reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{playgroundv1alpha1.SandboxNodeNameField: p.r.node}); err != nil {
		return nil, &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err, Message: "the agent could not list the Sandboxes of its node: retry shortly"}
	}
	here := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == p.r.node {
			here[ownerOf(&list.Items[i])] = true
		}
	}
	return here, nil
}

// RemovePile implements agentserver.PileKeeper: it removes the pile the
// node retains of Sandbox namespace/name, every file of it, and its
// record. It refuses while a Sandbox of that name is bound to this node
// (its pile is in use), and while the reconciler works on that name: a
// Sandbox created again meanwhile either finds the pile whole or finds
// none and starts afresh, never half of one.
func (p *pileKeeper) RemovePile(ctx context.Context, namespace, name string) (agentapi.RemovedPile, error) {
	owner := namespace + "/" + name
	unlock, ok := p.r.owners.TryLock(owner)
	if !ok {
		return agentapi.RemovedPile{}, &agentapi.Error{Code: agentapi.CodeUnavailable,
			Message: fmt.Sprintf("node %s's agent is working on Sandbox %s right now: retry in a moment", p.r.node, owner)}
	}
	defer unlock()
	id, found, err := p.r.ids.Lookup(owner)
	if err != nil {
		return agentapi.RemovedPile{}, &agentapi.Error{Code: agentapi.CodeInvalid, Err: err, Message: fmt.Sprintf("%q is not a Sandbox's namespace/name: %v", owner, err)}
	}
	if !found {
		return agentapi.RemovedPile{}, &agentapi.Error{Code: agentapi.CodeNotFound,
			Message: fmt.Sprintf("node %s retains no pile of Sandbox %s (kubectl playground pile list shows what each node retains)", p.r.node, owner)}
	}
	var sbx playgroundv1alpha1.Sandbox
	err = p.r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sbx)
	switch {
	case err == nil && sbx.Spec.NodeName == p.r.node:
		return agentapi.RemovedPile{}, &agentapi.Error{Code: agentapi.CodeInvalid,
			Message: fmt.Sprintf("Sandbox %s is bound to node %s and its pile is in use: delete its Tenant (or the Sandbox) first; kubectl playground tenant destroy --purge deletes a tenant with its pile", owner, p.r.node)}
	case err != nil && !apierrors.IsNotFound(err):
		return agentapi.RemovedPile{}, &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err, Message: fmt.Sprintf("the agent could not read Sandbox %s: retry shortly", owner)}
	}
	if err := p.r.agent.Remove(ctx, id, false); err != nil {
		return agentapi.RemovedPile{}, fmt.Errorf("removing the retained pile of sandbox %s: %w", id, err)
	}
	if err := p.r.ids.Release(owner); err != nil {
		return agentapi.RemovedPile{}, err
	}
	p.log.Info("Removed a retained pile", "sandbox", owner, "id", id)
	return agentapi.RemovedPile{Node: p.r.node, SandboxID: id}, nil
}
