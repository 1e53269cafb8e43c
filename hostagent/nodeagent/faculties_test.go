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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/fingerprint"
)

// runsWith is "name@fingerprint" of each faculty the sandbox's processes
// have, as the test backend recorded them at its start, and checks that
// each build's directory holds its staged binaries only.
func runsWith(g Gomega, be *backendtest.Fake, id string) []string {
	var out []string
	for _, fc := range be.Faculties(id) {
		entries, err := os.ReadDir(fc.Dir)
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		g.Expect(names).To(ConsistOf(fc.Binaries), "the build's directory holds its binaries only")
		out = append(out, fc.Name+"@"+fc.Fingerprint)
	}
	return out
}

// newBuildingFake is the test backend in the place of the oci backend's
// builder and mounts (TestFacultyOnOCI runs the real ones): its Build
// copies the source to /out over the same host directories, and it
// records the faculties each sandbox started with.
func newBuildingFake() *backendtest.Fake {
	return backendtest.New("oci", backendtest.Writes())
}

// startFakeNode runs an agent over a buildingFake and the state dir.
func startFakeNode(t *testing.T, name, stateDir string, be *backendtest.Fake) *node {
	return startNode(t, name, stateDir, "", func(o *nodeagent.Options) { o.Backends = []backend.Backend{be} })
}

// helloBundle creates the sample's ConfigMap and FacultyBundle: hello, a
// shell script, built by copying it to /out.
func helloBundle(t *testing.T, ns, name, script string) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"hello": script, "README": "not installed\n"}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: name}},
			Build:    &playgroundv1alpha1.BundleBuild{Command: []string{"/bin/sh", "-c", "cp /src/hello /out/hello"}},
			Binaries: []string{"hello"},
		}}); err != nil {
		t.Fatal(err)
	}
}

// helloFingerprint is the fingerprint the agent computes for helloBundle.
func helloFingerprint(t *testing.T, script string) string {
	t.Helper()
	fp, err := fingerprint.Of(fingerprint.Inputs{
		Files:    fingerprint.ConfigMapFiles(map[string]string{"hello": script, "README": "not installed\n"}, nil),
		Command:  []string{"/bin/sh", "-c", "cp /src/hello /out/hello"},
		Binaries: []string{"hello"},
		Builder:  fingerprint.Builder,
	})
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func setScript(t *testing.T, ns, name, script string) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["hello"] = script
	if err := k8s.Update(context.Background(), &cm); err != nil {
		t.Fatal(err)
	}
}

func lists(bundles ...string) func(*playgroundv1alpha1.Sandbox) {
	return func(s *playgroundv1alpha1.Sandbox) {
		for _, b := range bundles {
			s.Spec.Faculties = append(s.Spec.Faculties, playgroundv1alpha1.FacultyBundleReference{Name: b})
		}
	}
}

// nodeEntry is the bundle's status.nodes entry of node.
func nodeEntry(g Gomega, ns, bundle, node string) playgroundv1alpha1.BundleNodeStatus {
	var b playgroundv1alpha1.FacultyBundle
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: bundle}, &b)).To(Succeed())
	for _, n := range b.Status.Nodes {
		if n.NodeName == node {
			g.Expect(n.ObservedGeneration).To(Equal(b.Generation))
			return n
		}
	}
	g.Expect(b.Status.Nodes).To(ContainElement(HaveField("NodeName", node)))
	return playgroundv1alpha1.BundleNodeStatus{}
}

func facultyStatus(g Gomega, ns, sbx, bundle string) playgroundv1alpha1.FacultyInstallStatus {
	s := getSandbox(g, ns, sbx)
	for _, f := range s.Status.Faculties {
		if f.Name == bundle {
			return f
		}
	}
	g.Expect(s.Status.Faculties).To(ContainElement(HaveField("Name", bundle)))
	return playgroundv1alpha1.FacultyInstallStatus{}
}

func restart(t *testing.T, ns, name, request string) {
	t.Helper()
	updateSandbox(t, ns, name, func(s *playgroundv1alpha1.Sandbox) { s.Spec.RestartRequest = request })
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(getSandbox(g, ns, name).Status.RestartRequest).To(Equal(request))
	}).WithTimeout(timeout).Should(Succeed())
}

