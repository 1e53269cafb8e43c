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
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/agentserver"
	"github.com/playground-dev/playground/hostagent/agentserver/agentservertest"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/mcpgateway"
)

// The gateway tests run against one real kube-apiserver and etcd, and real
// host agents on runc sandboxes served over loopback. The gateways run with
// the rights of their generated RBAC (config/rbac/gateway) and no more,
// which include no tenant's Secret. The manager is not involved: the tests
// create Tenants, credential Secrets and Sandboxes, and write the Tenant
// and Sandbox status the manager and an agent would, and the manager's
// copies of workers' bearers (copyBearer).

const agentToken = "gateway-agent-token-for-tests"

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(controlplane.RunTests(m, func(c *controlplane.ControlPlane) (func(), error) {
		cp, k8s = c, c.Client
		return nil, cp.CreateNamespaces(context.Background(), agentlease.DefaultNamespace)
	}))
}

// node is one host agent on real runc sandboxes, its API on loopback,
// registered as an agent does (the gateway trusts only registered endpoints).
type node struct {
	name     string
	agent    *hostagent.Agent
	endpoint string
	budget   *budget.Limiter
}

var nodeSeq atomic.Int32

func startNode(t *testing.T) *node {
	t.Helper()
	return startNodeIn(t, agentlease.DefaultNamespace)
}

// startNodeIn starts a node whose agent registers in leaseNS.
func startNodeIn(t *testing.T, leaseNS string) *node {
	t.Helper()
	return startNodeWith(t, nodeOptions{leaseNS: leaseNS, protocol: agentapi.Current.String()})
}

// nodeOptions vary a node: the Lease namespace, the protocol version the
// agent advertises, and a wrapper that sees the requests it receives.
type nodeOptions struct {
	leaseNS  string
	protocol string
	wrap     func(http.Handler) http.Handler
	// trust, when set, makes the agent accept callers by Kubernetes
	// identity only, trusting these users as gateways: no shared token.
	trust []string
	// tls, when set, serves the agent API over TLS (an https endpoint).
	tls *tls.Config
}

func startNodeWith(t *testing.T, o nodeOptions) *node {
	t.Helper()
	ocitest.Require(t)
	agent, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{ocitest.New(t, "")}})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("gw-node-%d", nodeSeq.Add(1))
	shared := agentToken
	if o.trust != nil {
		shared = ""
	}
	endpoint, api := agentservertest.ServeWrappedTLS(t, agent, shared, o.tls, o.wrap, func(s *agentserver.Server) {
		if o.trust != nil {
			s.SetIdentities(&agentserver.KubeAuth{Client: kubernetes.NewForConfigOrDie(cp.Config), Audience: agentapi.NodeAudience(name), Gateways: o.trust})
		}
	})
	n := &node{name: name, agent: agent, endpoint: endpoint, budget: api.Budget()}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: o.leaseNS, Name: agentlease.Name(n.name)}}
	reg := agentlease.Registration{Node: n.name, Endpoint: n.endpoint, Protocol: o.protocol, Backends: []string{"oci"}, Duration: time.Hour}
	if err := reg.Apply(lease, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), lease) })
	return n
}

// tenant is a Tenant with its credential Secret (and the hash of its token
// published in its status) and, when placed on a node, its Sandbox.
type tenant struct {
	ns, name  string
	token     string
	sandboxID string
}

func (tn *tenant) String() string { return tn.ns + "/" + tn.name }

// newToken returns a token of the form the manager mints: "pgt_" and 256
// random bits in base64url.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "pgt_" + base64.RawURLEncoding.EncodeToString(b)
}

