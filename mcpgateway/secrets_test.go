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
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/bearermirror"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/mcpgateway"
)

// serviceAccountToken is a real token of the gateway's ServiceAccount in
// playground-system (created if need be), as its pod would present: the
// API server authenticates it as rbactest.ServiceAccountUser("gateway").
func serviceAccountToken(t *testing.T) *rest.Config {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ns, name := agentlease.DefaultNamespace, "playground-gateway"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// TestGatewayReadsNoTenantSecret: the gateway's ServiceAccount, with the
// rights of its generated RBAC (a ClusterRole, or with --namespace a Role
// in the tenants' namespace), may not get, list or watch a tenant's token
// Secret, its signing-key Secret, nor the agent CA's Secret beside the
// copies in the lease namespace: a SubjectAccessReview says so, and so
// does the API server to a request with a real token of that
// ServiceAccount. Of Secrets it may read the manager's copies of workers'
// bearers, by name, and no other; and with that token (or with
// --namespace) it forwards a workers tenant to its worker with the copy of
// the bearer.
func TestGatewayReadsNoTenantSecret(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tn := newTenant(t, ns, "tess", nil)
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: playgroundv1alpha1.SigningKeySecretName(tn.name)},
		Type: playgroundv1alpha1.SigningKeySecretType, Data: map[string][]byte{playgroundv1alpha1.SigningKeySecretKey: []byte(strings.Repeat("ab", 32))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The agent CA's Secret, as the manager makes it (no manager runs here).
	caCert, caKey, err := agentpki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(agentlease.DefaultNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentpki.CASecretName},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: caCert, corev1.TLSPrivateKeyKey: caKey}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	type secret struct{ ns, name string }
	refused := []secret{
		{ns, playgroundv1alpha1.CredentialSecretName(tn.name)},
		{ns, playgroundv1alpha1.SigningKeySecretName(tn.name)},
		{agentlease.DefaultNamespace, agentpki.CASecretName},
		{ns, ""}, // every Secret of the tenants' namespace
		{agentlease.DefaultNamespace, ""},
		{"", ""}, // every Secret of the cluster
	}
	verbs := []string{"get", "list", "watch"}
	allowed := func(user string, s secret, verb string) bool {
		t.Helper()
		res, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: s.ns, Verb: verb, Resource: "secrets", Name: s.name},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Status.Allowed
	}
	gatewayConfig(t, "", "") // the ServiceAccount, with the ClusterRole
	gatewayConfig(t, ns, "") // another user, as with --namespace: a Role in ns
	for _, user := range []string{rbactest.ServiceAccountUser("gateway"), rbactest.ServiceAccountUser("gateway") + "-in-" + ns + "-leases-"} {
		for _, s := range refused {
			for _, verb := range verbs {
				if allowed(user, s, verb) {
					t.Errorf("%s may %s Secret %q of namespace %q", user, verb, s.name, s.ns)
				}
			}
		}
		// The copies of the bearers, and they only.
		for _, name := range bearermirror.SecretNames() {
			for _, verb := range verbs {
				if !allowed(user, secret{agentlease.DefaultNamespace, name}, verb) {
					t.Errorf("%s may not %s Secret %s of the lease namespace", user, verb, name)
				}
				if allowed(user, secret{ns, name}, verb) {
					t.Errorf("%s may %s Secret %s of a tenants' namespace", user, verb, name)
				}
			}
		}
		if allowed(user, secret{agentlease.DefaultNamespace, bearermirror.NamePrefix + "64"}, "get") {
			t.Errorf("%s may read a Secret past the copies", user)
		}
	}

	// What the API server answers a real token of the ServiceAccount.
	cfg := serviceAccountToken(t)
	as := kubernetes.NewForConfigOrDie(cfg)
	for _, s := range refused[:3] {
		if _, err := as.CoreV1().Secrets(s.ns).Get(ctx, s.name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the gateway's token gets Secret %s/%s: %v, want forbidden", s.ns, s.name, err)
		}
	}
	for _, s := range refused[3:5] {
		if _, err := as.CoreV1().Secrets(s.ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the gateway's token lists the Secrets of namespace %q: %v, want forbidden", s.ns, err)
		}
	}
	if _, err := as.CoreV1().Secrets(agentlease.DefaultNamespace).Get(ctx, bearermirror.SecretName(0), metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("the gateway's token gets the copies of bearers: %v", err)
	}

	// And with that token, a gateway forwards to a worker with the copy.
	w := startWorker(t)
	wt := newWorkersTenant(t, ns, "wes")
	m := newMapping(t, ns, "wes-worker", wt.name, serviceDest("wes-worker"), "wes-bearer", time.Minute)
	newBearerSecret(t, ns, "wes-bearer", "wes-internal-bearer")
	copyBearer(t, ns, m.Name, "wes-internal-bearer")
	reconcileMapping(t, m, true, "Ready", "forwarding", w.url())
	g := startGateway(t, mcpgateway.Options{Config: cfg})
	waitServes(t, g, wt.token)
	if got := whoami(t, g.url, wt.token); got != "Bearer wes-internal-bearer" {
		t.Fatalf("the worker saw %q", got)
	}
	// So does one with --namespace, and its Role there.
	g = startGateway(t, mcpgateway.Options{Namespace: ns})
	waitServes(t, g, wt.token)
	if got := whoami(t, g.url, wt.token); got != "Bearer wes-internal-bearer" {
		t.Fatalf("through a gateway with --namespace, the worker saw %q", got)
	}
}