// A bundle is built once per node however many sandboxes list it; a
// source change is a new fingerprint and a new build, which a running
// sandbox gets at its next restart, and the old build stays while a
// sandbox runs it.
func TestFacultyBuiltOncePerFingerprint(t *testing.T) {
	ns := newNamespace(t, "faculty-once")
	be := newBuildingFake()
	n := startFakeNode(t, "faculty-once", "", be)
	v1, v2 := "#!/bin/sh\necho v1\n", "#!/bin/sh\necho v2\n"
	fp1, fp2 := helloFingerprint(t, v1), helloFingerprint(t, v2)
	helloBundle(t, ns, "hello", v1)

	createSandbox(t, ns, "a", n.name, lists("hello"))
	waitProvisioned(t, ns, "a")
	idA := idOf(t, ns, "a")
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(facultyStatus(g, ns, "a", "hello")).To(Equal(playgroundv1alpha1.FacultyInstallStatus{Name: "hello", Fingerprint: fp1, State: playgroundv1alpha1.FacultyInstalled}))
		e := nodeEntry(g, ns, "hello", n.name)
		g.Expect(e.Ready).To(BeTrue(), e.Message)
		g.Expect(e.Fingerprint).To(Equal(fp1))
		g.Expect(e.BuiltAt).NotTo(BeNil())
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(runsWith(g, be, idA)).To(Equal([]string{"hello@" + fp1}))
	staged, err := os.ReadFile(filepath.Join(n.stateDir, "faculties", fp1, "bin", "hello"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(staged)).To(Equal(v1))
	g.Expect(be.Builds()).To(BeEquivalentTo(1))

	// The agent writes its node's entry under its own field manager.
	var b playgroundv1alpha1.FacultyBundle
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hello"}, &b)).To(Succeed())
	g.Expect(b.ManagedFields).To(ContainElement(And(HaveField("Manager", playgroundv1alpha1.AgentNodeFieldOwner(n.name)), HaveField("Subresource", "status"))))

	// A second sandbox with the unchanged bundle: ready, no build.
	createSandbox(t, ns, "b", n.name, lists("hello"))
	waitProvisioned(t, ns, "b")
	idB := idOf(t, ns, "b")
	g.Expect(runsWith(g, be, idB)).To(Equal([]string{"hello@" + fp1}))
	g.Expect(be.Builds()).To(BeEquivalentTo(1), "the second sandbox of an unchanged bundle was built for")

	// The source changes: a new fingerprint, a new build; running
	// sandboxes keep theirs, and say so.
	setScript(t, ns, "hello", v2)
	g.Eventually(func(g Gomega) {
		e := nodeEntry(g, ns, "hello", n.name)
		g.Expect(e.Fingerprint).To(Equal(fp2))
		g.Expect(e.Ready).To(BeTrue(), e.Message)
		st := facultyStatus(g, ns, "a", "hello")
		g.Expect(st.State).To(Equal(playgroundv1alpha1.FacultyStale))
		g.Expect(st.Fingerprint).To(Equal(fp1))
		g.Expect(st.Message).To(ContainSubstring("replaces it when the sandbox restarts"))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(be.Builds()).To(BeEquivalentTo(2))
	g.Expect(runsWith(g, be, idA)).To(Equal([]string{"hello@" + fp1}))

	// A restart installs the new build; b still runs the old one, which
	// stays on disk.
	restart(t, ns, "a", "first")
	g.Eventually(func(g Gomega) {
		g.Expect(facultyStatus(g, ns, "a", "hello")).To(Equal(playgroundv1alpha1.FacultyInstallStatus{Name: "hello", Fingerprint: fp2, State: playgroundv1alpha1.FacultyInstalled}))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(runsWith(g, be, idA)).To(Equal([]string{"hello@" + fp2}))
	g.Expect(runsWith(g, be, idB)).To(Equal([]string{"hello@" + fp1}))
	g.Expect(filepath.Join(n.stateDir, "faculties", fp1, ".complete")).To(BeAnExistingFile(), "the build b runs was removed")
	g.Expect(be.Builds()).To(BeEquivalentTo(2))
}

// A failing build: the bundle's node entry and the waiting sandbox say
// what failed (with the log's tail, and an Event); a sandbox that had a
// build keeps running it, also across a restart.
func TestFacultyBuildFails(t *testing.T) {
	ns := newNamespace(t, "faculty-fails")
	be := newBuildingFake()
	good, bad := "#!/bin/sh\necho good\n", "#!/bin/sh\nbroken\n"
	fpGood, fpBad := helloFingerprint(t, good), helloFingerprint(t, bad)
	be.BuildFunc = func(req backend.BuildRequest) (backend.BuildResult, error) {
		data, _ := os.ReadFile(filepath.Join(req.Source, "hello"))
		if strings.Contains(string(data), "broken") {
			return backend.BuildResult{Exit: backend.ExitStatus{ExitCode: 2}, Log: []byte("make: *** [hello] Error 2\ncc: error: hello.c: No such file\n")}, nil
		}
		// The good source: the sample's command, cp /src/hello /out/hello.
		return backend.BuildResult{}, os.WriteFile(filepath.Join(req.Out, "hello"), data, 0o755)
	}
	n := startFakeNode(t, "faculty-fails", "", be)

	// A sandbox whose only bundle fails waits, and says why.
	helloBundle(t, ns, "broken", bad)
	createSandbox(t, ns, "waits", n.name, lists("broken"))
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		e := nodeEntry(g, ns, "broken", n.name)
		g.Expect(e.Ready).To(BeFalse())
		g.Expect(e.Fingerprint).To(Equal(fpBad))
		g.Expect(e.Message).To(And(ContainSubstring("the build command exited with code 2"), ContainSubstring("hello.c: No such file")))
		g.Expect(e.Reason).To(Equal(playgroundv1alpha1.ReasonBuildFailed), "the node's entry says the build failed, not that it builds")
		c := provisioned(getSandbox(g, ns, "waits"))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonFacultyUnavailable), "waiting does not mend a failed build")
		g.Expect(c.Message).To(And(ContainSubstring("FacultyBundle broken failed to build ("+fpBad[:12]+"): the build command exited with code 2"),
			ContainSubstring("fix its source or spec.build.command")))
		st := facultyStatus(g, ns, "waits", "broken")
		g.Expect(st.State).To(Equal(playgroundv1alpha1.FacultyPending))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(be.Has(idOf(t, ns, "waits"))).To(BeFalse(), "a sandbox waiting for its bundles was provisioned")
	// Not rebuilt in a loop: the failure is the answer for a minute.
	g.Consistently(be.Builds).WithTimeout(time.Second).Should(Equal(1))
	bundleEvent(t, ns, "broken", playgroundv1alpha1.ReasonBuildFailed)
	waitEvent(t, ns, "waits", corev1.EventTypeWarning, playgroundv1alpha1.ReasonFacultyUnavailable)

	// A sandbox with a good build, whose bundle's next source fails.
	helloBundle(t, ns, "hello", good)
	createSandbox(t, ns, "keeps", n.name, lists("hello"))
	waitProvisioned(t, ns, "keeps")
	id := idOf(t, ns, "keeps")
	setScript(t, ns, "hello", bad)
	g.Eventually(func(g Gomega) {
		g.Expect(nodeEntry(g, ns, "hello", n.name).Message).To(ContainSubstring("exited with code 2"))
		st := facultyStatus(g, ns, "keeps", "hello")
		g.Expect(st.State).To(Equal(playgroundv1alpha1.FacultyStale))
		g.Expect(st.Fingerprint).To(Equal(fpGood))
		g.Expect(st.Message).To(ContainSubstring("keeps build " + fpGood[:12]))
		g.Expect(st.Message).To(ContainSubstring("failed to build"))
	}).WithTimeout(timeout).Should(Succeed())
	restart(t, ns, "keeps", "after-the-failure")
	s := waitProvisioned(t, ns, "keeps")
	g.Expect(runsWith(g, be, id)).To(Equal([]string{"hello@" + fpGood}), "the restarted sandbox lost its previous build")
	g.Expect(s.Status.Faculties).To(ConsistOf(And(HaveField("State", playgroundv1alpha1.FacultyStale), HaveField("Fingerprint", fpGood))))
}

// bundleEvent waits for an Event about the bundle with the reason.
func bundleEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(ContainElement(And(HaveField("Regarding.Kind", "FacultyBundle"), HaveField("Regarding.Name", name), HaveField("Reason", reason))))
	}).WithTimeout(timeout).Should(Succeed())
}

