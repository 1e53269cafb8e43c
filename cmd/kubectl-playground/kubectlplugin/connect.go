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

package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EndpointEnv names the environment variable that gives the MCP endpoint
// when --endpoint does not.
const EndpointEnv = "PLAYGROUND_ENDPOINT"

// gatewayLabels select the gateway's Service, as the chart and
// config/gateway label it.
var gatewayLabels = client.MatchingLabels{"app.kubernetes.io/name": "playground", "app.kubernetes.io/component": "gateway"}

// mcpEndpoint is the URL clients reach the gateway at, and where it was
// learnt. Only the operator knows the URL from outside the cluster (an
// Ingress, a load balancer, a port-forward): --endpoint or
// $PLAYGROUND_ENDPOINT says it. Without either, the gateway's Service in
// the lease namespace gives the address inside the cluster, said to be
// that; with none of these the endpoint is unknown ("").
func (x *cli) mcpEndpoint(ctx context.Context, flag string) (endpoint, note string, err error) {
	for _, given := range []struct{ value, from string }{{flag, "--endpoint"}, {os.Getenv(EndpointEnv), "$" + EndpointEnv}} {
		if given.value == "" {
			continue
		}
		u, err := url.Parse(given.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", "", fmt.Errorf("%s %q is not an http(s) URL such as https://playground.example.com/mcp", given.from, given.value)
		}
		return given.value, "from " + given.from, nil
	}
	if dev, err := x.devCluster(); err == nil && dev != nil && dev.MCPEndpoint != "" {
		return dev.MCPEndpoint, "playground-dev's, from its kubeconfig", nil
	}
	var list corev1.ServiceList
	if err := x.c.List(ctx, &list, client.InNamespace(x.leaseNamespace), gatewayLabels); err != nil || len(list.Items) != 1 {
		// Not allowed to look, or no single gateway: unknown.
		return "", "", nil //nolint:nilerr // an endpoint not found is not an error here
	}
	svc := &list.Items[0]
	port := int32(80)
	if len(svc.Spec.Ports) > 0 {
		port = svc.Spec.Ports[0].Port
	}
	host := svc.Name + "." + svc.Namespace + ".svc"
	if port != 80 {
		host += fmt.Sprintf(":%d", port)
	}
	note = fmt.Sprintf("inside the cluster, the Service %s/%s; from elsewhere: kubectl -n %s port-forward svc/%s 8080:%d, then --endpoint http://127.0.0.1:8080/mcp (or set $%s)",
		svc.Namespace, svc.Name, svc.Namespace, svc.Name, port, EndpointEnv)
	return "http://" + host + "/mcp", note, nil
}

// printClients prints the MCP endpoint and paste-ready configurations of
// the clients people use, with token (none: only the stdio ones, which
// need no token).
func printClients(w io.Writer, namespace, tenant, endpoint, note, token string) {
	server := "playground-" + tenant
	if endpoint == "" {
		fmt.Fprintf(w, "MCP endpoint: unknown here: give --endpoint URL or set $%s (playground-dev's is http://127.0.0.1:7080/mcp)\n", EndpointEnv)
	} else {
		fmt.Fprintf(w, "MCP endpoint: %s   (%s)\n", endpoint, note)
	}
	if endpoint != "" && token != "" {
		bearer := "Bearer " + token
		headers := map[string]string{"Authorization": bearer}
		fmt.Fprintf(w, "\nClaude Code:\n  claude mcp add --transport http %s %s --header %s\n", server, shellQuote(endpoint), shellQuote("Authorization: "+bearer))
		fmt.Fprintf(w, "\nCursor (~/.cursor/mcp.json):\n%s\n", indentJSON(map[string]any{"mcpServers": map[string]any{server: map[string]any{"url": endpoint, "headers": headers}}}))
		fmt.Fprintf(w, "\nVS Code (.vscode/mcp.json):\n%s\n", indentJSON(map[string]any{"servers": map[string]any{server: map[string]any{"type": "http", "url": endpoint, "headers": headers}}}))
	}
	stdio := "playground gateway --stdio --tenant " + namespace + "/" + tenant
	fmt.Fprintf(w, "\nstdio, for a Kubernetes user allowed to use the tenant (RBAC verb use; no token):\n  %s\n  claude mcp add %s -- %s\n", stdio, server, stdio)
}

func indentJSON(v any) string {
	b, _ := json.MarshalIndent(v, "  ", "  ") //nolint:errchkjson // maps of strings always marshal
	return "  " + string(b)
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellJoin is argv as one command line for /bin/sh that runs exactly it.
func shellJoin(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}
