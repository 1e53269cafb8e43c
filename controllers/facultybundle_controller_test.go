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

package controllers

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/fingerprint"
)

// No agent runs in these tests: where one would report a node's build,
// the test applies that node's entry of status.nodes itself, exactly as
// each node's agent does (server-side apply of its own entry only, under
// the field owner AgentNodeFieldOwner(node)); hostagent's tests hold the
// agents' side of the contract.

var helloSource = map[string]string{"hello": "#!/bin/sh\necho hello\n"}

var helloBuild = []string{"/bin/sh", "-c", "cp /src/hello /out/hello && chmod 0755 /out/hello"}

// sourceConfigMap creates (or replaces the data of) the ConfigMap name.
func sourceConfigMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	cm.Data = data
	if err == nil {
		err = k8sClient.Update(ctx, cm)
	} else {
		err = k8sClient.Create(ctx, cm)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// configMapBundle creates a FacultyBundle built from the ConfigMap cm.
func configMapBundle(t *testing.T, ns, name, cm string, command []string) {
	t.Helper()
	fb := &playgroundv1alpha1.FacultyBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: cm}},
			Binaries: []string{"hello"},
		},
	}
	if command != nil {
		fb.Spec.Build = &playgroundv1alpha1.BundleBuild{Command: command}
	}
	if err := k8sClient.Create(context.Background(), fb); err != nil {
		t.Fatal(err)
	}
}

// expectedFingerprint is the fingerprint of a ConfigMap source, computed
// here from the bundle's inputs as the agents compute it.
func expectedFingerprint(t *testing.T, data map[string]string, command []string) string {
	t.Helper()
	fp, err := fingerprint.Of(fingerprint.Inputs{Files: fingerprint.ConfigMapFiles(data, nil), Command: command, Binaries: []string{"hello"}, Builder: fingerprint.Builder})
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// updateBundle changes the bundle's spec, retrying when a status write
// came in between.
func updateBundle(t *testing.T, ns, name string, change func(*playgroundv1alpha1.FacultyBundle)) *playgroundv1alpha1.FacultyBundle {
	t.Helper()
	var fb playgroundv1alpha1.FacultyBundle
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &fb); err != nil {
			return err
		}
		change(&fb)
		return k8sClient.Update(context.Background(), &fb)
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fb
}

func getBundle(g Gomega, ns, name string) *playgroundv1alpha1.FacultyBundle {
	var fb playgroundv1alpha1.FacultyBundle
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &fb)).To(Succeed())
	return &fb
}

func bundleCondition(fb *playgroundv1alpha1.FacultyBundle, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(fb.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// build is a node's report of its build of a bundle.
type build struct {
	fingerprint string
	generation  int64
	ready       bool
	reason      string
	message     string
}

// reportBuild applies node's entry of the bundle's status.nodes as the
// node's agent does: its own entry only, under its own field owner.
func reportBuild(g Gomega, ns, name, node string, b build) {
	entry := playgroundv1alpha1ac.BundleNodeStatus().WithNodeName(node).WithFingerprint(b.fingerprint).
		WithReady(b.ready).WithObservedGeneration(b.generation)
	if b.message != "" {
		entry.WithMessage(b.message)
	}
	if b.reason != "" {
		entry.WithReason(b.reason)
	}
	if b.ready {
		entry.WithBuiltAt(metav1.Now())
	}
	ac := playgroundv1alpha1ac.FacultyBundle(name, ns).WithStatus(playgroundv1alpha1ac.FacultyBundleStatus().WithNodes(entry))
	g.Expect(k8sClient.Status().Apply(context.Background(), ac,
		client.FieldOwner(playgroundv1alpha1.AgentNodeFieldOwner(node)), client.ForceOwnership)).To(Succeed())
}

// pinnedSandbox creates a Sandbox bound to node (pinned, as a user may)
// that lists the bundles.
func pinnedSandbox(t *testing.T, ns, name, node string, bundles ...string) {
	t.Helper()
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: name}, NodeName: node},
	}
	for _, b := range bundles {
		s.Spec.Faculties = append(s.Spec.Faculties, playgroundv1alpha1.FacultyBundleReference{Name: b})
	}
	if err := k8sClient.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// bundleEvents returns the Events about the bundle, by reason.
