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
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/playground-dev/devenv"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/backend/vm"
	"github.com/playground-dev/playground/internal/manifest"
	"github.com/playground-dev/playground/internal/registrytest"
	"github.com/playground-dev/playground/internal/sysctltest"
	"github.com/playground-dev/playground/internal/testbin"
)

// examplesDir is the repository's examples/.
const examplesDir = "../../examples"

// exampleCase is what TestExamples expects of one file of examples/: its
// objects apply, every FacultyBundle, WorkerMapping and Tenant in it turns
// Ready (a suspended Tenant: Suspended, settled), and then check holds.
type exampleCase struct {
	// skip says why this machine cannot run the example, or "".
	skip func(*examplesEnv) string
	// node adapts the objects, before they are applied, where this test's
	// node holds something elsewhere than a cluster's node would.
	node func(*testing.T, *examplesEnv, []*unstructured.Unstructured)
	// serve plays, once the objects are applied, the parts of a cluster
	// this test runs no binary of (a kubelet, the endpoint controller).
	serve func(*testing.T, *examplesEnv, []*unstructured.Unstructured)
	// within bounds the wait for Ready; zero: settle.
	within time.Duration
	// check is what the example's comments promise, once it is Ready.
	check func(*testing.T, *examplesEnv)
}

// exampleCases has an entry for each file of examples/ but its README:
// TestExamples fails on a file without one, and on an entry without its
// file.
var exampleCases = map[string]exampleCase{
	"egress-tenant.yaml": {check: func(t *testing.T, env *examplesEnv) {
		g := NewWithT(t)
		g.Expect(shell(t, env.sandbox(t, "egress-demo"), "cat /proc/net/dev")).To(ContainSubstring("eth0"), "an egress sandbox has an interface")
		out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		g.Expect(string(out)).To(ContainSubstring("ip daddr 192.0.2.0/24 meta l4proto { tcp, udp } th dport 443 counter name \"allowed\" accept"), "the list reached the node's rules")
		// With a host rule, names resolve through the sandbox's own
		// resolver, on the node's end of its link (its default route).
		sbx := env.sandbox(t, "egress-demo")
		g.Expect(shell(t, sbx, "grep nameserver /etc/resolv.conf")).To(Equal("nameserver "+shell(t, sbx, "ip route show default | cut -d' ' -f3")),
			"the sandbox's resolver, on its gateway")
	}},
	"faculty-bundle.yaml": {within: 2 * time.Minute, check: func(t *testing.T, env *examplesEnv) {
		NewWithT(t).Expect(shell(t, env.sandbox(t, "faculty-demo"), "greet")).To(Equal("hello, faculty-demo, from the greeting-tools bundle\n"))
	}},
	"gvisor-tenant.yaml": {
		skip: func(env *examplesEnv) string {
			if env.runsc == "" {
				return "gVisor sandboxes need runsc: set " + ocitest.RunscEnv + " (make runsc prints one; make test sets it)"
			}
			return ""
		},
		check: func(t *testing.T, env *examplesEnv) {
			NewWithT(t).Expect(shell(t, env.sandbox(t, "gvisor-demo"), "uname -r")).To(ContainSubstring("gvisor"), "gVisor's kernel answers")
		},
	},
	"sandbox-worker.yaml": {
		node: func(t *testing.T, env *examplesEnv, objs []*unstructured.Unstructured) {
			// The example takes the worker from the directory make dev
			// fills; here it is a directory of the test's.
			bundle := objectOf(t, objs, "FacultyBundle", "example-worker")
			path, _, _ := unstructured.NestedString(bundle.Object, "spec", "source", "hostPath", "path")
			NewWithT(t).Expect(path).To(Equal(devenv.DefaultFacultyHostPath), "the directory make dev fills and grants")
			NewWithT(t).Expect(unstructured.SetNestedField(bundle.Object, env.facultyDir, "spec", "source", "hostPath", "path")).To(Succeed())
		},
		check: func(t *testing.T, env *examplesEnv) {
			NewWithT(t).Eventually(func(g Gomega) {
				var wm playgroundv1alpha1.WorkerMapping
				g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: env.ns, Name: "sandbox-worker"}, &wm)).To(Succeed())
				g.Expect(wm.Status.Worker).NotTo(BeNil())
				g.Expect(wm.Status.Worker.Running).To(BeTrue(), "%+v", wm.Status.Worker)
				g.Expect(wm.Status.Worker.Error).To(BeEmpty())
			}).WithTimeout(settle).WithPolling(200 * time.Millisecond).Should(Succeed())
		},
	},
	"service-worker.yaml": {
		skip: func(env *examplesEnv) string {
			if env.ip == "" {
				return noHostAddress
			}
			return ""
		},
		serve: serveServiceWorker,
		check: func(t *testing.T, env *examplesEnv) {
			// Through the gateway, the tenant reaches the worker, which
			// received the bearer of the example's Secret.
			g := NewWithT(t)
			ctx := context.Background()
			var bearer corev1.Secret
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.ns, Name: "mcp-worker-bearer"}, &bearer)).To(Succeed())
			cs, err := mcpConnect(startGateway(t), tokenOf(g, env.ns, "service-worker"))
			g.Expect(err).NotTo(HaveOccurred())
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.IsError).To(BeFalse(), "%v", res.Content)
			var who whoAmI
			b, _ := json.Marshal(res.StructuredContent)
			g.Expect(json.Unmarshal(b, &who)).To(Succeed())
			g.Expect(who.Authorization).To(Equal("Bearer sha256:" + fingerprint(string(bearer.Data["token"]))))
		},
	},
	"image-tenant.yaml": {
		node: func(t *testing.T, env *examplesEnv, objs []*unstructured.Unstructured) {
			// Docker Hub is the internet: the test's registry serves the
			// image under the same repository and tag.
			env.image(t, objs, "image-demo", "docker.io/library/debian:bookworm-slim", "", "")
		},
		check: checkImagePinned("image-demo"),
	},
	"private-image-tenant.yaml": {
		node: func(t *testing.T, env *examplesEnv, objs []*unstructured.Unstructured) {
			const password = "example-pull-password"
			host := env.image(t, objs, "private-image-demo", "registry.example.com/team/base:1.0", "robot", password)
			secret := objectOf(t, objs, "Secret", "private-image-pull")
			cfg, _, _ := unstructured.NestedString(secret.Object, "stringData", ".dockerconfigjson")
			NewWithT(t).Expect(cfg).To(ContainSubstring(`"registry.example.com"`))
			cfg = strings.Replace(strings.Replace(cfg, "registry.example.com", host, 1), "replace-me", password, 1)
			NewWithT(t).Expect(unstructured.SetNestedField(secret.Object, cfg, "stringData", ".dockerconfigjson")).To(Succeed())
		},
		check: checkImagePinned("private-image-demo"),
	},
	"suspended-tenant.yaml": {},
	"tenant-policy.yaml":    {check: checkTenantPolicy},
	"vm-tenant.yaml": {
		skip: func(env *examplesEnv) string {
			if env.vmKernel == "" || env.vmModules == "" || env.vmRoot == "" {
				return "PLAYGROUND_VM_KERNEL, PLAYGROUND_VM_MODULES and PLAYGROUND_VM_ROOT are not set: run eval \"$(hack/vm-image.sh)\" first (make test does)"
			}
			return ""
		},
		// A boot under TCG, on a loaded machine (TestVMSandbox's bound).
		within: 4 * time.Minute,
		check: func(t *testing.T, env *examplesEnv) {
			var host unix.Utsname
			NewWithT(t).Expect(unix.Uname(&host)).To(Succeed())
			NewWithT(t).Expect(shell(t, env.sandbox(t, "vm-demo"), "uname -r")).NotTo(Equal(unix.ByteSliceToString(host.Release[:])+"\n"), "a kernel of its own")
		},
	},
}