// A bundle deleted while sandboxes list it: a running sandbox keeps its
// build and says the bundle is gone; a new one waits, saying so.
func TestFacultyBundleDeleted(t *testing.T) {
	ns := newNamespace(t, "faculty-deleted")
	be := newBuildingFake()
	n := startFakeNode(t, "faculty-deleted", "", be)
	script := "#!/bin/sh\necho hi\n"
	fp := helloFingerprint(t, script)
	helloBundle(t, ns, "hello", script)
	createSandbox(t, ns, "runs", n.name, lists("hello"))
	waitProvisioned(t, ns, "runs")

	g := NewWithT(t)
	g.Expect(k8s.Delete(context.Background(), &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := facultyStatus(g, ns, "runs", "hello")
		g.Expect(st.State).To(Equal(playgroundv1alpha1.FacultyStale))
		g.Expect(st.Fingerprint).To(Equal(fp))
		g.Expect(st.Message).To(ContainSubstring("does not exist"))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(runsWith(g, be, idOf(t, ns, "runs"))).To(Equal([]string{"hello@" + fp}))
	g.Expect(filepath.Join(n.stateDir, "faculties", fp, ".complete")).To(BeAnExistingFile(), "a build in use was collected")

	createSandbox(t, ns, "new", n.name, lists("hello"))
	g.Eventually(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "new"))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonFacultyUnavailable))
		g.Expect(c.Message).To(ContainSubstring("FacultyBundle hello does not exist in namespace " + ns + ": create it, or remove it from the Tenant's spec.sandbox.faculties"))
	}).WithTimeout(timeout).Should(Succeed())

	// Deleting the last sandbox that runs the build lets GC remove it.
	g.Expect(k8s.Delete(context.Background(), getSandbox(g, ns, "runs"))).To(Succeed())
	waitGone(t, ns, "runs")
	// The bundle coming back collects: its reconcile runs GC.
	helloBundle2 := func() {
		g.Expect(k8s.Create(context.Background(), &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
			Spec: playgroundv1alpha1.FacultyBundleSpec{
				Source:   playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: "hello"}},
				Binaries: []string{"hello"},
			}})).To(Succeed())
	}
	helloBundle2()
	createSandbox(t, ns, "other", n.name, lists("other"))
	waitProvisioned(t, ns, "other")
	g.Eventually(func() string { return filepath.Join(n.stateDir, "faculties", fp) }).WithTimeout(timeout).ShouldNot(BeADirectory(),
		"the deleted bundle's build, which no sandbox runs, is collected")
}

