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
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/tokenfile"
)

// maxAgents bounds the agent clients kept: one per node's endpoint.
const maxAgents = 4096

// agentPool keeps one client per agent endpoint over shared HTTP/2
// transports (cleartext h2c for http:// endpoints, TLS for https://), so
// calls to a node share a connection.
type agentPool struct {
	creds AgentCredentials
	h2c   http.RoundTripper
	tls   http.RoundTripper
	// cleartext allows http:// endpoints (playground-dev); otherwise they
	// are refused, since a node's token would cross the network in clear.
	cleartext bool

	// ca, when set, verifies https:// agents instead of tls, with a
	// transport per node and endpoint (the certificate must name both).
	ca *AgentCA

	mu         sync.Mutex
	clients    map[string]pooledAgent
	transports map[string]*http.Transport
}

type pooledAgent struct {
	token  string
	client *agentapi.Client
}

// newAgentPool returns a pool presenting the credentials of creds;
// tlsConfig verifies https:// agents (nil: the system's roots).
// ca, when not nil, takes its place. http:// agents are refused unless
// cleartext.
func newAgentPool(creds AgentCredentials, tlsConfig *tls.Config, ca *AgentCA, cleartext bool) *agentPool {
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &agentPool{
		creds:      creds,
		h2c:        agentapi.NewTransport(nil),
		tls:        agentapi.NewTransport(tlsConfig),
		ca:         ca,
		cleartext:  cleartext,
		clients:    map[string]pooledAgent{},
		transports: map[string]*http.Transport{},
	}
}

// client returns the client of the agent of node at endpoint, presenting
// the current token for it (a renewed or rotated token takes effect here).
func (p *agentPool) client(ctx context.Context, node, endpoint string) (*agentapi.Client, error) {
	if !strings.HasPrefix(endpoint, "https://") && !p.cleartext {
		return nil, fmt.Errorf("%w: node %s registered %q", errCleartextAgent, node, endpoint)
	}
	tok, err := p.creds.Token(ctx, node)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Keyed by node too: a certificate is checked against the node whose
	// agent the endpoint is registered for.
	key := node + " " + endpoint
	if c, ok := p.clients[key]; ok && c.token == tok {
		return c.client, nil
	}
	rt := p.h2c
	if strings.HasPrefix(endpoint, "https://") {
		rt = p.tls
		if p.ca != nil {
			u, err := url.Parse(endpoint)
			if err != nil {
				return nil, err
			}
			tr, ok := p.transports[key]
			if !ok {
				tr = agentapi.NewTransport(p.ca.tlsConfigFor(node, u.Hostname()))
				p.transports[key] = tr
			}
			rt = tr
		}
	}
	c, err := agentapi.NewClient(endpoint, tok, rt)
	if err != nil {
		return nil, err
	}
	if len(p.clients) >= maxAgents {
		clear(p.clients)
		for _, tr := range p.transports {
			tr.CloseIdleConnections()
		}
		clear(p.transports)
	}
	p.clients[key] = pooledAgent{token: tok, client: c}
	return c, nil
}

// AgentClients are clients of the agents' API for a component other than
// the gateway (the manager, which delivers brokered egress credentials):
// the same verification of each agent's node-bound certificate and the
// same tokens, minted for each node.
type AgentClients struct{ pool *agentPool }

// NewAgentClients returns clients presenting creds (else the shared
// token) and verifying https:// agents against ca; http:// agents are
// refused unless cleartext.
func NewAgentClients(creds AgentCredentials, shared func() (string, error), ca *AgentCA, cleartext bool) (*AgentClients, error) {
	c, err := agentCredentials(creds, shared)
	if err != nil {
		return nil, err
	}
	return &AgentClients{pool: newAgentPool(c, nil, ca, cleartext)}, nil
}

// Client is the client of node's agent at endpoint.
func (a *AgentClients) Client(ctx context.Context, node, endpoint string) (*agentapi.Client, error) {
	return a.pool.client(ctx, node, endpoint)
}

// errCleartextAgent refuses an agent endpoint that is not https://: only
// playground-dev, whose agent shares its process and loopback, speaks
// cleartext (Options.AgentCleartext).
var errCleartextAgent = errors.New("refusing an agent endpoint without TLS: the gateway's token for the node would cross the network in clear (only playground-dev allows it)")

// tokenRecheck is how often, at most, FileToken re-reads its file.
const tokenRecheck = 2 * time.Second

// FileToken returns a token source reading path (package tokenfile's
// format), re-read when the file changes (a mounted Secret is updated in
// place), checked at most every few seconds. The token is the file's first:
// agents accept every token of the same file, so a rotation writes the new
// token first and keeps the old one below it until every agent has
// reloaded, and no call is refused in between. A file that goes bad (gone,
// emptied) keeps the previous token, as the agents keep theirs, and says so
// to log (nil: not logged).
func FileToken(path string, log logr.Logger) func() (string, error) {
	var (
		mu      sync.Mutex
		file    *tokenfile.File
		checked time.Time
	)
	return func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if file == nil {
			f, err := tokenfile.Open(path, 0)
			if err != nil {
				return "", fmt.Errorf("reading the agent token: %w", err)
			}
			if len(f.Tokens()) == 0 {
				return "", fmt.Errorf("reading the agent token: token file %s %w", path, tokenfile.ErrNoToken)
			}
			file, checked = f, time.Now()
		} else if time.Since(checked) >= tokenRecheck {
			checked = time.Now()
			if changed, err := file.Reload(false); err != nil {
				log.Error(err, "Re-reading the agent token; presenting the previous one")
			} else if changed {
				log.Info("Reloaded the agent token", "file", path)
			}
		}
		return file.Tokens()[0], nil
	}
}

// StaticToken returns a token source of a fixed token.
func StaticToken(token string) func() (string, error) {
	return func() (string, error) {
		if token == "" {
			return "", errors.New("no agent token is configured")
		}
		return token, nil
	}
}