// examplesEnv is the system the examples are applied to: one node that
// offers what they ask for, where this machine has it.
type examplesEnv struct {
	ns string
	// ip is this machine's address, where the service worker listens.
	ip string
	// runsc and the VM image are what the node offers gVisor and vm with.
	runsc                       string
	vmKernel, vmModules, vmRoot string
	// facultyDir is the node's granted host path, holding the example
	// worker.
	facultyDir string
	// registry stands for the registries the image examples name, and
	// digests holds, by tenant, the digest of the image it pushed there.
	registry *registrytest.Registry
	digests  map[string]string
}

// image pushes, for the tenant of objs, an image to the test's registry
// under the repository and tag of ref (private behind user and password
// when user is set), points the tenant at it, and returns the registry's
// host.
func (env *examplesEnv) image(t *testing.T, objs []*unstructured.Unstructured, tenant, ref, user, password string) string {
	t.Helper()
	g := NewWithT(t)
	if env.registry == nil {
		env.registry, env.digests = registrytest.Start(t), map[string]string{}
	}
	tn := objectOf(t, objs, "Tenant", tenant)
	have, _, _ := unstructured.NestedString(tn.Object, "spec", "sandbox", "image", "reference")
	g.Expect(have).To(Equal(ref), "examples: the reference this test serves")
	repo, tag, _ := strings.Cut(ref[strings.Index(ref, "/")+1:], ":")
	var auth authn.Authenticator
	if user != "" {
		env.registry.Private(repo, user, password)
		auth = &authn.Basic{Username: user, Password: password}
	}
	// A system of this machine's shell and cat, its own os-release: what
	// the example's sandbox runs as its system.
	img := registrytest.Image(t, []string{"PATH=/usr/bin:/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID="+tenant+"\n", true, "dash", "cat")...)))
	byDigest := env.registry.Push(t, repo, tag, img, auth)
	env.digests[tenant] = byDigest[strings.Index(byDigest, "@")+1:]
	g.Expect(unstructured.SetNestedField(tn.Object, env.registry.Host+"/"+repo+":"+tag, "spec", "sandbox", "image", "reference")).To(Succeed())
	return env.registry.Host
}

