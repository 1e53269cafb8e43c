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
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// hostPathBundle creates a FacultyBundle of the host path; without a
// command, its binaries are taken from the source as they are.
func hostPathBundle(t *testing.T, ns, name, path string, command []string, binaries ...string) {
	t.Helper()
	b := &playgroundv1alpha1.FacultyBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.FacultyBundleSpec{
			Source:   playgroundv1alpha1.BundleSource{HostPath: &playgroundv1alpha1.HostPathSource{Path: path}},
			Binaries: binaries,
		}}
	if command != nil {
		b.Spec.Build = &playgroundv1alpha1.BundleBuild{Command: command}
	}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// waitsForSource waits until the bundle's entry of the node and the
// Sandbox listing it say that the node's agent does not read its source,
// with want in both; the bundle has no build there.
func waitsForSource(t *testing.T, ns, bundle, sbx, node, want string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		e := nodeEntry(g, ns, bundle, node)
		g.Expect(e.Ready).To(BeFalse())
		g.Expect(e.Fingerprint).To(BeEmpty())
		g.Expect(e.Reason).To(Equal(playgroundv1alpha1.ReasonSourceFailed))
		g.Expect(e.Message).To(And(HavePrefix("Cannot read the bundle's source on node "+node+": "), ContainSubstring(want)))
		c := provisioned(getSandbox(g, ns, sbx))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonFacultyUnavailable))
		g.Expect(c.Message).To(And(ContainSubstring("FacultyBundle "+bundle+" has a source the agent cannot read: "), ContainSubstring(want)))
		g.Expect(facultyStatus(g, ns, sbx, bundle).State).To(Equal(playgroundv1alpha1.FacultyPending))
	}).WithTimeout(timeout).Should(Succeed())
}

// A FacultyBundle names a node path; only the agent's configuration
// grants one. Paths the grant does not hold (/etc, /proc/1/root/etc, a
// link under the granted prefix that leads to /etc) are not read: nothing
// is built or installed, and the bundle's node entry, its Events and the
// waiting Sandbox say which setting grants a prefix. A path under the
// prefix is built and its binary runs in the tenant's sandbox, while the
// links of its tree (to /etc/shadow, to a file outside the prefix) reach
// the builder as links and read nothing of the node.
func TestFacultyHostPathOnlyUnderAGrantedPrefix(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "faculty-hostpath")
	const marker = "a node file outside the granted prefix"
	tmp := t.TempDir()
	outside, granted := filepath.Join(tmp, "outside"), filepath.Join(tmp, "granted")
	tools := filepath.Join(granted, "tools")
	g := NewWithT(t)
	g.Expect(os.MkdirAll(outside, 0o755)).To(Succeed())
	g.Expect(os.MkdirAll(tools, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(outside, "secret"), []byte(marker), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(tools, "hello"), []byte("#!/bin/sh\necho hello from the node tools\n"), 0o755)).To(Succeed())
	g.Expect(os.Symlink("/etc/shadow", filepath.Join(tools, "shadow"))).To(Succeed())
	g.Expect(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(tools, "secret"))).To(Succeed())
	g.Expect(os.Symlink("/etc", filepath.Join(granted, "etc"))).To(Succeed())

	n := startNode(t, "faculty-hostpath", "", "", func(o *nodeagent.Options) { o.FacultyHostPathPrefixes = []string{granted} })

	// Each would stage the node's /etc/passwd into the sandbox if read.
	notGranted := "is not under any prefix this node's agent allows (--faculty-host-path-prefix, chart value agent.faculties.hostPathPrefixes: " + granted + "); ask the cluster admin"
	refused := []struct{ bundle, path, want string }{
		{"etc", "/etc", "hostPath /etc " + notGranted},
		{"proc", "/proc/1/root/etc", "hostPath /proc/1/root/etc " + notGranted},
		{"link", filepath.Join(granted, "etc"), "hostPath " + granted + "/etc: opening etc beneath the granted prefix " + granted},
	}
	for _, r := range refused {
		hostPathBundle(t, ns, r.bundle, r.path, nil, "passwd")
		createSandbox(t, ns, "uses-"+r.bundle, n.name, lists(r.bundle))
	}
	hostPathBundle(t, ns, "tools", tools, []string{"/bin/sh", "-c", "cp /src/hello /out/hello; cat /src/shadow /src/secret > /out/leak 2>&1; true"}, "hello", "leak")
	createSandbox(t, ns, "uses-tools", n.name, lists("tools"))

	for _, r := range refused {
		waitsForSource(t, ns, r.bundle, "uses-"+r.bundle, n.name, r.want)
	}
	bundleEvent(t, ns, "etc", "SourceFailed")
	waitProvisioned(t, ns, "uses-tools")
	g.Eventually(func(g Gomega) { g.Expect(nodeEntry(g, ns, "tools", n.name).Ready).To(BeTrue()) }).WithTimeout(timeout).Should(Succeed())

	// Only the granted bundle was built, and only its sandbox runs.
	entries, err := os.ReadDir(filepath.Join(n.stateDir, "faculties"))
	g.Expect(err).NotTo(HaveOccurred())
	var builds []string
	for _, e := range entries {
		if regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(e.Name()) {
			builds = append(builds, e.Name())
		}
	}
	g.Expect(builds).To(ConsistOf(nodeEntry(g, ns, "tools", n.name).Fingerprint))
	g.Expect(n.containers(t)).To(ConsistOf(containerOf(t, ns, "uses-tools")))

	tenant, id := ns+"/uses-tools", idOf(t, ns, "uses-tools")
	h, err := n.client.Open(ctx, tenant, id)
	g.Expect(err).NotTo(HaveOccurred())
	run := func(command string) string {
		t.Helper()
		res, err := n.client.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: command, Shell: agentapi.ShellClean})
		g.Expect(err).NotTo(HaveOccurred())
		return string(res.Stdout) + string(res.Stderr)
	}
	g.Expect(run("hello")).To(Equal("hello from the node tools\n"))
	// The builder followed the links in its own root, where neither
	// target exists: the node's files were not read.
	leak := run("cat /opt/faculties/bin/leak")
	g.Expect(leak).To(And(ContainSubstring("/src/shadow: No such file"), ContainSubstring("/src/secret: No such file")))
	g.Expect(leak).NotTo(ContainSubstring(marker))
	if shadow, err := os.ReadFile("/etc/shadow"); err == nil && len(shadow) > 0 {
		first, _, _ := strings.Cut(string(shadow), "\n")
		g.Expect(leak).NotTo(ContainSubstring(first))
	}
}

