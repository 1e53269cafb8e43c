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

package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// tokenInfoTenant is the key of the caller's tenant in the TokenInfo that
// the HTTP middleware attaches to each request.
const tokenInfoTenant = "playground.dev/tenant"

// router resolves each call to the caller's tenant, that tenant's Sandbox
// (same name, same namespace) and the agent serving it. The tenant comes
// from the credential (HTTP) or the authorised --tenant (stdio), never from
// tool arguments. A tenant has exactly one sandbox, so sending its handles
// and job IDs to that sandbox's agent, with the tenant named, is the whole
// scope check the gateway can make without state; the agent then answers
// not_found for a handle or job of any other tenant.
type router struct {
	view   *clusterview.View
	agents *agentPool
	log    logr.Logger
	// fixed is the tenant of a stdio gateway; authorize re-checks it.
	fixed     *clusterview.Identity
	authorize func(context.Context) error
	// trustRegistrations sends the agent token only to the endpoint the
	// sandbox's node registered (HTTP mode; a stdio caller reads with its
	// own credentials and may not see the agents' Leases).
	trustRegistrations bool
}

// errNotAuthenticated should not happen: the middleware refuses requests
// without a tenant.
var errNotAuthenticated = errors.New("unauthenticated: the request carries no tenant credential; connect with your tenant's bearer token")

func (r *router) identity(req *mcp.CallToolRequest) (clusterview.Identity, error) {
	if r.fixed != nil {
		return *r.fixed, nil
	}
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return clusterview.Identity{}, errNotAuthenticated
	}
	id, ok := req.Extra.TokenInfo.Extra[tokenInfoTenant].(clusterview.Identity)
	if !ok || id.Name == "" {
		return clusterview.Identity{}, errNotAuthenticated
	}
	return id, nil
}

func (r *router) Route(ctx context.Context, req *mcp.CallToolRequest) (tools.Route, error) {
	id, err := r.identity(req)
	if err != nil {
		return tools.Route{}, err
	}
	if r.authorize != nil {
		if err := r.authorize(ctx); err != nil {
			return tools.Route{}, fmt.Errorf("unauthenticated: %w", err)
		}
	}
	return r.routeTenant(ctx, id)
}

// routeTenant resolves an authenticated tenant to its sandbox and agent.
func (r *router) routeTenant(ctx context.Context, id clusterview.Identity) (tools.Route, error) {
	// Re-check the tenant at the call: suspension and deletion take effect
	// on the next call, also in stdio mode and on long-lived streams.
	t, err := r.view.Tenant(id)
	if err != nil {
		return tools.Route{}, tenantError(err)
	}
	if c := clusterview.CatalogOf(t); c != playgroundv1alpha1.CatalogSandbox {
		return tools.Route{}, fmt.Errorf("unauthenticated: tenant %s is now served the %q catalog, not the sandbox tools: reconnect", id, c)
	}
	sandboxID, agent, err := r.agentFor(ctx, id)
	if err != nil {
		return tools.Route{}, err
	}
	var node, digest string
	if sbx, ok := r.view.Sandbox(id); ok {
		node = sbx.Spec.NodeName
		if sbx.Spec.Image != nil && sbx.Status.Image != nil {
			digest = sbx.Status.Image.Digest
		}
	}
	return tools.Route{Tenant: id.String(), SandboxID: sandboxID, Node: node, ImageDigest: digest, Agent: agent,
		Extended: clusterview.ToolsOf(t) == playgroundv1alpha1.ToolSetExtended}, nil
}

// agentFor resolves a tenant to its sandbox's ID and the client of its
// node's agent, refusing an agent whose Lease advertises a protocol this
// gateway does not speak.
func (r *router) agentFor(ctx context.Context, id clusterview.Identity) (string, *agentapi.Client, error) {
	sbx, ok := r.view.Sandbox(id)
	if !ok {
		return "", nil, fmt.Errorf("%s: your sandbox has not been created yet: the Tenant's controller creates it; retry in a few seconds, and if it persists ask the operator to check the Tenant %s", agentapi.CodeUnavailable, id)
	}
	if err := sandboxUsable(sbx); err != nil {
		return "", nil, err
	}
	// Without registrations (stdio) the agent's version is not known here:
	// the agent refuses a client of another version itself.
	if r.trustRegistrations {
		reg, ok := r.view.Agent(ctx, sbx.Spec.NodeName)
		if !ok || reg.Endpoint != sbx.Status.Endpoint {
			return "", nil, fmt.Errorf("%s: your sandbox's node %s has no current agent registration at the sandbox's endpoint; retry in a few seconds, and if it persists ask the operator to check the node's agent", agentapi.CodeUnavailable, sbx.Spec.NodeName)
		}
		if err := agentapi.Check(reg.Protocol); err != nil {
			protocolRefused(err)
			r.log.Error(err, "Refusing an agent of another protocol", "node", reg.Node)
			return "", nil, fmt.Errorf("%s: your sandbox's node %s runs an agent this gateway cannot speak to (a deployment problem during an upgrade): retry later and tell the operator: %w", agentapi.CodeUnavailable, reg.Node, err)
		}
	}
	agent, err := r.agents.client(ctx, sbx.Spec.NodeName, sbx.Status.Endpoint)
	if err != nil {
		r.log.Error(err, "No agent client", "sandbox", id.String())
		return "", nil, fmt.Errorf("%s: the gateway cannot reach your sandbox's node right now (a deployment problem): retry later and tell the operator", agentapi.CodeUnavailable)
	}
	return sbx.Status.SandboxID, agent, nil
}

