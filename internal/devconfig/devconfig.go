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

// Package devconfig is what `playground-dev` tells the tools that read its
// kubeconfig (the kubectl plugin): an extension of the kubeconfig's
// cluster that says the cluster is a playground-dev on this machine, where
// its MCP endpoint and audit trail are. It loosens one thing only: an
// agent whose endpoint is cleartext on loopback may be reached, when the
// API server is on loopback too (ReachAgent). A real cluster's agents
// serve TLS, and a kubeconfig of a remote cluster that carries the
// extension still sends no token in clear off this machine.
package devconfig

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ExtensionName names the extension in the kubeconfig's cluster.
const ExtensionName = "dev.playground.dev"

// Extension is what playground-dev says of itself.
type Extension struct {
	// MCPEndpoint is the gateway's URL.
	MCPEndpoint string `json:"mcpEndpoint,omitempty"`
	// AuditLog is the file of the audit trail, the gateway's and the
	// agent's records.
	AuditLog string `json:"auditLog,omitempty"`
	// Metrics is the URL of the components' metrics.
	Metrics string `json:"metrics,omitempty"`
}

// Add puts ext in the cluster of kc's current context.
func Add(kc *clientcmdapi.Config, ext Extension) error {
	cluster, err := currentCluster(kc, "")
	if err != nil {
		return err
	}
	raw, err := json.Marshal(ext)
	if err != nil {
		return err
	}
	cluster.Extensions[ExtensionName] = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	return nil
}

// Find returns the extension of the cluster of kc's context (its current
// one when context is ""), or nil when that cluster has none.
func Find(kc *clientcmdapi.Config, context string) (*Extension, error) {
	cluster, err := currentCluster(kc, context)
	if err != nil {
		return nil, nil //nolint:nilerr // no cluster, no playground-dev
	}
	obj, ok := cluster.Extensions[ExtensionName]
	if !ok {
		return nil, nil
	}
	u, ok := obj.(*runtime.Unknown)
	if !ok {
		return nil, fmt.Errorf("the kubeconfig's extension %s is not a JSON object", ExtensionName)
	}
	var ext Extension
	if err := json.Unmarshal(u.Raw, &ext); err != nil {
		return nil, fmt.Errorf("the kubeconfig's extension %s: %w", ExtensionName, err)
	}
	return &ext, nil
}

func currentCluster(kc *clientcmdapi.Config, context string) (*clientcmdapi.Cluster, error) {
	if context == "" {
		context = kc.CurrentContext
	}
	ctx, ok := kc.Contexts[context]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig has no context %q", context)
	}
	cluster, ok := kc.Clusters[ctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig has no cluster %q", ctx.Cluster)
	}
	if cluster.Extensions == nil {
		cluster.Extensions = map[string]runtime.Object{}
	}
	return cluster, nil
}

// ReachAgent says whether a client of the API server at server may reach
// the agent at endpoint in cleartext as playground-dev's: both on loopback
// (an address of 127.0.0.0/8 or ::1), so that a token sent there never
// leaves this machine. The error says why not.
func ReachAgent(server, endpoint string) error {
	if !loopback(server) {
		return fmt.Errorf("its API server %s is not on this machine's loopback", server)
	}
	if !loopback(endpoint) {
		return fmt.Errorf("the agent %s is not on this machine's loopback", endpoint)
	}
	return nil
}

// loopback says whether rawURL's host is a loopback address (a name, even
// localhost, is not: what it resolves to is not this check's to trust).
func loopback(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}
