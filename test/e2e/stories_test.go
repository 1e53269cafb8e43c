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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/kubectl-playground/kubectlplugin"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/rbactest"
)

const settle = 60 * time.Second

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func applyTenant(t *testing.T, ns, name string, mutate func(*playgroundv1alpha1.Tenant)) {
	t.Helper()
	tn := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mutate != nil {
		mutate(tn)
	}
	if err := k8sClient.Create(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
}

// Each test's nodes and tenants share a pool label of their own, so that
// one test's tenants never land on another test's nodes.
func pool(name string) map[string]string { return map[string]string{"e2e-pool": name} }

func inPool(name string) func(*playgroundv1alpha1.Tenant) {
	return func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.NodeSelector = pool(name) }
}

func isTrue(conds []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionTrue(conds, typ)
}

// waitReady waits until the tenant and its sandbox are Ready and returns both.
func waitReady(t *testing.T, ns, name string) (*playgroundv1alpha1.Tenant, *playgroundv1alpha1.Sandbox) {
	t.Helper()
	return waitReadyWithin(t, ns, name, settle)
}

// waitReadyWithin is waitReady with a bound of its own (a VM's boot under
// TCG takes longer).
func waitReadyWithin(t *testing.T, ns, name string, within time.Duration) (*playgroundv1alpha1.Tenant, *playgroundv1alpha1.Sandbox) {
	t.Helper()
	var tn playgroundv1alpha1.Tenant
	var sbx playgroundv1alpha1.Sandbox
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &tn)).To(Succeed())
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sbx)).To(Succeed())
		g.Expect(isTrue(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeTrue(), "sandbox %s/%s: %+v", ns, name, sbx.Status.Conditions)
		g.Expect(isTrue(tn.Status.Conditions, playgroundv1alpha1.ReadyCondition)).To(BeTrue(), "tenant %s/%s: %+v", ns, name, tn.Status.Conditions)
	}, within, 100*time.Millisecond).Should(Succeed())
	return &tn, &sbx
}

func tokenOf(g Gomega, ns, name string) string {
	var s corev1.Secret
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(name)}, &s)).To(Succeed())
	return string(s.Data[playgroundv1alpha1.CredentialTokenKey])
}

func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])[:16]
}

// shell runs a command in the tenant's sandbox through its agent's API, as
// the gateway does.
func shell(t *testing.T, sbx *playgroundv1alpha1.Sandbox, command string) string {
	t.Helper()
	ctx := context.Background()
	c, err := agentapi.NewClient(sbx.Status.Endpoint, agentToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	tenant := sbx.Namespace + "/" + sbx.Spec.TenantRef.Name
	h, err := c.Open(ctx, tenant, sbx.Status.SandboxID)
	if err != nil {
		t.Fatalf("opening %s: %v", sbx.Status.SandboxID, err)
	}
	defer func() { _ = c.Close(ctx, tenant, h.ID) }()
	res, err := c.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: command})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q: %+v %v", command, res, err)
	}
	return string(res.Stdout)
}

