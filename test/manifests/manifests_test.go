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

package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/playground-dev/playground/internal/bearermirror"
)

// expectedObjects is every object of a default installation, and which
// rendering has it.
var expectedObjects = []struct {
	kind, namespace, name string
	kustomize, helm       bool
}{
	// Helm charts do not own their namespace (helm install --create-namespace).
	{"Namespace", "", "playground-system", true, false},

	{"CustomResourceDefinition", "", "tenants.playground.dev", true, true},
	{"CustomResourceDefinition", "", "sandboxes.playground.dev", true, true},
	{"CustomResourceDefinition", "", "workermappings.playground.dev", true, true},
	{"CustomResourceDefinition", "", "facultybundles.playground.dev", true, true},
	{"CustomResourceDefinition", "", "sandboxsnapshots.playground.dev", true, true},
	{"CustomResourceDefinition", "", "tenantpolicies.playground.dev", true, true},

	{"ServiceAccount", namespace, "playground-manager", true, true},
	{"ServiceAccount", namespace, "playground-agent", true, true},
	{"ServiceAccount", namespace, "playground-gateway", true, true},
	{"ClusterRole", "", "playground-manager", true, true},
	{"ClusterRole", "", "playground-agent", true, true},
	{"ClusterRole", "", "playground-gateway", true, true},
	{"ClusterRoleBinding", "", "playground-manager", true, true},
	{"ClusterRoleBinding", "", "playground-agent", true, true},
	{"ClusterRoleBinding", "", "playground-gateway", true, true},
	{"Role", namespace, "playground-manager", true, true},
	{"Role", namespace, "playground-agent", true, true},
	{"Role", namespace, "playground-gateway", true, true},
	{"RoleBinding", namespace, "playground-manager", true, true},
	{"RoleBinding", namespace, "playground-agent", true, true},
	{"RoleBinding", namespace, "playground-gateway", true, true},

	{"Deployment", namespace, "playground-manager", true, true},
	{"DaemonSet", namespace, "playground-agent", true, true},
	{"Deployment", namespace, "playground-gateway", true, true},
	{"Service", namespace, "playground-gateway", true, true},
	{"PodDisruptionBudget", namespace, "playground-gateway", true, true},
	{"NetworkPolicy", namespace, "playground-agent-api", true, true},
	{"ValidatingAdmissionPolicy", "", "playground-agent-node-restriction", true, true},
	{"ValidatingAdmissionPolicyBinding", "", "playground-agent-node-restriction", true, true},
	{"ValidatingAdmissionPolicy", "", "playground-tenant-policy", true, true},
	{"ValidatingAdmissionPolicyBinding", "", "playground-tenant-policy", true, true},
	{"MutatingAdmissionPolicy", "", "playground-tenant-finalizer", true, true},
	{"MutatingAdmissionPolicyBinding", "", "playground-tenant-finalizer", true, true},
	// The one Secret: the key that seals worker sessions, which the chart
	// generates and kustomize cannot (docs/workers.md says how to create
	// it). No shared agent token: the gateway proves itself to the agents
	// with its ServiceAccount.
	{"Secret", namespace, "playground-gateway-session-key", false, true},
}

func expectedKeys(inKustomize bool) []string {
	var ks []string
	for _, e := range expectedObjects {
		if (inKustomize && e.kustomize) || (!inKustomize && e.helm) {
			ks = append(ks, e.kind+"/"+e.namespace+"/"+e.name)
		}
	}
	sort.Strings(ks)
	return ks
}

