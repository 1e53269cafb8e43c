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
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/controlplane"
)

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, func(c *controlplane.ControlPlane) (func(), error) {
		cp, k8s = c, c.Client
		return nil, nil
	}))
}

// admin is the environment of a run as the cluster's administrator.
func admin(out, errOut io.Writer) Env {
	return Env{Out: out, ErrOut: errOut, Config: cp.Config, Version: "v0.0.0-test"}
}

// register writes node's agent registration, renewed at renewed.
func register(t *testing.T, node string, renewed time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentlease.DefaultNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(node)}}
	reg := agentlease.Registration{Node: node, Endpoint: "http://" + node + ":9443", Backends: []string{"oci"}, Duration: 15 * time.Second}
	if err := reg.Apply(lease, renewed); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
}

// boundSandbox creates a Sandbox bound to node that carries the agent's
// finalizer, as a provisioned one does, and deletes it when deleting.
func boundSandbox(t *testing.T, ns, name, node string, deleting bool) client.ObjectKey {
	t.Helper()
	ctx := context.Background()
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{playgroundv1alpha1.SandboxFinalizer}},
		Spec:       playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: name}, NodeName: node},
	}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if deleting {
		if err := k8s.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return client.ObjectKeyFromObject(s)
}

func exists(t *testing.T, key client.ObjectKey) bool {
	t.Helper()
	err := k8s.Get(context.Background(), key, &playgroundv1alpha1.Sandbox{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestNodeForget: the deleted sandboxes and snapshots of a node whose agent
// is gone are released; those not being deleted, and other nodes' sandboxes,
// are left;
// a node whose agent still renews its registration is refused.
func TestNodeForget(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"forget-a", "forget-b"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	register(t, "lost", time.Now().Add(-time.Hour))
	register(t, "alive", time.Now())
	gone := boundSandbox(t, "forget-a", "gone", "lost", true)
	goneToo := boundSandbox(t, "forget-b", "gone-too", "lost", true)
	kept := boundSandbox(t, "forget-a", "kept", "lost", false)
	elsewhere := boundSandbox(t, "forget-a", "elsewhere", "alive", true)

	snaps := map[string]bool{"snap-gone": true, "snap-kept": false}
	for name, deleting := range snaps {
		snap := &playgroundv1alpha1.SandboxSnapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: "forget-a", Name: name, Finalizers: []string{playgroundv1alpha1.SnapshotFinalizer}},
			Spec:       playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "gone"}},
		}
		if err := k8s.Create(ctx, snap); err != nil {
			t.Fatal(err)
		}
		snap.Status.NodeName = "lost"
		if err := k8s.Status().Update(ctx, snap); err != nil {
			t.Fatal(err)
		}
		if deleting {
			if err := k8s.Delete(ctx, snap); err != nil {
				t.Fatal(err)
			}
		}
	}

	var out, errOut bytes.Buffer
	err := Run(ctx, []string{"node", "forget", "alive"}, admin(&out, &errOut))
	if err == nil || !strings.Contains(err.Error(), "it is running") {
		t.Fatalf("forgetting a node whose agent renews: %v", err)
	}
	if !exists(t, elsewhere) {
		t.Fatal("a refused forget released a sandbox")
	}

	out.Reset()
	if err := Run(ctx, []string{"node", "forget", "lost"}, admin(&out, &errOut)); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	for _, key := range []client.ObjectKey{gone, goneToo} {
		if exists(t, key) {
			t.Errorf("sandbox %s of the lost node is still there", key)
		}
	}
	if !exists(t, kept) || !exists(t, elsewhere) {
		t.Error("forget released a sandbox not being deleted, or another node's")
	}
	for name, deleting := range snaps {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "forget-a", Name: name}, &playgroundv1alpha1.SandboxSnapshot{})
		if gone := apierrors.IsNotFound(err); gone != deleting {
			t.Errorf("snapshot %s (being deleted: %v) gone: %v (%v)", name, deleting, gone, err)
		}
	}
	for _, want := range []string{"forget-a/gone released", "forget-b/gone-too released", "forget-a/kept is bound to node lost and not being deleted", "2 sandboxes released, 1 still bound",
		"snapshot forget-a/snap-gone released", "snapshot forget-a/snap-kept is kept on node lost", "1 snapshots released, 1 kept"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStatusShowsFaculties: status lists the tenant's bundles with what
// the node's agent installed (state, fingerprint) and the bundle's build
// on that node, and says how to switch to a newer build, or why a bundle
// is missing. The agent's and the manager's parts of the statuses are
// written here as they write them.
func TestStatusShowsFaculties(t *testing.T) {
	ctx := context.Background()
	const ns, node = "faculties", "fac-node"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	old, newer := strings.Repeat("a", 64), strings.Repeat("b", 64)
	tenant := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ada"}}
	if err := k8s.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ada"},
		Spec: playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "ada"}, NodeName: node,
			SandboxTemplate: playgroundv1alpha1.SandboxTemplate{Faculties: []playgroundv1alpha1.FacultyBundleReference{{Name: "tools"}, {Name: "missing"}}}},
	}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Status.Faculties = []playgroundv1alpha1.FacultyInstallStatus{
		{Name: "tools", Fingerprint: old, State: playgroundv1alpha1.FacultyStale, Message: "Build bbbbbbbbbbbb is ready; the sandbox gets it when it restarts"},
		{Name: "missing", State: playgroundv1alpha1.FacultyPending, Message: "FacultyBundle missing not found"},
	}
	if err := k8s.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	fb := &playgroundv1alpha1.FacultyBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: "tools"}},
			Binaries: []string{"hello"},
		},
	}
	if err := k8s.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	fb.Status = playgroundv1alpha1.FacultyBundleStatus{Fingerprint: newer, ReadyNodes: 1,
		Nodes: []playgroundv1alpha1.BundleNodeStatus{{NodeName: node, Fingerprint: newer, Ready: true, ObservedGeneration: 1}}}
	if err := k8s.Status().Update(ctx, fb); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if err := Run(ctx, []string{"-n", ns, "status", "ada"}, admin(&out, &errOut)); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = strings.Join(f, " ")
		}
	}
	want := map[string]string{
		"FACULTY": "FACULTY STATE FINGERPRINT NODE BUILD MESSAGE",
		"tools":   "tools Stale aaaaaaaaaaaa bbbbbbbbbbbb ready build bbbbbbbbbbbb is ready on node fac-node: kubectl playground tenant restart ada switches the sandbox to it",
		"missing": "missing Pending - - FacultyBundle missing not found",
	}
	for first, line := range want {
		if lines[first] != line {
			t.Errorf("status prints\n  %q\nwant\n  %q\nin:\n%s", lines[first], line, out.String())
		}
	}
}

