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
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/internal/registrytest"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// pythonRelease is the Python of the image TestThreeTenantsThreeSystems
// builds: one of this machine's (pyenv's), not the node's /usr/bin/python3,
// so that the image sandbox's python3 is a tool the default system lacks.
const pythonRelease = "3.12"

// withPython adds to a merged system's entries a Python in /usr (its
// interpreter, its shared library where the loader looks without the
// build's rpath, the system libraries it needs that the system lacks, and
// the little of its library it starts with), from this machine's pyenv;
// the test skips without it.
func withPython(t *testing.T, system []registrytest.Entry) []registrytest.Entry {
	t.Helper()
	matches, _ := filepath.Glob("/root/.pyenv/versions/" + pythonRelease + ".*")
	if len(matches) == 0 {
		t.Skipf("no Python %s under /root/.pyenv on this machine", pythonRelease)
	}
	home := matches[0]
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(home, p))
		if err != nil {
			t.Skipf("Python %s lacks %s: %v", pythonRelease, p, err)
		}
		return string(b)
	}
	lib := "lib/python" + pythonRelease
	entries := []registrytest.Entry{
		registrytest.File("usr/bin/python3", read("bin/python"+pythonRelease), 0o755),
		registrytest.File("usr/lib/libpython"+pythonRelease+".so.1.0", read("lib/libpython"+pythonRelease+".so.1.0"), 0o755),
		registrytest.Dir("usr/" + lib + "/"),
		// os.py and lib-dynload are the landmarks by which Python finds
		// its library.
		registrytest.File("usr/"+lib+"/os.py", read(lib+"/os.py"), 0o644),
		registrytest.Dir("usr/" + lib + "/lib-dynload/"),
		registrytest.Dir("usr/" + lib + "/encodings/"),
	}
	for _, f := range []string{"__init__.py", "aliases.py", "utf_8.py"} {
		entries = append(entries, registrytest.File("usr/"+lib+"/encodings/"+f, read(lib+"/encodings/"+f), 0o644))
	}
	have := map[string]bool{}
	for _, e := range system {
		have[e.Name] = true
	}
	out, err := exec.Command("ldd", filepath.Join(home, "bin/python"+pythonRelease)).Output()
	if err != nil {
		t.Skipf("ldd python%s: %v", pythonRelease, err)
	}
	for _, m := range regexp.MustCompile(`=> (/\S+)`).FindAllStringSubmatch(string(out), -1) {
		name := "usr/" + strings.TrimPrefix(strings.TrimPrefix(m[1], "/"), "usr/")
		if strings.Contains(m[1], "libpython") || have[name] {
			continue
		}
		b, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, registrytest.File(name, string(b), 0o755))
	}
	return append(system, entries...)
}

// withSetuidShell adds to a system's entries a copy of its shell at
// usr/bin/rootsh, setuid root and root's: what a hostile image offers to
// gain privilege.
func withSetuidShell(t *testing.T, entries []registrytest.Entry) []registrytest.Entry {
	t.Helper()
	for _, e := range entries {
		if e.Name == "usr/bin/dash" {
			e.Name, e.Mode, e.Uid, e.Gid = "usr/bin/rootsh", 0o4755, 0, 0
			return append(entries, e)
		}
	}
	t.Fatal("the system has no usr/bin/dash")
	return nil
}