// An agent granted no prefix, the default, reads no host path at all,
// and says so.
func TestFacultyHostPathNotGrantedByDefault(t *testing.T) {
	ns := newNamespace(t, "faculty-hostpath-none")
	tools := t.TempDir()
	NewWithT(t).Expect(os.WriteFile(filepath.Join(tools, "hello"), []byte("#!/bin/sh\n"), 0o755)).To(Succeed())
	be := newBuildingFake()
	n := startFakeNode(t, "faculty-hostpath-none", "", be)
	hostPathBundle(t, ns, "tools", tools, nil, "hello")
	createSandbox(t, ns, "waits", n.name, lists("tools"))
	waitsForSource(t, ns, "tools", "waits", n.name, "hostPath "+tools+" is not read: this node's agent allows no host path prefix (--faculty-host-path-prefix, chart value agent.faculties.hostPathPrefixes); ask the cluster admin")
	g := NewWithT(t)
	g.Expect(be.Builds()).To(BeZero())
	g.Expect(be.Has(idOf(t, ns, "waits"))).To(BeFalse(), "a sandbox whose bundle is not granted was provisioned")
}

// The agent refuses to start with a prefix that would grant the node's
// kernel views, devices, its whole tree or its own state.
func TestFacultyHostPathPrefixRefusedAtStart(t *testing.T) {
	stateDir := t.TempDir()
	for _, prefix := range []string{"/", "/proc", "/sys/kernel", "/dev", stateDir, filepath.Join(stateDir, "faculties"), filepath.Dir(stateDir)} {
		err := nodeagent.Run(context.Background(), nodeagent.Options{
			Config: agentConfig, NodeName: "refused", StateDir: stateDir, Backends: []backend.Backend{newBuildingFake()}, ListenAddress: "127.0.0.1:0",
			Tokens: []string{token}, FacultyHostPathPrefixes: []string{"/opt/tools", prefix},
		})
		if err == nil || !strings.Contains(err.Error(), "host path prefix") {
			t.Errorf("prefix %s: %v, want a refusal", prefix, err)
		}
	}
}