// TestStatusShowsWorker: the status of a workers tenant shows its mapping
// (Ready, where it forwards) and the worker process its agent reports
// (running, restarts, last exit); one without a mapping says so.
func TestStatusShowsWorker(t *testing.T) {
	ctx := context.Background()
	const ns = "status-workers"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"native", "unmapped"} {
		tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: playgroundv1alpha1.TenantSpec{Catalog: playgroundv1alpha1.CatalogWorkers}}
		if err := k8s.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	wm := &playgroundv1alpha1.WorkerMapping{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "native-worker"},
		Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "native"},
			Destination: playgroundv1alpha1.WorkerDestination{Sandbox: &playgroundv1alpha1.SandboxProcessDestination{
				Command: []string{"/opt/faculties/bin/worker"}, Port: 8765,
			}},
		},
	}
	if err := k8s.Create(ctx, wm); err != nil {
		t.Fatal(err)
	}
	// As the manager and the sandbox's agent report it.
	exited := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	wm.Status = playgroundv1alpha1.WorkerMappingStatus{
		Conditions: []metav1.Condition{{Type: playgroundv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready",
			Message: "The agent of node n1 supervises the worker", LastTransitionTime: exited}},
		Endpoint: "sandbox://sbx-1:8765/mcp",
		Worker: &playgroundv1alpha1.WorkerProcessStatus{Running: true, Restarts: 3, LastExit: "signal SIGKILL", LastExitTime: &exited,
			Output: "playground-example-worker: serving MCP on http://127.0.0.1:8765/mcp\n"},
	}
	if err := k8s.Status().Update(ctx, wm); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if err := Run(ctx, []string{"status", "native", "-n", ns}, admin(&out, &errOut)); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "workermapping/native-worker" {
			lines[f[1]] = strings.Join(f, " ")
		}
	}
	for typ, want := range map[string]string{
		"Ready":    "workermapping/native-worker Ready True Ready The agent of node n1 supervises the worker",
		"Endpoint": "workermapping/native-worker Endpoint - - sandbox://sbx-1:8765/mcp",
		"Worker":   "workermapping/native-worker Worker True Running restarts 3; last exit: signal SIGKILL at 2026-11-30T12:00:00Z",
	} {
		if lines[typ] != want {
			t.Errorf("%s row: %q, want %q\n%s", typ, lines[typ], want, out.String())
		}
	}

	out.Reset()
	if err := Run(ctx, []string{"status", "unmapped", "-n", ns}, admin(&out, &errOut)); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "NoMapping") || !strings.Contains(out.String(), "spec.tenantRef.name: unmapped") || strings.Contains(out.String(), "native-worker") {
		t.Errorf("the status of a tenant without a mapping:\n%s", out.String())
	}

	// logs: the worker's output as its agent reported it, and its end.
	out.Reset()
	if err := Run(ctx, []string{"logs", "native", "-n", ns}, admin(&out, &errOut)); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if want := "playground-example-worker: serving MCP on http://127.0.0.1:8765/mcp\n# workermapping/native-worker: running, 3 restarts, last exit: signal SIGKILL at 2026-11-30T12:00:00Z\n"; out.String() != want {
		t.Errorf("logs:\n%q\nwant\n%q", out.String(), want)
	}
	if err := Run(ctx, []string{"logs", "unmapped", "-n", ns}, admin(&out, &errOut)); err == nil || !strings.Contains(err.Error(), "no WorkerMapping") {
		t.Errorf("logs of a tenant without a mapping: %v", err)
	}
}