func bundleEvents(g Gomega, ns, name string) map[string][]eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := map[string][]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "FacultyBundle" && e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e)
		}
	}
	return out
}

// TestBundleFingerprint: the manager publishes the fingerprint of a
// ConfigMap source, the one the agents compute from the same inputs, and a
// new one when the ConfigMap's content or the build command changes, with
// an Event each time. Nobody needs the bundle yet, so it is Ready
// (NotNeeded).
func TestBundleFingerprint(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	sourceConfigMap(t, ns, "tools", helloSource)
	configMapBundle(t, ns, "tools", "tools", helloBuild)

	first := expectedFingerprint(t, helloSource, helloBuild)
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		g.Expect(fb.Status.Fingerprint).To(Equal(first))
		g.Expect(fb.Status.ObservedGeneration).To(Equal(fb.Generation))
		ready := bundleCondition(fb, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ready.Reason).To(Equal(ReasonNotNeeded))
		g.Expect(bundleEvents(g, ns, "tools")).To(HaveKey(ReasonFingerprintChanged))
	})

	changed := map[string]string{"hello": "#!/bin/sh\necho hello again\n"}
	sourceConfigMap(t, ns, "tools", changed)
	second := expectedFingerprint(t, changed, helloBuild)
	g.Expect(second).NotTo(Equal(first))
	eventually(t, func(g Gomega) {
		g.Expect(getBundle(g, ns, "tools").Status.Fingerprint).To(Equal(second), "a ConfigMap change gives a new fingerprint")
	})

	command := []string{"/bin/sh", "-c", "install -m 0755 /src/hello /out/hello"}
	updateBundle(t, ns, "tools", func(fb *playgroundv1alpha1.FacultyBundle) { fb.Spec.Build.Command = command })
	third := expectedFingerprint(t, changed, command)
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		g.Expect(fb.Status.Fingerprint).To(Equal(third), "a build command change gives a new fingerprint")
		g.Expect(fb.Status.ObservedGeneration).To(Equal(fb.Generation))
	})
}

// TestBundleMissingConfigMap: a bundle whose ConfigMap does not exist says
// which to create, and stalls until it exists.
func TestBundleMissingConfigMap(t *testing.T) {
	ns := newNamespace(t)
	configMapBundle(t, ns, "tools", "tools-src", nil)
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		ready := bundleCondition(fb, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(ReasonSourceNotFound))
		g.Expect(ready.Message).To(And(ContainSubstring("ConfigMap tools-src not found in namespace "+ns), ContainSubstring("create it")))
		g.Expect(bundleCondition(fb, playgroundv1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(fb.Status.Fingerprint).To(BeEmpty())
		g.Expect(bundleEvents(g, ns, "tools")).To(HaveKey(ReasonSourceNotFound))
	})

	// Created, it is seen through the metadata watch alone.
	sourceConfigMap(t, ns, "tools-src", helloSource)
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		g.Expect(fb.Status.Fingerprint).To(Equal(expectedFingerprint(t, helloSource, nil)))
		g.Expect(bundleCondition(fb, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(meta.FindStatusCondition(fb.Status.Conditions, playgroundv1alpha1.StalledCondition)).To(BeNil())
	})
}