// TestThreeTenantsThreeSystems: through the gateway (the MCP client's
// exec), three tenants on one node see three systems: one on an image with
// a Python the node's system lacks (3.12 where the node has its own, or
// none), one on a minimal image (a shell and cat, no Python at all), one on
// the node's own; each its own /etc/os-release. The first image carries a
// setuid-root shell, which runs as the tenant's user, not root.
func TestThreeTenantsThreeSystems(t *testing.T) {
	g := NewWithT(t)
	reg := registrytest.Start(t)
	py := withSetuidShell(t, withPython(t, registrytest.System(t, "ID=python-image\n", true, "dash", "cat")))
	reg.Push(t, "systems/python", "3.12", registrytest.Image(t, []string{"PATH=/usr/bin"}, registrytest.Layer(t, registrytest.Tar(t, py...))), nil)
	reg.Push(t, "systems/minimal", "1", registrytest.Image(t, []string{"PATH=/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=minimal-image\n", false, "dash", "cat")...))), nil)

	startManager(t, func(o *controllers.Options) { o.Images.PlainHTTP = []string{"127.0.0.1"} })
	n := &node{name: "three-systems-1", labels: pool("three-systems")}
	n.images = imageStore(t, filepath.Join(t.TempDir(), "image-store"))
	startNode(t, n)
	url := startGateway(t)

	ns := newNamespace(t)
	for name, ref := range map[string]string{"py": reg.Host + "/systems/python:3.12", "minimal": reg.Host + "/systems/minimal:1", "plain": ""} {
		applyTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) {
			inPool("three-systems")(tn)
			if ref != "" {
				tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
			}
		})
	}
	run := map[string]func(string) string{}
	for _, name := range []string{"py", "minimal", "plain"} {
		waitReady(t, ns, name)
		c := connectTenant(t, url, ns, name)
		run[name] = func(command string) string {
			t.Helper()
			return mcpExec(g, c.cs, command)
		}
	}

	// Each its own os-release.
	nodeRelease, err := os.ReadFile("/etc/os-release")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(run["py"]("cat /etc/os-release")).To(Equal("ID=python-image\n"))
	g.Expect(run["minimal"]("cat /etc/os-release")).To(Equal("ID=minimal-image\n"))
	g.Expect(run["plain"]("cat /etc/os-release")).To(Equal(string(nodeRelease)))

	// Each its own tools: the image's Python, none, the node's.
	version := `python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>&1 || echo no python3`
	g.Expect(run["py"](version)).To(Equal(pythonRelease+"\n"), "the Python image's python3")
	g.Expect(run["minimal"](version)).To(ContainSubstring("no python3"), "the minimal image has a python3")
	g.Expect(run["minimal"]("for t in dash cat ls python3; do command -v $t >/dev/null && echo $t; done; true")).To(Equal("dash\ncat\n"))
	nodePython := "no python3\n"
	if out, err := exec.Command("/usr/bin/python3", "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output(); err == nil {
		nodePython = string(out)
	}
	g.Expect(nodePython).NotTo(Equal(pythonRelease+"\n"), "the node's own Python is the image's: the test tells nothing")
	g.Expect(run["plain"](version)).To(Equal(nodePython), "the default sandbox's python3 is the node's")

	// The image's setuid-root shell has no setuid bit in the sandbox and
	// runs as the tenant's user.
	uids := `[ -u /usr/bin/rootsh ] && echo setuid; /usr/bin/rootsh -c 'while read k r e s f; do case $k in Uid:|Gid:) echo $k $r $e $s;; esac; done < /proc/self/status'`
	g.Expect(run["py"](uids)).To(Equal("Uid: 1000 1000 1000\nGid: 1000 1000 1000\n"), "the image's setuid-root shell gave privilege")
}

// TestPullInProgressIsSaid: a tenant whose sandbox's image is being pulled
// is told so by a tool call through the gateway, with how far the pull is
// (bytes fetched of the total), and that retrying will do; once the pull
// ends the same call runs. No MCP call waits on a pull: the gateway answers
// at once from the Sandbox's condition (docs/images.md).
func TestPullInProgressIsSaid(t *testing.T) {
	g := NewWithT(t)
	reg := registrytest.Start(t)
	// A layer of some size, so that half of it is more than one read.
	big := registrytest.Layer(t, registrytest.Tar(t, registrytest.File("usr/share/big", strings.Repeat("0123456789abcdef", 64<<10), 0o644)))
	img := registrytest.Image(t, []string{"PATH=/usr/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=slow-image\n", true, "dash", "cat")...)), big)
	reg.Push(t, "systems/slow", "1", img, nil)
	d, err := big.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	size, err := big.Size()
	g.Expect(err).NotTo(HaveOccurred())
	resume := reg.Stall(t, d.String())

	startManager(t, func(o *controllers.Options) { o.Images.PlainHTTP = []string{"127.0.0.1"} })
	n := &node{name: "slow-pull-1", labels: pool("slow-pull")}
	n.images = imageStore(t, filepath.Join(t.TempDir(), "image-store"))
	startNode(t, n)
	url := startGateway(t)
	ns := newNamespace(t)
	applyTenant(t, ns, "slow", func(tn *playgroundv1alpha1.Tenant) {
		inPool("slow-pull")(tn)
		tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/systems/slow:1"}
	})
	var c toolClient
	g.Eventually(func(g Gomega) {
		cs, err := mcpConnect(url, tokenOf(g, ns, "slow"))
		g.Expect(err).NotTo(HaveOccurred())
		c = toolClient{t: t, cs: cs}
	}, settle, 100*time.Millisecond).Should(Succeed())
	t.Cleanup(func() { _ = c.cs.Close() })

	progress := regexp.MustCompile(`Pulling image \S+/systems/slow@sha256:[0-9a-f]{64} to node ` + n.name + `: (\d+) of (\d+) bytes`)
	var msg string
	g.Eventually(func() string {
		msg = c.call("open_session", map[string]any{}, nil)
		return msg
	}, settle, 200*time.Millisecond).Should(MatchRegexp(progress.String()), "the tenant is not told its image is being pulled")
	g.Expect(msg).To(HavePrefix("unavailable: your sandbox is not ready: " + playgroundv1alpha1.ReasonPullingImage + ": "))
	g.Expect(msg).To(ContainSubstring("retry in a few seconds"))
	m := progress.FindStringSubmatch(msg)
	var done, total int64
	_, _ = fmt.Sscan(m[1], &done)
	_, _ = fmt.Sscan(m[2], &total)
	g.Expect(total).To(BeNumerically(">=", size), "the total is not the bytes to fetch")
	g.Expect(done).To(BeNumerically("<", total))

	resume()
	waitReady(t, ns, "slow")
	g.Eventually(func() string {
		var open tools.OpenSessionOutput
		return c.call("open_session", map[string]any{}, &open)
	}, settle, 200*time.Millisecond).Should(BeEmpty())
	g.Expect(mcpExec(g, c.cs, "cat /etc/os-release")).To(Equal("ID=slow-image\n"))
}