// checkImagePinned: the tenant's Sandbox holds, in status.image, the
// digest of the image its tag named when it was applied.
func checkImagePinned(tenant string) func(*testing.T, *examplesEnv) {
	return func(t *testing.T, env *examplesEnv) {
		sbx := env.sandbox(t, tenant)
		g := NewWithT(t)
		g.Expect(sbx.Status.Image).NotTo(BeNil())
		g.Expect(sbx.Status.Image.Digest).To(Equal(env.digests[tenant]))
		c := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ImageResolvedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonImageResolved))
		g.Expect(shell(t, sbx, "cat /etc/os-release")).To(Equal("ID="+tenant+"\n"), "the sandbox runs the image as its system")
	}
}

func (env *examplesEnv) sandbox(t *testing.T, tenant string) *playgroundv1alpha1.Sandbox {
	t.Helper()
	var sbx playgroundv1alpha1.Sandbox
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: env.ns, Name: tenant}, &sbx); err != nil {
		t.Fatal(err)
	}
	return &sbx
}

// TestExamples: every file of examples/ applies, as `kubectl apply
// --server-side -f` would, to a system with a node that offers gVisor,
// vm and egress, and what it declares turns Ready (the suspended tenant:
// Suspended) and does what its comments say. The examples are applied
// together, into one namespace, as `kubectl apply -f examples/` would.
func TestExamples(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	entries, err := os.ReadDir(examplesDir)
	g.Expect(err).NotTo(HaveOccurred())
	var files []string
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		if _, ok := exampleCases[e.Name()]; !ok {
			t.Errorf("examples/%s has no case in exampleCases (test/e2e/examples_test.go): say what it must become", e.Name())
		}
		files = append(files, e.Name())
	}
	for name := range exampleCases {
		if !slices.Contains(files, name) {
			t.Errorf("exampleCases has a case for examples/%s, which is gone", name)
		}
	}
	if t.Failed() {
		return
	}
	sort.Strings(files)

	ip, err := hostIPv4()
	g.Expect(err).NotTo(HaveOccurred())
	env := &examplesEnv{
		ns: newNamespace(t), ip: ip, runsc: os.Getenv(ocitest.RunscEnv), facultyDir: t.TempDir(),
		vmKernel: os.Getenv("PLAYGROUND_VM_KERNEL"), vmModules: os.Getenv("PLAYGROUND_VM_MODULES"), vmRoot: os.Getenv("PLAYGROUND_VM_ROOT"),
	}
	startManager(t, func(o *controllers.Options) {
		// The service worker listens on this machine's address, which is
		// also the API server's: a control-plane address, which the
		// manager refuses unless the cluster admin grants it.
		if ip != "" {
			o.WorkerEndpoints.Allow = []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(ip), 32)}
		}
		// The image examples' registry serves cleartext HTTP on loopback.
		o.Images.PlainHTTP = []string{"127.0.0.1"}
	})
	startExamplesNode(t, env)

	skipped := map[string]string{}
	applied := map[string][]*unstructured.Unstructured{}
	appliedAt := map[string]time.Time{}
	for _, name := range files {
		c := exampleCases[name]
		if c.skip != nil {
			if reason := c.skip(env); reason != "" {
				skipped[name] = reason
				continue
			}
		}
		f, err := os.Open(filepath.Join(examplesDir, name))
		g.Expect(err).NotTo(HaveOccurred())
		objs, err := manifest.Decode(name, f)
		f.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(objs).NotTo(BeEmpty(), "examples/%s", name)
		for _, o := range objs {
			g.Expect(o.GetNamespace()).To(BeEmpty(), "examples/%s: %s %s names a namespace: the examples go to the namespace of kubectl's context, or of -n", name, o.GetKind(), o.GetName())
			if o.GetKind() == "Tenant" {
				// This test's node only: another test's may still be
				// registered.
				g.Expect(unstructured.SetNestedStringMap(o.Object, pool("examples"), "spec", "sandbox", "nodeSelector")).To(Succeed())
			}
		}
		if c.node != nil {
			c.node(t, env, objs)
		}
		g.Expect(manifest.Apply(ctx, k8sClient, env.ns, objs)).To(Succeed(), "examples/%s", name)
		applied[name], appliedAt[name] = objs, time.Now()
	}
	for _, name := range files {
		if c := exampleCases[name]; c.serve != nil && applied[name] != nil {
			c.serve(t, env, applied[name])
		}
	}

	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			if reason, ok := skipped[name]; ok {
				t.Skip(reason)
			}
			c := exampleCases[name]
			waitExample(t, env.ns, applied[name], cmp.Or(c.within, settle))
			if c.check != nil {
				c.check(t, env)
			}
			t.Logf("examples/%s: as its comments say %.1f s after it was applied", name, time.Since(appliedAt[name]).Seconds())
		})
	}
}