// whoamiErr calls the test worker's whoami through the gateway at url in a
// session of its own: the Authorization the worker saw.
func whoamiErr(url, token string) (string, error) {
	cs, err := connectErr(url, token, http.DefaultTransport, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", errors.New(resultText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return "", err
	}
	var who struct{ Authorization string }
	err = json.Unmarshal(b, &who)
	return who.Authorization, err
}

func whoami(t *testing.T, url, token string) string {
	t.Helper()
	a, err := whoamiErr(url, token)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestWorkerBearerIsTheManagersCopy: the gateway presents to a service
// worker the manager's copy of its bearer and nothing else, whatever the
// team's Secret holds (the gateway cannot read it): without a copy it
// refuses and forwards nothing; a rotated copy is presented from the next
// request; a copy removed is presented no more.
func TestWorkerBearerIsTheManagersCopy(t *testing.T) {
	ns := newNamespace(t)
	w := startWorker(t)
	tn := newWorkersTenant(t, ns, "cora")
	newBearerSecret(t, ns, "cora-bearer", "what-the-teams-secret-holds")
	m := newMapping(t, ns, "cora-worker", tn.name, serviceDest("cora-worker"), "cora-bearer", time.Minute)
	reconcileMapping(t, m, true, "Ready", "forwarding", w.url())
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)

	refusedUntil := func(what string) {
		t.Helper()
		waitFor(t, what, 10*time.Second, func() error {
			resp, body := post(t, g.url, tn.token, "", initializeBody)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "cannot present your worker's internal bearer") {
				return fmt.Errorf("%s %s", resp.Status, body)
			}
			return nil
		})
	}
	presents := func(bearer string) time.Duration {
		t.Helper()
		start := time.Now()
		waitFor(t, "the gateway to present "+bearer, 10*time.Second, func() error {
			got, err := whoamiErr(g.url, tn.token)
			if err == nil && got != "Bearer "+bearer {
				err = fmt.Errorf("the worker saw %q", got)
			}
			return err
		})
		return time.Since(start)
	}

	refusedUntil("a refusal without a copy")
	if n := len(w.requests()); n != 0 {
		t.Fatalf("the worker received %d requests without a bearer to present", n)
	}
	copyBearer(t, ns, m.Name, "copy-1")
	presents("copy-1")
	copyBearer(t, ns, m.Name, "copy-2")
	t.Logf("a rotated copy was presented %s after it was written", presents("copy-2").Round(time.Millisecond))
	copyBearer(t, ns, m.Name, "")
	refusedUntil("a refusal once the copy is gone")
	for _, r := range w.requests() {
		if !slices.Contains([]string{"Bearer copy-1", "Bearer copy-2"}, r.authorization) {
			t.Errorf("the worker saw Authorization %q", r.authorization)
		}
	}
}