// TestChartCopiesMatchConfig: the chart's CRDs and RBAC rules are the
// generated ones, and its admission policies of agents and TenantPolicies
// config/admission's, byte for byte.
func TestChartCopiesMatchConfig(t *testing.T) {
	root := repoRoot(t)
	fix := "run hack/sync-chart-crds.sh after `make manifests`"

	src, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(src) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	dst, err := filepath.Glob(filepath.Join(root, "charts", "playground", "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	base := func(paths []string) []string {
		var names []string
		for _, p := range paths {
			names = append(names, filepath.Base(p))
		}
		sort.Strings(names)
		return names
	}
	if got, want := base(dst), base(src); !slices.Equal(got, want) {
		t.Errorf("charts/playground/crds holds %v, config/crd/bases %v: %s", got, want, fix)
	}
	pairs := map[string]string{}
	for _, s := range src {
		pairs[s] = filepath.Join(root, "charts", "playground", "crds", filepath.Base(s))
	}
	for _, c := range []string{"manager", "agent", "gateway"} {
		pairs[filepath.Join(root, "config", "rbac", c, "role.yaml")] = filepath.Join(root, "charts", "playground", "files", "rbac", c, "role.yaml")
	}
	for _, f := range []string{"agent-node-restriction.yaml", "tenant-policy.yaml"} {
		pairs[filepath.Join(root, "config", "admission", f)] = filepath.Join(root, "charts", "playground", "files", "admission", f)
	}
	for s, d := range pairs {
		want, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(d)
		if err != nil {
			t.Errorf("%v: %s", err, fix)
			continue
		}
		if !bytes.Equal(got, want) {
			rel, _ := filepath.Rel(root, d)
			t.Errorf("%s differs from %s: %s", rel, strings.TrimPrefix(s, root+"/"), fix)
		}
	}
}

// TestHelmLint: the chart passes `helm lint --strict`.
func TestHelmLint(t *testing.T) {
	run(t, nil, helmEnv(t), helm(t), "lint", "--strict", filepath.Join(repoRoot(t), "charts", "playground"))
}

// TestRenderedObjects: both renderings hold exactly the expected objects.
func TestRenderedObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    rendering
		want []string
	}{
		{"kustomize", renderKustomize(t), expectedKeys(true)},
		{"helm", renderHelmDefault(t), expectedKeys(false)},
	} {
		got := keys(tc.r.objs)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s renders\n  %s\nwant\n  %s\nmissing: %v\nunexpected: %v", tc.name,
				strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "), minus(tc.want, got), minus(got, tc.want))
		}
	}
}

func minus(a, b []string) []string {
	var d []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			d = append(d, x)
		}
	}
	return d
}

// TestRenderingsAgree: every object in both renderings is the same but for
// labels and annotations (helm's and kustomize's own differ).
func TestRenderingsAgree(t *testing.T) {
	k, h := renderKustomize(t), renderHelmDefault(t)
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range h.objs {
		byKey[key(o)] = o
	}
	compared := 0
	for _, ko := range k.objs {
		ho, ok := byKey[key(ko)]
		if !ok {
			continue // TestRenderedObjects says which
		}
		compared++
		a, b := normalized(t, ko), normalized(t, ho)
		if a != b {
			t.Errorf("%s differs between kustomize and helm (labels and annotations aside):\n%s", key(ko), lineDiff(a, b))
		}
	}
	if compared < 20 {
		t.Errorf("only %d objects in common", compared)
	}
}

// normalized is an object's YAML without the labels and annotations of the
// object and its pod template; selectors stay.
func normalized(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	c := o.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "labels")
	unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "annotations")
	b, err := yaml.Marshal(c.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lineDiff shows the lines of a and b that differ, with - and +.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- kustomize: "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ helm:      "+l)
		}
	}
	if len(out) == 0 {
		return "(the same lines in another order)\n--- kustomize\n" + a + "--- helm\n" + b
	}
	return strings.Join(out, "\n")
}

// TestServerSideDryRun applies each rendering to a real kube-apiserver (with
// the CRDs installed) with server-side apply and --dry-run=server: every
// object must be accepted by the real schemas, strict field validation and
// admission.
func TestServerSideDryRun(t *testing.T) {
	kubeconfig := apiServer(t)
	kc := kubectl(t)
	k := renderKustomize(t)

	// Dry-run of namespaced objects needs their namespace: create it for
	// real, from the kustomize rendering.
	ns := find(t, k, "Namespace", namespace)
	nsYAML, err := yaml.Marshal(ns.Object)
	if err != nil {
		t.Fatal(err)
	}
	run(t, nsYAML, nil, kc, "--kubeconfig", kubeconfig, "apply", "--server-side", "--field-manager=playground-test", "-f", "-")
	// The custom values install into another namespace, and the gateway
	// serves team-a.
	run(t, nil, nil, kc, "--kubeconfig", kubeconfig, "create", "namespace", "playground-apps")
	run(t, nil, nil, kc, "--kubeconfig", kubeconfig, "create", "namespace", "team-a")

	for _, tc := range []struct {
		name string
		r    rendering
	}{
		{"kustomize", k},
		{"helm", renderHelmDefault(t)},
		{"helm with custom values", renderHelmCustom(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, tc.r.raw, nil, kc, "--kubeconfig", kubeconfig, "apply", "--server-side", "--dry-run=server",
				"--field-manager=playground-test", "-f", "-")
			applied := strings.Count(string(out), "(server dry run)")
			if applied != len(tc.r.objs) {
				t.Errorf("kubectl reported %d objects applied, the rendering has %d:\n%s", applied, len(tc.r.objs), out)
			}
		})
	}

	// The dry run changed nothing: no Deployment exists.
	out := run(t, nil, nil, kc, "--kubeconfig", kubeconfig, "get", "deployments,daemonsets", "-A", "-o", "name")
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("the dry run created objects: %s", s)
	}
}

// workload converts a rendered object into its typed form.
func workload[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("%s: %v", key(o), err)
	}
	return &v
}

