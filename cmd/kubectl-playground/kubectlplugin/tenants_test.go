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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		allFlags,
		{"tenant", "create", "x", "--backend", "vm", "--dry-run", "-o", "yaml"},
		{"tenant", "create", "x", "--dry-run", "-o", "yaml", "--pile-size", "1Gi", "--pile-inodes", "8192", "--reclaim-policy", "Delete",
			"--shared-pile", "commons", "--signing-key-secret", "platform-key"},
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

	// The pile's settings, in the one place they are.
	code, out, errOut = runMain(t, "-n", ns, "tenant", "create", "x", "--pile-size", "1Gi", "--pile-inodes", "8192", "--reclaim-policy", "Delete",
		"--shared-pile", "commons", "--signing-key-secret", "platform-key", "--dry-run", "-o", "json")
	tn = playgroundv1alpha1.Tenant{}
	if code != 0 || json.Unmarshal([]byte(out), &tn) != nil {
		t.Fatalf("the pile's flags: status %d, %s%s", code, out, errOut)
	}
	if p := tn.Spec.Pile; p.Size.String() != "1Gi" || *p.Inodes != 8192 || p.ReclaimPolicy != playgroundv1alpha1.ReclaimDelete ||
		p.Shared.Name != "commons" || p.SigningKey.SecretName != "platform-key" {
		t.Errorf("the pile's flags printed spec.pile %+v", p)
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

// allFlags is tenant create with every flag of the Tenant's spec.
var allFlags = []string{"tenant", "create", "x", "--dry-run", "-o", "yaml",
	"--persona", "Ada", "--catalog", "sandbox", "--tools", "extended", "--backend", "oci", "--isolation", "gvisor",
	"--cpu", "2", "--memory", "2Gi", "--pids", "2048", "--storage", "8Gi", "--inodes", "100000",
	"--reclaim-policy", "Delete", "--pile-size", "1Gi", "--pile-inodes", "8192", "--signing-key-secret", "team-key", "--shared-pile", "shared",
	"--faculty", "tools", "--node-selector", "example.com/pool=fast", "--network", "egress", "--egress", "pypi.org:443",
	"--image", "registry.example.com/team/base:1.4", "--image-pull-secret", "regcred", "--image-pull-policy", "Always",
	"--idle-suspend", "30s", "--idle-mode", "Pause", "--idle-with-running-jobs",
	"--env", "EDITOR=vi", "--env", "PAGER=less", "--login-script", "alias ll='ls -l'", "--from-snapshot", "golden",
	"--usage-cpu-seconds", "3600", "--usage-period", "24h", "--suspended"}

// notFlags are the fields of a Tenant's spec that tenant create has no
// flag for, and why.
var notFlags = map[string]string{
	"spec.credentials.rotationRequest":                        "a rotation of a tenant that exists: token reset",
	"spec.pile.signingKey.rotationRequest":                    "a rotation of a generated key of a tenant that exists",
	"spec.sandbox.network.egress[].checkServerName":           "a choice per egress rule: write it in YAML (--dry-run -o yaml)",
	"spec.sandbox.network.egress[].credential.header":         "a brokered credential per egress rule: write it in YAML (--dry-run -o yaml)",
	"spec.sandbox.network.egress[].credential.secretRef.name": "a brokered credential per egress rule: write it in YAML (--dry-run -o yaml)",
	"spec.sandbox.network.egress[].credential.secretRef.key":  "a brokered credential per egress rule: write it in YAML (--dry-run -o yaml)",
	"spec.sandbox.network.egress[].cidr":                      "--egress takes a CIDR or a host: allFlags gives a host",
}

// schemaLeaves lists the leaf fields of an OpenAPI schema under path.
func schemaLeaves(path string, schema map[string]any, out map[string]bool) {
	if items, ok := schema["items"].(map[string]any); ok {
		schemaLeaves(path+"[]", items, out)
		return
	}
	props, ok := schema["properties"].(map[string]any)
	if !ok {
		out[path] = true
		return
	}
	for name, sub := range props {
		schemaLeaves(path+"."+name, sub.(map[string]any), out)
	}
}

// valueLeaves lists the leaf fields of a decoded JSON value under path.
func valueLeaves(path string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		if path == "spec.sandbox.nodeSelector" {
			out[path] = true // a map: its keys are the user's
			return
		}
		for k, sub := range v {
			valueLeaves(path+"."+k, sub, out)
		}
	case []any:
		for _, sub := range v {
			valueLeaves(path+"[]", sub, out)
		}
	default:
		out[path] = true
	}
}

