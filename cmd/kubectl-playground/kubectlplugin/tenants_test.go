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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

func newNamespace(t *testing.T, name string) {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestCreateDryRun: tenant create --dry-run prints a Tenant of the flags
// without creating it, which the API server accepts as it is (applied
// with a server-side dry run); --dry-run=server has the API server fill
// in its defaults; -o json parses.
func TestCreateDryRun(t *testing.T) {
	ctx := context.Background()
	const ns = "dry-run"
	newNamespace(t, ns)
	for _, args := range [][]string{
		{"tenant", "create", "x", "--isolation", "gvisor", "--dry-run", "-o", "yaml"},
		{"tenant", "create", "x", "--dry-run=client", "-o", "yaml", "--backend", "oci", "--isolation", "container", "--cpu", "500m", "--memory", "2Gi",
			"--storage", "8Gi", "--node-selector", "example.com/pool=fast", "--faculty", "tools", "--faculty", "more-tools", "--catalog", "sandbox", "--persona", "Ada L.",
			"--network", "egress", "--egress", "10.0.0.0/8:443,80", "--egress", "203.0.113.7/32", "--egress", "pypi.org:443", "--egress", "*.githubusercontent.com", "--egress", "2001:db8::/32:443", "--egress", "2001:db8:1::/48", "--idle-suspend", "15m"},
		{"tenant", "create", "x", "--backend", "vm", "--dry-run", "-o", "yaml"},
	} {
		code, out, errOut := runMain(t, append([]string{"-n", ns}, args...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("%q: status %d: %s", args, code, errOut)
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(out), &u.Object); err != nil {
			t.Fatalf("%q printed no YAML: %v\n%s", args, err, out)
		}
		if u.GetKind() != "Tenant" || u.GetAPIVersion() != "playground.dev/v1alpha1" || u.GetNamespace() != ns || u.GetName() != "x" {
			t.Fatalf("%q printed\n%s", args, out)
		}
		if _, found := u.Object["status"]; found || strings.Contains(out, "creationTimestamp") {
			t.Errorf("%q printed fields only the API server fills:\n%s", args, out)
		}
		if err := k8s.Create(ctx, &u, client.DryRunAll); err != nil {
			t.Errorf("the API server refuses what %q printed: %v\n%s", args, err, out)
		}
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &playgroundv1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the tenant: %v", err)
	}

	code, out, errOut := runMain(t, "-n", ns, "tenant", "create", "x", "--isolation", "gvisor", "--memory", "2Gi", "--dry-run", "-o", "json")
	var tn playgroundv1alpha1.Tenant
	if code != 0 || json.Unmarshal([]byte(out), &tn) != nil {
		t.Fatalf("-o json: status %d, %s%s", code, out, errOut)
	}
	if tn.Spec.Sandbox.Isolation != playgroundv1alpha1.IsolationGVisor || tn.Spec.Sandbox.Resources.Memory.String() != "2Gi" {
		t.Errorf("-o json printed %+v", tn.Spec)
	}

	code, out, errOut = runMain(t, "-n", ns, "tenant", "create", "x", "--isolation", "gvisor", "--dry-run=server", "-o", "yaml")
	tn = playgroundv1alpha1.Tenant{}
	if code != 0 || yaml.Unmarshal([]byte(out), &tn) != nil {
		t.Fatalf("--dry-run=server: status %d, %s%s", code, out, errOut)
	}
	if tn.Spec.Sandbox.Backend != playgroundv1alpha1.BackendOCI || tn.Spec.Catalog != playgroundv1alpha1.CatalogSandbox {
		t.Errorf("--dry-run=server printed no defaults: %+v", tn.Spec)
	}
	if code, out, _ := runMain(t, "-n", ns, "tenant", "create", "x", "--dry-run"); code != 0 || out != "tenant/x created (dry run)\n" {
		t.Errorf("--dry-run without -o: %d %q", code, out)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &playgroundv1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the tenant: %v", err)
	}
}

// tenantAt creates a tenant whose manager and agent reported it Ready (or
// not, with reason), with a token in its Secret, and returns the token.
func tenantAt(t *testing.T, ns, name, node, reason string, mutate func(*playgroundv1alpha1.Tenant)) string {
	t.Helper()
	ctx := context.Background()
	tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mutate != nil {
		mutate(tn)
	}
	if err := k8s.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	token := "pgt_" + name + "-token-of-the-test"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name)},
		Data: map[string][]byte{playgroundv1alpha1.CredentialTokenKey: []byte(token)}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	ready := metav1.Condition{Type: playgroundv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", Message: "serving"}
	if reason != "" {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reason, "waiting"
	}
	apimeta.SetStatusCondition(&tn.Status.Conditions, ready)
	hash := playgroundv1alpha1.TokenSHA256(token)
	tn.Status.Credentials = playgroundv1alpha1.CredentialsStatus{SecretRef: &playgroundv1alpha1.LocalObjectReference{Name: secret.Name}, Fingerprint: hash[:16], TokenSHA256: hash}
	if err := k8s.Status().Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if node == "" {
		return token
	}
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: name}, NodeName: node},
	}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Status = playgroundv1alpha1.SandboxStatus{Phase: playgroundv1alpha1.SandboxReady, SandboxID: "sbx-" + name, Endpoint: "https://" + node + ":9443"}
	if err := k8s.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	return token
}