// An agent killed mid-build leaves a build without its stamp: the next
// agent discards it and builds again. An agent restarted over a finished
// build reattaches its sandboxes with it and builds nothing.
func TestFacultyAcrossAgentRestarts(t *testing.T) {
	ns := newNamespace(t, "faculty-restarts")
	stateDir := ""
	be := newBuildingFake()
	script := "#!/bin/sh\necho hi\n"
	fp := helloFingerprint(t, script)

	first := startFakeNode(t, "faculty-restarts", stateDir, be)
	stateDir = first.stateDir
	first.stop()
	// What a kill between staging and the stamp leaves.
	half := filepath.Join(stateDir, "faculties", fp, "bin")
	if err := os.MkdirAll(half, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, "hello"), []byte("half-writ"), 0o555); err != nil {
		t.Fatal(err)
	}

	helloBundle(t, ns, "hello", script)
	createSandbox(t, ns, "a", "faculty-restarts", lists("hello"))
	second := startFakeNode(t, "faculty-restarts", stateDir, be)
	waitProvisioned(t, ns, "a")
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(facultyStatus(g, ns, "a", "hello").State).To(Equal(playgroundv1alpha1.FacultyInstalled))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(be.Builds()).To(BeEquivalentTo(1), "the unstamped build was not built again")
	staged, err := os.ReadFile(filepath.Join(half, "hello"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(staged)).To(Equal(script), "the half-written binary survived")

	second.stop()
	startFakeNode(t, "faculty-restarts", stateDir, be)
	g.Consistently(func(g Gomega) {
		c := provisioned(getSandbox(g, ns, "a"))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(facultyStatus(g, ns, "a", "hello").State).To(Equal(playgroundv1alpha1.FacultyInstalled))
	}).WithTimeout(2 * leaseDuration).Should(Succeed())
	g.Expect(be.Builds()).To(BeEquivalentTo(1), "a restarted agent built again")
	g.Expect(runsWith(g, be, idOf(t, ns, "a"))).To(Equal([]string{"hello@" + fp}))
	var b playgroundv1alpha1.FacultyBundle
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hello"}, &b)).To(Succeed())
	g.Expect(fmt.Sprintf("%v %s", b.Status.Nodes[0].Ready, b.Status.Nodes[0].Fingerprint)).To(Equal("true " + fp))
}

