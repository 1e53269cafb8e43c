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
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/playground-dev/playground/mcpgateway"
)

// TestSDKSessionsNotLogged: a stateless gateway's log at the default
// verbosity holds none of the MCP SDK's lines about sessions (it wrote
// several per request, naming no tenant: most of playground-dev's log);
// at --zap-log-level=1 they are there, for whoever debugs the protocol.
func TestSDKSessionsNotLogged(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	alice := newTenant(t, ns, "alice", n)
	for _, v := range []int{0, mcpgateway.SDKInfoVerbosity} {
		var mu sync.Mutex
		var lines []string
		log := funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, prefix+" "+args)
		}, funcr.Options{Verbosity: v})
		g := startGateway(t, mcpgateway.Options{Logger: log})
		g.waitReady(t)
		for range 3 {
			cs := connect(t, g.url, alice.token, nil)
			call(t, cs, "open_session", map[string]any{})
			cs.Close()
		}
		mu.Lock()
		all := strings.Join(lines, "\n")
		mu.Unlock()
		sessions := strings.Count(all, "server session connected")
		switch {
		case v == 0 && sessions > 0:
			t.Errorf("at verbosity 0 the gateway logged the SDK's sessions %d times:\n%s", sessions, all)
		case v > 0 && sessions == 0:
			t.Errorf("at verbosity %d the SDK's sessions are not in the log:\n%s", v, all)
		}
	}
}