// TestStatusListsTenants: status and tenant list without a name list the
// namespace's tenants (-A: every namespace's), one row each with what to
// do; -o json|yaml prints the rows (status) or the Tenants (tenant list).
func TestStatusListsTenants(t *testing.T) {
	newNamespace(t, "list-a")
	newNamespace(t, "list-b")
	tenantAt(t, "list-a", "ready", "n1", "", nil)
	tenantAt(t, "list-a", "waiting", "", "NoEligibleNode", nil)
	tenantAt(t, "list-a", "paused", "n1", "", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Suspended = true })
	tenantAt(t, "list-b", "other", "n2", "", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers })

	rows := func(out string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				m[f[0]] = strings.Join(f, " ")
			}
		}
		return m
	}
	for _, args := range [][]string{{"status"}, {"tenant", "list"}} {
		code, out, errOut := runMain(t, append([]string{"-n", "list-a"}, args...)...)
		if code != 0 {
			t.Fatalf("%q: %d %s", args, code, errOut)
		}
		got := rows(out)
		for first, want := range map[string]string{
			"NAME":    "NAME CATALOG READY PHASE NODE AGE NEXT",
			"ready":   "ready sandbox True Ready n1 <AGE> connect: kubectl playground attach ready",
			"waiting": "waiting sandbox False - - <AGE> NoEligibleNode: kubectl playground status waiting",
			"paused":  "paused sandbox True Ready n1 <AGE> suspended: kubectl playground tenant resume paused",
		} {
			line := got[first]
			if f := strings.Fields(line); len(f) > 5 && first != "NAME" {
				f[5] = "<AGE>"
				line = strings.Join(f, " ")
			}
			if line != want {
				t.Errorf("%q: row %q\nwant %q\n%s", args, line, want, out)
			}
		}
		if _, ok := got["other"]; ok {
			t.Errorf("%q listed another namespace's tenant:\n%s", args, out)
		}
	}

	code, out, _ := runMain(t, "status", "-A")
	got := rows(out)
	if code != 0 || !strings.HasPrefix(got["NAMESPACE"], "NAMESPACE NAME CATALOG") || !strings.HasPrefix(got["list-b"], "list-b other workers True") ||
		!strings.Contains(got["list-b"], "connect: kubectl playground -n list-b attach other") {
		t.Errorf("status -A:\n%s", out)
	}

	code, out, _ = runMain(t, "-n", "list-a", "status", "-o", "json")
	var summary struct{ Items []tenantRow }
	if err := json.Unmarshal([]byte(out), &summary); code != 0 || err != nil || len(summary.Items) != 3 || summary.Items[1].Name != "ready" || summary.Items[1].Node != "n1" || summary.Items[1].SandboxID != "sbx-ready" {
		t.Errorf("status -o json (%v):\n%s", err, out)
	}
	code, out, _ = runMain(t, "-n", "list-a", "tenant", "list", "-o", "yaml")
	var list struct {
		Kind  string
		Items []playgroundv1alpha1.Tenant
	}
	if err := yaml.Unmarshal([]byte(out), &list); code != 0 || err != nil || list.Kind != "List" || len(list.Items) != 3 || list.Items[0].Kind != "Tenant" || strings.Contains(out, "managedFields") {
		t.Errorf("tenant list -o yaml (%v):\n%s", err, out)
	}
	code, out, _ = runMain(t, "-n", "list-a", "status", "ready", "-o", "json")
	var one tenantStatus
	if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil || one.Name != "ready" || len(one.Conditions) == 0 || one.Conditions[0].Object != "tenant/ready" {
		t.Errorf("status NAME -o json (%v):\n%s", err, out)
	}
	if code, out, _ := runMain(t, "-n", "list-none", "status"); code != 0 || !strings.Contains(out, "No tenants in namespace list-none") {
		t.Errorf("status of an empty namespace: %d %q", code, out)
	}
}