// startExamplesNode starts the examples' node: the oci backend with
// runc, gVisor (when this machine has runsc) and egress, the vm backend
// (when it has the VM image), and a granted host path.
func startExamplesNode(t *testing.T, env *examplesEnv) {
	t.Helper()
	g := NewWithT(t)
	ocitest.Require(t)
	// The egress backend turns IPv4 forwarding on; the machine gets back
	// what it had.
	sysctltest.HoldIPv4Forwarding(t)
	stateDir := ocitest.StateDir(t)
	be, err := oci.New(oci.Options{StateDir: stateDir, GuestBinary: ocitest.GuestBinary(t), GVisorRuntime: env.runsc, Network: oci.NetworkEgress})
	g.Expect(err).NotTo(HaveOccurred())
	backends := []backend.Backend{be}
	if env.vmKernel != "" && env.vmModules != "" && env.vmRoot != "" {
		ctx := context.Background()
		newVM := func() (*vm.Backend, error) {
			return vm.New(ctx, vm.Options{
				StateDir: filepath.Join(stateDir, "vm"), GuestBinary: ocitest.GuestBinary(t),
				Kernel: env.vmKernel, Modules: env.vmModules, Root: env.vmRoot, Accel: vm.AccelTCG,
			})
		}
		t.Cleanup(func() {
			// After the agent stopped, before the state directory goes: no
			// QEMU outlives the test.
			be, err := newVM()
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ents, _ := os.ReadDir(filepath.Join(stateDir, "vm", "sandboxes"))
			for _, e := range ents {
				if err := be.Destroy(sctx, e.Name(), false); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		})
		vmb, err := newVM()
		g.Expect(err).NotTo(HaveOccurred())
		backends = append(backends, vmb)
	}
	worker, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-example-worker", "-trimpath")
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(worker)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(env.facultyDir, "playground-example-worker"), data, 0o755)).To(Succeed())
	// The node's image store, reaching the test's registry (the image
	// examples' stand-in, on loopback in cleartext).
	startNode(t, &node{name: "examples-1", labels: pool("examples"), stateDir: stateDir,
		hostPathPrefixes: []string{env.facultyDir}, backends: backends, images: imageStore(t, filepath.Join(stateDir, "image-store"))})
}