// TestRegistryDown: with the registry down, a new tenant on an image the
// node holds (named by digest, which the manager records without asking
// the registry) starts from the node's copy; one on an image the node
// lacks waits, its Sandbox saying why in Provisioned (the pull failed, the
// registry unreachable) and its Tenant not Ready; a running sandbox moved
// to that image keeps running and serving on its own, an Event saying
// why. Both get the image once the registry answers again, at the same
// address, without anyone's help.
func TestRegistryDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registrytest.Start(t)
	cached := reg.Push(t, "systems/cached", "1", registrytest.Image(t, []string{"PATH=/usr/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=cached-image\n", true, "dash", "cat")...))), nil)
	uncached := reg.Push(t, "systems/uncached", "1", registrytest.Image(t, []string{"PATH=/usr/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=uncached-image\n", true, "dash", "cat")...))), nil)

	startManager(t, func(o *controllers.Options) { o.Images.PlainHTTP = []string{"127.0.0.1"} })
	n := &node{name: "registry-down-1", labels: pool("registry-down")}
	n.images = imageStore(t, filepath.Join(t.TempDir(), "image-store"))
	startNode(t, n)
	ns := newNamespace(t)
	on := func(ref string) func(*playgroundv1alpha1.Tenant) {
		return func(tn *playgroundv1alpha1.Tenant) {
			inPool("registry-down")(tn)
			tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: ref}
		}
	}
	// The node pulls the first image for a first tenant.
	applyTenant(t, ns, "first", on(cached))
	_, first := waitReady(t, ns, "first")
	g.Expect(shell(t, first, "cat /etc/os-release")).To(Equal("ID=cached-image\n"))

	reg.Stop(true)
	applyTenant(t, ns, "second", on(cached))
	applyTenant(t, ns, "third", on(uncached))
	_, second := waitReady(t, ns, "second")
	g.Expect(shell(t, second, "cat /etc/os-release")).To(Equal("ID=cached-image\n"), "a cached image did not start with the registry down")

	g.Eventually(func(g Gomega) {
		var sbx playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "third"}, &sbx)).To(Succeed())
		c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect([]any{c.Status, c.Reason}).To(Equal([]any{metav1.ConditionFalse, playgroundv1alpha1.ReasonImagePullFailed}), c.Message)
		g.Expect(c.Message).To(HavePrefix("registry " + reg.Host + " cannot be reached or failed, so the node cannot pull image " + uncached +
			": the node tries again with backoff, and the sandbox starts once the registry answers ("))
		var tn playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "third"}, &tn)).To(Succeed())
		g.Expect(isTrue(tn.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeFalse())
	}, settle, 100*time.Millisecond).Should(Succeed())

	// The first tenant moves to the image the node lacks: its sandbox
	// keeps running, and serving through the gateway, on the image it has,
	// an Event saying why it has not changed.
	url := startGateway(t)
	c := connectTenant(t, url, ns, "first")
	g.Eventually(func() error {
		var tn playgroundv1alpha1.Tenant
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "first"}, &tn); err != nil {
			return err
		}
		tn.Spec.Sandbox.Image.Reference = uncached
		return k8sClient.Update(ctx, &tn)
	}, settle, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		found := false
		for _, e := range events.Items {
			found = found || e.Regarding.Name == "first" && e.Reason == playgroundv1alpha1.ReasonImagePullFailed &&
				strings.HasPrefix(e.Note, "The sandbox keeps running on its current system: registry "+reg.Host+" cannot be reached")
		}
		g.Expect(found).To(BeTrue(), "no Event says why the sandbox's image did not change")
	}, settle, 100*time.Millisecond).Should(Succeed())
	var sbx playgroundv1alpha1.Sandbox
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "first"}, &sbx)).To(Succeed())
	g.Expect(sbx.Status.Image.Digest).To(Equal(uncached[strings.LastIndex(uncached, "@")+1:]), "the manager pinned the new digest")
	g.Expect(isTrue(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)).To(BeTrue(), "the running sandbox was reported not provisioned")
	g.Expect(mcpExec(g, c.cs, "cat /etc/os-release")).To(Equal("ID=cached-image\n"), "the running sandbox stopped serving")

	reg.Stop(false)
	_, third := waitReady(t, ns, "third")
	g.Expect(shell(t, third, "cat /etc/os-release")).To(Equal("ID=uncached-image\n"))
	g.Eventually(func() string { return mcpExec(g, c.cs, "cat /etc/os-release") }, settle, 200*time.Millisecond).
		Should(Equal("ID=uncached-image\n"), "the first sandbox did not move to its new image once the registry answered")
}