// TestTokenShow: token show prints the token of the tenant's Secret only
// once the Tenant's status describes it (a rotation puts the new token in
// the Secret a moment before), and nothing else.
func TestTokenShow(t *testing.T) {
	ctx := context.Background()
	const ns = "token-show"
	newNamespace(t, ns)
	token := tenantAt(t, ns, "ada", "", "", nil)
	for _, args := range [][]string{{"token", "show", "ada"}, {"tenant", "token", "show", "ada"}} {
		if code, out, errOut := runMain(t, append([]string{"-n", ns}, args...)...); code != 0 || out != token+"\n" || errOut != "" {
			t.Errorf("%q: %d %q %q", args, code, out, errOut)
		}
	}

	// The Secret holds a token the status does not describe yet.
	var s corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ada-token"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data[playgroundv1alpha1.CredentialTokenKey] = []byte("pgt_the-next-token")
	if err := k8s.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "-n", ns, "--timeout", "1s", "token", "show", "ada")
	if code != 1 || out != "" || !strings.Contains(errOut, "timed out after 1s waiting for the token the tenant's status describes") {
		t.Errorf("a token the status does not describe: %d %q %q", code, out, errOut)
	}
	var tn playgroundv1alpha1.Tenant
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ada"}, &tn); err != nil {
		t.Fatal(err)
	}
	hash := playgroundv1alpha1.TokenSHA256("pgt_the-next-token")
	tn.Status.Credentials.Fingerprint, tn.Status.Credentials.TokenSHA256 = hash[:16], hash
	if err := k8s.Status().Update(ctx, &tn); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runMain(t, "-n", ns, "token", "show", "ada"); code != 0 || out != "pgt_the-next-token\n" {
		t.Errorf("once the status describes it: %d %q %q", code, out, errOut)
	}
}

