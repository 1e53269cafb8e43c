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

package adversarial

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/rbactest"
)

// namespaceAdminRole is Kubernetes' admin ClusterRole as a cluster's
// aggregation controller fills it (the rules of the roles labelled
// aggregate-to-admin, -edit and -view): the test control plane runs no
// controller manager, so it is filled here, once, under a name of its own.
func namespaceAdminRole(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	const name = "playground-test-namespace-admin"
	admin := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, from := range []string{"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view"} {
		var r rbacv1.ClusterRole
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: from}, &r)).To(Succeed())
		admin.Rules = append(admin.Rules, r.Rules...)
	}
	g.Expect(admin.Rules).NotTo(BeEmpty())
	if err := k8s.Create(ctx, admin); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

// asTeamAdmin is a client acting as user, who administers the namespaces
// nss as a platform team would grant it: Kubernetes' admin role and write
// on Playground's Tenants and Sandboxes there, by RoleBindings.
func asTeamAdmin(t *testing.T, user string, nss ...string) client.Client {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	adminRole := namespaceAdminRole(t)
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var attrs []authorizationv1.ResourceAttributes
	for _, ns := range nss {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "playground-team"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{playgroundv1alpha1.GroupVersion.Group}, Resources: []string{"tenants", "sandboxes"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}}
		g.Expect(k8s.Create(ctx, role)).To(Succeed())
		for _, rb := range []*rbacv1.RoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-admin"}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: adminRole}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-playground"}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
		} {
			g.Expect(k8s.Create(ctx, rb)).To(Succeed())
		}
		for _, res := range []string{"tenants", "sandboxes"} {
			attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: playgroundv1alpha1.GroupVersion.Group, Resource: res})
		}
		attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: rbacv1.GroupName, Resource: "rolebindings"})
	}
	g.Expect(rbactest.AwaitAllowed(ctx, cp.Config, user, nil, attrs...)).To(Succeed())
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return newClient(t, cfg)
}

// refusedBy says whether err is the TenantPolicy admission policy's
// refusal (not RBAC's, not the schema's), naming the TenantPolicy and
// saying what each of want says.
func refusedBy(policy string, want ...string) func(error) bool {
	return func(err error) bool {
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "TenantPolicy "+policy+":") && !strings.Contains(err.Error(), "TenantPolicy "+policy+" ") {
			return false
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				return false
			}
		}
		return true
	}
}

// withImage has a Tenant run the image ref.
func withImage(ref string) func(*playgroundv1alpha1.Tenant) {
	return func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
	}
}

// compliant is a Tenant within platformCeilings.
func compliant(ns, name string) *playgroundv1alpha1.Tenant {
	return &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: playgroundv1alpha1.TenantSpec{
		Sandbox: playgroundv1alpha1.SandboxTemplate{
			Isolation: playgroundv1alpha1.IsolationGVisor,
			Resources: playgroundv1alpha1.SandboxResources{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("1Gi"))},
			Storage:   playgroundv1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("4Gi"))},
			// 100 per hour is 2400 per day, within 3600.
			UsageLimits: &playgroundv1alpha1.UsageLimits{CPUSeconds: ptr.To[int64](100), Period: metav1.Duration{Duration: time.Hour}},
		},
	}}
}

// platformCeilings is a platform team's policy for the namespaces labelled
// playground.dev/tier=restricted.
func platformCeilings() *playgroundv1alpha1.TenantPolicy {
	return &playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform-ceilings"}, Spec: playgroundv1alpha1.TenantPolicySpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"playground.dev/tier": "restricted"}},
		Sandbox: playgroundv1alpha1.SandboxCeilings{
			Max: playgroundv1alpha1.SandboxMax{
				CPU: ptr.To(resource.MustParse("2")), Memory: ptr.To(resource.MustParse("2Gi")), PIDs: ptr.To[int64](2048),
				StorageSize: ptr.To(resource.MustParse("8Gi")), StorageInodes: ptr.To[int64](300000),
				PileSize: ptr.To(resource.MustParse("1Gi")), PileInodes: ptr.To[int64](8192),
			},
			UsageLimit:        &playgroundv1alpha1.UsageLimitCeiling{MaxCPUSeconds: 3600, Period: metav1.Duration{Duration: 24 * time.Hour}},
			AllowedBackends:   []playgroundv1alpha1.BackendClass{playgroundv1alpha1.BackendOCI},
			AllowedIsolations: []playgroundv1alpha1.Isolation{playgroundv1alpha1.IsolationGVisor},
			AllowedImages:     []string{"registry.example.com/team/", "docker.io/library/python"},
			Network: playgroundv1alpha1.NetworkCeilings{
				AllowedModes: []playgroundv1alpha1.NetworkMode{playgroundv1alpha1.NetworkNone, playgroundv1alpha1.NetworkEgress},
				AllowedEgress: &playgroundv1alpha1.EgressCeilings{
					Hosts: []string{"pypi.org", "*.pythonhosted.org"},
					CIDRs: []string{"10.20.0.0/16"},
				},
			},
		},
		AllowedToolSets: []playgroundv1alpha1.ToolSet{playgroundv1alpha1.ToolSetStandard},
		AllowedCatalogs: []playgroundv1alpha1.Catalog{playgroundv1alpha1.CatalogSandbox},
	}}
}

