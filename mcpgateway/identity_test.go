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

package mcpgateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/mcpgateway"
)

// TestNodeBoundAgentTokens: a gateway that presents its ServiceAccount's
// tokens serves tenants on agents that trust only that identity, with no
// shared token anywhere, and the token one agent received opens no other
// agent: root on one node learns nothing that works on the next.
func TestNodeBoundAgentTokens(t *testing.T) {
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	saNS := newNamespace(t)
	if _, err := cs.CoreV1().ServiceAccounts(saNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gateway"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	identity := "system:serviceaccount:" + saNS + ":gateway"

	var mu sync.Mutex
	received := map[string]string{} // by node: the last bearer token its agent received
	record := func(node *string) func(http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				received[*node] = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
				mu.Unlock()
				next.ServeHTTP(w, r)
			})
		}
	}
	var nameA, nameB string
	a := startNodeWith(t, nodeOptions{leaseNS: "playground-system", protocol: agentapi.Current.String(), trust: []string{identity}, wrap: record(&nameA)})
	b := startNodeWith(t, nodeOptions{leaseNS: "playground-system", protocol: agentapi.Current.String(), trust: []string{identity}, wrap: record(&nameB)})
	nameA, nameB = a.name, b.name

	g := startGateway(t, mcpgateway.Options{AgentCredentials: mcpgateway.ServiceAccountTokensOf(cs, saNS, "gateway", 0)})
	g.waitReady(t)
	ns := newNamespace(t)
	for _, n := range []*node{a, b} {
		tn := newTenant(t, ns, "on-"+n.name, n)
		cl := connect(t, g.url, tn.token, nil)
		if out := execOK(t, cl, openServed(t, cl), "echo served"); out != "served\n" {
			t.Fatalf("on %s: %q", n.name, out)
		}
	}

	mu.Lock()
	tokA, tokB := received[a.name], received[b.name]
	mu.Unlock()
	if tokA == "" || tokB == "" || tokA == tokB {
		t.Fatalf("the agents received tokens %q and %q: want one of its own each", tokA, tokB)
	}
	// A's token, replayed against B (as root on node A could), is refused.
	c, err := agentapi.NewClient(b.endpoint, tokA, nil)
	if err != nil {
		t.Fatal(err)
	}
	tenantB := ns + "/on-" + b.name
	sandboxB := sandboxids.New() // refused before any lookup: any ID will do
	if _, err := c.Open(ctx, tenantB, sandboxB); agentapi.CodeOf(err) != agentapi.CodeUnauth {
		t.Fatalf("node A's token against node B: %v, want unauthenticated", err)
	}
	// And a shared token is nothing to these agents.
	c, _ = agentapi.NewClient(b.endpoint, agentToken, nil)
	if _, err := c.Open(ctx, tenantB, sandboxB); agentapi.CodeOf(err) != agentapi.CodeUnauth {
		t.Fatalf("the shared test token against an identity-only agent: %v", err)
	}
}