// The sample bundle on the real oci backend: built in a throwaway runc
// builder, installed read-only, hello runs by name in login and clean
// shells, a file of the source not listed in binaries is not there, and
// neither the build nor its directory can be written.
func TestFacultyOnOCI(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "faculty-oci")
	n := startNode(t, "faculty-oci", "", "")
	g := NewWithT(t)
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello-tools"},
		Data: map[string]string{"hello": "#!/bin/sh\necho \"hello from a faculty bundle, $PERSONA\"\n", "secret-notes": "not listed\n"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello-tools"},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{ConfigMap: &playgroundv1alpha1.LocalObjectReference{Name: "hello-tools"}},
			Build:    &playgroundv1alpha1.BundleBuild{Command: []string{"/bin/sh", "-c", "cp /src/hello /src/secret-notes /out/ && chmod 0755 /out/hello"}},
			Binaries: []string{"hello"},
		}})).To(Succeed())
	createSandbox(t, ns, "uses", n.name, lists("hello-tools"), func(s *playgroundv1alpha1.Sandbox) { s.Spec.Persona = "tester" })
	s := waitProvisioned(t, ns, "uses")
	g.Expect(s.Status.Faculties).To(ConsistOf(HaveField("State", playgroundv1alpha1.FacultyInstalled)))
	g.Eventually(func(g Gomega) { g.Expect(nodeEntry(g, ns, "hello-tools", n.name).Ready).To(BeTrue()) }).WithTimeout(timeout).Should(Succeed())

	tenant, id := ns+"/uses", idOf(t, ns, "uses")
	h, err := n.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	run := func(shell agentapi.Shell, command string) agentapi.ExecResult {
		t.Helper()
		res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: command, Shell: shell})
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}
	g.Expect(string(run(agentapi.ShellLogin, "hello").Stdout)).To(Equal("hello from a faculty bundle, tester\n"))
	g.Expect(string(run(agentapi.ShellClean, "command -v hello && hello").Stdout)).To(Equal("/opt/faculties/bin/hello\nhello from a faculty bundle, \n"))
	g.Expect(string(run(agentapi.ShellClean, "ls -A /opt/faculties/hello-tools").Stdout)).To(Equal("hello\n"), "a file not in binaries was installed")
	for _, cmd := range []string{"echo x >> /opt/faculties/hello-tools/hello", "touch /opt/faculties/hello-tools/new", "rm -f /opt/faculties/bin/hello"} {
		res := run(agentapi.ShellClean, cmd)
		g.Expect(res.ExitCode).NotTo(BeZero(), "%s succeeded", cmd)
	}
}

// Two nodes that run sandboxes listing one bundle each build it and each
// report their own entry of status.nodes, under their own field manager,
// without removing the other's.
func TestFacultyTwoNodesReportTheirOwn(t *testing.T) {
	ns := newNamespace(t, "faculty-two")
	script := "#!/bin/sh\necho two\n"
	fp := helloFingerprint(t, script)
	helloBundle(t, ns, "hello", script)
	beA, beB := newBuildingFake(), newBuildingFake()
	a, b := startFakeNode(t, "faculty-two-a", "", beA), startFakeNode(t, "faculty-two-b", "", beB)
	createSandbox(t, ns, "on-a", a.name, lists("hello"))
	createSandbox(t, ns, "on-b", b.name, lists("hello"))
	waitProvisioned(t, ns, "on-a")
	waitProvisioned(t, ns, "on-b")
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		for _, n := range []*node{a, b} {
			e := nodeEntry(g, ns, "hello", n.name)
			g.Expect(e.Ready).To(BeTrue(), e.Message)
			g.Expect(e.Fingerprint).To(Equal(fp))
		}
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(beA.Builds()).To(Equal(1))
	g.Expect(beB.Builds()).To(Equal(1))
	var fb playgroundv1alpha1.FacultyBundle
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hello"}, &fb)).To(Succeed())
	for _, n := range []*node{a, b} {
		g.Expect(fb.ManagedFields).To(ContainElement(And(HaveField("Manager", playgroundv1alpha1.AgentNodeFieldOwner(n.name)),
			HaveField("FieldsV1.Raw", ContainSubstring(n.name)))))
	}
}

// After the retry interval a failed build runs again, and its status says
// so: building while it runs, the failure again when it fails.
func TestFacultyFailureRetried(t *testing.T) {
	ns := newNamespace(t, "faculty-retried")
	be := newBuildingFake()
	be.BuildFunc = func(backend.BuildRequest) (backend.BuildResult, error) {
		return backend.BuildResult{Exit: backend.ExitStatus{ExitCode: 1}, Log: []byte("still broken\n")}, nil
	}
	n := startNode(t, "faculty-retried", "", "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{be}
		o.Faculties.RetryAfter = 300 * time.Millisecond
	})
	helloBundle(t, ns, "hello", "#!/bin/sh\n")
	createSandbox(t, ns, "waits", n.name, lists("hello"))
	g := NewWithT(t)
	g.Eventually(be.Builds).WithTimeout(timeout).Should(BeNumerically(">=", 3))
	g.Eventually(func(g Gomega) {
		g.Expect(nodeEntry(g, ns, "hello", n.name).Message).To(And(ContainSubstring("exited with code 1"), ContainSubstring("still broken")))
	}).WithTimeout(timeout).WithPolling(20 * time.Millisecond).Should(Succeed())
}