// TestTeamCannotLiftPlatformCeilings: a namespace's admin (Kubernetes'
// admin role in its namespace and write on Tenants and Sandboxes there,
// by real RoleBindings) tries to ask for more than the platform team's
// TenantPolicy allows: resources and storage past its ceilings, its usage
// limit raised, removed or stretched over a longer period, an isolation,
// backend, network host or network, tool set or catalog the policy does
// not allow, a Sandbox written directly. The installation's admission
// policy refuses each, naming the TenantPolicy and the ceiling; what is
// within the policy is accepted, a namespace it does not select is
// unaffected, and the team cannot change the policy or unselect its
// namespace. After the platform tightens the policy, the team can still
// suspend and relabel a Tenant now over it, and cannot raise it further.
func TestTeamCannotLiftPlatformCeilings(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	restricted, free := "team-restricted", "team-free"
	g.Expect(cp.CreateNamespaces(ctx, restricted, free)).To(Succeed())
	var ns corev1.Namespace
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: restricted}, &ns)).To(Succeed())
	ns.Labels["playground.dev/tier"] = "restricted"
	g.Expect(k8s.Update(ctx, &ns)).To(Succeed())
	policy := platformCeilings()
	g.Expect(k8s.Create(ctx, policy)).To(Succeed())
	alice := asTeamAdmin(t, "alice", restricted, free)

	// The policy is in force a moment after it is created: wait for its
	// refusal of the first attack, a Tenant asking for 4 CPUs.
	over := compliant(restricted, "greedy")
	over.Spec.Sandbox.Resources.CPU = ptr.To(resource.MustParse("4"))
	g.Eventually(func() error {
		return alice.Create(ctx, over.DeepCopy(), client.DryRunAll)
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Satisfy(refusedBy("platform-ceilings")), "a Tenant over the CPU ceiling")

	create := func(mutate func(*playgroundv1alpha1.Tenant)) error {
		tn := compliant(restricted, "attack")
		mutate(tn)
		return alice.Create(ctx, tn, client.DryRunAll)
	}
	t.Run("create past a ceiling", func(t *testing.T) {
		g := NewWithT(t)
		for _, a := range []struct {
			what   string
			mutate func(*playgroundv1alpha1.Tenant)
			says   []string
		}{
			{"4 CPUs", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Resources.CPU = ptr.To(resource.MustParse("4")) },
				[]string{"spec.sandbox.resources.cpu is 4", "ceiling of 2", "ask for 2 or less"}},
			{"8Gi of memory", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Sandbox.Resources.Memory = ptr.To(resource.MustParse("8Gi"))
			}, []string{"spec.sandbox.resources.memory is 8Gi", "ceiling of 2Gi"}},
			{"pids", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Resources.PIDs = ptr.To[int64](100000) },
				[]string{"spec.sandbox.resources.pids is 100000", "ceiling of 2048"}},
			{"a larger disk", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Sandbox.Storage.Size = ptr.To(resource.MustParse("100Gi"))
			},
				[]string{"spec.sandbox.storage.size is 100Gi", "ceiling of 8Gi"}},
			{"more inodes", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Storage.Inodes = ptr.To[int64](1000000) },
				[]string{"spec.sandbox.storage.inodes is 1000000"}},
			{"a larger pile", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Pile.Size = ptr.To(resource.MustParse("10Gi"))
			}, []string{"spec.pile.size is 10Gi", "ceiling of 1Gi"}},
			{"more pile inodes", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Pile.Inodes = ptr.To[int64](100000) },
				[]string{"spec.pile.inodes is 100000", "ceiling of 8192"}},
			{"no usage limit", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.UsageLimits = nil },
				[]string{"requires a usage limit", "at most 3600 per 24h"}},
			{"a usage limit past the ceiling", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.UsageLimits.CPUSeconds = ptr.To[int64](200) },
				[]string{"usageLimits.cpuSeconds is 200 per 1h", "3600 CPU-seconds per 24h", "ask for 150 or less per 1h"}},
			{"the usage limit over a longer period", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Sandbox.UsageLimits = &playgroundv1alpha1.UsageLimits{CPUSeconds: ptr.To[int64](3600), Period: metav1.Duration{Duration: 48 * time.Hour}}
			}, []string{"usageLimits.period 48h0m0s does not divide it"}},
			{"container isolation", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Isolation = "" },
				[]string{"spec.sandbox.isolation container is not allowed", "ask for gvisor"}},
			{"backend vm", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Sandbox.Backend, tn.Spec.Sandbox.Isolation = playgroundv1alpha1.BackendVM, ""
			}, []string{"spec.sandbox.backend vm is not allowed", "ask for oci"}},
			{"an egress host", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Sandbox.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress, Egress: []playgroundv1alpha1.EgressRule{
					{Host: "pypi.org"}, {Host: "exfiltrate.example.com", Ports: []int32{443}}}}
			}, []string{"names host exfiltrate.example.com", "pypi.org, *.pythonhosted.org"}},
			{"the domain of a wildcard", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Sandbox.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress, Egress: []playgroundv1alpha1.EgressRule{{Host: "pythonhosted.org"}}}
			}, []string{"names host pythonhosted.org"}},
			{"a wider network", func(tn *playgroundv1alpha1.Tenant) {
				tn.Spec.Sandbox.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress, Egress: []playgroundv1alpha1.EgressRule{{CIDR: "0.0.0.0/0"}}}
			}, []string{"names cidr 0.0.0.0/0", "within 10.20.0.0/16"}},
			{"an image of another registry", withImage("evil.example.com/team/base:1"),
				[]string{"spec.sandbox.image.reference evil.example.com/team/base:1 is not allowed", "the images allowed are registry.example.com/team/, docker.io/library/python"}},
			{"an image of a path beside the allowed one", withImage("registry.example.com/teammate/base:1"),
				[]string{"image.reference registry.example.com/teammate/base:1 is not allowed"}},
			{"an image of a repository beside the allowed one", withImage("docker.io/library/python-evil:3"),
				[]string{"image.reference docker.io/library/python-evil:3 is not allowed"}},
			{"an image of the allowed repository's registry", withImage("docker.io/library/busybox@sha256:" + strings.Repeat("ab", 32)),
				[]string{"image.reference docker.io/library/busybox@sha256:"}},
			{"the extended tools", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Tools = playgroundv1alpha1.ToolSetExtended },
				[]string{"spec.tools extended is not allowed"}},
			{"the workers catalog", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers },
				[]string{"spec.catalog workers is not allowed"}},
		} {
			g.Expect(create(a.mutate)).To(Satisfy(refusedBy("platform-ceilings", a.says...)), a.what)
		}
	})

	t.Run("within the ceilings", func(t *testing.T) {
		g := NewWithT(t)
		tn := compliant(restricted, "fair")
		tn.Spec.Sandbox.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress, Egress: []playgroundv1alpha1.EgressRule{
			{Host: "pypi.org", Ports: []int32{443}}, {Host: "files.pythonhosted.org"}, {Host: "*.cdn.pythonhosted.org"}, {CIDR: "10.20.30.0/24"}}}
		tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: "registry.example.com/team/ml/base:1"}
		g.Expect(alice.Create(ctx, tn)).To(Succeed())
		for _, ref := range []string{"docker.io/library/python:3.12", "docker.io/library/python", "docker.io/library/python@sha256:" + strings.Repeat("cd", 32)} {
			g.Expect(create(withImage(ref))).To(Succeed(), "image %s, of the allowed repository", ref)
		}
		// At the ceilings exactly, with a limit over the policy's own period.
		at := compliant(restricted, "at-the-ceiling")
		at.Spec.Sandbox.Resources = playgroundv1alpha1.SandboxResources{CPU: ptr.To(resource.MustParse("2000m")), Memory: ptr.To(resource.MustParse("2Gi")), PIDs: ptr.To[int64](2048)}
		at.Spec.Sandbox.UsageLimits = &playgroundv1alpha1.UsageLimits{CPUSeconds: ptr.To[int64](3600), Period: metav1.Duration{Duration: 24 * time.Hour}}
		g.Expect(alice.Create(ctx, at)).To(Succeed())
	})

	t.Run("raise an existing tenant", func(t *testing.T) {
		g := NewWithT(t)
		change := func(mutate func(*playgroundv1alpha1.Tenant)) error {
			var tn playgroundv1alpha1.Tenant
			if err := alice.Get(ctx, client.ObjectKey{Namespace: restricted, Name: "fair"}, &tn); err != nil {
				return err
			}
			patch := client.MergeFrom(tn.DeepCopy())
			mutate(&tn)
			return alice.Patch(ctx, &tn, patch)
		}
		g.Expect(change(func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.Resources.CPU = ptr.To(resource.MustParse("3")) })).
			To(Satisfy(refusedBy("platform-ceilings", "resources.cpu is 3")), "its CPU raised")
		g.Expect(change(func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.UsageLimits.CPUSeconds = ptr.To[int64](1000) })).
			To(Satisfy(refusedBy("platform-ceilings", "cpuSeconds is 1000 per 1h")), "its usage limit raised")
		g.Expect(change(func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.UsageLimits = nil })).
			To(Satisfy(refusedBy("platform-ceilings", "requires a usage limit")), "its usage limit removed")
		g.Expect(change(func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Pile.Size = ptr.To(resource.MustParse("2Gi")) })).
			To(Satisfy(refusedBy("platform-ceilings", "spec.pile.size is 2Gi")), "its pile grown")
		g.Expect(change(func(tn *playgroundv1alpha1.Tenant) {
			tn.Spec.Sandbox.Network.Egress = append(tn.Spec.Sandbox.Network.Egress, playgroundv1alpha1.EgressRule{Host: "evil.example"})
		})).To(Satisfy(refusedBy("platform-ceilings", "names host evil.example")), "a host added to its egress")
		g.Expect(change(withImage("ghcr.io/someone/miner:latest"))).
			To(Satisfy(refusedBy("platform-ceilings", "image.reference ghcr.io/someone/miner:latest is not allowed")), "its image changed to another registry's")
		g.Expect(change(func(tn *playgroundv1alpha1.Tenant) {
			tn.Spec.Sandbox.Resources.CPU = ptr.To(resource.MustParse("1500m"))
		})).
			To(Succeed(), "a change within the ceiling")
	})

	t.Run("sandboxes written directly", func(t *testing.T) {
		g := NewWithT(t)
		sbx := &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: restricted, Name: "direct"}, Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "direct"}, SandboxTemplate: compliant(restricted, "direct").Spec.Sandbox}}
		big := sbx.DeepCopy()
		big.Spec.Resources.CPU = ptr.To(resource.MustParse("16"))
		g.Expect(alice.Create(ctx, big)).To(Satisfy(refusedBy("platform-ceilings", "spec.resources.cpu is 16")), "a Sandbox over the CPU ceiling")
		open := sbx.DeepCopy()
		open.Spec.Isolation = playgroundv1alpha1.IsolationContainer
		g.Expect(alice.Create(ctx, open)).To(Satisfy(refusedBy("platform-ceilings", "spec.isolation container")), "a Sandbox of runc")
		foreign := sbx.DeepCopy()
		foreign.Spec.Image = &playgroundv1alpha1.SandboxImage{Reference: "evil.example.com/base:1"}
		g.Expect(alice.Create(ctx, foreign)).To(Satisfy(refusedBy("platform-ceilings", "spec.image.reference evil.example.com/base:1 is not allowed")), "a Sandbox of a foreign image")
		pile := sbx.DeepCopy()
		pile.Spec.Pile.Size = ptr.To(resource.MustParse("5Gi"))
		g.Expect(alice.Create(ctx, pile)).To(Satisfy(refusedBy("platform-ceilings", "spec.pile.size is 5Gi")), "a Sandbox over the pile's ceiling")
		g.Expect(alice.Create(ctx, sbx)).To(Succeed(), "a Sandbox within")
		patch := client.MergeFrom(sbx.DeepCopy())
		sbx.Spec.Resources.Memory = ptr.To(resource.MustParse("64Gi"))
		g.Expect(alice.Patch(ctx, sbx, patch)).To(Satisfy(refusedBy("platform-ceilings", "spec.resources.memory is 64Gi")), "a Sandbox's memory raised")
	})

	t.Run("a namespace the policy does not select", func(t *testing.T) {
		g := NewWithT(t)
		tn := over.DeepCopy()
		tn.Namespace = free
		tn.Spec.Sandbox.UsageLimits = nil
		tn.Spec.Tools = playgroundv1alpha1.ToolSetExtended
		g.Expect(alice.Create(ctx, tn)).To(Succeed())
	})

	t.Run("the policy is not the team's", func(t *testing.T) {
		g := NewWithT(t)
		var p playgroundv1alpha1.TenantPolicy
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(policy), &p)).To(Succeed())
		p.Spec.Sandbox.Max.CPU = ptr.To(resource.MustParse("64"))
		g.Expect(alice.Update(ctx, &p)).To(Satisfy(apierrors.IsForbidden), "the team raises the policy")
		g.Expect(alice.Delete(ctx, &p)).To(Satisfy(apierrors.IsForbidden), "the team deletes the policy")
		lax := &playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "lax"}, Spec: playgroundv1alpha1.TenantPolicySpec{}}
		g.Expect(alice.Create(ctx, lax)).To(Satisfy(apierrors.IsForbidden), "the team writes a policy of its own")
		var own corev1.Namespace
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: restricted}, &own)).To(Succeed())
		delete(own.Labels, "playground.dev/tier")
		g.Expect(alice.Update(ctx, &own)).To(Satisfy(apierrors.IsForbidden), "the team unlabels its namespace")
		// A RoleBinding to a role that writes policies is an escalation
		// the API server refuses to a namespace's admin.
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: restricted, Name: "grant-myself"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}
		g.Expect(alice.Create(ctx, rb)).To(Satisfy(apierrors.IsForbidden), "the team binds itself cluster-admin in its namespace")
	})

	t.Run("a tightened ceiling", func(t *testing.T) {
		g := NewWithT(t)
		var p playgroundv1alpha1.TenantPolicy
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(policy), &p)).To(Succeed())
		p.Spec.Sandbox.Max.CPU = ptr.To(resource.MustParse("1"))
		p.Spec.Sandbox.Max.PileSize = ptr.To(resource.MustParse("256Mi"))
		// "fair" runs an image under registry.example.com/team/, now
		// outside the list: it keeps it, and can change other fields.
		p.Spec.Sandbox.AllowedImages = []string{"registry.example.com/golden/"}
		g.Expect(k8s.Update(ctx, &p)).To(Succeed())
		// "fair" asks for 1500m, over the new ceiling of 1, and has a pile
		// of 512Mi (the default), over the new 256Mi: once the API server
		// enforces them, the team cannot raise either further...
		raise := func(cpu string) error {
			var tn playgroundv1alpha1.Tenant
			if err := alice.Get(ctx, client.ObjectKey{Namespace: restricted, Name: "fair"}, &tn); err != nil {
				return err
			}
			patch := client.MergeFrom(tn.DeepCopy())
			tn.Spec.Sandbox.Resources.CPU = ptr.To(resource.MustParse(cpu))
			return alice.Patch(ctx, &tn, patch)
		}
		g.Eventually(func() error { return raise("1800m") }).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
			Should(Satisfy(refusedBy("platform-ceilings", "ceiling of 1 per sandbox")), "a raise past the tightened ceiling")
		// ... but what does not touch the fields over it still works:
		// suspension, labels, its finalizer's removal.
		var tn playgroundv1alpha1.Tenant
		g.Expect(alice.Get(ctx, client.ObjectKey{Namespace: restricted, Name: "fair"}, &tn)).To(Succeed())
		patch := client.MergeFrom(tn.DeepCopy())
		tn.Spec.Suspended = true
		tn.Labels = map[string]string{"team": "a"}
		tn.Finalizers = nil
		g.Expect(alice.Patch(ctx, &tn, patch)).To(Succeed(), "suspension, a label and the finalizer's removal of a Tenant over a tightened ceiling")
		// The pile's other settings are its own too: its signing key's
		// rotation and its reclaim policy are not its size.
		patch = client.MergeFrom(tn.DeepCopy())
		tn.Spec.Pile.SigningKey.RotationRequest = "2026-12-03"
		tn.Spec.Pile.ReclaimPolicy = playgroundv1alpha1.ReclaimDelete
		g.Expect(alice.Patch(ctx, &tn, patch)).To(Succeed(), "the signing key and reclaim policy of a Tenant over a tightened pile ceiling")
		patch = client.MergeFrom(tn.DeepCopy())
		tn.Spec.Pile.Size = ptr.To(resource.MustParse("1Gi"))
		g.Expect(alice.Patch(ctx, &tn, patch)).To(Satisfy(refusedBy("platform-ceilings", "spec.pile.size is 1Gi", "ceiling of 256Mi")), "its pile raised past the tightened ceiling")
		patch = client.MergeFrom(tn.DeepCopy())
		tn.Spec.Sandbox.Image.Reference = "registry.example.com/team/ml/base:2"
		g.Expect(alice.Patch(ctx, &tn, patch)).To(Satisfy(refusedBy("platform-ceilings", "the images allowed are registry.example.com/golden/")), "its image changed, outside the tightened list")
		g.Expect(raise("1")).To(Succeed(), "a change that brings it within")
	})
}