// waitExample waits until every FacultyBundle, WorkerMapping and Tenant
// of objs is Ready, with the Sandbox of each Tenant; a suspended Tenant
// until it and its Sandbox report Suspended, settled.
func waitExample(t *testing.T, ns string, objs []*unstructured.Unstructured, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	ready := func(g Gomega, obj client.Object, conds []metav1.Condition, observed int64) {
		g.Expect(isTrue(conds, playgroundv1alpha1.ReadyCondition)).To(BeTrue(), "%T %s: %+v", obj, obj.GetName(), conds)
		g.Expect(observed).To(Equal(obj.GetGeneration()), "%T %s", obj, obj.GetName())
		g.Expect(kstatusOf(t, obj)).To(Equal(status.CurrentStatus), "%T %s", obj, obj.GetName())
	}
	// settled: not on its way anywhere (kstatus calls every Ready=False
	// InProgress, so it is the conditions that say so).
	settled := func(g Gomega, obj client.Object, conds []metav1.Condition, observed int64) {
		g.Expect(observed).To(Equal(obj.GetGeneration()), "%T %s", obj, obj.GetName())
		for _, typ := range []string{playgroundv1alpha1.ReconcilingCondition, playgroundv1alpha1.StalledCondition} {
			g.Expect(isTrue(conds, typ)).To(BeFalse(), "%T %s is %s where it is meant to be: %+v", obj, obj.GetName(), typ, conds)
		}
	}
	NewWithT(t).Eventually(func(g Gomega) {
		for _, o := range objs {
			key := client.ObjectKey{Namespace: ns, Name: o.GetName()}
			switch o.GetKind() {
			case "FacultyBundle":
				fb := &playgroundv1alpha1.FacultyBundle{}
				g.Expect(k8sClient.Get(ctx, key, fb)).To(Succeed())
				ready(g, fb, fb.Status.Conditions, fb.Status.ObservedGeneration)
			case "WorkerMapping":
				wm := &playgroundv1alpha1.WorkerMapping{}
				g.Expect(k8sClient.Get(ctx, key, wm)).To(Succeed())
				ready(g, wm, wm.Status.Conditions, wm.Status.ObservedGeneration)
			case "TenantPolicy":
				p := &playgroundv1alpha1.TenantPolicy{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: o.GetName()}, p)).To(Succeed())
				ready(g, p, p.Status.Conditions, p.Status.ObservedGeneration)
			case "Tenant":
				tn, sbx := &playgroundv1alpha1.Tenant{}, &playgroundv1alpha1.Sandbox{}
				g.Expect(k8sClient.Get(ctx, key, tn)).To(Succeed())
				g.Expect(k8sClient.Get(ctx, key, sbx)).To(Succeed())
				if !tn.Spec.Suspended {
					ready(g, sbx, sbx.Status.Conditions, sbx.Status.ObservedGeneration)
					ready(g, tn, tn.Status.Conditions, tn.Status.ObservedGeneration)
					continue
				}
				// Suspended: the token minted but refused, the sandbox
				// provisioned and stopped, and both settled there.
				c := meta.FindStatusCondition(tn.Status.Conditions, playgroundv1alpha1.ReadyCondition)
				g.Expect(c).NotTo(BeNil(), "tenant %s: %+v", tn.Name, tn.Status.Conditions)
				g.Expect([]any{c.Status, c.Reason, tn.Status.ObservedGeneration}).To(Equal([]any{metav1.ConditionFalse, controllers.ReasonSuspended, tn.Generation}), "tenant %s: %+v", tn.Name, tn.Status.Conditions)
				g.Expect(tn.Status.Credentials.SecretRef).NotTo(BeNil(), "tenant %s: its token is minted while suspended", tn.Name)
				g.Expect(sbx.Status.Phase).To(Equal(playgroundv1alpha1.SandboxSuspended), "sandbox %s: %+v", sbx.Name, sbx.Status.Conditions)
				settled(g, sbx, sbx.Status.Conditions, sbx.Status.ObservedGeneration)
				settled(g, tn, tn.Status.Conditions, tn.Status.ObservedGeneration)
			}
		}
	}).WithTimeout(within).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// checkTenantPolicy: in a namespace labelled as the example says, a