var nsSeq struct {
	sync.Mutex
	n int
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	nsSeq.Lock()
	nsSeq.n++
	name := fmt.Sprintf("gw-%d", nsSeq.n)
	nsSeq.Unlock()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// newTenant creates a Tenant and its credential Secret, and publishes the
// token's hash in the Tenant's status, as the manager does (in that order);
// and, with a node, its Sandbox: provisioned on the node's agent and with
// the status the agent and manager would write.
func newTenant(t *testing.T, ns, name string, n *node) *tenant {
	t.Helper()
	ctx := context.Background()
	tn := &tenant{ns: ns, name: name, token: newToken()}
	owner := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name),
			Labels:          map[string]string{playgroundv1alpha1.TenantLabel: name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, playgroundv1alpha1.GroupVersion.WithKind("Tenant"))},
		},
		Type: playgroundv1alpha1.CredentialSecretType,
		Data: map[string][]byte{playgroundv1alpha1.CredentialTokenKey: []byte(tn.token)},
	}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	tn.publish(t)
	if n == nil {
		return tn
	}
	tn.sandboxID = sandboxids.New()
	if err := n.agent.Ensure(ctx, backend.Spec{ID: tn.sandboxID, Tenant: ns + "/" + name, Persona: name}); err != nil {
		t.Fatal(err)
	}
	sbx := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{playgroundv1alpha1.TenantLabel: name}},
		Spec:       playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: name}, NodeName: n.name},
	}
	if err := k8s.Create(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	sbx.Status = playgroundv1alpha1.SandboxStatus{
		Phase: playgroundv1alpha1.SandboxReady, SandboxID: tn.sandboxID, Endpoint: n.endpoint,
	}
	apimeta.SetStatusCondition(&sbx.Status.Conditions, metav1.Condition{
		Type: playgroundv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: playgroundv1alpha1.ReasonReady, Message: "serving",
	})
	if err := k8s.Status().Update(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	return tn
}

// publish writes what the Tenant controller writes of the tenant's
// current token into its status: the Secret's name, the fingerprint and
// the hash the gateway authenticates against.
func (tn *tenant) publish(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var obj playgroundv1alpha1.Tenant
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: tn.name}, &obj); err != nil {
		t.Fatal(err)
	}
	hash := playgroundv1alpha1.TokenSHA256(tn.token)
	obj.Status.Credentials = playgroundv1alpha1.CredentialsStatus{
		SecretRef:   &playgroundv1alpha1.LocalObjectReference{Name: playgroundv1alpha1.CredentialSecretName(tn.name)},
		Fingerprint: hash[:16],
		TokenSHA256: hash,
	}
	if err := k8s.Status().Update(ctx, &obj); err != nil {
		t.Fatal(err)
	}
}

// rotate gives the tenant a new token, as the Tenant controller would: into
// its Secret, then its hash into the Tenant's status.
func (tn *tenant) rotate(t *testing.T) (old string) {
	t.Helper()
	var s corev1.Secret
	key := client.ObjectKey{Namespace: tn.ns, Name: playgroundv1alpha1.CredentialSecretName(tn.name)}
	if err := k8s.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	old, tn.token = tn.token, newToken()
	s.Data[playgroundv1alpha1.CredentialTokenKey] = []byte(tn.token)
	if err := k8s.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	tn.publish(t)
	return old
}

// gateway is one gateway replica serving on loopback.
type gateway struct {
	gw  *mcpgateway.Gateway
	srv *httptest.Server
	url string
}

// startGateway starts a gateway with opts; without a Config, it acts as the
// gateway's ServiceAccount with the generated rights, granted as the chart
// does for opts.Namespace and opts.LeaseNamespace.
func startGateway(t *testing.T, opts mcpgateway.Options) *gateway {
	t.Helper()
	if opts.Config == nil {
		opts.Config = gatewayConfig(t, opts.Namespace, opts.LeaseNamespace)
	}
	if opts.AgentToken == nil {
		opts.AgentToken = mcpgateway.StaticToken(agentToken)
	}
	// The tests' agents serve cleartext on loopback, unless the test
	// verifies agents (TLS, or a CA).
	opts.AgentCleartext = opts.AgentCA == nil && opts.AgentTLS == nil
	if opts.WorkerEndpoints.Allow == nil && opts.WorkerEndpoints.Deny == nil {
		// The tests' workers listen on loopback: the admin's grant.
		opts.WorkerEndpoints.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	if opts.ProgressInterval == 0 {
		opts.ProgressInterval = 200 * time.Millisecond
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testLogger(t)
	}
	gw, err := mcpgateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gw.Start(ctx)
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return &gateway{gw: gw, srv: srv, url: srv.URL + "/mcp"}
}

// gatewayConfig acts as the gateway's ServiceAccount, with its generated
// rules granted in namespace (a Role there; empty: a ClusterRole) and its
// Roles in leaseNS (empty: playground-system). Each such variant is a user
// of its own, so that it has those rights and no others.
func gatewayConfig(t *testing.T, namespace, leaseNS string) *rest.Config {
	t.Helper()
	user := rbactest.ServiceAccountUser("gateway")
	if namespace != "" || leaseNS != "" {
		user += "-in-" + namespace + "-leases-" + leaseNS
	}
	cfg, err := rbactest.Grant(context.Background(), k8s, cp.Config, "gateway", user,
		rbactest.Options{Namespace: namespace, RoleNamespace: leaseNS})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// waitReady waits until the gateway trusts its view.
func (g *gateway) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for g.gw.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not sync: %v", g.gw.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connect opens an MCP client session over Streamable HTTP with token.
func connect(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := connectErr(url, token, http.DefaultTransport, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func connectErr(url, token string, rt http.RoundTripper, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "v0"}, opts)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: rt}},
		MaxRetries: -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Connect(ctx, tr, nil)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

var errNotYet = errors.New("not yet")

// testLogger writes to t's output until t's cleanups run: the gateway's
// view goes on for a moment after its context is cancelled, and a write to
// a finished test's output panics.
func testLogger(t *testing.T) logr.Logger {
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	})
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			fmt.Fprintln(t.Output(), prefix, args)
		}
	}, funcr.Options{})
}
