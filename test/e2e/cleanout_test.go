//go:build linux

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

package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/kubectl-playground/kubectlplugin"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/bearermirror"
	"github.com/playground-dev/playground/internal/netnstest"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/internal/sysctltest"
	"github.com/playground-dev/playground/internal/testbin"
	"github.com/playground-dev/playground/mcpgateway"
)

// TestDeletingLeavesNothing: one of every kind (TenantPolicy, FacultyBundle,
// Tenant, Sandbox, WorkerMapping, SandboxSnapshot), with every option that
// makes node or cluster state (egress by network and by host name with a
// brokered credential, the generated signing key, faculties built on the
// node, a worker in a sandbox and one behind a Service with its bearer, a
// snapshot and a fork, idle suspension, which has put a sandbox to sleep,
// usage limits), through a real API server, manager and agent with runc
// sandboxes; then everything deleted as its user would delete it. Under
// reclaim policy Delete no object, file, process, cgroup, nftables table,
// veth, network namespace, mount, loop device, listening socket or Secret
// of it is left. Under Retain the node keeps exactly each sandbox's pile
// (its image and the node's record of it) and the namespace each
// tenant's signing key's Secret, nothing else; kubectl playground pile
// delete then removes the piles, and nothing is left.
func TestDeletingLeavesNothing(t *testing.T) {
	ocitest.Require(t)
	sysctltest.HoldIPv4Forwarding(t)
	g := NewWithT(t)

	// A world of test hosts, as TestBrokeredCredential's: the brokered
	// host, its DNS zone, and HTTPS the node's broker verifies.
	const api = "198.19.78.1"
	world := netnstest.New(t, "198.19.78", 1)
	world.ServeZone(t, api+":53", map[string][]string{"api.test.": {"api.test. 60 IN A " + api}})
	roots := world.ServeHTTPS(t, api+":443", "api.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer cleanout" {
			_, _ = w.Write([]byte("authorized\n"))
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))

	startManager(t)
	src := t.TempDir()
	worker, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-example-worker", "-trimpath")
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(worker)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(src, "playground-example-worker"), data, 0o755)).To(Succeed())

	n := &node{name: "cleanout-1", labels: pool("cleanout"), stateDir: ocitest.StateDir(t), hostPathPrefixes: []string{src}}
	be, err := oci.New(oci.Options{StateDir: n.stateDir, GuestBinary: ocitest.GuestBinary(t), Network: oci.NetworkEgress,
		EgressResolvers: []string{api + ":53"}, EgressRoots: roots})
	g.Expect(err).NotTo(HaveOccurred())
	n.backends = []backend.Backend{be}
	startNode(t, n)
	g.Eventually(func() error {
		return k8sClient.Get(context.Background(), client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(n.name)}, &coordinationv1.Lease{})
	}, settle, 100*time.Millisecond).Should(Succeed(), "the node registers")
	// What the node holds before any tenant came: its own, not theirs.
	before := stateFiles(t, n.stateDir)

	for _, policy := range []playgroundv1alpha1.ReclaimPolicy{playgroundv1alpha1.ReclaimDelete, playgroundv1alpha1.ReclaimRetain} {
		t.Run(string(policy), func(t *testing.T) {
			g := NewWithT(t)
			r := createEverything(t, n, src, policy)
			deleteEverything(t, r)

			if policy == playgroundv1alpha1.ReclaimRetain {
				// Exactly the piles and the keys, each where it was.
				var piles []string
				for _, id := range r.trace.ids {
					piles = append(piles, "sandbox-ids/"+id, "sandboxes/"+id, "sandboxes/"+id+"/pile.img")
				}
				g.Expect(namespacedObjects(t, r.ns)).To(ConsistOf(r.keySecrets()), "Retain keeps each tenant's signing key's Secret, nothing else")
				g.Expect(newFiles(before, stateFiles(t, n.stateDir), r.trace.ids)).To(ConsistOf(piles), "Retain keeps each sandbox's pile and the node's record of it, nothing else")
				g.Expect(clusterLeftovers(t, r)).To(BeEmpty())
				g.Expect(nodeLeftovers(t, n, r.trace)).To(BeEmpty())

				// The plugin removes the piles; the keys' Secrets are the
				// user's to delete.
				for _, name := range r.tenants {
					out, err := plugin(t, r.ns, "", "pile", "delete", name, "--yes", "--agent-cleartext", "--agent-token-file", r.tokenFile)
					g.Expect(err).NotTo(HaveOccurred(), out)
					g.Expect(out).To(MatchRegexp(`removed: the pile of Sandbox %s/%s on node %s \(sandbox sbx-[0-9a-f]{20}\)`, r.ns, name, n.name))
				}
				for _, s := range r.keySecrets() {
					g.Expect(k8sClient.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: strings.TrimPrefix(s, "Secret/")}})).To(Succeed())
				}
			}

			// Each said apart, so that one failure does not hide another.
			for what, left := range map[string][]string{
				"objects of them in their namespace":   namespacedObjects(t, r.ns),
				"objects of them elsewhere":            clusterLeftovers(t, r),
				"files of them on the node":            newFiles(before, stateFiles(t, n.stateDir), r.trace.ids),
				"what the node's kernel holds of them": nodeLeftovers(t, n, r.trace),
			} {
				if len(left) > 0 {
					t.Errorf("%s are left:\n  %s", what, strings.Join(left, "\n  "))
				}
			}
			// The agent's book of usage, and the series of the metrics it
			// and the manager serve, forget a sandbox at the agent's next
			// reading.
			g.Eventually(func() []string {
				left := metricSeries(t, r)
				if b, _ := os.ReadFile(filepath.Join(n.stateDir, "usage.json")); strings.Contains(string(b), r.ns+"/") {
					left = append(left, "the agent's book of usage, usage.json")
				}
				return left
			}, 3*nodeagent.DefaultUsageInterval, 200*time.Millisecond).Should(BeEmpty(), "the agent's and the manager's accounts forget them")
		})
	}
}