// TestBundleReadyOnEveryNode: with sandboxes listing the bundle on two
// nodes, it is Ready only once both nodes' agents report a ready build of
// the current fingerprint and generation; until then Ready names the node
// still missing and quotes its agent's message. The two agents' entries
// coexist (neither's apply removes the other's, nor does the manager's),
// and a source change makes both stale again.
func TestBundleReadyOnEveryNode(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	suffix := rand.String(5)
	n1, n2 := "fb-a-"+suffix, "fb-b-"+suffix
	registerAgent(t, n1, nil, time.Hour)
	registerAgent(t, n2, nil, time.Hour)
	sourceConfigMap(t, ns, "tools", helloSource)
	configMapBundle(t, ns, "tools", "tools", helloBuild)
	fp := expectedFingerprint(t, helloSource, helloBuild)
	eventually(t, func(g Gomega) { g.Expect(getBundle(g, ns, "tools").Status.Fingerprint).To(Equal(fp)) })
	gen := getBundle(g, ns, "tools").Generation

	pinnedSandbox(t, ns, "one", n1, "tools")
	pinnedSandbox(t, ns, "two", n2, "tools")
	eventually(t, func(g Gomega) {
		ready := bundleCondition(getBundle(g, ns, "tools"), playgroundv1alpha1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(ReasonBuilding))
		g.Expect(ready.Message).To(And(ContainSubstring("2 of 2"), ContainSubstring("node "+n1+": its agent has not reported"), ContainSubstring("node "+n2+": its agent has not reported")))
	})

	reportBuild(g, ns, "tools", n1, build{fingerprint: fp, generation: gen, ready: true, reason: playgroundv1alpha1.ReasonBuilt})
	reportBuild(g, ns, "tools", n2, build{fingerprint: fp, generation: gen, reason: playgroundv1alpha1.ReasonBuilding, message: "Building " + fp[:12] + " on node " + n2})
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		g.Expect(fb.Status.ReadyNodes).To(Equal(int32(1)))
		ready := bundleCondition(fb, playgroundv1alpha1.ReadyCondition)
		g.Expect([]string{string(ready.Status), ready.Reason}).To(Equal([]string{"False", ReasonBuilding}))
		g.Expect(ready.Message).To(And(ContainSubstring("1 of 2"), ContainSubstring("node "+n2+": Building"), Not(ContainSubstring(n1))))
		g.Expect(bundleCondition(fb, playgroundv1alpha1.ReconcilingCondition).Status).To(Equal(metav1.ConditionTrue))
	})

	// A failed build is no build under way: it says so, and what to do,
	// and stalls (the same source fails the same way).
	reportBuild(g, ns, "tools", n2, build{fingerprint: fp, generation: gen, reason: playgroundv1alpha1.ReasonBuildFailed,
		message: "Build " + fp[:12] + " failed on node " + n2 + ": the build command exited with code 2; log tail:\ncp: /src/hello: no such file"})
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		ready := bundleCondition(fb, playgroundv1alpha1.ReadyCondition)
		g.Expect([]string{string(ready.Status), ready.Reason}).To(Equal([]string{"False", playgroundv1alpha1.ReasonBuildFailed}))
		g.Expect(ready.Message).To(And(ContainSubstring("Cannot be built on 1 of 2 nodes that need it, and waiting does not help"),
			ContainSubstring("node "+n2+": Build "+fp[:12]+" failed"), ContainSubstring("cp: /src/hello: no such file"),
			ContainSubstring("Fix the source or spec.build.command"), Not(ContainSubstring(n1+":"))))
		stalled := bundleCondition(fb, playgroundv1alpha1.StalledCondition)
		g.Expect([]string{string(stalled.Status), stalled.Reason}).To(Equal([]string{"True", playgroundv1alpha1.ReasonBuildFailed}))
		g.Expect(meta.FindStatusCondition(fb.Status.Conditions, playgroundv1alpha1.ReconcilingCondition)).To(BeNil())
		g.Expect(kstatusOf(g, playgroundv1alpha1.GroupVersion.WithKind("FacultyBundle"), ns, "tools").Status).To(Equal(status.FailedStatus))
	})

	reportBuild(g, ns, "tools", n2, build{fingerprint: fp, generation: gen, ready: true})
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		g.Expect(fb.Status.ReadyNodes).To(Equal(int32(2)))
		ready := bundleCondition(fb, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ready.Reason).To(Equal(ReasonBuilt))
		g.Expect(meta.FindStatusCondition(fb.Status.Conditions, playgroundv1alpha1.ReconcilingCondition)).To(BeNil())
		g.Expect(fb.Status.Nodes).To(HaveLen(2), "one agent's apply removed the other's entry")
		g.Expect(bundleEvents(g, ns, "tools")).To(HaveKey(ReasonBuilt))
		// Each entry is its own agent's; the manager owns none.
		g.Expect(bundleStatusFields(fb, playgroundv1alpha1.AgentNodeFieldOwner(n1))).To(And(ContainSubstring(n1), Not(ContainSubstring(n2))))
		g.Expect(bundleStatusFields(fb, playgroundv1alpha1.AgentNodeFieldOwner(n2))).To(And(ContainSubstring(n2), Not(ContainSubstring(n1))))
		g.Expect(bundleStatusFields(fb, playgroundv1alpha1.FacultyBundleControllerFieldOwner)).To(And(
			ContainSubstring(`"f:fingerprint"`), ContainSubstring(`"f:readyNodes"`), Not(ContainSubstring(`"f:nodes"`))))
	})

	// A new source: both builds are of the old fingerprint now.
	sourceConfigMap(t, ns, "tools", map[string]string{"hello": "#!/bin/sh\necho changed\n"})
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		g.Expect(fb.Status.Fingerprint).NotTo(Equal(fp))
		g.Expect(fb.Status.ReadyNodes).To(BeZero())
		ready := bundleCondition(fb, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("node " + n1 + ": has build " + fp[:12] + ", not the current " + fb.Status.Fingerprint[:12]))
	})
}

