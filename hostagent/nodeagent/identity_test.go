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

package nodeagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/rbactest"
)

// TestComponentsAreNoTenants: the manager may read every tenant's
// credential Secret (its generated RBAC; the gateway, which reads none,
// could be granted as much), yet neither's own token acts as a tenant at
// an agent: only the gateway's token bound to the node is a gateway's,
// and a user needs the explicit verb "use".
func TestComponentsAreNoTenants(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "components")
	token := serviceAccounts(t, ns, "gateway", "manager")
	for _, c := range []string{"gateway", "manager"} {
		if _, err := rbactest.Grant(ctx, k8s, cp.Config, c, "system:serviceaccount:"+ns+":"+c, rbactest.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, "components-a", "", "", func(o *nodeagent.Options) {
		o.TrustedGateways = []string{"system:serviceaccount:" + ns + ":gateway"}
		o.TrustedManagers = []string{"system:serviceaccount:" + ns + ":manager"}
	})
	createSandbox(t, ns, "x", n.name)
	waitProvisioned(t, ns, "x")
	// One transport for the test's clients, as one process keeps one:
	// the agent bounds the connections a source holds.
	rt := agentapi.NewTransport(nil)
	open := func(bearer string) error {
		c, err := agentapi.NewClient(n.endpoint, bearer, rt)
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Open(ctx, ns+"/x", idOf(t, ns, "x"))
		if err == nil {
			_ = c.Close(ctx, ns+"/x", h.ID)
		}
		return err
	}
	g := NewWithT(t)
	// The manager may read the tenant's credential Secret: that is no
	// grant.
	g.Expect(rbactest.AwaitAllowed(ctx, cp.Config, "system:serviceaccount:"+ns+":manager", nil, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "get", Resource: "secrets", Name: playgroundv1alpha1.CredentialSecretName("x"),
	})).To(Succeed())
	g.Expect(open(token("gateway", agentapi.NodeAudience(n.name)))).To(Succeed(), "the gateway, with its token for this node")
	g.Expect(agentapi.CodeOf(open(token("gateway")))).To(Equal(agentapi.CodeUnauth), "the gateway's own token")
	g.Expect(agentapi.CodeOf(open(token("manager")))).To(Equal(agentapi.CodeUnauth), "the manager's own token")
	g.Expect(agentapi.CodeOf(open(token("manager", agentapi.NodeAudience(n.name))))).To(Equal(agentapi.CodeForbidden), "the manager's token for this node")

	// Brokered egress credentials come from the trusted manager, with its
	// token for this node, and from no gateway.
	deliver := func(bearer string) error {
		c, err := agentapi.NewClient(n.endpoint, bearer, rt)
		if err != nil {
			t.Fatal(err)
		}
		return c.SetEgressCredentials(ctx, ns+"/x", idOf(t, ns, "x"), []agentapi.EgressCredential{{Host: "api.test", Header: "Authorization", Value: "Bearer k"}})
	}
	g.Expect(agentapi.CodeOf(deliver(token("gateway", agentapi.NodeAudience(n.name))))).To(Equal(agentapi.CodeForbidden), "a gateway delivering credentials")
	g.Expect(agentapi.CodeOf(deliver(token("manager")))).To(Equal(agentapi.CodeUnauth), "the manager's own token")
	g.Expect(agentapi.CodeOf(deliver(token("manager", agentapi.NodeAudience("components-b"))))).To(Equal(agentapi.CodeUnauth), "the manager's token for another node")
	g.Expect(deliver(token("manager", agentapi.NodeAudience(n.name)))).To(Succeed(), "the manager, with its token for this node")

	// So do signing keys, and only for a Sandbox of this node, by its UID,
	// that names one; the key then is the sandbox's /pile/self.key.
	var sbx playgroundv1alpha1.Sandbox
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &sbx)).To(Succeed())

	// And registry credentials, for a Sandbox of this node that names
	// pull Secrets.
	pull := func(bearer string) error {
		c, err := agentapi.NewClient(n.endpoint, bearer, rt)
		if err != nil {
			t.Fatal(err)
		}
		return c.SetImageCredentials(ctx, agentapi.ImageCredentialsRequest{Namespace: ns, Name: "x", UID: string(sbx.UID),
			Configs: [][]byte{[]byte(`{"auths":{"registry.test":{"auth":"dTpw"}}}`)}})
	}
	g.Expect(agentapi.CodeOf(pull(token("gateway", agentapi.NodeAudience(n.name))))).To(Equal(agentapi.CodeForbidden), "a gateway delivering registry credentials")
	g.Expect(agentapi.CodeOf(pull(token("manager", agentapi.NodeAudience("components-b"))))).To(Equal(agentapi.CodeUnauth), "the manager's token for another node")
	g.Expect(agentapi.CodeOf(pull(token("manager", agentapi.NodeAudience(n.name))))).To(Equal(agentapi.CodeInvalid), "credentials for a Sandbox that names no pull Secret")
	key := strings.Repeat("ab", 32)
	give := func(bearer, uid string) error {
		c, err := agentapi.NewClient(n.endpoint, bearer, rt)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.SetSigningKey(ctx, agentapi.SigningKeyRequest{Namespace: ns, Name: "x", UID: uid, Key: key})
		return err
	}
	manager := token("manager", agentapi.NodeAudience(n.name))
	g.Expect(agentapi.CodeOf(give(token("gateway", agentapi.NodeAudience(n.name)), string(sbx.UID)))).To(Equal(agentapi.CodeForbidden), "a gateway delivering a key")
	g.Expect(agentapi.CodeOf(give(token("manager", agentapi.NodeAudience("components-b")), string(sbx.UID)))).To(Equal(agentapi.CodeUnauth), "the manager's token for another node")
	g.Expect(agentapi.CodeOf(give(manager, "not-its-uid"))).To(Equal(agentapi.CodeNotFound), "a key for another incarnation of the Sandbox")
	g.Expect(agentapi.CodeOf(give(manager, string(sbx.UID)))).To(Equal(agentapi.CodeInvalid), "a key for a Sandbox that names none")
	patch := client.MergeFrom(sbx.DeepCopy())
	sbx.Spec.Pile.SigningKey = &playgroundv1alpha1.SigningKeySource{SecretName: "x-key"}
	g.Expect(k8s.Patch(ctx, &sbx, patch)).To(Succeed())
	g.Eventually(func() error { return give(manager, string(sbx.UID)) }, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	c, err := agentapi.NewClient(n.endpoint, token("gateway", agentapi.NodeAudience(n.name)), nil)
	g.Expect(err).NotTo(HaveOccurred())
	h, err := c.Open(ctx, ns+"/x", idOf(t, ns, "x"))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := c.Exec(ctx, ns+"/x", h.ID, agentapi.ExecRequest{Command: "cat /pile/self.key"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal(key))
}

// TestCallerIdentity: the agent knows its callers by their Kubernetes
// identity. A trusted gateway's token bound to this node may act as any
// tenant; the same gateway's token bound to another node, or its
// unbound one, may not; another node's agent is no gateway here; a user
// may act only as a tenant its RBAC lets it "use", asked on every
// request, so a forged tenant is refused and a removed RoleBinding stops
// it at the next request.
func TestCallerIdentity(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "identities")
	token := serviceAccounts(t, ns, "gateway", "agent-of-b", "alice")
	var trailed syncBuffer
	trail := audit.New(audit.LevelRequest, "agent", audit.Writer("stdout", &trailed, 0))
	n := startNode(t, "ids-a", "", "", func(o *nodeagent.Options) {
		o.TrustedGateways = []string{"system:serviceaccount:" + ns + ":gateway"}
		o.Audit = trail
	})
	createSandbox(t, ns, "x", n.name)
	createSandbox(t, ns, "y", n.name)
	waitProvisioned(t, ns, "x")
	waitProvisioned(t, ns, "y")

	// One transport for the test's clients, as one process keeps one:
	// the agent bounds the connections a source holds.
	rt := agentapi.NewTransport(nil)
	open := func(bearer, tenant string) error {
		c, err := agentapi.NewClient(n.endpoint, bearer, rt)
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Open(ctx, ns+"/"+tenant, idOf(t, ns, tenant))
		if err == nil {
			_ = c.Close(ctx, ns+"/"+tenant, h.ID)
		}
		return err
	}
	g := NewWithT(t)

	gateway := token("gateway", agentapi.NodeAudience(n.name))
	g.Expect(open(gateway, "x")).To(Succeed(), "the trusted gateway, bound to this node")
	g.Expect(open(gateway, "y")).To(Succeed(), "the trusted gateway acts as any tenant")
	g.Expect(agentapi.CodeOf(open(token("gateway", agentapi.NodeAudience("ids-b")), "x"))).To(Equal(agentapi.CodeUnauth), "the gateway's token for node B")
	g.Expect(agentapi.CodeOf(open(token("gateway"), "x"))).To(Equal(agentapi.CodeUnauth), "the gateway's unbound token acts as no tenant")
	g.Expect(agentapi.CodeOf(open(token("agent-of-b", agentapi.NodeAudience(n.name)), "x"))).To(Equal(agentapi.CodeForbidden), "another node's agent")
	g.Expect(agentapi.CodeOf(open("not-a-token", "x"))).To(Equal(agentapi.CodeUnauth))

	alice := token("alice")
	err := open(alice, "x")
	g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeForbidden))
	g.Expect(err.Error()).To(ContainSubstring(`may not use tenant ` + ns + `/x on this agent: it needs the RBAC verb "use"`))

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "use-x"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{playgroundv1alpha1.GroupVersion.Group}, Resources: []string{"tenants"}, ResourceNames: []string{"x"}, Verbs: []string{"use"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-uses-x"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "alice"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "use-x"}}
	g.Expect(k8s.Create(ctx, role)).To(Succeed())
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	g.Eventually(func() error { return open(alice, "x") }).WithTimeout(timeout).Should(Succeed(), "alice, granted use of x")
	g.Expect(agentapi.CodeOf(open(alice, "y"))).To(Equal(agentapi.CodeForbidden), "alice naming a tenant she may not use")

	g.Expect(k8s.Delete(ctx, binding)).To(Succeed())
	g.Eventually(func() agentapi.Code { return agentapi.CodeOf(open(alice, "x")) }).WithTimeout(timeout).Should(Equal(agentapi.CodeForbidden), "alice, her RoleBinding removed")

	// The agent records the calls of users who reach it directly, allowed
	// or not, with who they are; a trusted gateway's calls are the
	// gateway's to record.
	g.Expect(trail.Close()).To(Succeed())
	rep, err := audit.Verify(strings.NewReader(trailed.String()))
	g.Expect(err).NotTo(HaveOccurred())
	var recs []audit.Record
	for _, line := range strings.Split(strings.TrimSpace(trailed.String()), "\n") {
		var r audit.Record
		g.Expect(json.Unmarshal([]byte(line), &r)).To(Succeed())
		recs = append(recs, r)
	}
	g.Expect(rep.Records).To(Equal(len(recs)))
	aliceUser := "system:serviceaccount:" + ns + ":alice"
	g.Expect(recs).To(ContainElement(And(HaveField("Identity", aliceUser), HaveField("Tenant", ns+"/x"), HaveField("Tool", "handles"),
		HaveField("Outcome", "ok"), HaveField("Node", n.name), HaveField("Component", "agent"))), "alice's open, granted")
	g.Expect(recs).To(ContainElement(And(HaveField("Identity", aliceUser), HaveField("Tenant", ns+"/y"), HaveField("Outcome", "error"),
		HaveField("Code", string(agentapi.CodeForbidden)))), "alice naming a tenant she may not use")
	for _, r := range recs {
		g.Expect(r.Identity).NotTo(Equal("system:serviceaccount:"+ns+":gateway"), "a trusted gateway's call in the agent's trail: %+v", r)
	}
}

// syncBuffer is a bytes.Buffer that an audit sink writes from its own
// goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serviceAccounts creates the ServiceAccounts of ns and returns a minter of
// their tokens, for audiences (none: the API server's).
func serviceAccounts(t *testing.T, ns string, names ...string) func(sa string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	for _, sa := range names {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return func(sa string, audiences ...string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
}
