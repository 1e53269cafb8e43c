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
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// serviceAccountConfig returns a client configuration that authenticates
// as a new ServiceAccount: a Kubernetes user with only the RBAC the test
// grants.
func serviceAccountConfig(t *testing.T, ns, name string) *rest.Config {
	t.Helper()
	cfg, err := cp.ServiceAccountConfig(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stdioGateway runs ServeStdio over pipes, with options changed by with;
// the returned channel has its result.
func stdioGateway(t *testing.T, cfg *rest.Config, tn *tenant, reauth time.Duration, with ...func(*mcpgateway.StdioOptions)) (client *mcp.IOTransport, errc chan error) {
	t.Helper()
	id, err := mcpgateway.ParseTenant(tn.String())
	if err != nil {
		t.Fatal(err)
	}
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	errc = make(chan error, 1)
	opts := mcpgateway.StdioOptions{
		AgentCleartext: true, // the test's agents serve cleartext on loopback
		Config:         cfg, Tenant: id, AgentToken: mcpgateway.StaticToken(agentToken),
		ProgressInterval: 200 * time.Millisecond, ReauthorizeEvery: reauth,
	}
	for _, f := range with {
		f(&opts)
	}
	go func() {
		errc <- mcpgateway.ServeStdio(ctx, opts, &mcp.IOTransport{Reader: serverR, Writer: serverW})
		serverW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		clientW.Close()
		clientR.Close()
	})
	return &mcp.IOTransport{Reader: clientR, Writer: clientW}, errc
}

func testStdio(t *testing.T, alice *tenant) {
	ctx := context.Background()
	session := func(t *testing.T, cfg *rest.Config, reauth time.Duration, with ...func(*mcpgateway.StdioOptions)) *mcp.ClientSession {
		tr, errc := stdioGateway(t, cfg, alice, reauth, with...)
		c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		type result struct {
			cs  *mcp.ClientSession
			err error
		}
		done := make(chan result, 1)
		go func() {
			cs, err := c.Connect(cctx, tr, nil)
			done <- result{cs, err}
		}()
		select {
		case err := <-errc:
			t.Fatalf("the stdio gateway ended: %v", err)
		case r := <-done:
			if r.err != nil {
				t.Fatal(r.err)
			}
			t.Cleanup(func() { _ = r.cs.Close() })
			return r.cs
		}
		return nil
	}

	t.Run("administrator", func(t *testing.T) {
		cs := session(t, cp.Config, 0)
		res, err := cs.ListTools(ctx, nil)
		if err != nil || len(res.Tools) != len(tools.Names) {
			t.Fatalf("tools/list over stdio: %v, %d tools", err, len(res.Tools))
		}
		var open tools.OpenSessionOutput
		callOK(t, cs, "open_session", nil, &open)
		if open.SandboxID != alice.sandboxID {
			t.Fatalf("stdio opened %+v", open)
		}
		var ex tools.ExecOutput
		callOK(t, cs, "exec", map[string]any{"handle": open.Handle, "command": "echo over stdio"}, &ex)
		if ex.Stdout != "over stdio\n" {
			t.Fatalf("exec over stdio: %+v", ex)
		}
		callOK(t, cs, "close_session", map[string]any{"handle": open.Handle}, nil)
	})

	// --budget-* apply over stdio as over HTTP: a read reserves a whole
	// file and its base64, more than a budget of 1 MiB.
	t.Run("budget", func(t *testing.T) {
		cs := session(t, cp.Config, 0, func(o *mcpgateway.StdioOptions) {
			o.Budget = budget.Limits{BytesPerTenant: 1 << 20, Bytes: 1 << 20}
		})
		var open tools.OpenSessionOutput
		callOK(t, cs, "open_session", nil, &open)
		callErr(t, cs, "read", map[string]any{"handle": open.Handle, "path": "/etc/hostname"}, "too_large", "1 MiB")
	})

	t.Run("denied", func(t *testing.T) {
		cfg := serviceAccountConfig(t, alice.ns, "stdio-nobody")
		_, errc := stdioGateway(t, cfg, alice, 0)
		select {
		case err := <-errc:
			var denied *mcpgateway.DeniedError
			if !errors.As(err, &denied) {
				t.Fatalf("ServeStdio without RBAC: %v, want a DeniedError", err)
			}
			t.Logf("refused: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("ServeStdio did not refuse a user without RBAC")
		}
	})

	t.Run("use verb, then revoked", func(t *testing.T) {
		cfg := serviceAccountConfig(t, alice.ns, "stdio-user")
		cs := kubernetes.NewForConfigOrDie(cp.Config)
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: alice.ns, Name: "use-alice"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{playgroundv1alpha1.GroupVersion.Group}, Resources: []string{"tenants"}, ResourceNames: []string{alice.name}, Verbs: []string{"use", "get", "list", "watch"}},
				{APIGroups: []string{playgroundv1alpha1.GroupVersion.Group}, Resources: []string{"sandboxes"}, ResourceNames: []string{alice.name}, Verbs: []string{"get", "list", "watch"}},
			},
		}
		if _, err := cs.RbacV1().Roles(alice.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: alice.ns, Name: "use-alice"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: alice.ns, Name: "stdio-user"}},
		}
		if _, err := cs.RbacV1().RoleBindings(alice.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The API server's authorizer learns of a new RoleBinding from its
		// own watch, a moment after the create returns (longer on a loaded
		// machine): wait for it to answer yes before starting the gateway,
		// which asks once at start and refuses for good.
		id, err := mcpgateway.ParseTenant(alice.String())
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the API server to authorize the new RoleBinding", 30*time.Second, func() error {
			return mcpgateway.Authorize(ctx, cfg, id)
		})
		session := session(t, cfg, 200*time.Millisecond)
		var open tools.OpenSessionOutput
		callOK(t, session, "open_session", nil, &open)
		if err := cs.RbacV1().RoleBindings(alice.ns).Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "revoked RBAC to refuse calls", 10*time.Second, func() error {
			res := call(t, session, "exec", map[string]any{"handle": open.Handle, "command": "true"})
			if !res.IsError {
				return errNotYet
			}
			if msg := resultText(res); !containsAll(msg, "unauthenticated", "may not use tenant") {
				t.Fatalf("refusal: %s", msg)
			}
			return nil
		})
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