// TestSmokeInAnImageSandbox: the deployment smoke test (hack/smoke.sh,
// with its cancellation proof and isolation checks) passes through the
// gateway for a tenant whose sandbox runs an image, a system of this
// machine's shell and the tools the smoke uses, on runc and, with runsc,
// on gVisor. (vm sandboxes on images are issue 52's vm part.)
func TestSmokeInAnImageSandbox(t *testing.T) {
	for _, tool := range []string{"curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("hack/smoke.sh needs %s", tool)
		}
	}
	g := NewWithT(t)
	reg := registrytest.Start(t)
	reg.Push(t, "systems/smoke", "1", registrytest.Image(t, []string{"PATH=/usr/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=smoke-image\n", true,
			"dash", "cat", "setsid", "sleep", "tr", "awk", "sort", "ls", "head", "tail", "uname", "rm", "mv")...))), nil)

	startManager(t, func(o *controllers.Options) { o.Images.PlainHTTP = []string{"127.0.0.1"} })
	n := &node{name: "smoke-image-1", labels: pool("smoke-image")}
	n.stateDir = ocitest.StateDir(t)
	be, err := oci.New(oci.Options{StateDir: n.stateDir, GuestBinary: ocitest.GuestBinary(t), GVisorRuntime: os.Getenv(ocitest.RunscEnv)})
	g.Expect(err).NotTo(HaveOccurred())
	n.backends = []backend.Backend{be}
	n.images = imageStore(t, filepath.Join(t.TempDir(), "image-store"))
	startNode(t, n)
	url := startGateway(t)

	isolations := []playgroundv1alpha1.Isolation{playgroundv1alpha1.IsolationContainer}
	if os.Getenv(ocitest.RunscEnv) != "" {
		isolations = append(isolations, playgroundv1alpha1.IsolationGVisor)
	} else {
		t.Logf("gVisor not tried: set %s", ocitest.RunscEnv)
	}
	ns := newNamespace(t)
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			g := NewWithT(t)
			name := "smoke-" + string(iso)
			applyTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) {
				inPool("smoke-image")(tn)
				tn.Spec.Sandbox.Isolation = iso
				tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/systems/smoke:1"}
			})
			_, sbx := waitReady(t, ns, name)
			g.Expect(shell(t, sbx, "cat /etc/os-release")).To(Equal("ID=smoke-image\n"))
			args := []string{"--cancel-proof", "--isolation"}
			if iso == playgroundv1alpha1.IsolationGVisor {
				args = append(args, "--other-kernel")
			}
			cmd := exec.Command("../../hack/smoke.sh", args...)
			cmd.Env = append(os.Environ(), "PLAYGROUND_ENDPOINT="+url, "PLAYGROUND_TOKEN="+tokenOf(g, ns, name))
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), " passed, 0 failed") {
				t.Fatalf("hack/smoke.sh %s in an image sandbox: %v\n%s", strings.Join(args, " "), err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("hack/smoke.sh %s: %s", strings.Join(args, " "), lines[len(lines)-1])
		})
	}
}