// Tenant that asks for more CPU than the policy allows is refused, naming
// the policy and the ceiling, as is one without a usage limit; one within
// it is accepted. (The examples' own namespace is not labelled: the other
// examples are not bound by it.)
func checkTenantPolicy(t *testing.T, _ *examplesEnv) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-ceilings-", Labels: map[string]string{"playground.dev/ceilings": "standard"}}}
	g.Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	tenant := func(mutate func(*playgroundv1alpha1.SandboxTemplate)) *playgroundv1alpha1.Tenant {
		tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "t"}, Spec: playgroundv1alpha1.TenantSpec{
			Sandbox: playgroundv1alpha1.SandboxTemplate{Isolation: playgroundv1alpha1.IsolationGVisor,
				UsageLimits: &playgroundv1alpha1.UsageLimits{CPUSeconds: ptr.To[int64](600), Period: metav1.Duration{Duration: time.Hour}}}}}
		mutate(&tn.Spec.Sandbox)
		return tn
	}
	refused := func(want string) func(error) bool {
		return func(err error) bool {
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "TenantPolicy standard-teams") && strings.Contains(err.Error(), want)
		}
	}
	g.Expect(k8sClient.Create(ctx, tenant(func(s *playgroundv1alpha1.SandboxTemplate) { s.Resources.CPU = ptr.To(resource.MustParse("4")) }), client.DryRunAll)).
		To(Satisfy(refused("spec.sandbox.resources.cpu is 4, over its ceiling of 2 per sandbox: ask for 2 or less")))
	g.Expect(k8sClient.Create(ctx, tenant(func(s *playgroundv1alpha1.SandboxTemplate) { s.UsageLimits = nil }), client.DryRunAll)).
		To(Satisfy(refused("requires a usage limit")))
	g.Expect(k8sClient.Create(ctx, tenant(func(*playgroundv1alpha1.SandboxTemplate) {}), client.DryRunAll)).To(Succeed())
	var p playgroundv1alpha1.TenantPolicy
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "standard-teams"}, &p)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), &p) })
}

// objectOf is the object of objs of that kind and name.
func objectOf(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

// typedOf converts the only object of objs of that kind into out.
func typedOf(t *testing.T, objs []*unstructured.Unstructured, kind string, out any) {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, out); err != nil {
		t.Fatal(err)
	}
}