// round is one round of TestDeletingLeavesNothing: what it created, and
// what the node made of it.
type round struct {
	ns, policyName string
	tenants        []string
	tokenFile      string
	trace          *nodeTrace
}

// keySecrets are the objects of the tenants' generated signing keys.
func (r *round) keySecrets() []string {
	out := make([]string, len(r.tenants))
	for i, name := range r.tenants {
		out[i] = "Secret/" + playgroundv1alpha1.SigningKeySecretName(name)
	}
	return out
}

// createEverything creates the round's objects, each with what makes node
// or cluster state, and waits until the node has made it.
func createEverything(t *testing.T, n *node, workerDir string, policy playgroundv1alpha1.ReclaimPolicy) *round {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	r := &round{ns: ns, policyName: "cleanout-" + ns, trace: &nodeTrace{}}
	r.tokenFile = filepath.Join(t.TempDir(), "agent-token")
	g.Expect(os.WriteFile(r.tokenFile, []byte(agentToken+"\n"), 0o600)).To(Succeed())

	// A policy bound to the namespace by its label.
	var nsObj corev1.Namespace
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &nsObj)).To(Succeed())
	nsObj.Labels = map[string]string{"e2e-cleanout": ns}
	g.Expect(k8sClient.Update(ctx, &nsObj)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.policyName},
		Spec: playgroundv1alpha1.TenantPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"e2e-cleanout": ns}},
			Namespace:         playgroundv1alpha1.NamespaceCeilings{MaxSandboxes: ptr.To[int32](10)},
		}})).To(Succeed())

	// What the user brings: a credential, a bundle's source, a bearer.
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-key"}, Type: playgroundv1alpha1.EgressCredentialSecretType,
			StringData: map[string]string{"token": "Bearer cleanout"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-bearer"}, Type: playgroundv1alpha1.WorkerBearerSecretType,
			StringData: map[string]string{"token": "svc-bearer-0123456789"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"},
			Data: map[string]string{"hello": "#!/bin/sh\necho hello from $PERSONA\n"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-worker"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8765}}}},
		&playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"},
			Spec: playgroundv1alpha1.FacultyBundleSpec{
				Source:   playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: "tools"}},
				Build:    &playgroundv1alpha1.BundleBuild{Command: []string{"/bin/sh", "-c", "cp /src/hello /out/hello && chmod 0755 /out/hello"}},
				Binaries: []string{"hello"},
			}},
		&playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
			Spec: playgroundv1alpha1.FacultyBundleSpec{
				Source:   playgroundv1alpha1.BundleSource{HostPath: &playgroundv1alpha1.HostPathSource{Path: workerDir}},
				Binaries: []string{"playground-example-worker"},
			}},
	} {
		g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	}

	tenant := func(name string, mutate func(*playgroundv1alpha1.Tenant)) {
		applyTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) {
			inPool("cleanout")(tn)
			tn.Spec.Pile.ReclaimPolicy = policy
			mutate(tn)
		})
		r.tenants = append(r.tenants, name)
	}
	tenant("full", func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Tools = playgroundv1alpha1.ToolSetExtended
		tn.Spec.Sandbox.Faculties = []playgroundv1alpha1.FacultyBundleReference{{Name: "tools"}}
		tn.Spec.Sandbox.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
			Egress: []playgroundv1alpha1.EgressRule{
				{CIDR: "198.19.78.0/24", Ports: []int32{80}},
				{Host: "api.test", Ports: []int32{443},
					Credential: &playgroundv1alpha1.EgressCredential{SecretRef: playgroundv1alpha1.SecretKeyReference{Name: "api-key"}}},
			}}
		tn.Spec.Sandbox.IdleSuspend = &playgroundv1alpha1.IdleSuspend{After: metav1.Duration{Duration: 10 * time.Second}}
		tn.Spec.Sandbox.UsageLimits = &playgroundv1alpha1.UsageLimits{CPUSeconds: ptr.To[int64](3600), Period: metav1.Duration{Duration: time.Hour}}
		tn.Spec.Sandbox.Resources.Memory = ptr.To(resource.MustParse("512Mi"))
	})
	tenant("native", func(tn *playgroundv1alpha1.Tenant) {
		tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers
		tn.Spec.Sandbox.Faculties = []playgroundv1alpha1.FacultyBundleReference{{Name: "worker"}}
	})
	tenant("svc", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers })
	for _, wm := range []*playgroundv1alpha1.WorkerMapping{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "native"}, Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "native"},
			Destination: playgroundv1alpha1.WorkerDestination{Sandbox: &playgroundv1alpha1.SandboxProcessDestination{
				Command: []string{"playground-example-worker", "-listen", "127.0.0.1:8765"}, Port: 8765,
			}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}, Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef:       playgroundv1alpha1.LocalObjectReference{Name: "svc"},
			Destination:     playgroundv1alpha1.WorkerDestination{Service: &playgroundv1alpha1.ServiceDestination{Name: "svc-worker", Port: 8765}},
			BearerSecretRef: &playgroundv1alpha1.SecretKeyReference{Name: "svc-bearer"},
		}},
	} {
		g.Expect(k8sClient.Create(ctx, wm)).To(Succeed())
	}

	_, full := waitReadyWithin(t, ns, "full", 2*time.Minute)
	_, native := waitReadyWithin(t, ns, "native", 2*time.Minute)
	// The service worker has no pod: its mapping waits for one, and its
	// bearer is copied meanwhile.
	svc := sandboxOf(g, ns, "svc")
	g.Eventually(func(g Gomega) {
		var copies corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace,
			Name: bearermirror.SecretName(bearermirror.ShardOf(ns, "svc"))}, &copies)).To(Succeed())
		g.Expect(copies.Data).To(HaveKey(bearermirror.Key(ns, "svc")))
	}, settle, 200*time.Millisecond).Should(Succeed(), "the service worker's bearer is copied")

	// The node's state of them: the brokered credential used, the faculty
	// run, the worker running.
	g.Eventually(func() string {
		return shell(t, full, "curl -sS --max-time 10 https://api.test/ 2>&1; true")
	}, settle, 200*time.Millisecond).Should(Equal("authorized\n"), "the brokered credential reached the node")
	g.Expect(shell(t, full, "hello")).To(Equal("hello from full\n"))
	g.Eventually(func(g Gomega) {
		var wm playgroundv1alpha1.WorkerMapping
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "native"}, &wm)).To(Succeed())
		g.Expect(wm.Status.Worker).NotTo(BeNil())
		g.Expect(wm.Status.Worker.Running).To(BeTrue())
	}, settle, 200*time.Millisecond).Should(Succeed())

	// A snapshot of the native worker's sandbox, and a fork of it.
	snap := &playgroundv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "snap"},
		Spec: playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "native"}}}
	g.Expect(k8sClient.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap)).To(Succeed())
		g.Expect(snap.Status.Phase).To(Equal(playgroundv1alpha1.SnapshotReady), "%+v", snap.Status.Conditions)
	}, settle, 200*time.Millisecond).Should(Succeed())
	g.Expect(filepath.Join(n.stateDir, "snapshots", snap.Status.SnapshotID)).To(BeADirectory())
	tenant("fork", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.FromSnapshot = "snap" })
	_, fork := waitReady(t, ns, "fork")

	for _, sbx := range []*playgroundv1alpha1.Sandbox{full, native, fork} {
		r.trace.capture(t, n, sbx)
	}
	r.trace.ids = append(r.trace.ids, svc.Status.SandboxID)
	// The probe sees each kind of thing the node holds of them while
	// they run: what it finds nothing of afterwards is gone.
	held := strings.Join(nodeLeftovers(t, n, r.trace), "\n")
	for _, kind := range []string{"process ", "cgroup ", "mount ", "loop device ", "link ", "nftables table ", "socket "} {
		g.Expect(held).To(ContainSubstring(kind), "the probe finds a %s of the running sandboxes", kind)
	}
	g.Eventually(func() []string { return metricSeries(t, r) }, 3*nodeagent.DefaultUsageInterval, 200*time.Millisecond).
		ShouldNot(BeEmpty(), "the probe finds their metrics' series")

	// Idle, the full tenant's sandbox goes to sleep: its container stops,
	// its network stays for its wake.
	g.Eventually(func() string { return runcContainers(t, n) }, 2*time.Minute, 500*time.Millisecond).
		ShouldNot(ContainSubstring(full.Status.SandboxID), "the idle sandbox sleeps")
	return r
}