// TestTenantPolicySelectors: a TenantPolicy selects namespaces as a label
// selector does (matchLabels and every operator of matchExpressions), the
// namespaces it does not select are unaffected, and each of several
// policies that select a namespace is enforced there, the refusal naming
// the one that refused.
func TestTenantPolicySelectors(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	tiny := func(name string, sel metav1.LabelSelector) *playgroundv1alpha1.TenantPolicy {
		return &playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: playgroundv1alpha1.TenantPolicySpec{
			NamespaceSelector: sel, AllowedToolSets: []playgroundv1alpha1.ToolSet{playgroundv1alpha1.ToolSetStandard}}}
	}
	policies := []*playgroundv1alpha1.TenantPolicy{
		tiny("sel-in", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sel-env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}}}}),
		tiny("sel-notin", metav1.LabelSelector{MatchLabels: map[string]string{"sel-group": "x"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sel-env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}}),
		tiny("sel-exists", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "sel-pci", Operator: metav1.LabelSelectorOpExists}, {Key: "sel-exempt", Operator: metav1.LabelSelectorOpDoesNotExist}}}),
	}
	for _, p := range policies {
		g.Expect(k8s.Create(ctx, p)).To(Succeed())
	}
	cases := []struct {
		ns     string
		labels map[string]string
		// refused names the policies that select the namespace: one of
		// them refuses the extended tool set there (none: it is allowed).
		refused []string
	}{
		{"sel-prod", map[string]string{"sel-env": "prod"}, []string{"sel-in"}},
		{"sel-staging-x", map[string]string{"sel-env": "staging", "sel-group": "x"}, []string{"sel-in", "sel-notin"}},
		{"sel-dev-x", map[string]string{"sel-env": "dev", "sel-group": "x"}, []string{"sel-notin"}},
		{"sel-x", map[string]string{"sel-group": "x"}, []string{"sel-notin"}},
		{"sel-prod-x", map[string]string{"sel-env": "prod", "sel-group": "x"}, []string{"sel-in"}},
		{"sel-pci", map[string]string{"sel-pci": ""}, []string{"sel-exists"}},
		{"sel-pci-exempt", map[string]string{"sel-pci": "yes", "sel-exempt": "yes"}, nil},
		{"sel-none", map[string]string{"sel-env": "dev"}, nil},
	}
	for _, tc := range cases {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.ns, Labels: tc.labels}}
		g.Expect(k8s.Create(ctx, ns)).To(Succeed())
	}
	extended := func(ns string) error {
		tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}, Spec: playgroundv1alpha1.TenantSpec{Tools: playgroundv1alpha1.ToolSetExtended}}
		return k8s.Create(ctx, tn, client.DryRunAll)
	}
	// In force a moment after their creation.
	for _, first := range []struct{ ns, policy string }{{"sel-prod", "sel-in"}, {"sel-x", "sel-notin"}, {"sel-pci", "sel-exists"}} {
		g.Eventually(func() error { return extended(first.ns) }).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
			Should(Satisfy(refusedBy(first.policy)), "namespace %s", first.ns)
	}
	for _, tc := range cases {
		err := extended(tc.ns)
		if len(tc.refused) == 0 {
			g.Expect(err).To(Succeed(), "namespace %s, which no policy selects", tc.ns)
			continue
		}
		g.Expect(slices.ContainsFunc(tc.refused, func(p string) bool { return refusedBy(p, "spec.tools extended is not allowed")(err) })).
			To(BeTrue(), "namespace %s, selected by %v: %v", tc.ns, tc.refused, err)
		for _, p := range policies {
			if !slices.Contains(tc.refused, p.Name) {
				g.Expect(refusedBy(p.Name)(err)).To(BeFalse(), "namespace %s refused by %s, which does not select it", tc.ns, p.Name)
			}
		}
	}
}