func kstatusOf(t *testing.T, obj client.Object) status.Status {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// TestTenantLifecycle: apply a Tenant and it is Ready with a token and a
// running sandbox; rotate, suspend and resume; delete it and its container
// goes, its pile per the reclaim policy, with no finalizer left behind.
func TestTenantLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	n := &node{name: "life-1", labels: pool("life")}
	startNode(t, n)
	ns := newNamespace(t)

	applyTenant(t, ns, "keeper", inPool("life"))
	applyTenant(t, ns, "dropper", func(tn *playgroundv1alpha1.Tenant) {
		inPool("life")(tn)
		tn.Spec.Pile.ReclaimPolicy = playgroundv1alpha1.ReclaimDelete
	})
	tn, sbx := waitReady(t, ns, "keeper")
	_, drop := waitReady(t, ns, "dropper")

	token := tokenOf(g, ns, "keeper")
	g.Expect(token).To(HavePrefix("pgt_"))
	g.Expect(len(token)).To(BeNumerically(">=", 4+43), "256 random bits, base64url")
	g.Expect(tn.Status.Credentials.Fingerprint).To(Equal(fingerprint(token)))
	g.Expect(sbx.Spec.NodeName).To(Equal(n.name))
	g.Expect(sbx.Status.SandboxID).To(MatchRegexp(`^sbx-[0-9a-f]{20}$`), "a sandbox ID")
	g.Expect(runcContainers(t, n)).To(ContainSubstring(sbx.Status.SandboxID))
	g.Expect(kstatusOf(t, tn)).To(Equal(status.CurrentStatus))
	g.Expect(kstatusOf(t, sbx)).To(Equal(status.CurrentStatus))
	g.Expect(shell(t, sbx, "echo hello >> /pile/self.pile; echo $PERSONA")).To(Equal("keeper\n"))
	shell(t, drop, "echo bye >> /pile/self.pile")

	// Rotate.
	patch := client.MergeFrom(tn.DeepCopy())
	tn.Spec.Credentials.RotationRequest = "first"
	g.Expect(k8sClient.Patch(ctx, tn, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var cur playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tn), &cur)).To(Succeed())
		g.Expect(cur.Status.Credentials.RotationRequest).To(Equal("first"))
		newToken := tokenOf(g, ns, "keeper")
		g.Expect(newToken).NotTo(Equal(token))
		g.Expect(cur.Status.Credentials.Fingerprint).To(Equal(fingerprint(newToken)))
	}, settle, 100*time.Millisecond).Should(Succeed())

	// Suspend and resume flip CredentialsReady; suspension stops the
	// sandbox (phase Suspended, no container) and resuming starts it again.
	for _, suspended := range []bool{true, false} {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tn), tn)).To(Succeed())
		patch := client.MergeFrom(tn.DeepCopy())
		tn.Spec.Suspended = suspended
		g.Expect(k8sClient.Patch(ctx, tn, patch)).To(Succeed())
		g.Eventually(func(g Gomega) {
			var cur playgroundv1alpha1.Tenant
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tn), &cur)).To(Succeed())
			g.Expect(isTrue(cur.Status.Conditions, playgroundv1alpha1.CredentialsReadyCondition)).To(Equal(!suspended))
			var s playgroundv1alpha1.Sandbox
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), &s)).To(Succeed())
			if suspended {
				g.Expect(s.Status.Phase).To(Equal(playgroundv1alpha1.SandboxSuspended))
				g.Expect(runcContainers(t, n)).NotTo(ContainSubstring(sbx.Status.SandboxID), "a suspended sandbox runs no container")
			} else {
				g.Expect(s.Status.Phase).To(BeElementOf(playgroundv1alpha1.SandboxReady, playgroundv1alpha1.SandboxDetached))
				g.Expect(runcContainers(t, n)).To(ContainSubstring(sbx.Status.SandboxID), "resuming starts the sandbox again")
			}
		}, settle, 100*time.Millisecond).Should(Succeed())
	}

	// Delete both: containers go; the pile stays with Retain, goes with Delete.
	be, err := oci.New(oci.Options{StateDir: n.stateDir, GuestBinary: ocitest.GuestBinary(t)})
	g.Expect(err).NotTo(HaveOccurred())
	dropPile := be.PileDir(drop.Status.SandboxID)
	for _, name := range []string{"keeper", "dropper"} {
		g.Expect(k8sClient.Delete(ctx, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"keeper", "dropper"} {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &playgroundv1alpha1.Tenant{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "tenant %s still there (a finalizer hangs?)", name)
			err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &playgroundv1alpha1.Sandbox{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "sandbox %s still there", name)
		}
	}, settle, 200*time.Millisecond).Should(Succeed())
	g.Expect(runcContainers(t, n)).NotTo(ContainSubstring(sbx.Status.SandboxID))
	g.Expect(runcContainers(t, n)).NotTo(ContainSubstring(drop.Status.SandboxID))
	// The retained pile is its image, no longer mounted: read it as an
	// operator would.
	var pile []byte
	g.Expect(be.InspectPile(sbx.Status.SandboxID, func(dir string) (err error) {
		pile, err = os.ReadFile(dir + "/self.pile")
		return err
	})).To(Succeed(), "Retain keeps the pile")
	g.Expect(string(pile)).To(Equal("hello\n"))
	_, err = os.Stat(dropPile)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "Delete removes the pile: %v", err)

	// Re-created under the same names: the keeper finds its retained pile
	// under its recorded ID; the dropper, whose record went with its
	// files, starts afresh under a new one.
	applyTenant(t, ns, "keeper", inPool("life"))
	applyTenant(t, ns, "dropper", inPool("life"))
	_, again := waitReady(t, ns, "keeper")
	_, dropAgain := waitReady(t, ns, "dropper")
	g.Expect(again.Status.SandboxID).To(Equal(sbx.Status.SandboxID))
	g.Expect(shell(t, again, "cat /pile/self.pile")).To(Equal("hello\n"))
	g.Expect(dropAgain.Status.SandboxID).NotTo(Equal(drop.Status.SandboxID))
}