// sandboxOf waits until the tenant's Sandbox has its sandbox ID.
func sandboxOf(g Gomega, ns, name string) *playgroundv1alpha1.Sandbox {
	var sbx playgroundv1alpha1.Sandbox
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sbx)).To(Succeed())
		g.Expect(sbx.Status.SandboxID).NotTo(BeEmpty())
	}, settle, 200*time.Millisecond).Should(Succeed())
	return &sbx
}

// deleteEverything deletes what the round created, as its user would
// (kubectl delete), and waits until every object is gone.
func deleteEverything(t *testing.T, r *round) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var objs []client.Object
	for _, name := range []string{"native", "svc"} {
		objs = append(objs, &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}})
	}
	objs = append(objs, &playgroundv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "snap"}})
	for _, name := range r.tenants {
		objs = append(objs, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}})
	}
	for _, name := range []string{"tools", "worker"} {
		objs = append(objs, &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}})
	}
	objs = append(objs,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "api-key"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "svc-bearer"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "tools"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "svc-worker"}},
		&playgroundv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.policyName}},
	)
	for _, o := range objs {
		g.Expect(k8sClient.Delete(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
	}
	for _, o := range objs {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o))
		}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "%T %s is deleted", o, o.GetName())
	}
}

// plugin runs kubectl playground in namespace ns with stdin.
func plugin(t *testing.T, ns, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut strings.Builder
	err := kubectlplugin.Run(context.Background(), append([]string{"-n", ns, "--timeout", "60s"}, args...),
		kubectlplugin.Env{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut, Config: cp.Config})
	return out.String() + errOut.String(), err
}

