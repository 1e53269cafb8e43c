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

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// pullCredentials is what the node agent asks of the kernel's
// pull-credential service (hostagent.ImageCredentials).
type pullCredentials interface {
	SetImageCredentials(obj hostagent.SandboxObject, configs [][]byte) error
	ForgetImageCredentials(obj hostagent.SandboxObject)
}

// credentialInbox takes the registry credentials the manager delivers
// (agentserver.PullCredentialInbox) for a Sandbox bound to this node,
// by its UID, that names pull Secrets, into the kernel's pull-credential
// service, and drops them there as soon as its Sandbox is deleted, leaves
// the node or names no pull Secret any more, without waiting for the
// manager to say so. Agents read no Secrets: this is the only way a
// credential reaches a node.
type credentialInbox struct {
	sandboxes client.Reader // this node's Sandboxes (the manager's cache)
	node      string
	creds     pullCredentials

	// mu makes a delivery's check of its Sandbox and its store one step,
	// and a drop's: a drop for a change never runs between the two and
	// leaves credentials the change took away.
	mu sync.Mutex
}

// newCredentialInbox returns the inbox of the node's agent, whose
// manager mgr caches the node's Sandboxes; it watches them to drop what
// they no longer name.
func newCredentialInbox(ctx context.Context, mgr manager.Manager, node string, creds pullCredentials) (*credentialInbox, error) {
	in := &credentialInbox{sandboxes: mgr.GetClient(), node: node, creds: creds}
	inf, err := mgr.GetCache().GetInformer(ctx, &playgroundv1alpha1.Sandbox{})
	if err != nil {
		return nil, fmt.Errorf("nodeagent: watching Sandboxes for their pull credentials: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { in.settle(ctx, obj) },
		DeleteFunc: func(obj any) { in.settle(ctx, obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("nodeagent: watching Sandboxes for their pull credentials: %w", err)
	}
	return in, nil
}

// DeliverImageCredentials keeps the credentials of a Sandbox bound to
// this node, by its UID (bounds checked by the server, where they
// entered); none forgets them. Another node's Sandbox, or another
// incarnation of one, is answered as one this agent does not know.
func (in *credentialInbox) DeliverImageCredentials(ctx context.Context, req agentapi.ImageCredentialsRequest) error {
	obj := hostagent.SandboxObject{Namespace: req.Namespace, Name: req.Name, UID: req.UID}
	in.mu.Lock()
	defer in.mu.Unlock()
	sbx := &playgroundv1alpha1.Sandbox{}
	err := in.sandboxes.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, sbx)
	if err != nil || string(sbx.UID) != req.UID || sbx.Spec.NodeName != in.node || !sbx.DeletionTimestamp.IsZero() {
		// Not in this agent's cache yet, maybe: the manager tries again.
		return &agentapi.Error{Code: agentapi.CodeNotFound,
			Message: fmt.Sprintf("no Sandbox %s/%s (UID %s) bound to node %s in this agent's view", req.Namespace, req.Name, req.UID, in.node)}
	}
	if len(req.Configs) == 0 {
		in.creds.ForgetImageCredentials(obj)
		return nil
	}
	if !namesPullSecrets(sbx) {
		return &agentapi.Error{Code: agentapi.CodeInvalid,
			Message: fmt.Sprintf("Sandbox %s/%s names no pull Secret (spec.image.pullSecrets): this agent takes registry credentials for it only once it does", req.Namespace, req.Name)}
	}
	return in.creds.SetImageCredentials(obj, req.Configs)
}

// settle drops the credentials of the Sandbox obj (a watch event's) when
// its current state no longer calls for them.
func (in *credentialInbox) settle(ctx context.Context, obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	sbx, ok := obj.(*playgroundv1alpha1.Sandbox)
	if !ok {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	cur := &playgroundv1alpha1.Sandbox{}
	err := in.sandboxes.Get(ctx, client.ObjectKeyFromObject(sbx), cur)
	if err == nil && cur.UID == sbx.UID && cur.Spec.NodeName == in.node && cur.DeletionTimestamp.IsZero() && namesPullSecrets(cur) {
		return
	}
	in.creds.ForgetImageCredentials(hostagent.SandboxObject{Namespace: sbx.Namespace, Name: sbx.Name, UID: string(sbx.UID)})
}

// namesPullSecrets says whether sbx's image is pulled with credentials.
func namesPullSecrets(sbx *playgroundv1alpha1.Sandbox) bool {
	return sbx.Spec.Image != nil && len(sbx.Spec.Image.PullSecrets) > 0
}