// TestSpreadAndSelector: three nodes, ten tenants spread over them; a node
// selector puts a sandbox where it asks.
func TestSpreadAndSelector(t *testing.T) {
	g := NewWithT(t)
	startManager(t)
	ssd := pool("spread")
	ssd["disk"] = "ssd"
	nodes := []*node{{name: "spread-1", labels: pool("spread")}, {name: "spread-2", labels: pool("spread")}, {name: "spread-3", labels: ssd}}
	for _, n := range nodes {
		startNode(t, n)
	}
	ns := newNamespace(t)
	// The pinned tenant first: the binder places each sandbox on the least
	// loaded eligible node as it comes, so it evens out a load it knows
	// of, not one that arrives after (ten spread 4, 3, 3, and a pinned
	// eleventh may land on the 4).
	applyTenant(t, ns, "picky", func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Sandbox.NodeSelector = ssd })
	_, picky := waitReady(t, ns, "picky")
	g.Expect(picky.Spec.NodeName).To(Equal("spread-3"))
	for i := range 10 {
		applyTenant(t, ns, fmt.Sprintf("t%d", i), inPool("spread"))
	}
	// Eleven sandboxes, one of them pinned: the binder evens out the whole
	// load, so the nodes hold 4, 4 and 3 in some order.
	load := map[string]int{picky.Spec.NodeName: 1}
	for i := range 10 {
		_, sbx := waitReady(t, ns, fmt.Sprintf("t%d", i))
		load[sbx.Spec.NodeName]++
	}
	for _, n := range nodes {
		g.Expect(load[n.name]).To(BeNumerically(">=", 3), "uneven spread: %v", load)
		g.Expect(load[n.name]).To(BeNumerically("<=", 4), "uneven spread: %v", load)
	}
	g.Expect(runcContainers(t, nodes[2])).To(ContainSubstring(picky.Status.SandboxID))
}

// TestRestarts: an agent restart keeps sandbox IDs, files and background
// processes, and the sandbox stays Ready; a manager restart re-creates and
// re-mints nothing; an agent gone for good turns its sandboxes not Ready
// with a reason, and new sandboxes go elsewhere.
func TestRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	manager := startManager(t)
	a, b := &node{name: "restart-a", labels: pool("restart")}, &node{name: "restart-b", labels: pool("restart")}
	startNode(t, a)
	ns := newNamespace(t)
	applyTenant(t, ns, "survivor", inPool("restart"))
	tn, sbx := waitReady(t, ns, "survivor")
	g.Expect(sbx.Spec.NodeName).To(Equal(a.name))
	shell(t, sbx, "echo kept > file")
	pid := strings.TrimSpace(shell(t, sbx, "setsid sleep 1000 >/dev/null 2>&1 & echo $!"))
	readySince := meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition).LastTransitionTime

	// Restart the agent on the same state directory and endpoint.
	a.agent.Stop(t)
	startNode(t, a)
	_, sbx = waitReady(t, ns, "survivor")
	g.Expect(sbx.Status.SandboxID).To(Equal(tn.Status.SandboxID), "the restarted agent found the sandbox under its recorded ID")
	g.Expect(shell(t, sbx, "cat file; kill -0 "+pid+" && echo alive")).To(Equal("kept\nalive\n"))
	g.Expect(meta.FindStatusCondition(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition).LastTransitionTime).To(Equal(readySince), "Ready flapped across the agent restart")

	// Restart the manager: same token, same sandbox.
	var secret corev1.Secret
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName("survivor")}, &secret)).To(Succeed())
	manager.Stop(t)
	startManager(t)
	g.Consistently(func(g Gomega) {
		var s corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&secret), &s)).To(Succeed())
		g.Expect(s.ResourceVersion).To(Equal(secret.ResourceVersion), "the manager restart rewrote the Secret")
		var cur playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), &cur)).To(Succeed())
		g.Expect(cur.UID).To(Equal(sbx.UID), "the manager restart re-created the sandbox")
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
	_, _ = waitReady(t, ns, "survivor")
	_ = tn

	// Stop agent a for good, with b available.
	startNode(t, b)
	a.agent.Stop(t)
	g.Eventually(func(g Gomega) {
		var cur playgroundv1alpha1.Sandbox
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), &cur)).To(Succeed())
		ready := meta.FindStatusCondition(cur.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(playgroundv1alpha1.ReasonAgentUnavailable))
		g.Expect(cur.Spec.NodeName).To(Equal(a.name))
	}, leaseDuration+settle, 200*time.Millisecond).Should(Succeed())
	applyTenant(t, ns, "newcomer", inPool("restart"))
	_, fresh := waitReady(t, ns, "newcomer")
	g.Expect(fresh.Spec.NodeName).To(Equal(b.name))
}