// namespacedObjects lists every object of namespace ns, of every kind the
// API server serves but Events, as Kind/name.
func namespacedObjects(t *testing.T, ns string) []string {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(cp.Config)
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range l.APIResources {
			if !slices.Contains(res.Verbs, "list") || res.Name == "events" || strings.Contains(res.Name, "/") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(res.Name)).Namespace(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s: %v", res.Name, err)
			}
			for _, it := range items.Items {
				out = append(out, res.Kind+"/"+it.GetName())
			}
		}
	}
	return out
}

// clusterLeftovers are the objects of the round outside its namespace:
// its policy, its bearer's copy.
func clusterLeftovers(t *testing.T, r *round) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: r.policyName}, &playgroundv1alpha1.TenantPolicy{}); !apierrors.IsNotFound(err) {
		out = append(out, "TenantPolicy/"+r.policyName)
	}
	var secrets corev1.SecretList
	if err := k8sClient.List(ctx, &secrets, client.InNamespace(agentlease.DefaultNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		for k := range s.Data {
			if bearermirror.NamespaceOfKey(k) == r.ns {
				out = append(out, fmt.Sprintf("Secret %s/%s holds %s", s.Namespace, s.Name, k))
			}
		}
	}
	return out
}

// metricSeries lists the series of the in-process components' metrics
// (the manager's and the agent's) that name one of the round's objects
// or sandboxes.
func metricSeries(t *testing.T, r *round) []string {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				v := l.GetValue()
				if strings.Contains(v, r.ns) || slices.ContainsFunc(r.trace.ids, func(id string) bool { return strings.Contains(v, id) }) {
					out = append(out, fmt.Sprintf("%s{%s=%q}", mf.GetName(), l.GetName(), v))
				}
			}
		}
	}
	return out
}