// renderings are the default renderings, by name.
func renderings(t *testing.T) map[string]rendering {
	return map[string]rendering{"kustomize": renderKustomize(t), "helm": renderHelmDefault(t)}
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func volumeByName(vols []corev1.Volume, name string) *corev1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

// mountOf returns the volume mounted at the directory holding path.
func mountOf(t *testing.T, pod corev1.PodSpec, c corev1.Container, path string) *corev1.Volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) == m.MountPath || path == m.MountPath {
			if v := volumeByName(pod.Volumes, m.Name); v != nil {
				return v
			}
		}
	}
	t.Fatalf("container %s mounts nothing at %s", c.Name, path)
	return nil
}

func envFrom(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func listenPort(t *testing.T, args []string, flag string) int32 {
	t.Helper()
	v, ok := flagValue(args, flag)
	if !ok {
		t.Fatalf("no --%s in %v", flag, args)
	}
	_, p, ok := strings.Cut(v, ":")
	if !ok {
		t.Fatalf("--%s=%s has no port", flag, v)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("--%s=%s: %v", flag, v, err)
	}
	return int32(n)
}

func namedPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, name)
	return 0
}

// TestAgentDaemonSet: what the oci backend needs on a real node.
func TestAgentDaemonSet(t *testing.T) {
	for name, r := range renderings(t) {
		t.Run(name, func(t *testing.T) {
			ds := workload[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "playground-agent"))
			pod := ds.Spec.Template.Spec
			if !pod.HostPID {
				t.Error("hostPID is not set: sandboxes would die with the agent's pod")
			}
			if pod.HostNetwork {
				t.Error("hostNetwork is set: the agent advertises its pod IP and the NetworkPolicy guards the pod network")
			}
			if pod.NodeSelector["playground.dev/sandbox-node"] != "true" {
				t.Errorf("nodeSelector %v, want playground.dev/sandbox-node=true", pod.NodeSelector)
			}
			if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
				return tol.Key == "playground.dev/sandbox-node" && tol.Effect == corev1.TaintEffectNoSchedule
			}) {
				t.Errorf("no toleration of the sandbox-node taint: %v", pod.Tolerations)
			}
			if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 60 {
				t.Errorf("terminationGracePeriodSeconds %v, want at least 60", g)
			}
			if pod.ServiceAccountName != "playground-agent" {
				t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
			}
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			c := pod.Containers[0]
			if len(c.Args) == 0 || c.Args[0] != "agent" {
				t.Fatalf("args %v: want the agent role first", c.Args)
			}
			if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
				t.Error("the agent is not privileged")
			}

			// State directory: a hostPath at the same path, named by --state-dir.
			state, ok := flagValue(c.Args, "state-dir")
			if !ok || !filepath.IsAbs(state) {
				t.Fatalf("--state-dir %q", state)
			}
			v := mountOf(t, pod, c, state)
			if v.HostPath == nil || v.HostPath.Path != state {
				t.Errorf("the state dir %s is not the node's %s: %+v", state, state, v.VolumeSource)
			}
			if v.HostPath != nil && (v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate) {
				t.Errorf("state dir hostPath type %v, want DirectoryOrCreate", v.HostPath.Type)
			}
			// cgroups: the host's hierarchy, and an absolute parent.
			cg := mountOf(t, pod, c, "/sys/fs/cgroup")
			if cg.HostPath == nil || cg.HostPath.Path != "/sys/fs/cgroup" {
				t.Errorf("/sys/fs/cgroup is not the node's: %+v", cg.VolumeSource)
			}
			if p, _ := flagValue(c.Args, "cgroup-parent"); !strings.HasPrefix(p, "/") {
				t.Errorf("--cgroup-parent %q is not absolute: sandboxes would live in the pod's cgroup", p)
			}

			// Downward API: the node name and the pod IP.
			if e := envFrom(c, "NODE_NAME"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
				t.Errorf("NODE_NAME is not spec.nodeName: %+v", e)
			}
			if e := envFrom(c, "POD_IP"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				t.Errorf("POD_IP is not status.podIP: %+v", e)
			}

			// The API port and the token.
			if got, want := namedPort(t, c, "api"), listenPort(t, c.Args, "listen"); got != want {
				t.Errorf("port api %d, --listen port %d", got, want)
			}
			// It trusts the gateway's ServiceAccount, and no shared token.
			if gw, _ := flagValue(c.Args, "trusted-gateway"); gw != "system:serviceaccount:"+namespace+":playground-gateway" {
				t.Errorf("--trusted-gateway %q, want the gateway's ServiceAccount", gw)
			}
			if f, ok := flagValue(c.Args, "token-file"); ok {
				t.Errorf("the agent accepts a shared token file %s", f)
			}
			if ns, _ := flagValue(c.Args, "lease-namespace"); ns != namespace {
				t.Errorf("--lease-namespace %q", ns)
			}
			for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString("api") || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
					t.Errorf("probe %+v: want GET /healthz over HTTPS on the api port (the only unauthenticated call; the API serves TLS only)", p)
				}
			}
			for _, f := range []string{"tls", "tls-cert", "tls-key"} {
				if v, ok := flagValue(c.Args, f); ok {
					t.Errorf("--%s=%s: the agent should take its certificate from the Playground signer (the default)", f, v)
				}
			}
		})
	}
}