// TestAttachPrintsClients: attach prints the sandbox and paste-ready
// client configurations; the endpoint is --endpoint's, else
// $PLAYGROUND_ENDPOINT's, else the gateway Service's inside the cluster.
func TestAttachPrintsClients(t *testing.T) {
	ctx := context.Background()
	const ns = "attach"
	newNamespace(t, ns)
	newNamespace(t, agentlease.DefaultNamespace)
	token := tenantAt(t, ns, "ada", "n1", "", nil)

	code, out, errOut := runMain(t, "-n", ns, "attach", "ada")
	if code != 0 || !strings.Contains(out, "MCP endpoint: unknown here: give --endpoint URL or set $PLAYGROUND_ENDPOINT") ||
		!strings.Contains(out, "playground gateway --stdio --tenant attach/ada") || strings.Contains(out, token) {
		t.Errorf("attach without an endpoint: %d\n%s%s", code, out, errOut)
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: "playground-gateway",
			Labels: map[string]string{"app.kubernetes.io/name": "playground", "app.kubernetes.io/component": "gateway"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	const inCluster = "http://playground-gateway.playground-system.svc/mcp"
	code, out, _ = runMain(t, "-n", ns, "attach", "ada")
	if code != 0 || !strings.Contains(out, "MCP endpoint: "+inCluster+"   (inside the cluster, the Service playground-system/playground-gateway; from elsewhere: kubectl -n playground-system port-forward svc/playground-gateway 8080:80") {
		t.Errorf("attach with the gateway's Service:\n%s", out)
	}
	if !strings.Contains(out, "claude mcp add --transport http playground-ada "+inCluster+" --header 'Authorization: Bearer "+token+"'\n") {
		t.Errorf("attach prints no Claude Code command:\n%s", out)
	}
	for _, block := range []struct{ title, key string }{{"Cursor (~/.cursor/mcp.json):\n", "mcpServers"}, {"VS Code (.vscode/mcp.json):\n", "servers"}} {
		_, rest, ok := strings.Cut(out, block.title)
		text, _, _ := strings.Cut(rest, "\n\n")
		var cfg map[string]map[string]struct {
			Type, URL string
			Headers   map[string]string
		}
		if !ok || json.Unmarshal([]byte(text), &cfg) != nil {
			t.Errorf("no %s JSON in:\n%s", block.title, out)
			continue
		}
		server := cfg[block.key]["playground-ada"]
		if server.URL != inCluster || server.Headers["Authorization"] != "Bearer "+token || (block.key == "servers") != (server.Type == "http") {
			t.Errorf("%s%s", block.title, text)
		}
	}

	t.Setenv(EndpointEnv, "https://mcp.example.com/mcp")
	if _, out, _ := runMain(t, "-n", ns, "attach", "ada"); !strings.Contains(out, "MCP endpoint: https://mcp.example.com/mcp   (from $PLAYGROUND_ENDPOINT)") {
		t.Errorf("attach with $%s:\n%s", EndpointEnv, out)
	}
	if _, out, _ := runMain(t, "-n", ns, "attach", "ada", "--endpoint", "https://other.example.com/mcp"); !strings.Contains(out, "MCP endpoint: https://other.example.com/mcp   (from --endpoint)") {
		t.Errorf("attach with --endpoint:\n%s", out)
	}
	code, out, _ = runMain(t, "-n", ns, "attach", "ada", "-o", "json")
	var info attachInfo
	if err := json.Unmarshal([]byte(out), &info); code != 0 || err != nil || info.SandboxID != "sbx-ada" || info.Node != "n1" || info.Endpoint != "https://mcp.example.com/mcp" || strings.Contains(out, token) {
		t.Errorf("attach -o json (%v):\n%s", err, out)
	}
}

// TestStatusOfATenantOverItsPolicy: status NAME lists a Tenant's
// TenantPolicy conditions with the others, and says of a Tenant that its
// namespace's ceiling holds back that the manager creates no Sandbox for
// it, rather than that it has not yet.
func TestStatusOfATenantOverItsPolicy(t *testing.T) {
	ctx := context.Background()
	newNamespace(t, "held-back")
	tenantAt(t, "held-back", "held", "", playgroundv1alpha1.ReasonNamespaceCeilingExceeded, nil)
	var tn playgroundv1alpha1.Tenant
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "held-back", Name: "held"}, &tn); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&tn.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.SandboxReadyCondition, Status: metav1.ConditionFalse,
		Reason: playgroundv1alpha1.ReasonNamespaceCeilingExceeded, Message: "TenantPolicy p allows namespace held-back at most 1 sandboxes, and it holds 1"})
	apimeta.SetStatusCondition(&tn.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.PolicyCompliantCondition, Status: metav1.ConditionFalse,
		Reason: playgroundv1alpha1.ReasonPolicyExceeded, Message: "TenantPolicy p: spec.sandbox.resources.cpu is 2, over its ceiling of 1 per sandbox"})
	if err := k8s.Status().Update(ctx, &tn); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "-n", "held-back", "status", "held")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"NamespaceCeilingExceeded: kubectl playground status held",
		"tenant/held PolicyCompliant False PolicyExceeded TenantPolicy p: spec.sandbox.resources.cpu is 2",
		"sandbox/held - - NotFound the manager creates none while the namespace is at a TenantPolicy's ceiling",
	} {
		if !strings.Contains(words, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
}