// nodeTrace is what the node made of a round's sandboxes while they ran:
// their IDs, their inits' cgroups, their network (the node's end of the
// veth pair, its nftables table, its address, where the sandbox's
// resolver and egress proxy listen).
type nodeTrace struct {
	ids     []string
	cgroups []string
	links   []string
	tables  []string
	addrs   []netip.Addr
}

// capture records what the node made of sbx, which runs now.
func (tr *nodeTrace) capture(t *testing.T, n *node, sbx *playgroundv1alpha1.Sandbox) {
	t.Helper()
	g := NewWithT(t)
	id := sbx.Status.SandboxID
	tr.ids = append(tr.ids, id)
	initPID(g, n, id) // it runs
	tr.cgroups = append(tr.cgroups, cgroupsNaming(id)...)
	g.Expect(tr.cgroups).NotTo(BeEmpty(), "sandbox %s's cgroups", id)
	netns := filepath.Join(n.stateDir, "sandboxes", id, "netns")
	if _, err := os.Stat(netns); err != nil {
		return // no egress
	}
	out, err := exec.Command("nsenter", "--net="+netns, "ip", "-o", "link", "show", "eth0").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	m := regexp.MustCompile(`eth0@if(\d+):`).FindStringSubmatch(string(out))
	g.Expect(m).To(HaveLen(2), "%s", out)
	links, err := os.ReadDir("/sys/class/net")
	g.Expect(err).NotTo(HaveOccurred())
	for _, l := range links {
		idx, _ := os.ReadFile(filepath.Join("/sys/class/net", l.Name(), "ifindex"))
		if strings.TrimSpace(string(idx)) != m[1] {
			continue
		}
		tr.links = append(tr.links, l.Name())
		tr.tables = append(tr.tables, "playground_"+l.Name())
		out, err := exec.Command("ip", "-o", "-4", "addr", "show", "dev", l.Name()).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		a := regexp.MustCompile(`inet (\S+)/`).FindStringSubmatch(string(out))
		g.Expect(a).To(HaveLen(2), "%s", out)
		tr.addrs = append(tr.addrs, netip.MustParseAddr(a[1]))
	}
	g.Expect(tr.links).NotTo(BeEmpty(), "the node's end of sandbox %s's veth pair", id)
	out, err = exec.Command("nft", "list", "tables").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).To(ContainSubstring("table inet "+tr.tables[len(tr.tables)-1]), "its nftables table")
}