// TestNetworkPolicy: the policy selects the agents' pods and admits to the
// API port only the gateway's and the manager's pods.
func TestNetworkPolicy(t *testing.T) {
	for name, r := range renderings(t) {
		t.Run(name, func(t *testing.T) {
			np := workload[networkingv1.NetworkPolicy](t, find(t, r, "NetworkPolicy", "playground-agent-api"))
			podLabels := func(kind, name string) labels.Set {
				o := find(t, r, kind, name)
				l, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
				return l
			}
			agent := podLabels("DaemonSet", "playground-agent")
			gateway := podLabels("Deployment", "playground-gateway")
			manager := podLabels("Deployment", "playground-manager")
			matches := func(s metav1.LabelSelector, l labels.Set) bool {
				sel, err := metav1.LabelSelectorAsSelector(&s)
				if err != nil {
					t.Fatal(err)
				}
				return !sel.Empty() && sel.Matches(l)
			}
			if !matches(np.Spec.PodSelector, agent) {
				t.Fatalf("podSelector %v does not select the agent pods %v", np.Spec.PodSelector, agent)
			}
			for who, l := range map[string]labels.Set{"gateway": gateway, "manager": manager} {
				if matches(np.Spec.PodSelector, l) {
					t.Errorf("the policy selects the %s pods too", who)
				}
			}
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				t.Errorf("policyTypes %v lack Ingress", np.Spec.PolicyTypes)
			}

			ds := workload[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "playground-agent"))
			apiPort := listenPort(t, ds.Spec.Template.Spec.Containers[0].Args, "listen")
			// Who may reach the API port: exactly the gateway and the manager.
			var apiRules int
			for _, rule := range np.Spec.Ingress {
				coversAPI := len(rule.Ports) == 0
				for _, p := range rule.Ports {
					if p.Port == nil || p.Port.IntValue() == int(apiPort) || p.Port.String() == "api" {
						coversAPI = true
					}
				}
				if !coversAPI {
					continue
				}
				apiRules++
				if len(rule.From) == 0 {
					t.Fatalf("an ingress rule admits everyone to the API port %d", apiPort)
				}
				var admitsGateway, admitsManager bool
				for _, peer := range rule.From {
					if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil {
						t.Errorf("peer %+v admits more than pods of this namespace", peer)
						continue
					}
					g, m := matches(*peer.PodSelector, gateway), matches(*peer.PodSelector, manager)
					if !g && !m {
						t.Errorf("peer %v admits pods that are neither the gateway's nor the manager's", peer.PodSelector)
					}
					if matches(*peer.PodSelector, agent) {
						t.Errorf("peer %v admits the agents themselves", peer.PodSelector)
					}
					admitsGateway, admitsManager = admitsGateway || g, admitsManager || m
				}
				if !admitsGateway || !admitsManager {
					t.Errorf("the API port admits gateway=%v manager=%v; want both", admitsGateway, admitsManager)
				}
			}
			if apiRules == 0 {
				t.Errorf("no rule admits anyone to the API port %d", apiPort)
			}
		})
	}
}