// TestHostileImageIsRefusedWithItsReason: a tenant on an image with a
// hostile layer (a path out of the layer, a hard link out of it, a write
// through a symbolic link) or whose registry sends a layer that is not its
// digest's is refused by the node: its Sandbox's Provisioned condition has
// the store's reason and names the entry, its Tenant is not Ready, a tool
// call through the gateway says the same, and nothing is written outside
// the node's store.
func TestHostileImageIsRefusedWithItsReason(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registrytest.Start(t)
	outside := t.TempDir()
	system := registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=hostile\n", true, "dash", "cat")...))
	mismatch := registrytest.Layer(t, registrytest.Tar(t, registrytest.File("usr/share/data", strings.Repeat("content ", 4096), 0o644)))
	cases := []struct {
		name    string
		layer   v1.Layer
		reason  string
		message string
	}{
		{"escapes", registrytest.Layer(t, registrytest.Tar(t, registrytest.File("../../../../../../.."+outside+"/up", "x", 0o644))),
			"ImagePathEscapes", `"../../../../../../..` + outside + `/up"`},
		{"links-out", registrytest.Layer(t, registrytest.Tar(t, registrytest.Hardlink("usr/share/passwd", "/etc/passwd"))),
			"ImageLinkEscapes", `"usr/share/passwd"`},
		{"through-link", registrytest.Layer(t, registrytest.Tar(t, registrytest.Symlink("usr/share/out", outside), registrytest.File("usr/share/out/through", "x", 0o644))),
			"ImageThroughLink", `"usr/share/out/through"`},
		{"mismatch", mismatch, "ImageDigestMismatch", "the registry sent a layer whose digest is sha256:"},
	}
	for _, c := range cases {
		reg.Push(t, "hostile/"+c.name, "1", registrytest.Image(t, []string{"PATH=/usr/bin"}, system, c.layer), nil)
	}
	d, err := mismatch.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	reg.Corrupt(d.String())

	startManager(t, func(o *controllers.Options) { o.Images.PlainHTTP = []string{"127.0.0.1"} })
	n := &node{name: "hostile-image-1", labels: pool("hostile-image")}
	storeDir := filepath.Join(t.TempDir(), "image-store")
	n.images = imageStore(t, storeDir)
	startNode(t, n)
	url := startGateway(t)
	ns := newNamespace(t)
	for _, c := range cases {
		applyTenant(t, ns, c.name, func(tn *playgroundv1alpha1.Tenant) {
			inPool("hostile-image")(tn)
			tn.Spec.Sandbox.Image = &playgroundv1alpha1.SandboxImage{Reference: reg.Host + "/hostile/" + c.name + ":1"}
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			var cond *metav1.Condition
			g.Eventually(func(g Gomega) {
				var sbx playgroundv1alpha1.Sandbox
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.name}, &sbx)).To(Succeed())
				cond = meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
				g.Expect(cond).NotTo(BeNil())
				g.Expect([]any{cond.Status, cond.Reason}).To(Equal([]any{metav1.ConditionFalse, c.reason}), cond.Message)
			}, settle, 100*time.Millisecond).Should(Succeed())
			g.Expect(cond.Message).To(ContainSubstring("image refused (" + c.reason + "): " + c.message))
			var tn playgroundv1alpha1.Tenant
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.name}, &tn)).To(Succeed())
			g.Expect(isTrue(tn.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeFalse())
			tc := connectTenant(t, url, ns, c.name)
			g.Eventually(func() string { return tc.call("open_session", map[string]any{}, nil) }, settle, 200*time.Millisecond).
				Should(HavePrefix("unavailable: your sandbox is not ready: " + c.reason + ": "))
		})
	}
	ents, err := os.ReadDir(outside)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ents).To(BeEmpty(), "a hostile layer wrote outside the node's store")
	layers, err := os.ReadDir(filepath.Join(storeDir, "layers"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, l := range layers {
		s, err := system.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Name()).To(HavePrefix(s.Hex), "a refused layer was kept in the store")
	}
}