// cgroupsNaming lists the cgroups, in every hierarchy the node mounts,
// whose name holds id.
func cgroupsNaming(id string) []string {
	var out []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, root := range append(roots, "/sys/fs/cgroup") {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil || !d.IsDir():
				return nil //nolint:nilerr // a cgroup gone meanwhile
			case p != root && slices.Contains(roots, p):
				return filepath.SkipDir // another hierarchy
			case strings.Contains(d.Name(), id):
				out = append(out, p)
				return filepath.SkipDir
			case strings.Count(strings.TrimPrefix(p, root), "/") >= 4:
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out
}

// stateFiles lists the node's state directory, as paths relative to it.
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nodeWide are the parts of a node's state directory that are the node's,
// whoever uses them: a tenant's objects leave nothing in them when they
// go, but they may fill up (runc's root, the guest binary, the shared
// /etc of runc sandboxes) on the first sandbox's start.
var nodeWide = []string{"runc", "runsc", "bin", "shared", "empty", "faculties", "snapshots", "usage.json"}

// newFiles are the paths of after that were not in before, but those of
// the node-wide parts that name none of ids.
func newFiles(before, after, ids []string) []string {
	var out []string
	for _, p := range after {
		top, _, _ := strings.Cut(p, string(filepath.Separator))
		named := slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(p, id) })
		if slices.Contains(before, p) || slices.Contains(nodeWide, top) && !named {
			continue
		}
		out = append(out, p)
	}
	return out
}

// nodeLeftovers says what the kernel still holds of the trace's
// sandboxes: processes, cgroups, mounts and loop devices under the
// node's state directory, veths, nftables tables, sockets on their
// addresses.
func nodeLeftovers(t *testing.T, n *node, tr *nodeTrace) []string {
	t.Helper()
	var out []string
	ours := func(s string) bool {
		if strings.Contains(s, n.stateDir) {
			return true
		}
		return slices.ContainsFunc(tr.ids, func(id string) bool { return strings.Contains(s, id) })
	}
	procs, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil || p.Name() == self {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		cg, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cgroup"))
		if !ours(string(cmd)) && !ours(string(cg)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		// A container's init dies a child of the node's init (runc
		// run --detach left it), which reaps it in its own time: dead,
		// it holds nothing but its PID until then.
		if _, rest, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(rest, "Z 1 ") {
			continue
		}
		out = append(out, fmt.Sprintf("process %s: %s (%s)", p.Name(), strings.ReplaceAll(string(cmd), "\x00", " "), strings.TrimSpace(string(stat))))
	}
	for _, id := range tr.ids {
		for _, c := range cgroupsNaming(id) {
			out = append(out, "cgroup "+c)
		}
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) > 4 && ours(fields[4]) {
				out = append(out, "mount "+fields[4])
			}
		}
		f.Close()
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && ours(string(b)) {
			out = append(out, fmt.Sprintf("loop device %s: %s", strings.Split(l, "/")[3], strings.TrimSpace(string(b))))
		}
	}
	for _, l := range tr.links {
		if _, err := os.Stat(filepath.Join("/sys/class/net", l)); err == nil {
			out = append(out, "link "+l)
		}
	}
	tables, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, tables)
	}
	for _, tb := range tr.tables {
		if strings.Contains(string(tables), "table inet "+tb+"\n") {
			out = append(out, "nftables table "+tb)
		}
	}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/udp"} {
		b, _ := os.ReadFile(file)
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) < 10 || f[0] == "sl" {
				continue
			}
			// A socket no process holds (inode 0: TIME_WAIT after the
			// agent closed a connection first, or an orphan the kernel is
			// finishing) goes by itself within a minute: what is left
			// is what something still holds open.
			if f[9] == "0" {
				continue
			}
			hexAddr, _, _ := strings.Cut(f[1], ":")
			raw, err := hex.DecodeString(hexAddr)
			if err != nil || len(raw) != 4 {
				continue
			}
			a := netip.AddrFrom4([4]byte{raw[3], raw[2], raw[1], raw[0]})
			if slices.Contains(tr.addrs, a) {
				out = append(out, fmt.Sprintf("socket %s %s (state %s, inode %s)", filepath.Base(file), f[1], f[3], f[9]))
			}
		}
	}
	return out
}