// TestControlPlaneWorkloads: the manager and the gateway are hardened,
// probed where they serve, and wired to their Service, PDB and token.
func TestControlPlaneWorkloads(t *testing.T) {
	for name, r := range renderings(t) {
		t.Run(name, func(t *testing.T) {
			mgr := workload[appsv1.Deployment](t, find(t, r, "Deployment", "playground-manager"))
			gw := workload[appsv1.Deployment](t, find(t, r, "Deployment", "playground-gateway"))
			for _, d := range []*appsv1.Deployment{mgr, gw} {
				if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
					t.Errorf("%s: replicas %v, want 2", d.Name, d.Spec.Replicas)
				}
				hardened(t, d.Name, d.Spec.Template.Spec)
				if d.Spec.Template.Spec.ServiceAccountName != d.Name {
					t.Errorf("%s: serviceAccountName %q", d.Name, d.Spec.Template.Spec.ServiceAccountName)
				}
			}

			// Manager: leader election, probes and metrics on its flags' ports.
			mc := mgr.Spec.Template.Spec.Containers[0]
			if mc.Args[0] != "manager" || !slices.Contains(mc.Args, "--leader-elect") {
				t.Errorf("manager args %v: want the manager role and --leader-elect", mc.Args)
			}
			// It signs serving certificates for the agents' ServiceAccount
			// only (by default playground-agent of the lease namespace).
			if v, ok := flagValue(mc.Args, "agent-service-account"); ok && v != "system:serviceaccount:"+namespace+":playground-agent" {
				t.Errorf("manager --agent-service-account %q, want the agents' ServiceAccount", v)
			}
			if got, want := namedPort(t, mc, "probes"), listenPort(t, mc.Args, "health-probe-bind-address"); got != want || got != 8081 {
				t.Errorf("manager probes port %d, flag %d, want 8081", got, want)
			}
			if got, want := namedPort(t, mc, "metrics"), listenPort(t, mc.Args, "metrics-bind-address"); got != want || got != 8080 {
				t.Errorf("manager metrics port %d, flag %d, want 8080", got, want)
			}
			probes(t, mc, "probes")

			// Gateway: probes, Service 80 -> the listen port, PDB, token.
			gc := gw.Spec.Template.Spec.Containers[0]
			if gc.Args[0] != "gateway" {
				t.Errorf("gateway args %v", gc.Args)
			}
			if _, ok := flagValue(gc.Args, "namespace"); ok {
				t.Errorf("the gateway is restricted to a namespace by default: %v", gc.Args)
			}
			httpPort := namedPort(t, gc, "http")
			if want := listenPort(t, gc.Args, "listen"); httpPort != want || httpPort != 8080 {
				t.Errorf("gateway http port %d, --listen %d, want 8080", httpPort, want)
			}
			probes(t, gc, "http")
			if got, want := namedPort(t, gc, "metrics"), listenPort(t, gc.Args, "metrics-bind-address"); got != want {
				t.Errorf("gateway metrics port %d, flag %d", got, want)
			}
			podLabels := labels.Set(gw.Spec.Template.Labels)

			svc := workload[corev1.Service](t, find(t, r, "Service", "playground-gateway"))
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) == 0 {
				t.Errorf("the Service's selector %v does not select the gateway pods %v", svc.Spec.Selector, podLabels)
			}
			if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 ||
				(svc.Spec.Ports[0].TargetPort != intstr.FromString("http") && svc.Spec.Ports[0].TargetPort != intstr.FromInt32(httpPort)) {
				t.Errorf("Service %s ports %+v: want ClusterIP 80 -> http", svc.Spec.Type, svc.Spec.Ports)
			}

			pdb := workload[policyv1.PodDisruptionBudget](t, find(t, r, "PodDisruptionBudget", "playground-gateway"))
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(podLabels) {
				t.Errorf("the PDB's selector %v does not select the gateway pods (%v)", pdb.Spec.Selector, err)
			}
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
				t.Errorf("PDB minAvailable %v, want 1", pdb.Spec.MinAvailable)
			}

			// The gateway mints its ServiceAccount's tokens for the agents:
			// no shared token file, and the right to mint its own only.
			if f, ok := flagValue(gc.Args, "agent-token-file"); ok {
				t.Errorf("the gateway presents a shared token file %s", f)
			}
			if gw.Spec.Template.Spec.AutomountServiceAccountToken != nil && !*gw.Spec.Template.Spec.AutomountServiceAccountToken {
				t.Error("the gateway's pod mounts no ServiceAccount token: it could not mint the agents' tokens")
			}
			mintsOwn(t, r, gw.Spec.Template.Spec.ServiceAccountName, namespace)
			// The manager mints its own, to deliver brokered egress credentials.
			mintsOwn(t, r, "playground-manager", namespace)
		})
	}
}

// mintsOwn checks that ServiceAccount sa of namespace ns may create tokens
// of itself through a Role there, and that every rule on tokens is such a
// Role's, for its own component's ServiceAccount (the gateway's and the
// manager's, named as their Roles are) and no other.
func mintsOwn(t *testing.T, r rendering, sa, ns string) {
	t.Helper()
	found := false
	for _, o := range r.objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, raw := range rules {
			rule, _ := raw.(map[string]any)
			res, _, _ := unstructured.NestedStringSlice(rule, "resources")
			if !slices.Contains(res, "serviceaccounts/token") {
				continue
			}
			names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
			if o.GetKind() != "Role" || o.GetNamespace() != ns || !slices.Equal(names, []string{o.GetName()}) {
				t.Errorf("%s %s/%s lets someone create tokens of %v: want a Role in %s for its own ServiceAccount only", o.GetKind(), o.GetNamespace(), o.GetName(), names, ns)
				continue
			}
			if o.GetName() == sa {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no Role lets %s/%s create its own tokens", ns, sa)
	}
}

func hardened(t *testing.T, name string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext %+v: want runAsNonRoot with a non-zero runAsUser", name, psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccomp profile is not RuntimeDefault", name)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 ||
			(sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("%s/%s: securityContext %+v: want a read-only root, no privilege escalation, ALL capabilities dropped", name, c.Name, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s/%s: resources %+v: want CPU and memory requests and a memory limit", name, c.Name, c.Resources)
		}
	}
}