// TestCreateFlagsCoverTheSpec: tenant create has a flag for every field of
// a Tenant's spec (the CRD's schema, so a field added to the API without
// a flag fails here), bar those notFlags names with why; allFlags sets
// them all, and the API server takes the result.
func TestCreateFlagsCoverTheSpec(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", "playground.dev_tenants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var def struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(crd, &def); err != nil || len(def.Spec.Versions) != 1 {
		t.Fatalf("reading the Tenant CRD: %v", err)
	}
	schema := map[string]bool{}
	spec := def.Spec.Versions[0].Schema.OpenAPIV3Schema["properties"].(map[string]any)["spec"].(map[string]any)
	schemaLeaves("spec", spec, schema)

	newNamespace(t, "all-flags")
	code, out, errOut := runMain(t, append([]string{"-n", "all-flags"}, allFlags...)...)
	if code != 0 {
		t.Fatalf("tenant create with every flag: %d %s", code, errOut)
	}
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(out), &u.Object); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{} // what the flags set, before the API server's defaults
	valueLeaves("spec", u.Object["spec"], set)
	if err := k8s.Create(context.Background(), &u, client.DryRunAll); err != nil {
		t.Fatalf("the API server refuses tenant create with every flag: %v\n%s", err, out)
	}
	for field := range schema {
		if _, why := notFlags[field]; !why && !set[field] {
			t.Errorf("tenant create has no flag for %s (add one, or say why in notFlags)", field)
		}
	}
	for field := range notFlags {
		if !schema[field] {
			t.Errorf("notFlags names %s, which the Tenant's spec does not have", field)
		}
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
	tenantAt(t, "list-a", "sleeper", "n1", "", nil)
	sandboxRunning(t, "list-a", "sleeper", metav1.ConditionFalse, playgroundv1alpha1.ReasonIdleSuspended, "Suspended at 2026-01-01T00:00:00Z after 30s without calls")
	tenantAt(t, "list-a", "spent", "n1", "", nil)
	sandboxRunning(t, "list-a", "spent", metav1.ConditionFalse, playgroundv1alpha1.ReasonCPULimitReached, "Frozen for its usage limit")

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
			"NAME":    "NAME CATALOG READY PHASE STATE NODE AGE NEXT",
			"ready":   "ready sandbox True Ready - n1 <AGE> connect: kubectl playground attach ready",
			"waiting": "waiting sandbox False - - - <AGE> NoEligibleNode: kubectl playground status waiting",
			"paused":  "paused sandbox True Ready - n1 <AGE> suspended: kubectl playground tenant resume paused",
			"sleeper": "sleeper sandbox True Ready IdleSuspended n1 <AGE> connect (asleep: the next call wakes it): kubectl playground attach sleeper",
			"spent":   "spent sandbox True Ready CPULimitReached n1 <AGE> frozen for its usage limit until its period resets, or raise spec.sandbox.usageLimits: kubectl playground status spent",
		} {
			line := got[first]
			if f := strings.Fields(line); len(f) > 6 && first != "NAME" {
				f[6] = "<AGE>"
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
	if err := json.Unmarshal([]byte(out), &summary); code != 0 || err != nil || len(summary.Items) != 5 || summary.Items[1].Name != "ready" || summary.Items[1].Node != "n1" || summary.Items[1].SandboxID != "sbx-ready" ||
		summary.Items[2].State != playgroundv1alpha1.ReasonIdleSuspended {
		t.Errorf("status -o json (%v):\n%s", err, out)
	}
	code, out, _ = runMain(t, "-n", "list-a", "tenant", "list", "-o", "yaml")
	var list struct {
		Kind  string
		Items []playgroundv1alpha1.Tenant
	}
	if err := yaml.Unmarshal([]byte(out), &list); code != 0 || err != nil || list.Kind != "List" || len(list.Items) != 5 || list.Items[0].Kind != "Tenant" || strings.Contains(out, "managedFields") {
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

// sandboxRunning writes the Running condition of tenant name's Sandbox, as
// its agent does.
func sandboxRunning(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	ctx := context.Background()
	var s playgroundv1alpha1.Sandbox
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.RunningCondition, Status: status, Reason: reason, Message: msg})
	if err := k8s.Status().Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
}

// TestStatusShowsStateAndSettings: status NAME shows whether the tenant's
// sandbox runs (its STATE, and its Running condition with what the next
// call does) and what decides how it runs and what it is served: backend,
// the isolation it runs with, tool set and idle policy; -o json has them
// as data.
func TestStatusShowsStateAndSettings(t *testing.T) {
	ctx := context.Background()
	newNamespace(t, "settings")
	tenantAt(t, "settings", "napper", "n1", "", func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Tools = playgroundv1alpha1.ToolSetExtended
		tn.Spec.Sandbox.Isolation = playgroundv1alpha1.IsolationGVisor
		tn.Spec.Sandbox.IdleSuspend = &playgroundv1alpha1.IdleSuspend{Mode: playgroundv1alpha1.IdleModePause, After: metav1.Duration{Duration: 30 * time.Second}}
	})
	const paused = "Paused at 2026-01-01T00:00:00Z after 30s without calls (spec.idleSuspend), mode Pause: the next call thaws it in milliseconds"
	sandboxRunning(t, "settings", "napper", metav1.ConditionFalse, playgroundv1alpha1.ReasonIdlePaused, paused)
	var s playgroundv1alpha1.Sandbox
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "settings", Name: "napper"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Status.Isolation = playgroundv1alpha1.IsolationGVisor
	if err := k8s.Status().Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	tenantAt(t, "settings", "plain", "", "", nil)

	code, out, errOut := runMain(t, "-n", "settings", "status", "napper")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"NAME CATALOG READY PHASE STATE NODE AGE NEXT",
		"napper sandbox True Ready IdlePaused n1",
		"BACKEND ISOLATION TOOLS IDLE oci gvisor extended Pause after 30s",
		"sandbox/napper Running False IdlePaused " + paused,
	} {
		if !strings.Contains(words, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
	code, out, _ = runMain(t, "-n", "settings", "status", "napper", "-o", "json")
	var st tenantStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.State != playgroundv1alpha1.ReasonIdlePaused ||
		st.Settings != (settingsRow{Backend: "oci", Isolation: "gvisor", Tools: "extended", Idle: "Pause after 30s"}) {
		t.Errorf("status -o json (%v): %+v\n%s", err, st.Settings, out)
	}
	// The defaults, said as what they are.
	_, out, _ = runMain(t, "-n", "settings", "status", "plain")
	if words := strings.Join(strings.Fields(out), " "); !strings.Contains(words, "BACKEND ISOLATION TOOLS IDLE oci container standard never") {
		t.Errorf("status of a tenant of the defaults:\n%s", out)
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

// TestStatusSaysARefusal: a Tenant whose sandbox serves but cannot be
// given its egress credential (what the manager writes: the Sandbox's
// EgressCredentialsDelivered, and the Tenant's Ready repeating it) is
// shown not Ready, with the reason in NEXT and, in its conditions, which
// Secret and what to do.
func TestStatusSaysARefusal(t *testing.T) {
	ctx := context.Background()
	newNamespace(t, "refused")
	const why = "Requests to llm.test get no credential (answered 503): Secret llm-key does not exist in namespace refused: create it, of type playground.dev/egress-credential"
	tenantAt(t, "refused", "brokered", "node-r", playgroundv1alpha1.ReasonEgressCredentialRefused, nil)
	var tn playgroundv1alpha1.Tenant
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "refused", Name: "brokered"}, &tn); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&tn.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: playgroundv1alpha1.ReasonEgressCredentialRefused, Message: why})
	if err := k8s.Status().Update(ctx, &tn); err != nil {
		t.Fatal(err)
	}
	var sbx playgroundv1alpha1.Sandbox
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "refused", Name: "brokered"}, &sbx); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&sbx.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.EgressCredentialsDeliveredCondition, Status: metav1.ConditionFalse,
		Reason: playgroundv1alpha1.ReasonEgressCredentialRefused, Message: why})
	if err := k8s.Status().Update(ctx, &sbx); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "-n", "refused", "status", "brokered")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"brokered sandbox False Ready - node-r",
		"EgressCredentialRefused: kubectl playground status brokered",
		"tenant/brokered Ready False EgressCredentialRefused " + why,
		"sandbox/brokered EgressCredentialsDelivered False EgressCredentialRefused " + why,
	} {
		if !strings.Contains(words, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
}

// TestResolveImage: tenant resolve-image sets the Tenant's resolve-image
// annotation and prints the digest once the manager (played here, as it
// copies the request to the Sandbox and answers it in status.image) has
// recorded it for that request; a failure of the resolution is said with
// its reason and message; a tenant without an image is told so. status
// shows the image and its digest, with the key that verified its
// signature, or that it is not resolved yet.
func TestResolveImage(t *testing.T) {
	ctx := context.Background()
	const ns, ref = "resolve-image", "registry.example.com/team/base:1.4"
	digest := "sha256:" + strings.Repeat("5e", 32)
	newNamespace(t, ns)
	tenantAt(t, ns, "plain", "node-a", "", nil)
	if code, _, errOut := runMain(t, "-n", ns, "tenant", "resolve-image", "plain"); code != 1 || !strings.Contains(errOut, `tenant "plain" names no image`) {
		t.Errorf("a tenant without an image: %d %q", code, errOut)
	}
	tenantAt(t, ns, "ada", "node-a", "", func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
	})
	status := func() string {
		t.Helper()
		code, out, errOut := runMain(t, "-n", ns, "status", "ada")
		if code != 0 {
			t.Fatalf("status: %d %s", code, errOut)
		}
		return strings.Join(strings.Fields(out), " ")
	}
	if words := status(); !strings.Contains(words, "IMAGE DIGEST "+ref+" (not resolved yet: see ImageResolved)") {
		t.Errorf("status of a tenant whose image is not resolved: %s", words)
	}
	// The manager: the Tenant's request is the Sandbox's, answered with
	// the digest (first) or a failure (then).
	answer := func(fail bool) {
		var request string
		for request == "" {
			var tn playgroundv1alpha1.Tenant
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ada"}, &tn); err != nil {
				t.Error(err)
				return
			}
			request = tn.Annotations[playgroundv1alpha1.ResolveImageAnnotation]
			if fail && request == "2026-01-01" {
				request = ""
			}
			time.Sleep(20 * time.Millisecond) // polling the fake manager's input, not a readiness wait
		}
		var s playgroundv1alpha1.Sandbox
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ada"}, &s); err != nil {
			t.Error(err)
			return
		}
		metav1.SetMetaDataAnnotation(&s.ObjectMeta, playgroundv1alpha1.ResolveImageAnnotation, request)
		if err := k8s.Update(ctx, &s); err != nil {
			t.Error(err)
			return
		}
		if fail {
			apimeta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: playgroundv1alpha1.ImageResolvedCondition, Status: metav1.ConditionFalse,
				Reason: playgroundv1alpha1.ReasonRegistryUnavailable, Message: "Registry registry.example.com cannot be reached"})
		} else {
			s.Status.Image = &playgroundv1alpha1.SandboxImageStatus{Reference: ref, Digest: digest, ResolveRequest: request, SignedBy: []string{"signed-images/release"}}
		}
		if err := k8s.Status().Update(ctx, &s); err != nil {
			t.Error(err)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); answer(false) }()
	code, out, errOut := runMain(t, "-n", ns, "tenant", "resolve-image", "ada")
	<-done
	if code != 0 || out != "tenant/ada: "+ref+" resolved to "+digest+"; the sandbox runs it from its next start\n" {
		t.Errorf("resolve-image: %d %q %q", code, out, errOut)
	}
	if words := status(); !strings.Contains(words, "IMAGE DIGEST "+ref+" "+digest+" (signed by signed-images/release)") {
		t.Errorf("status of a tenant whose image is resolved: %s", words)
	}

	// Marked so the fake manager waits for the command's own request.
	var tn playgroundv1alpha1.Tenant
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ada"}, &tn); err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataAnnotation(&tn.ObjectMeta, playgroundv1alpha1.ResolveImageAnnotation, "2026-01-01")
	if err := k8s.Update(ctx, &tn); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() { defer close(done); answer(true) }()
	code, out, errOut = runMain(t, "-n", ns, "tenant", "resolve-image", "ada")
	<-done
	if code != 1 || out != "" || !strings.Contains(errOut, ref+" cannot be resolved: RegistryUnavailable: Registry registry.example.com cannot be reached") {
		t.Errorf("resolve-image of an unreachable registry: %d %q %q", code, out, errOut)
	}
}
