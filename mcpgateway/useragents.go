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

	"k8s.io/client-go/rest"

	"github.com/go-logr/logr"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// UserAgents reaches the agent of a tenant's sandbox as a Kubernetes user,
// the way a stdio gateway does: it presents the user's own token, which the
// agent checks with a SubjectAccessReview (the verb use on the Tenant), and
// verifies the agent's certificate against the CA bundle it is given, for
// the sandbox's node. A user's own tools (kubectl playground exec) go this
// way; call Authorize first for a clear refusal before any agent is asked.
type UserAgents struct {
	pool *agentPool
}

// NewUserAgents presents token to the agents and verifies them against ca;
// http:// agents are refused unless cleartext (playground-dev).
func NewUserAgents(token func() (string, error), ca *AgentCA, cleartext bool) (*UserAgents, error) {
	creds, err := agentCredentials(nil, token)
	if err != nil {
		return nil, err
	}
	return &UserAgents{pool: newAgentPool(creds, nil, ca, cleartext)}, nil
}

// Sandbox returns the ID of the sandbox and the client of its node's
// agent, or why the sandbox cannot serve now. Without the agents'
// registrations (a user may not read them) the client speaks this
// release's protocol, as a stdio gateway does.
func (u *UserAgents) Sandbox(ctx context.Context, sbx *playgroundv1alpha1.Sandbox) (string, *agentapi.Client, error) {
	if err := sandboxUsable(sbx); err != nil {
		return "", nil, err
	}
	c, err := u.pool.client(ctx, sbx.Spec.NodeName, sbx.Status.Endpoint)
	if err != nil {
		return "", nil, err
	}
	return sbx.Status.SandboxID, c, nil
}

// Node returns the client of node's agent at endpoint (its registration
// says it), for the calls that name no sandbox: its retained piles.
func (u *UserAgents) Node(ctx context.Context, node, endpoint string) (*agentapi.Client, error) {
	return u.pool.client(ctx, node, endpoint)
}

// KubeconfigToken is the bearer token of a kubeconfig, which a user's tools
// present to the agents as the user's identity.
func KubeconfigToken(cfg *rest.Config) (func() (string, error), error) {
	switch {
	case cfg.BearerTokenFile != "":
		return FileToken(cfg.BearerTokenFile, logr.Discard()), nil
	case cfg.BearerToken != "":
		return func() (string, error) { return cfg.BearerToken, nil }, nil
	}
	return nil, errors.New("the host agents check your kubeconfig's bearer token with the API server (may you use the tenant?), and this kubeconfig has none (a client certificate or an exec plugin cannot be presented): use a token, e.g. from kubectl create token, or give --agent-token-file")
}