// probes checks GET /healthz (liveness) and /readyz (readiness) on port.
func probes(t *testing.T, c corev1.Container, port string) {
	t.Helper()
	for path, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString(port) {
			t.Errorf("%s: want a probe GET %s on port %s, got %+v", c.Name, path, port, p)
		}
	}
}

// TestFlagsParse runs each rendered container's arguments through the real
// playground binary with -h appended: the flag set parses everything before
// it, so an unknown flag or a malformed value fails, and a clean parse
// prints the help and exits 0.
func TestFlagsParse(t *testing.T) {
	bin := playgroundBinary(t)
	all := renderings(t)
	all["helm with custom values"] = renderHelmCustom(t)
	all["helm with another lease namespace"] = renderHelmLeaseNamespace(t)
	for name, r := range all {
		for _, o := range r.objs {
			if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
				continue
			}
			var tmpl corev1.PodTemplateSpec
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(mustNested(t, o, "spec", "template"), &tmpl, true); err != nil {
				t.Fatalf("%s %s: %v", name, key(o), err)
			}
			for _, c := range tmpl.Spec.Containers {
				if len(c.Command) != 0 {
					t.Errorf("%s %s: command %v overrides the image's entrypoint (the playground binary)", name, key(o), c.Command)
				}
				cmd := exec.Command(bin, append(slices.Clone(c.Args), "-h")...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s %s: playground %s: %v\n%s", name, key(o), strings.Join(c.Args, " "), err, lastLines(string(out), 3))
				}
			}
		}
	}
}