// TestStatusShowsUsage: status shows what the tenant's sandbox spent, as
// its agent wrote it, in the units it is charged in: CPU and jobs to the
// millisecond, memory in MiB-seconds, and where its limit stands (issue
// 50: a trial read all zeros, and the plugin showed none of it).
func TestStatusShowsUsage(t *testing.T) {
	ctx := context.Background()
	const ns = "status-usage"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	limits := &playgroundv1alpha1.UsageLimits{Period: metav1.Duration{Duration: time.Hour}, CPUSeconds: ptr.To[int64](60)}
	tenant := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ada"}}
	tenant.Spec.Sandbox.UsageLimits = limits
	if err := k8s.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ada"},
		Spec: playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "ada"},
			SandboxTemplate: playgroundv1alpha1.SandboxTemplate{UsageLimits: limits}},
	}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	start := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	s.Status.Usage = &playgroundv1alpha1.UsageStatus{CPUMilliseconds: 312, JobMilliseconds: 3250, MemoryMiBSeconds: 1234,
		MemoryPeakBytes: 64 << 20, StorageBytes: 12 << 20, PeriodStart: &start, PeriodCPUMilliseconds: 312, SampleTime: metav1.Now()}
	if err := k8s.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if err := Run(ctx, []string{"-n", ns, "status", "ada"}, admin(&out, &errOut)); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = strings.Join(f, " ")
		}
	}
	want := map[string]string{
		"cpu":     "cpu 0.312 CPU-seconds",
		"jobs":    "jobs 3.250 s of background jobs' run time",
		"memory":  "memory 1234 MiB-seconds (peak 64Mi)",
		"storage": "storage 12Mi",
		"limit":   "limit 0.312 of 60 CPU-seconds per 1h0m0s, since 2026-12-03T10:00:00Z",
	}
	for first, line := range want {
		if lines[first] != line {
			t.Errorf("status prints\n  %q\nwant\n  %q\nin:\n%s", lines[first], line, out.String())
		}
	}

	out.Reset()
	if err := Run(ctx, []string{"-n", ns, "status", "ada", "-o", "json"}, admin(&out, &errOut)); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `"jobMilliseconds": 3250`) {
		t.Errorf("status -o json has no usage:\n%s", out.String())
	}
}