// bundleStatusFields is the status apply entry of manager in fb's managed
// fields, as JSON ("" when there is none).
func bundleStatusFields(fb *playgroundv1alpha1.FacultyBundle, manager string) string {
	for _, m := range fb.ManagedFields {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == "status" {
			return m.FieldsV1.GetRawString()
		}
	}
	return ""
}

// TestBundleHostPathGeneration: a host-path bundle has no fingerprint of
// the manager's (each node reports its own), and a node's build counts
// only for the generation it reports: a spec change waits for the agents
// to report again.
func TestBundleHostPathGeneration(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	node := "fb-host-" + rand.String(5)
	registerAgent(t, node, nil, time.Hour)
	fb := &playgroundv1alpha1.FacultyBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host"},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{HostPath: &playgroundv1alpha1.HostPathSource{Path: "/opt/tools"}},
			Binaries: []string{"hello"},
		},
	}
	g.Expect(k8sClient.Create(context.Background(), fb)).To(Succeed())
	pinnedSandbox(t, ns, "user", node, "host")
	reportBuild(g, ns, "host", node, build{fingerprint: "0123456789abcdef", generation: fb.Generation, ready: true})
	eventually(t, func(g Gomega) {
		cur := getBundle(g, ns, "host")
		g.Expect(cur.Status.Fingerprint).To(BeEmpty())
		g.Expect(cur.Status.ReadyNodes).To(Equal(int32(1)))
		g.Expect(bundleCondition(cur, playgroundv1alpha1.ReadyCondition).Reason).To(Equal(ReasonBuilt))
	})

	cur := updateBundle(t, ns, "host", func(fb *playgroundv1alpha1.FacultyBundle) { fb.Spec.Binaries = append(fb.Spec.Binaries, "bye") })
	eventually(t, func(g Gomega) {
		cur := getBundle(g, ns, "host")
		g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		g.Expect(cur.Status.ReadyNodes).To(BeZero())
		g.Expect(bundleCondition(cur, playgroundv1alpha1.ReadyCondition).Message).To(ContainSubstring(
			"node " + node + ": its agent has not reported on generation"))
	})
	reportBuild(g, ns, "host", node, build{fingerprint: "fedcba9876543210", generation: cur.Generation, ready: true})
	eventually(t, func(g Gomega) {
		g.Expect(bundleCondition(getBundle(g, ns, "host"), playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	})
}

// TestBundleForgetsGoneNodes: the entry of a node with no Node object and
// no agent registration (or one not renewed for NodeGoneAfter) is removed;
// a node with a Node object, or whose agent renews, keeps its entry.
func TestBundleForgetsGoneNodes(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx := context.Background()
	suffix := rand.String(5)
	alive, withNode, lapsed, gone := "fb-alive-"+suffix, "fb-node-"+suffix, "fb-lapsed-"+suffix, "fb-gone-"+suffix
	registerAgent(t, alive, nil, time.Minute)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: withNode}}
	g.Expect(k8sClient.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), node) })
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(lapsed)}}
	reg := agentlease.Registration{Node: lapsed, Endpoint: "http://" + lapsed + ":9443", Backends: []string{"oci"}, Duration: 15 * time.Second}
	g.Expect(reg.Apply(lease, time.Now().Add(-NodeGoneAfter-time.Minute))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, lease)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), lease) })

	sourceConfigMap(t, ns, "tools", helloSource)
	configMapBundle(t, ns, "tools", "tools", helloBuild)
	fp := expectedFingerprint(t, helloSource, helloBuild)
	gen := getBundle(g, ns, "tools").Generation
	for _, n := range []string{alive, withNode, lapsed, gone} {
		reportBuild(g, ns, "tools", n, build{fingerprint: fp, generation: gen, ready: true})
	}
	eventually(t, func(g Gomega) {
		fb := getBundle(g, ns, "tools")
		var nodes []string
		for _, n := range fb.Status.Nodes {
			nodes = append(nodes, n.NodeName)
		}
		g.Expect(nodes).To(ConsistOf(alive, withNode))
		g.Expect(fb.Status.ReadyNodes).To(Equal(int32(2)))
		var notes []string
		for _, e := range bundleEvents(g, ns, "tools")[ReasonNodeGone] {
			notes = append(notes, e.Note)
		}
		g.Expect(notes).To(ContainElements(ContainSubstring("node "+gone+":"), ContainSubstring("node "+lapsed+":")))
	})
}