func mustNested(t *testing.T, o *unstructured.Unstructured, fields ...string) map[string]any {
	t.Helper()
	m, ok, err := unstructured.NestedMap(o.Object, fields...)
	if err != nil || !ok {
		t.Fatalf("%s: no %s (%v)", key(o), strings.Join(fields, "."), err)
	}
	return m
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// TestHelmCustomValues: the values that move or drop objects do so
// consistently. The release is in playground-apps; the Leases, and so the
// Roles, stay in playground-system; the gateway, told namespace team-a,
// has a Role there instead of a ClusterRole, and one in its own namespace
// to mint its tokens.
func TestHelmCustomValues(t *testing.T) {
	r := renderHelmCustom(t)
	validating := 0
	defer func() {
		if validating != 4 {
			t.Errorf("the chart renders %d objects of the agents' node restriction and the TenantPolicies' ceilings, want each policy and its binding", validating)
		}
	}()
	for _, o := range r.objs {
		switch o.GetKind() {
		case "Secret":
			// Only the gateway's session key, which is optional.
			t.Errorf("gateway.sessionKey.create=false, yet the chart renders Secret %s (and no component shares a secret)", o.GetName())
		case "PodDisruptionBudget":
			t.Errorf("gateway.pdb.enabled=false, yet the chart renders %s", key(o))
		case "Role", "RoleBinding":
			// The gateway's Roles (in team-a, and to mint its tokens in its
			// own namespace) and the manager's to mint its own.
			if o.GetNamespace() != namespace && (o.GetName() != "playground-gateway" || (o.GetNamespace() != "team-a" && o.GetNamespace() != "playground-apps")) &&
				(o.GetName() != "playground-manager" || o.GetNamespace() != "playground-apps") {
				t.Errorf("%s is neither in the lease namespace %s nor the gateway's in team-a or its own", key(o), namespace)
			}
		case "ClusterRole", "ClusterRoleBinding":
			if o.GetName() == "playground-gateway" {
				t.Errorf("gateway.namespace=team-a, yet the chart renders %s", key(o))
			}
		case "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
			t.Errorf("admissionPolicies.enabled=false, yet the chart renders %s", key(o))
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			// The agents' node restriction and the TenantPolicies'
			// ceilings: always, and cluster-scoped.
			validating++
			if o.GetNamespace() != "" {
				t.Errorf("%s has a namespace", key(o))
			}
		case "CustomResourceDefinition":
		default:
			if o.GetNamespace() != "playground-apps" {
				t.Errorf("%s is not in the release namespace playground-apps", key(o))
			}
		}
		if k := o.GetKind(); k == "RoleBinding" || k == "ClusterRoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if ns := s.(map[string]any)["namespace"]; ns != "playground-apps" {
					t.Errorf("%s binds a ServiceAccount of namespace %v, want playground-apps", key(o), ns)
				}
			}
		}
	}
	ds := workload[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "playground-agent"))
	ac := ds.Spec.Template.Spec.Containers[0]
	gw := workload[appsv1.Deployment](t, find(t, r, "Deployment", "playground-gateway"))
	gc := gw.Spec.Template.Spec.Containers[0]
	mgr := workload[appsv1.Deployment](t, find(t, r, "Deployment", "playground-manager"))
	mc := mgr.Spec.Template.Spec.Containers[0]

	for who, args := range map[string][]string{"agent": ac.Args, "manager": mc.Args} {
		if v, _ := flagValue(args, "lease-namespace"); v != namespace {
			t.Errorf("%s --lease-namespace %q, want %s", who, v, namespace)
		}
	}
	if v, _ := flagValue(ac.Args, "node-labels"); v != "disk=ssd,zone=a" {
		t.Errorf("agent --node-labels %q, want disk=ssd,zone=a", v)
	}
	if v, _ := flagValue(ac.Args, "metrics-bind-address"); v != "0" {
		t.Errorf("agent --metrics-bind-address %q with agent.metricsPort=0", v)
	}
	if ds.Spec.Template.Spec.PriorityClassName != "system-node-critical" {
		t.Errorf("agent priorityClassName %q", ds.Spec.Template.Spec.PriorityClassName)
	}
	if v, _ := flagValue(gc.Args, "namespace"); v != "team-a" {
		t.Errorf("gateway --namespace %q, want team-a", v)
	}
	if !slices.Contains(mc.Args, "-v=2") {
		t.Errorf("manager args %v lack the extra -v=2", mc.Args)
	}
	for _, c := range []corev1.Container{ac, gc, mc} {
		if c.Image != "ghcr.io/playground-dev/playground:v9.9.9" {
			t.Errorf("%s image %s", c.Name, c.Image)
		}
	}
	if v, _ := flagValue(ac.Args, "trusted-gateway"); v != "system:serviceaccount:playground-apps:playground-gateway" {
		t.Errorf("agent --trusted-gateway %q, want the gateway's ServiceAccount in playground-apps", v)
	}
	if v, _ := flagValue(ac.Args, "trusted-manager"); v != "system:serviceaccount:playground-apps:playground-manager" {
		t.Errorf("agent --trusted-manager %q, want the manager's ServiceAccount in playground-apps", v)
	}
	mintsOwn(t, r, gw.Spec.Template.Spec.ServiceAccountName, "playground-apps")
	svc := workload[corev1.Service](t, find(t, r, "Service", "playground-gateway"))
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("Service %s %+v, want NodePort 30080", svc.Spec.Type, svc.Spec.Ports)
	}
	np := workload[networkingv1.NetworkPolicy](t, find(t, r, "NetworkPolicy", "playground-agent-api"))
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			t.Errorf("with the agent's metrics off, the policy still opens %v to everyone", rule.Ports)
		}
	}
}

// TestHelmLeaseNamespace: another lease namespace reaches every component
// (the gateway sends the agent token only to endpoints registered there),
// and the Roles that read and write the Leases move with it.
func TestHelmLeaseNamespace(t *testing.T) {
	r := renderHelmLeaseNamespace(t)
	for _, o := range r.objs {
		// The gateway's and the manager's Roles to mint their own tokens
		// stay in their namespace.
		if k := o.GetKind(); (k == "Role" || k == "RoleBinding") && o.GetNamespace() != "elsewhere" &&
			((o.GetName() != "playground-gateway" && o.GetName() != "playground-manager") || o.GetNamespace() != namespace) {
			t.Errorf("%s is not in the lease namespace elsewhere", key(o))
		}
	}
	gwd := workload[appsv1.Deployment](t, find(t, r, "Deployment", "playground-gateway"))
	mintsOwn(t, r, gwd.Spec.Template.Spec.ServiceAccountName, namespace)
	for kind, name := range map[string]string{"DaemonSet": "playground-agent", "Deployment": "playground-manager"} {
		pod := mustNested(t, find(t, r, kind, name), "spec", "template", "spec")
		args := podArgs(t, pod)
		if v, _ := flagValue(args, "lease-namespace"); v != "elsewhere" {
			t.Errorf("%s --lease-namespace %q, want elsewhere", name, v)
		}
	}
	gw := workload[appsv1.Deployment](t, find(t, r, "Deployment", "playground-gateway"))
	if v, _ := flagValue(gw.Spec.Template.Spec.Containers[0].Args, "lease-namespace"); v != "elsewhere" {
		t.Errorf("gateway --lease-namespace %q, want elsewhere", v)
	}
}