// sandboxUsable refuses a sandbox that cannot serve, with its own reason:
// the condition that says why, as its Sandbox's status has it (a tenant
// whose sandbox waits for a FacultyBundle hears which, not that no such
// sandbox exists). Otherwise the agent is asked and has the last word: a
// sandbox that is Detached, or whose node is briefly unhealthy, may well
// serve.
func sandboxUsable(s *playgroundv1alpha1.Sandbox) error {
	if s.DeletionTimestamp != nil || s.Status.Phase == playgroundv1alpha1.SandboxTerminating {
		return fmt.Errorf("%s: your sandbox is being deleted; ask the operator if that is unexpected", agentapi.CodeUnavailable)
	}
	// The agent's own report first: it says why it does not serve the
	// sandbox (waiting for faculties, a backend refusal, a first start),
	// and the manager's Ready repeats it a write later.
	prov := apimeta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
	if prov != nil && prov.Status != metav1.ConditionTrue {
		// A wait for a signing key that cannot come says why it cannot.
		if key := apimeta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.SigningKeyDeliveredCondition); prov.Reason == playgroundv1alpha1.ReasonWaitingForSigningKey &&
			key != nil && key.Status == metav1.ConditionFalse {
			return notReady(key)
		}
		return notReady(prov)
	}
	if s.Status.Endpoint == "" || s.Status.SandboxID == "" {
		ready := apimeta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		if ready == nil || ready.Status == metav1.ConditionTrue {
			ready = &metav1.Condition{Reason: playgroundv1alpha1.ReasonProvisioning, Message: "its node's agent has not reported it yet"}
		}
		return notReady(ready)
	}
	return nil
}

// maxConditionQuoted bounds how much of a condition's message a tool error
// quotes.
const maxConditionQuoted = 1024

// notReady is the tool error for a sandbox whose condition c is not True:
// its reason and message, and what the tenant can do.
func notReady(c *metav1.Condition) error {
	msg := c.Message
	if len(msg) > maxConditionQuoted {
		msg = strings.ToValidUTF8(msg[:maxConditionQuoted], "") + "..."
	}
	next := "retry in a few seconds; if it persists, ask the operator, who sees the same in kubectl playground status"
	switch c.Reason {
	case playgroundv1alpha1.ReasonBackendFailed, playgroundv1alpha1.ReasonInsufficientStorage, playgroundv1alpha1.ReasonNoEligibleNode,
		playgroundv1alpha1.ReasonFacultyUnavailable, playgroundv1alpha1.ReasonSigningKeyRefused,
		playgroundv1alpha1.ReasonImageRefused, playgroundv1alpha1.ReasonImagePathEscapes, playgroundv1alpha1.ReasonImageLinkEscapes,
		playgroundv1alpha1.ReasonImageThroughLink, playgroundv1alpha1.ReasonImageUnsupported, playgroundv1alpha1.ReasonImageTooLarge,
		playgroundv1alpha1.ReasonImageTooManyEntries, playgroundv1alpha1.ReasonImageDigestMismatch, playgroundv1alpha1.ReasonImageMalformed:
		// Retrying does not help until the spec, a Secret, a bundle, the
		// image or the node changes.
		next = "retrying does not help until it is fixed: ask the operator, who sees the same in kubectl playground status, then retry"
	}
	return fmt.Errorf("%s: your sandbox is not ready: %s: %s; %s", agentapi.CodeUnavailable, c.Reason, msg, next)
}

// tenantError describes a refused tenant to its own caller.
func tenantError(err error) error {
	var susp *clusterview.SuspendedError
	var cat *clusterview.WrongCatalogError
	switch {
	case errors.Is(err, clusterview.ErrNotReady):
		return fmt.Errorf("%s: the gateway cannot verify credentials right now (its view of the cluster is not current): retry in a few seconds", agentapi.CodeUnavailable)
	case errors.As(err, &susp), errors.As(err, &cat):
		return fmt.Errorf("unauthenticated: %w", err)
	case errors.Is(err, clusterview.ErrUnknownToken):
		return errors.New("unauthenticated: your tenant no longer exists or your credential was revoked; get the current token from the tenant's credential Secret")
	}
	return fmt.Errorf("%s: %w", agentapi.CodeUnavailable, err)
}