// serveServiceWorker plays the kubelet and the endpoint controller for
// the service worker: it runs the Deployment's container (the example
// worker, built from this repository) on this machine's address, with its
// bearer Secret mounted as the pod would have it, and publishes the
// process as the Service's ready endpoint.
func serveServiceWorker(t *testing.T, env *examplesEnv, objs []*unstructured.Unstructured) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var dep appsv1.Deployment
	var svc corev1.Service
	var wm playgroundv1alpha1.WorkerMapping
	typedOf(t, objs, "Deployment", &dep)
	typedOf(t, objs, "Service", &svc)
	typedOf(t, objs, "WorkerMapping", &wm)

	// The mapping names the Service and one of its ports; the Service
	// selects the Deployment's pods and targets a port of their container.
	g.Expect(wm.Spec.Destination.Service).NotTo(BeNil())
	g.Expect(wm.Spec.Destination.Service.Name).To(Equal(svc.Name))
	g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels))).To(BeTrue(), "the Service selects the Deployment's pods")
	g.Expect(dep.Spec.Template.Spec.Containers).To(HaveLen(1))
	c := dep.Spec.Template.Spec.Containers[0]
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == wm.Spec.Destination.Service.Port {
			sp = &svc.Spec.Ports[i]
		}
	}
	g.Expect(sp).NotTo(BeNil(), "the Service has the mapping's port")
	g.Expect(c.Ports).To(ContainElement(Or(HaveField("Name", sp.TargetPort.String()), HaveField("ContainerPort", sp.TargetPort.IntVal))), "the Service targets the container's port")

	// The container, as the kubelet would run it: its command (the
	// example worker, built here), its arguments with the address it
	// listens on made this machine's, its environment, and its Secret
	// volumes as directories of files under a root of the test's.
	g.Expect(filepath.Base(c.Command[0])).To(Equal("playground-example-worker"))
	bin, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-example-worker", "-trimpath")
	g.Expect(err).NotTo(HaveOccurred())
	args := slices.Clone(c.Args)
	i := slices.Index(args, "-listen")
	g.Expect(i).To(BeNumerically(">=", 0), "the worker's arguments name its address")
	args[i+1] = net.JoinHostPort(env.ip, "0")
	root := t.TempDir()
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		g.Expect(i).To(BeNumerically(">=", 0), "volume %s", m.Name)
		v := dep.Spec.Template.Spec.Volumes[i]
		g.Expect(v.Secret).NotTo(BeNil(), "volume %s: the test mounts Secrets only", v.Name)
		var s corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.ns, Name: v.Secret.SecretName}, &s)).To(Succeed())
		dir := filepath.Join(root, m.MountPath)
		g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
		for k, b := range s.Data {
			g.Expect(os.WriteFile(filepath.Join(dir, k), b, 0o600)).To(Succeed())
		}
	}
	cmdEnv := []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range c.Env {
		g.Expect(e.ValueFrom).To(BeNil(), "env %s: the test passes values only", e.Name)
		value := e.Value
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(value, m.MountPath+"/") {
				value = filepath.Join(root, value)
			}
		}
		cmdEnv = append(cmdEnv, e.Name+"="+value)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = cmdEnv
	stderr, err := cmd.StderrPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// It says where it listens; the rest of its output is drained until
	// it ends.
	serving := regexp.MustCompile(`serving MCP on http://(\S+)/mcp`)
	addr := make(chan string, 1)
	var lines []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
			lines = append(lines, sc.Text())
		}
		close(addr)
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var listen string
	select {
	case a, ok := <-addr:
		g.Expect(ok).To(BeTrue(), "the worker ended: %s", strings.Join(lines, "\n"))
		listen = a
	case <-time.After(settle):
		t.Fatal("the worker did not say where it listens")
	}
	_, portText, err := net.SplitHostPort(listen)
	g.Expect(err).NotTo(HaveOccurred())
	port, err := strconv.ParseInt(portText, 10, 32)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(k8sClient.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: env.ns, Name: svc.Name + "-examples", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{env.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(sp.Name), Port: ptr.To(int32(port))}},
	})).To(Succeed(), fmt.Sprintf("the EndpointSlice of Service %s", svc.Name))
}