// podArgs are the first container's arguments of a pod spec.
func podArgs(t *testing.T, pod map[string]any) []string {
	t.Helper()
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pod, &spec); err != nil {
		t.Fatal(err)
	}
	return spec.Containers[0].Args
}

// TestGatewayReadsNoTenantSecret: no rule of the gateway, generated or
// rendered, in a ClusterRole or a Role, lets it read a Secret but the
// manager's copies of the workers' bearers, by name, in the lease
// namespace (the Role that also holds its leases): it authenticates
// tokens against the hashes the manager publishes in the Tenants' status,
// and presents to workers only the bearers the manager copied
// (internal/bearermirror). Nor does any name every resource of the core
// group. With gateway.namespace the chart gives it a Role in that
// namespace and no ClusterRole.
func TestGatewayReadsNoTenantSecret(t *testing.T) {
	generated, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "rbac", "gateway", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	genObjs, err := decode(generated)
	if err != nil {
		t.Fatal(err)
	}
	all := renderings(t)
	all["generated (config/rbac/gateway)"] = rendering{raw: generated, objs: genObjs}
	all["helm with custom values"] = renderHelmCustom(t)
	all["helm with another lease namespace"] = renderHelmLeaseNamespace(t)
	all["helm with the gateway in the lease namespace"] = renderHelm(t, "helm (gateway in the lease namespace)", "--set", "gateway.namespace="+namespace)
	copies := bearermirror.SecretNames()
	for name, r := range all {
		var roles []string
		readsCopies := false
		for _, o := range r.objs {
			if (o.GetKind() != "ClusterRole" && o.GetKind() != "Role") || o.GetName() != "playground-gateway" {
				continue
			}
			roles = append(roles, key(o))
			// A Role's fields are a subset of a ClusterRole's.
			rules := workload[rbacv1.ClusterRole](t, o).Rules
			leases := slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "leases") })
			for _, rule := range rules {
				core := slices.Contains(rule.APIGroups, "") || slices.Contains(rule.APIGroups, "*")
				if core && slices.Contains(rule.Resources, "*") {
					t.Errorf("%s: %s grants %v on every resource", name, key(o), rule.Verbs)
				}
				if !core || !slices.Contains(rule.Resources, "secrets") {
					continue
				}
				readsCopies = true
				if o.GetKind() != "Role" || !leases || len(rule.ResourceNames) == 0 || !slices.Equal(rule.ResourceNames, copies) ||
					slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
					t.Errorf("%s: %s grants %v on secrets %v: want get, list and watch of the copies of bearers %v, in the lease namespace only", name, key(o), rule.Verbs, rule.ResourceNames, copies)
				}
			}
		}
		if len(roles) == 0 {
			t.Errorf("%s: no roles of the gateway", name)
		}
		if !readsCopies {
			t.Errorf("%s: the gateway may not read the copies of the workers' bearers", name)
		}
	}

	custom := keys(renderHelmCustom(t).objs)
	for _, want := range []string{"Role/team-a/playground-gateway", "RoleBinding/team-a/playground-gateway", "Role/" + namespace + "/playground-gateway"} {
		if !slices.Contains(custom, want) {
			t.Errorf("gateway.namespace=team-a renders no %s", want)
		}
	}
	for _, unwanted := range []string{"ClusterRole//playground-gateway", "ClusterRoleBinding//playground-gateway"} {
		if slices.Contains(custom, unwanted) {
			t.Errorf("gateway.namespace=team-a still renders %s", unwanted)
		}
	}
}

// TestHelmAdmissionPolicyFollowsTheCluster: by default the chart installs
// the Tenant finalizer's MutatingAdmissionPolicy only where the cluster
// serves the kind (an older API server would refuse the whole release);
// admissionPolicies.enabled=true installs it regardless.
func TestHelmAdmissionPolicyFollowsTheCluster(t *testing.T) {
	policies := func(r rendering) []string {
		var ks []string
		for _, o := range r.objs {
			if strings.HasPrefix(o.GetKind(), "MutatingAdmissionPolicy") {
				ks = append(ks, key(o))
			}
		}
		return ks
	}
	if got := policies(renderHelm(t, "helm (before Kubernetes 1.36)")); len(got) != 0 {
		t.Errorf("for a cluster that does not serve MutatingAdmissionPolicy the chart renders %v", got)
	}
	if got := policies(renderHelm(t, "helm (policies forced)", "--set", "admissionPolicies.enabled=true")); len(got) != 2 {
		t.Errorf("admissionPolicies.enabled=true renders %v, want the policy and its binding", got)
	}
	if got := policies(renderHelmDefault(t)); len(got) != 2 {
		t.Errorf("for a cluster that serves MutatingAdmissionPolicy the chart renders %v, want the policy and its binding", got)
	}
}