// TestTenantPurge: kubectl playground tenant destroy --purge and pile, as
// users of their own through the TLS agent of the tenant's node, which
// asks the API server about them. Destroying with --purge lists what it
// will remove and removes nothing unconfirmed; confirmed, the tenant, its
// sandbox, token, snapshot, generated signing key and retained pile are
// gone, each said. A user who may not delete the tenant's Sandbox is refused before
// anything is removed. The pile retained of a tenant deleted without
// --purge is listed, refused to a user who may not delete its Sandbox,
// removed for one who may; a pile in use is refused.
func TestTenantPurge(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	n := startTLSNode(t, "purge-1", pool("purge"))
	ns := newNamespace(t)
	owner := purgeUser(t, ns, "owner", true)
	looker := purgeUser(t, ns, "looker", false)
	as := func(cfg *rest.Config, stdin string, args ...string) (string, error) {
		var out, errOut strings.Builder
		err := kubectlplugin.Run(ctx, append([]string{"-n", ns, "--timeout", "60s"}, args...),
			kubectlplugin.Env{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut, Config: cfg})
		return out.String() + errOut.String(), err
	}

	for _, name := range []string{"keep", "gone", "busy"} {
		applyTenant(t, ns, name, inPool("purge"))
	}
	_, keep := waitReady(t, ns, "keep")
	_, gone := waitReady(t, ns, "gone")
	waitReady(t, ns, "busy")
	snap := &playgroundv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-snap"},
		Spec: playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "keep"}}}
	g.Expect(k8sClient.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap)).To(Succeed())
		g.Expect(snap.Status.Phase).To(Equal(playgroundv1alpha1.SnapshotReady), "%+v", snap.Status.Conditions)
	}, settle, 200*time.Millisecond).Should(Succeed())
	exists := func(obj client.Object) bool {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return err == nil
	}
	keyOf := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: playgroundv1alpha1.SigningKeySecretName(name)}}
	}
	onNode := func(id string) []string {
		var out []string
		for _, p := range []string{"sandboxes/" + id, "sandbox-ids/" + id} {
			if _, err := os.Stat(filepath.Join(n.stateDir, p)); err == nil {
				out = append(out, p)
			}
		}
		return out
	}

	// Not allowed to delete the Sandbox: refused before anything goes.
	out, err := as(looker, "", "tenant", "destroy", "keep", "--purge", "--yes")
	g.Expect(err).To(MatchError(ContainSubstring("removing the pile takes the RBAC verb delete on Sandbox " + ns + "/keep")))
	g.Expect(out).NotTo(ContainSubstring("removed:"))
	g.Expect(exists(&playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"}})).To(BeTrue())

	// Unconfirmed: the plan, and nothing removed.
	out, err = as(owner, "", "tenant", "destroy", "keep", "--purge")
	g.Expect(err).To(MatchError(ContainSubstring("nothing was removed")))
	g.Expect(out).To(ContainSubstring("This removes, for good:"))
	for _, want := range []string{
		"SandboxSnapshot " + ns + "/keep-snap", "Tenant " + ns + "/keep", "Sandbox " + ns + "/keep (node purge-1, sandbox " + keep.Status.SandboxID + ")",
		"Secret " + ns + "/keep-token (its token)", "Secret " + ns + "/keep-signing-key (its signing key)", "its pile on node purge-1",
	} {
		g.Expect(out).To(ContainSubstring("  - "+want), "the plan names %s", want)
	}
	out, err = as(owner, "no\n", "tenant", "destroy", "keep", "--purge")
	g.Expect(err).To(MatchError(ContainSubstring("nothing was removed")), out)
	g.Expect(exists(&playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"}})).To(BeTrue())
	g.Expect(exists(snap)).To(BeTrue())

	// Confirmed: everything of it, each said.
	out, err = as(owner, "y\n", "tenant", "destroy", "keep", "--purge")
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, want := range []string{
		"removed: SandboxSnapshot " + ns + "/keep-snap", "removed: Tenant " + ns + "/keep",
		"removed: Secret " + ns + "/keep-token (its token)", "removed: Secret " + ns + "/keep-signing-key (its signing key)",
		"removed: its pile on node purge-1 (sandbox " + keep.Status.SandboxID + "), every file in it and the node's record of it",
	} {
		g.Expect(out).To(ContainSubstring(want))
	}
	g.Expect(exists(snap)).To(BeFalse())
	g.Expect(exists(keyOf("keep"))).To(BeFalse())
	g.Expect(onNode(keep.Status.SandboxID)).To(BeEmpty(), "nothing of it on the node")

	// A tenant deleted without --purge: its pile stays, listed.
	g.Expect(k8sClient.Delete(ctx, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}})).To(Succeed())
	g.Eventually(func() bool {
		return exists(&playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}})
	}, settle, 200*time.Millisecond).Should(BeFalse())
	g.Expect(onNode(gone.Status.SandboxID)).To(HaveLen(2), "Retain keeps its pile and the node's record")
	out, err = as(looker, "", "pile", "list")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`NAMESPACE\s+NAME\s+NODE\s+SANDBOX ID\n` + ns + `\s+gone\s+purge-1\s+` + gone.Status.SandboxID + `\n$`))
	out, err = as(looker, "", "pile", "delete", "gone", "--yes")
	g.Expect(err).To(MatchError(ContainSubstring(`may not do this on this agent: it needs the RBAC verb "delete" on sandboxes.playground.dev gone in namespace `+ns)), out)
	out, err = as(owner, "n\n", "pile", "delete", "gone")
	g.Expect(err).To(MatchError(ContainSubstring("nothing was removed")), out)
	g.Expect(out).To(ContainSubstring("  - the pile of Sandbox " + ns + "/gone on node purge-1 (sandbox " + gone.Status.SandboxID + ")"))
	g.Expect(onNode(gone.Status.SandboxID)).To(HaveLen(2))
	out, err = as(owner, "", "pile", "delete", "gone", "--yes")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("removed: the pile of Sandbox " + ns + "/gone on node purge-1 (sandbox " + gone.Status.SandboxID + ")"))
	g.Expect(onNode(gone.Status.SandboxID)).To(BeEmpty())
	g.Expect(exists(keyOf("gone"))).To(BeTrue(), "the key's Secret is the user's to delete")
	out, err = as(owner, "", "pile", "list")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("No node retains a pile of a deleted Sandbox in namespace " + ns + ".\n"))

	// A pile in use is no retained pile: not listed, and refused by the
	// agent to whoever asks (the manager here).
	out, err = as(owner, "", "pile", "delete", "busy", "--yes")
	g.Expect(err).To(MatchError(ContainSubstring("no node retains a pile of Sandbox "+ns+"/busy")), out)
	ca, err := mcpgateway.ReadAgentCA(ctx, kubernetes.NewForConfigOrDie(cp.Config), agentlease.DefaultNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	agents, err := mcpgateway.NewAgentClients(nil, mcpgateway.StaticToken(agentToken), ca, false)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := agents.Client(ctx, n.name, n.endpoint)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.RemovePile(ctx, ns, "busy")
	g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeInvalid), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("Sandbox " + ns + "/busy is bound to node purge-1 and its pile is in use")))
	g.Expect(exists(&playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"}})).To(BeTrue())
}

// purgeUser is a user of its own (a ServiceAccount's token) who may read
// and delete the namespace's tenants and what is theirs, and find and
// reach the agents; with sandboxes, delete its Sandboxes too.
func purgeUser(t *testing.T, ns, name string, sandboxes bool) *rest.Config {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := cp.ServiceAccountConfig(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	user := "system:serviceaccount:" + ns + ":" + name
	bind := func(namespace string, rules ...rbacv1.PolicyRule) {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ns + "-" + name}, Rules: rules}
		g.Expect(k8sClient.Create(ctx, role)).To(Succeed())
		g.Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		})).To(Succeed())
	}
	group := playgroundv1alpha1.GroupVersion.Group
	all := []string{"get", "list", "watch", "delete"}
	sandboxVerbs := []string{"get", "list", "watch"}
	if sandboxes {
		sandboxVerbs = all
	}
	bind(ns,
		rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"tenants", "sandboxsnapshots", "workermappings"}, Verbs: all},
		rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"sandboxes"}, Verbs: sandboxVerbs},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: all})
	bind(agentlease.DefaultNamespace,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{agentpki.CAConfigMapName}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}})
	attrs := []authorizationv1.ResourceAttributes{
		{Namespace: ns, Group: group, Resource: "sandboxes", Verb: "list"},
		{Namespace: agentlease.DefaultNamespace, Group: "coordination.k8s.io", Resource: "leases", Verb: "list"},
	}
	if sandboxes {
		attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: "sandboxes", Name: "keep", Verb: "delete"})
	}
	g.Expect(rbactest.AwaitAllowed(ctx, cp.Config, user, nil, attrs...)).To(Succeed())
	return cfg
}
