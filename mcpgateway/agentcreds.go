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
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// AgentCredentials gives the bearer token the gateway presents to the
// agent of a node.
type AgentCredentials interface {
	Token(ctx context.Context, node string) (string, error)
}

// sharedToken presents one token to every agent (playground-dev; a stdio
// user's own).
type sharedToken func() (string, error)

func (f sharedToken) Token(context.Context, string) (string, error) { return f() }

// agentCredentials is creds, else the shared token, else an error.
func agentCredentials(creds AgentCredentials, shared func() (string, error)) (AgentCredentials, error) {
	switch {
	case creds != nil:
		return creds, nil
	case shared != nil:
		return sharedToken(shared), nil
	}
	return nil, errors.New("mcpgateway: the gateway has no credentials for the agents: its ServiceAccount's tokens, or a shared token")
}

// DefaultAgentTokenLifetime is how long a minted agent token lives; the
// gateway renews it at half its life.
const DefaultAgentTokenLifetime = time.Hour

// maxNodeTokens bounds the tokens kept, one per node.
const maxNodeTokens = 4096

// ServiceAccountTokens mints, for each node, a token of the gateway's own
// ServiceAccount bound to that node's agent (agentapi.NodeAudience)
// through the TokenRequest API, and renews it at half its life. A token
// one agent receives is then good against that agent only: root on one
// node learns nothing that opens another.
type ServiceAccountTokens struct {
	client    kubernetes.Interface
	namespace string
	name      string
	lifetime  time.Duration

	mu     sync.Mutex
	tokens map[string]mintedToken // by node
}

type mintedToken struct {
	token string
	renew time.Time
}

// NewServiceAccountTokens returns the token source of the ServiceAccount
// the client authenticates as (asked of the API server with a
// SelfSubjectReview), or an error when the client is not a ServiceAccount
// (a kubeconfig user, as in playground-dev: give it a shared token then).
func NewServiceAccountTokens(ctx context.Context, client kubernetes.Interface, lifetime time.Duration) (*ServiceAccountTokens, error) {
	ssr, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("asking the API server who the gateway is: %w", err)
	}
	user := ssr.Status.UserInfo.Username
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || name == "" {
		return nil, fmt.Errorf("the gateway runs as %q, not a ServiceAccount: it can mint no agent tokens (give it a shared agent token instead)", user)
	}
	return ServiceAccountTokensOf(client, ns, name, lifetime), nil
}

// ServiceAccountTokensOf returns the token source of a named
// ServiceAccount, for a gateway that runs outside the cluster with a
// kubeconfig allowed to create that ServiceAccount's tokens.
func ServiceAccountTokensOf(client kubernetes.Interface, namespace, name string, lifetime time.Duration) *ServiceAccountTokens {
	if lifetime <= 0 {
		lifetime = DefaultAgentTokenLifetime
	}
	return &ServiceAccountTokens{client: client, namespace: namespace, name: name, lifetime: lifetime, tokens: map[string]mintedToken{}}
}

// Identity is the ServiceAccount's user name, the one agents trust as a
// gateway.
func (s *ServiceAccountTokens) Identity() string {
	return "system:serviceaccount:" + s.namespace + ":" + s.name
}

// Token implements AgentCredentials.
func (s *ServiceAccountTokens) Token(ctx context.Context, node string) (string, error) {
	if node == "" {
		return "", errors.New("no node to mint an agent token for")
	}
	s.mu.Lock()
	if t, ok := s.tokens[node]; ok && time.Now().Before(t.renew) {
		s.mu.Unlock()
		return t.token, nil
	}
	s.mu.Unlock()
	seconds := int64(s.lifetime / time.Second)
	tr, err := s.client.CoreV1().ServiceAccounts(s.namespace).CreateToken(ctx, s.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{agentapi.NodeAudience(node)}, ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("minting the gateway's token for node %s: %w", node, err)
	}
	issued := time.Now()
	life := tr.Status.ExpirationTimestamp.Sub(issued)
	if life <= 0 || life > s.lifetime {
		life = s.lifetime
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tokens) >= maxNodeTokens {
		clear(s.tokens)
	}
	s.tokens[node] = mintedToken{token: tr.Status.Token, renew: issued.Add(life / 2)}
	return tr.Status.Token, nil
}