// TestBundleColumns: `kubectl get fb` shows Ready, the nodes with a ready
// build, the reason and age, and with -o wide the fingerprint: the table
// the API server serves kubectl, from the CRD's printer columns.
func TestBundleColumns(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	node := "fb-col-" + rand.String(5)
	registerAgent(t, node, nil, time.Hour)
	sourceConfigMap(t, ns, "tools", helloSource)
	configMapBundle(t, ns, "tools", "tools", helloBuild)
	fp := expectedFingerprint(t, helloSource, helloBuild)
	pinnedSandbox(t, ns, "user", node, "tools")
	reportBuild(g, ns, "tools", node, build{fingerprint: fp, generation: getBundle(g, ns, "tools").Generation, ready: true})

	cfg := rest.CopyConfig(restConfig)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &playgroundv1alpha1.GroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	eventually(t, func(g Gomega) {
		// What kubectl asks for.
		body, err := rc.Get().Namespace(ns).Resource("facultybundles").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
		g.Expect(err).NotTo(HaveOccurred(), string(body))
		var table metav1.Table
		g.Expect(json.Unmarshal(body, &table)).To(Succeed())
		cells := map[string]any{}
		wide := map[string]bool{}
		g.Expect(table.Rows).To(HaveLen(1))
		for i, c := range table.ColumnDefinitions {
			cells[c.Name] = table.Rows[0].Cells[i]
			wide[c.Name] = c.Priority > 0
		}
		g.Expect(cells).To(HaveKeyWithValue("Name", "tools"))
		g.Expect(cells).To(HaveKeyWithValue("Ready", "True"))
		g.Expect(cells).To(HaveKeyWithValue("Reason", ReasonBuilt))
		g.Expect(cells).To(HaveKeyWithValue("Nodes-Ready", BeNumerically("==", 1)))
		g.Expect(cells).To(HaveKeyWithValue("Fingerprint", fp))
		g.Expect(cells).To(HaveKey("Age"))
		g.Expect(wide).To(HaveKeyWithValue("Fingerprint", true), "64 hex digits belong in -o wide")
	})
}