// TestKubectlPlugin: the kubectl plugin's tenant workflow against the real
// system: create prints a working token and client configurations, token
// show prints it again, reset replaces it, suspend and resume flip access,
// attach and status describe, destroy cleans up; and a user RBAC allows to
// use the tenant runs commands in its sandbox (exec, shell) through the
// TLS agent of its node, which one without that right cannot.
func TestKubectlPlugin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	n := startTLSNode(t, "plugin-1", pool("plugin"))
	ns := newNamespace(t)
	// as runs the plugin as the user of cfg, with stdin.
	as := func(cfg *rest.Config, stdin string, args ...string) (code int, stdout, stderr string) {
		var out, errOut strings.Builder
		code = kubectlplugin.Main(ctx, append([]string{"-n", ns, "--timeout", "60s"}, args...),
			kubectlplugin.Env{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut, Config: cfg})
		return code, out.String(), errOut.String()
	}
	kubectl := func(args ...string) (string, error) {
		var out, errOut strings.Builder
		err := kubectlplugin.Run(ctx, append([]string{"-n", ns, "--timeout", "60s"}, args...), kubectlplugin.Env{Out: &out, ErrOut: &errOut, Config: cp.Config})
		return out.String() + errOut.String(), err
	}

	out, err := kubectl("tenant", "create", "cli", "--persona", "cli-bot", "--node-selector", "e2e-pool=plugin", "--wait", "--endpoint", "https://mcp.example.com/mcp")
	g.Expect(err).NotTo(HaveOccurred(), out)
	token := regexp.MustCompile(`token: (pgt_\S+)`).FindStringSubmatch(out)
	g.Expect(token).To(HaveLen(2), out)
	g.Expect(tokenOf(g, ns, "cli")).To(Equal(token[1]))
	g.Expect(out).NotTo(ContainSubstring("being provisioned"), "--wait waits until the sandbox is Ready")
	g.Expect(out).To(ContainSubstring("claude mcp add --transport http playground-cli https://mcp.example.com/mcp --header 'Authorization: Bearer " + token[1] + "'"))
	g.Expect(out).To(ContainSubstring("playground gateway --stdio --tenant " + ns + "/cli"))
	_, err = kubectl("tenant", "create", "cli")
	g.Expect(err).To(MatchError(ContainSubstring("already exists")))
	out, err = kubectl("token", "show", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal(token[1] + "\n"))
	_, ready := waitReady(t, ns, "cli")
	g.Expect(ready.Spec.NodeName).To(Equal("plugin-1"))

	out, err = kubectl("attach", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`sandbox:\s+` + ready.Status.SandboxID))
	g.Expect(out).To(MatchRegexp(`node:\s+plugin-1`))
	g.Expect(out).To(MatchRegexp(`persona:\s+cli-bot`))

	out, err = kubectl("status", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`tenant/cli\s+Ready\s+True`))
	g.Expect(out).To(MatchRegexp(`sandbox/cli\s+Ready\s+True`))
	g.Expect(out).To(MatchRegexp(`node/plugin-1\s+Registered\s+True\s+AgentHealthy`))
	out, err = kubectl("status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`cli\s+sandbox\s+True\s+(Ready|Detached)\s+Running\s+plugin-1\s+\S+\s+connect: kubectl playground attach cli`))

	// exec and shell, as a user granted use on the tenant, through the
	// TLS agent, which checks the user itself.
	runner := userOf(t, ns, "runner", true)
	stranger := userOf(t, ns, "stranger", false)
	hostKernel, err := exec.Command("uname", "-r").Output()
	g.Expect(err).NotTo(HaveOccurred())
	code, stdout, stderr := as(runner, "", "exec", "cli", "--", "uname", "-r")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(Equal(string(hostKernel)), "a runc sandbox runs on the node's kernel")
	code, stdout, stderr = as(runner, "", "exec", "cli", "--", "sh", "-c", `printf 'a\0b\377'; echo "$PERSONA" >&2; exit 3`)
	g.Expect(code).To(Equal(3), stderr)
	g.Expect(stdout).To(Equal("a\x00b\xff"), "byte for byte")
	g.Expect(stderr).To(Equal("cli-bot\n"), "a login shell, with the tenant's profile")
	code, stdout, stderr = as(runner, "twelve bytes", "exec", "cli", "-i", "--", "wc", "-c")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(Equal("12\n"))
	code, stdout, stderr = as(runner, "cd /tmp\npwd\necho to-stderr >&2\nexit 4\necho never\n", "shell", "cli")
	g.Expect(code).To(Equal(4), stderr)
	g.Expect(stdout).To(Equal("/tmp\n"))
	g.Expect(stderr).To(Equal("to-stderr\n"))
	code, stdout, stderr = as(stranger, "", "exec", "cli", "--", "uname", "-r")
	g.Expect(code).To(Equal(1))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(HavePrefix(fmt.Sprintf("error: your kubeconfig's user may not use tenant %s/cli: it needs RBAC verb \"use\" on tenants.playground.dev \"cli\" in namespace %s", ns, ns)))
	g.Expect(strings.Count(stderr, "\n")).To(Equal(1), "one line")

	// As in playground-dev: an agent without TLS, reached only when told
	// to, with the shared token of a file.
	dev := &node{name: "plugin-dev", labels: pool("plugin-dev")}
	startNode(t, dev)
	out, err = kubectl("tenant", "create", "dev", "--node-selector", "e2e-pool=plugin-dev", "--wait")
	g.Expect(err).NotTo(HaveOccurred(), out)
	code, stdout, stderr = as(cp.Config, "", "exec", "dev", "--", "echo", "over", "h2c")
	g.Expect(code).To(Equal(1))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(ContainSubstring("serves without TLS"))
	g.Expect(stderr).To(ContainSubstring("give --agent-cleartext and --agent-token-file"))
	tokenFile := filepath.Join(t.TempDir(), "agent-token")
	g.Expect(os.WriteFile(tokenFile, []byte(agentToken+"\n"), 0o600)).To(Succeed())
	code, stdout, stderr = as(cp.Config, "", "exec", "dev", "--agent-cleartext", "--agent-token-file", tokenFile, "--", "echo", "over", "h2c")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(Equal("over h2c\n"))

	// jobs: what holds the tenant's bounds, for an agent that lost its
	// job IDs; as for exec, only for a user who may use the tenant.
	_, devSbx := waitReady(t, ns, "dev")
	devAgent, err := agentapi.NewClient(devSbx.Status.Endpoint, agentToken, nil)
	g.Expect(err).NotTo(HaveOccurred())
	devTenant := ns + "/dev"
	devHandle, err := devAgent.Open(ctx, devTenant, devSbx.Status.SandboxID)
	g.Expect(err).NotTo(HaveOccurred())
	job, err := devAgent.StartJob(ctx, devTenant, devHandle.ID, agentapi.ExecRequest{Command: "sleep 300 # the long one"})
	g.Expect(err).NotTo(HaveOccurred())
	code, stdout, stderr = as(cp.Config, "", "jobs", "dev", "--agent-cleartext", "--agent-token-file", tokenFile)
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(MatchRegexp(`HANDLE\s+AGE\s+IDLE\s+EXPIRES IN\n` + devHandle.ID + `\s`))
	g.Expect(stdout).To(MatchRegexp(`JOB\s+STATE\s+AGE\s+RESULT\s+INPUT\s+COMMAND\n` + job.ID + `\s+running\s+\S+\s+-\s+-\s+sleep 300 # the long one\n`))
	code, stdout, stderr = as(cp.Config, "", "jobs", "dev", "--agent-cleartext", "--agent-token-file", tokenFile, "-o", "json")
	g.Expect(code).To(Equal(0), stderr)
	var listed agentapi.Activity
	g.Expect(json.Unmarshal([]byte(stdout), &listed)).To(Succeed(), stdout)
	g.Expect(listed.Jobs).To(HaveLen(1))
	g.Expect(listed.Jobs[0].ID).To(Equal(job.ID))
	_, err = devAgent.Cancel(ctx, devTenant, job.ID)
	g.Expect(err).NotTo(HaveOccurred())
	code, stdout, stderr = as(runner, "", "jobs", "cli")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(Equal("No open session handles.\n\nNo jobs.\n"), "exec and shell closed their handles")
	code, _, stderr = as(stranger, "", "jobs", "cli")
	g.Expect(code).To(Equal(1))
	g.Expect(stderr).To(ContainSubstring("may not use tenant"))

	// restart: the agent kills every process of the sandbox and starts it
	// again; the command waits for the agent's answer.
	initBefore := initPID(g, n, ready.Status.SandboxID)
	out, err = kubectl("tenant", "restart", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("restarted"))
	g.Expect(initPID(g, n, ready.Status.SandboxID)).NotTo(Equal(initBefore), "a restart starts a new init")

	out, err = kubectl("tenant", "token", "reset", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	fresh := regexp.MustCompile(`token: (pgt_\S+)`).FindStringSubmatch(out)
	g.Expect(fresh).To(HaveLen(2), out)
	g.Expect(fresh[1]).NotTo(Equal(token[1]))
	g.Expect(tokenOf(g, ns, "cli")).To(Equal(fresh[1]))

	out, err = kubectl("tenant", "suspend", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("suspended"))
	out, err = kubectl("tenant", "resume", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("resumed"))

	out, err = kubectl("tenant", "destroy", "cli")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(runcContainers(t, n)).NotTo(ContainSubstring(ready.Status.SandboxID))
	_, err = kubectl("attach", "cli")
	g.Expect(err).To(MatchError(ContainSubstring(`no tenant "cli"`)))
	_, err = kubectl("tenant", "frobnicate", "cli")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "frobnicate"`)))
}

// userOf is a user of its own (a ServiceAccount's token) who may read the
// tenant cli of namespace ns, its sandbox and the agents' CA bundle and,
// when use, act as the tenant (the RBAC verb use), as docs/tools.md says
// a stdio user needs. It waits until the API server's authorizer knows.
func userOf(t *testing.T, ns, name string, use bool) *rest.Config {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := cp.ServiceAccountConfig(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	user := "system:serviceaccount:" + ns + ":" + name
	verbs := []string{"get", "list", "watch"}
	if use {
		verbs = append(verbs, playgroundv1alpha1.UseVerb)
	}
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
	bind(ns,
		rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"tenants"}, ResourceNames: []string{"cli"}, Verbs: verbs},
		rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"sandboxes"}, ResourceNames: []string{"cli"}, Verbs: []string{"get", "list", "watch"}})
	bind(agentlease.DefaultNamespace,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{agentpki.CAConfigMapName}, Verbs: []string{"get", "list", "watch"}})
	attrs := []authorizationv1.ResourceAttributes{
		{Namespace: ns, Group: group, Resource: "sandboxes", Name: "cli", Verb: "get"},
		{Namespace: agentlease.DefaultNamespace, Resource: "configmaps", Name: agentpki.CAConfigMapName, Verb: "get"},
	}
	if use {
		attrs = append(attrs, playgroundv1alpha1.TenantUseAttributes(ns, "cli"))
	}
	g.Expect(rbactest.AwaitAllowed(ctx, cp.Config, user, nil, attrs...)).To(Succeed())
	return cfg
}

// initPID is the host PID of the init of a sandbox on node n.
func initPID(g Gomega, n *node, id string) string {
	b, err := os.ReadFile(filepath.Join(n.stateDir, "sandboxes", id, "init.pid"))
	g.Expect(err).NotTo(HaveOccurred())
	return strings.TrimSpace(string(b))
}
