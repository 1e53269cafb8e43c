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

package agentserver

import (
	"context"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// PileKeeper keeps the piles the node retains of Sandboxes that are gone
// (the node agent's, which knows the node's records and its Sandbox
// objects).
type PileKeeper interface {
	RetainedPiles(ctx context.Context, namespace string) (agentapi.Piles, error)
	RemovePile(ctx context.Context, namespace, name string) (agentapi.RemovedPile, error)
}

// SetPiles makes the server answer the pile calls with p; call it before
// serving.
func (s *Server) SetPiles(p PileKeeper) { s.piles = p }

// mayAccess checks that the request's caller may do what attrs say: the
// manager may; a gateway, which serves tenants, may not; a user as its
// RBAC allows.
func (s *Server) mayAccess(r *http.Request, attrs authorizationv1.ResourceAttributes) error {
	c, ok := r.Context().Value(callerKey{}).(Caller)
	switch {
	case !ok:
		return errNoCredential
	case c.Manager:
		return nil
	case c.Gateway:
		return &agentapi.Error{Code: agentapi.CodeForbidden, Message: "a gateway serves tenants and acts on no pile: piles are listed and removed by users their RBAC allows, or by the manager"}
	case s.identities == nil:
		return errNoCredential
	}
	return s.identities.MayAccess(r.Context(), c, attrs)
}

// sandboxAttributes are the RBAC attributes of verb on the Sandboxes of
// namespace ("": every namespace), or on the one named name.
func sandboxAttributes(verb, namespace, name string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: playgroundv1alpha1.GroupVersion.Group, Resource: "sandboxes", Name: name}
}

// retainedPiles lists the node's retained piles: for a user allowed to
// list the Sandboxes of the namespace asked about.
func (s *Server) retainedPiles(r *http.Request) (any, error) {
	var req agentapi.PilesRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if err := s.mayAccess(r, sandboxAttributes("list", req.Namespace, "")); err != nil {
		return nil, err
	}
	if s.piles == nil {
		return nil, errNoPiles
	}
	return s.piles.RetainedPiles(r.Context(), req.Namespace)
}

// removePile removes a retained pile: for a user allowed to delete the
// Sandbox it was kept of.
func (s *Server) removePile(r *http.Request) (any, error) {
	var req agentapi.RemovePileRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if req.Namespace == "" || req.Name == "" {
		return nil, &agentapi.Error{Code: agentapi.CodeInvalid, Message: "the request names no Sandbox: give its namespace and name"}
	}
	noteRequest(r.Context(), req.Namespace+"/"+req.Name, &req)
	if err := s.mayAccess(r, sandboxAttributes("delete", req.Namespace, req.Name)); err != nil {
		return nil, err
	}
	if s.piles == nil {
		return nil, errNoPiles
	}
	return s.piles.RemovePile(r.Context(), req.Namespace, req.Name)
}

var errNoPiles = &agentapi.Error{Code: agentapi.CodeUnavailable, Message: "this agent keeps no record of piles (it runs without its Kubernetes side)"}
