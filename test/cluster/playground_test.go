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

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/mcpgateway/tools"
)

// The deployment under test: Playground's own image (make image) and a
// rebuilt one to upgrade to, the chart or config/default, on the node of
// hack/cluster.sh.
const (
	image        = "ghcr.io/playground-dev/playground"
	upgradeTag   = "e2e-upgrade"
	installNS    = "playground-system"
	tenantNS     = "e2e"
	release      = "pg"
	kustomizeSvc = "playground-gateway"
)

// playgroundDeployment installs Playground with Helm and with kustomize,
// uses it through the gateway Service, upgrades it under a polling client
// and uninstalls it, asserting at each step what a platform team would
// check. The agent keeps its sandboxes in a directory of the cluster's own
// (CLUSTER_DIR/playground) and their cgroups under /playground-e2e, so that
// `make dev` and the other suites on this machine are not touched.
func playgroundDeployment(t *testing.T, k kubectl) {
	archive := filepath.Join(root, "bin", "playground-image.oci.tar")
	if _, err := os.Stat(archive); err != nil {
		t.Skip("no bin/playground-image.oci.tar (make image)")
	}
	d := newDeployment(t, k)

	// A rebuilt image to upgrade to: the same sources under another tag,
	// so another digest (the tag is one of its labels).
	upgrade := filepath.Join(d.dir, "upgrade.oci.tar")
	run(t, root, []string{"IMAGE=" + image + ":" + upgradeTag, "IMAGE_OUT=" + upgrade}, "hack/image.sh")
	clusterSh(t, "import", upgrade)

	k.must("", "label", "node", "--all", "--overwrite", "playground.dev/sandbox-node=true")
	t.Run("Helm", d.helm)
	t.Run("Kustomize", d.kustomize)
}

type deployment struct {
	t        *testing.T
	k        kubectl
	helmBin  string
	dir      string // the cluster's directory
	stateDir string // the agents' --state-dir
	cgroup   string // the agents' --cgroup-parent
}

func newDeployment(t *testing.T, k kubectl) *deployment {
	dir := filepath.Join(root, "bin", "cluster")
	if v := os.Getenv("CLUSTER_DIR"); v != "" {
		dir = v
	}
	d := &deployment{t: t, k: k, dir: dir, stateDir: filepath.Join(dir, "playground"), cgroup: "/playground-e2e"}
	d.helmBin = strings.TrimSpace(run(t, root, nil, "hack/helm.sh"))
	t.Cleanup(d.removeHostState)
	return d
}

// helm: install, smoke, upgrade under a polling client, a gateway roll,
// uninstall.
func (d *deployment) helm(t *testing.T) {
	k := d.k
	k.must("", "create", "namespace", installNS)
	values := []string{
		"--set", "agent.stateDir=" + d.stateDir,
		"--set", "agent.cgroupParent=" + d.cgroup,
	}
	d.helmRun(t, append([]string{"install", release, filepath.Join(root, "charts", "playground"),
		"--namespace", installNS, "--wait", "--timeout", "5m"}, values...)...)
	prefix := release + "-playground-"
	d.rolledOut(t, installNS, "deployment/"+prefix+"manager", "deployment/"+prefix+"gateway", "daemonset/"+prefix+"agent")
	d.readyPods(t, installNS, map[string]int{"manager": 2, "gateway": 2, "agent": 1})

	k.must("", "create", "namespace", tenantNS)
	endpoint := d.gatewayEndpoint(t, installNS, prefix+"gateway")
	token := d.tenant(t, "demo", "Retain")
	d.smoke(t, endpoint, token)

	// gVisor: the image's runsc, offered by the agent in its pod; the
	// tenant's sandbox runs on gVisor's kernel, not the node's.
	gvToken := d.tenantWith(t, "gvisor", "Delete", "gvisor")
	gv := connect(t, endpoint, gvToken)
	hostKernel, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	gvBefore := gv.open(t)
	gvKernel := gv.exec(t, gvBefore.Handle, "cat /proc/version")
	if gvKernel == "" || gvKernel == string(hostKernel) {
		t.Errorf("in a gvisor sandbox /proc/version says %q: want gVisor's kernel, not the node's %q", gvKernel, hostKernel)
	}
	gv.close()

	// Before the upgrade: a file and a background process outside any job.
	c := connect(t, endpoint, token)
	before := c.open(t)
	out := c.exec(t, before.Handle, `echo kept > /workspace/upgrade.txt
setsid sh -c 'while sleep 1; do date +%s >> /workspace/ticks; done' >/dev/null 2>&1 &
echo $!`)
	pid := strings.TrimSpace(out)
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("the background process's pid: %q", out)
	}

	// A client polls with exec throughout the upgrade. The agent's
	// restart is allowed to answer "unavailable: retry" and to forget
	// session handles (they do not outlive the agent: docs/operations.md);
	// nothing else may fail.
	p := startPolling(t, endpoint, token, true)
	oldAgent := d.podNames(t, installNS, "agent")
	var oldPods []string
	for _, c := range []string{"manager", "gateway", "agent"} {
		oldPods = append(oldPods, d.podNames(t, installNS, c)...)
	}
	d.helmRun(t, append([]string{"upgrade", release, filepath.Join(root, "charts", "playground"),
		"--namespace", installNS, "--wait", "--timeout", "5m", "--set", "image.tag=" + upgradeTag}, values...)...)
	d.rolledOut(t, installNS, "deployment/"+prefix+"manager", "deployment/"+prefix+"gateway", "daemonset/"+prefix+"agent")
	p.settle(t)
	p.stop(t, "the upgrade")
	// The old pods end (a rollout is complete when the new ones are
	// available, not when the old ones are gone): nothing of the sandboxes
	// the old agent reattached stays in its cgroup (the kubelet removes
	// the pod only with its cgroup).
	for _, old := range oldPods {
		k.must("", "-n", installNS, "wait", "--for=delete", "pod/"+old, "--timeout=2m")
	}
	for _, c := range []string{"manager", "gateway", "agent"} {
		d.podsRun(t, installNS, c, image+":"+upgradeTag)
	}
	if now := d.podNames(t, installNS, "agent"); strings.Join(now, ",") == strings.Join(oldAgent, ",") {
		t.Errorf("the agent pod %v was not replaced by the upgrade", now)
	}

	// After it: the same sandbox, its file, and the process, which kept
	// running (its ticks have no gap longer than a few seconds).
	after := c.open(t)
	if after.SandboxID != before.SandboxID {
		t.Errorf("after the upgrade open_session gave sandbox %s, before it %s", after.SandboxID, before.SandboxID)
	}
	out = c.exec(t, after.Handle, `cat /workspace/upgrade.txt; kill -0 `+pid+` && echo alive
awk 'NR > 1 && $1 - prev > 5 { print "gap of", $1 - prev, "s" } { prev = $1 }' /workspace/ticks`)
	if out != "kept\nalive\n" {
		t.Errorf("after the upgrade the sandbox said %q, want the file's line, the process alive, and no gap in its ticks", out)
	}

	// The gVisor sandbox too: the new agent reattached it, on gVisor.
	gv = connect(t, endpoint, gvToken)
	gvAfter := gv.open(t)
	if got := gv.exec(t, gvAfter.Handle, "cat /proc/version"); gvAfter.SandboxID != gvBefore.SandboxID || got != gvKernel {
		t.Errorf("after the upgrade the gvisor tenant has sandbox %s on %q; before, %s on %q", gvAfter.SandboxID, got, gvBefore.SandboxID, gvKernel)
	}
	gv.close()

	// The gateway alone rolls (a configuration change): a polling client
	// sees no failure at all.
	p = startPolling(t, endpoint, token, false)
	k.must("", "-n", installNS, "rollout", "restart", "deployment/"+prefix+"gateway")
	d.rolledOut(t, installNS, "deployment/"+prefix+"gateway")
	p.settle(t)
	p.stop(t, "the gateway's roll")
	c.close()

	// Uninstall: the Tenants first (their sandboxes are destroyed, the
	// Retain pile kept), then the release.
	k.must("", "-n", tenantNS, "delete", "tenant", "demo", "gvisor", "--wait", "--timeout=2m")
	d.helmRun(t, "uninstall", release, "--namespace", installNS, "--wait", "--timeout", "5m")
	d.nothingLeft(t, installNS, before.SandboxID, true)
	k.must("", "delete", "namespace", installNS, tenantNS, "--wait", "--timeout=2m")
}

// kustomize: config/default applied as its comment says, a tenant served,
// then deleted with the same kustomization.
func (d *deployment) kustomize(t *testing.T) {
	k := d.k
	// Rendered as it is, with the agent's directories moved out of the
	// way of this machine's other uses.
	rendered := k.must("", "kustomize", filepath.Join(root, "config", "default"))
	for from, to := range map[string]string{"/var/lib/playground": d.stateDir, "--cgroup-parent=/playground\n": "--cgroup-parent=" + d.cgroup + "\n"} {
		if !strings.Contains(rendered, from) {
			t.Fatalf("config/default's agent has no %q to move", from)
		}
		rendered = strings.ReplaceAll(rendered, from, to)
	}
	manifest := filepath.Join(t.TempDir(), "playground.yaml")
	if err := os.WriteFile(manifest, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	k.must("", "apply", "--server-side", "-f", manifest)
	d.rolledOut(t, installNS, "deployment/playground-manager", "deployment/playground-gateway", "daemonset/playground-agent")
	d.readyPods(t, installNS, map[string]int{"manager": 2, "gateway": 2, "agent": 1})

	k.must("", "create", "namespace", tenantNS)
	endpoint := d.gatewayEndpoint(t, installNS, kustomizeSvc)
	token := d.tenant(t, "kustomized", "Delete")
	c := connect(t, endpoint, token)
	s := c.open(t)
	if out := c.exec(t, s.Handle, "echo served"); out != "served\n" {
		t.Errorf("exec said %q", out)
	}
	c.close()

	k.must("", "-n", tenantNS, "delete", "tenant", "kustomized", "--wait", "--timeout=2m")
	// Deleting the kustomization removes the namespace, and with it what
	// the components made in it, and the CRDs.
	k.must("", "delete", "-f", manifest, "--wait", "--timeout=5m")
	d.nothingLeft(t, "", s.SandboxID, false)
	k.must("", "delete", "namespace", tenantNS, "--wait", "--timeout=2m")
}

func (d *deployment) helmRun(t *testing.T, args ...string) {
	t.Helper()
	run(t, root, []string{"KUBECONFIG=" + d.k.kubeconfig}, d.helmBin, args...)
}

// rolledOut waits for each workload's rollout to complete.
func (d *deployment) rolledOut(t *testing.T, ns string, workloads ...string) {
	t.Helper()
	for _, w := range workloads {
		d.k.must("", "-n", ns, "rollout", "status", w, "--timeout=5m")
	}
}

type podList struct {
	Items []struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Containers []struct {
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
		Status struct {
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

func (d *deployment) pods(t *testing.T, ns, component string) podList {
	t.Helper()
	var l podList
	out := d.k.must("", "-n", ns, "get", "pods", "-l", "app.kubernetes.io/component="+component, "-o", "json")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func (d *deployment) podNames(t *testing.T, ns, component string) []string {
	var names []string
	for _, p := range d.pods(t, ns, component).Items {
		names = append(names, p.Metadata.Name)
	}
	return names
}

// readyPods checks how many Ready pods each component has.
func (d *deployment) readyPods(t *testing.T, ns string, want map[string]int) {
	t.Helper()
	for component, n := range want {
		ready := 0
		for _, p := range d.pods(t, ns, component).Items {
			for _, c := range p.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					ready++
				}
			}
		}
		if ready != n {
			t.Errorf("%d Ready %s pods, want %d", ready, component, n)
		}
	}
}

// podsRun checks that every pod of a component runs the image.
func (d *deployment) podsRun(t *testing.T, ns, component, want string) {
	t.Helper()
	for _, p := range d.pods(t, ns, component).Items {
		if img := p.Spec.Containers[0].Image; img != want {
			t.Errorf("pod %s runs %s, want %s", p.Metadata.Name, img, want)
		}
	}
}

// gatewayEndpoint is the MCP endpoint of the gateway Service, by its
// cluster IP (kube-proxy; there is no cluster DNS here).
func (d *deployment) gatewayEndpoint(_ *testing.T, ns, svc string) string {
	ip := strings.TrimSpace(d.k.must("", "-n", ns, "get", "service", svc, "-o", "jsonpath={.spec.clusterIP}"))
	port := strings.TrimSpace(d.k.must("", "-n", ns, "get", "service", svc, "-o", "jsonpath={.spec.ports[0].port}"))
	return "http://" + ip + ":" + port + "/mcp"
}

// tenant applies a Tenant, waits until it is Ready and returns its token,
// read from the Secret its status names.
func (d *deployment) tenant(t *testing.T, name, reclaim string) string {
	return d.tenantWith(t, name, reclaim, "container")
}

// tenantWith is tenant with an isolation.
func (d *deployment) tenantWith(t *testing.T, name, reclaim, isolation string) string {
	t.Helper()
	d.k.must(fmt.Sprintf(`apiVersion: playground.dev/v1alpha1
kind: Tenant
metadata:
  name: %s
  namespace: %s
spec:
  persona: e2e
  sandbox:
    backend: oci
    isolation: %s
  pile:
    reclaimPolicy: %s
`, name, tenantNS, isolation, reclaim), "apply", "-f", "-")
	d.k.must("", "-n", tenantNS, "wait", "--for=condition=Ready", "tenant/"+name, "--timeout=3m")
	secret := strings.TrimSpace(d.k.must("", "-n", tenantNS, "get", "tenant", name, "-o", "jsonpath={.status.credentials.secretRef.name}"))
	token := strings.TrimSpace(d.k.must("", "-n", tenantNS, "get", "secret", secret, "-o", "go-template={{.data.token | base64decode}}"))
	if token == "" {
		t.Fatalf("the Secret %s has no token", secret)
	}
	return token
}

// smoke runs the deployment smoke test against the gateway Service.
func (d *deployment) smoke(t *testing.T, endpoint, token string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "smoke.sh"), "--cancel-proof")
	cmd.Env = append(os.Environ(), "PLAYGROUND_ENDPOINT="+endpoint, "PLAYGROUND_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), " passed, 0 failed") {
		t.Fatalf("hack/smoke.sh --cancel-proof against %s: %v\n%s", endpoint, err, out)
	}
	t.Logf("hack/smoke.sh --cancel-proof: %s", lastLine(string(out)))
}

// nothingLeft checks what uninstalling leaves: no Playground pod, object
// or process, no sandbox mount or loop device on the host; only the pile
// of a Retain sandbox, on the node's disk.
func (d *deployment) nothingLeft(t *testing.T, ns, sandboxID string, retained bool) {
	t.Helper()
	k := d.k
	if ns != "" {
		// What the components create at run time (Leases, the agent CA)
		// is owned by their ServiceAccounts: the garbage collector takes
		// it. Wait for it to be done.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			left := strings.Fields(k.must("", "-n", ns, "get", "pods,leases,secrets,configmaps,serviceaccounts,roles,rolebindings,services,deployments,daemonsets",
				"-o", "name"))
			var ours []string
			for _, o := range left {
				if o != "configmap/kube-root-ca.crt" && o != "serviceaccount/default" {
					ours = append(ours, o)
				}
			}
			if len(ours) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("left in namespace %s after uninstalling: %v", ns, ours)
				break
			}
			time.Sleep(time.Second)
		}
	}
	for _, kind := range []string{"clusterroles", "clusterrolebindings"} {
		for _, o := range strings.Fields(k.must("", "get", kind, "-o", "name")) {
			if strings.Contains(o, "playground") {
				t.Errorf("left after uninstalling: %s", o)
			}
		}
	}
	if out, err := k.run("", "get", "tenants,sandboxes,workermappings,facultybundles", "-A", "-o", "name"); err == nil && strings.TrimSpace(out) != "" {
		t.Errorf("Playground objects left after uninstalling: %s", out)
	}

	// The host: no sandbox process, mount or loop device. A sandbox's
	// processes are told by their cgroup, under the agents' parent: other
	// sandboxes of this machine (a test run beside this one) are not ours.
	ours := func(p process) bool {
		cg, _ := os.ReadFile(filepath.Join(p.proc, "cgroup"))
		return strings.Contains(string(cg), ":"+d.cgroup+"/")
	}
	for _, p := range processes() {
		if strings.HasPrefix(p.exe, d.stateDir+"/") || strings.Contains(p.args, d.stateDir) || (strings.HasPrefix(p.args, "playground-sandbox ") && ours(p)) {
			t.Errorf("left running after uninstalling: %s %s (%s)", p.proc, p.exe, p.args)
		}
	}
	mounts, _ := os.ReadFile("/proc/1/mounts")
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], d.stateDir+"/") {
			t.Errorf("left mounted on the host: %s", f[1])
		}
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		if f, _ := os.ReadFile(b); strings.HasPrefix(string(f), d.stateDir+"/") {
			t.Errorf("loop device %s left attached to %s", filepath.Base(filepath.Dir(filepath.Dir(b))), strings.TrimSpace(string(f)))
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*" + d.cgroup + "/*/cgroup.procs")
	for _, c := range cgroups {
		t.Errorf("sandbox cgroup left: %s", filepath.Dir(c))
	}
	pile := filepath.Join(d.stateDir, "sandboxes", sandboxID, "pile.img")
	if _, err := os.Stat(pile); retained && err != nil {
		t.Errorf("the Retain sandbox's pile is gone: %v", err)
	} else if !retained && err == nil {
		t.Errorf("the Delete sandbox's pile %s is still there", pile)
	}
}

// removeHostState removes what the agents leave on the node by design (the
// state directory with retained piles, the sandboxes' parent cgroups), so
// that the next run starts empty.
func (d *deployment) removeHostState() {
	if err := os.RemoveAll(d.stateDir); err != nil {
		d.t.Errorf("removing %s: %v", d.stateDir, err)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + d.cgroup)
	for _, dir := range dirs {
		_ = os.Remove(dir)
	}
}

// A client of the gateway, with the tenant's token.
type client struct {
	cs *mcp.ClientSession
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func connect(t *testing.T, endpoint, token string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cluster-e2e", Version: "v0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport.(*http.Transport).Clone()}},
	}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	return &client{cs: cs}
}

func (c *client) close() { _ = c.cs.Close() }

func (c *client) call(name string, args map[string]any, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		var msg []string
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				msg = append(msg, tc.Text)
			}
		}
		return toolError(strings.Join(msg, " "))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

type toolError string

func (e toolError) Error() string { return string(e) }

func (c *client) open(t *testing.T) tools.OpenSessionOutput {
	t.Helper()
	var s tools.OpenSessionOutput
	if err := c.call("open_session", map[string]any{}, &s); err != nil {
		t.Fatalf("open_session: %v", err)
	}
	return s
}

func (c *client) exec(t *testing.T, handle, command string) string {
	t.Helper()
	var out tools.ExecOutput
	if err := c.call("exec", map[string]any{"handle": handle, "command": command}, &out); err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	if out.ExitCode != 0 {
		t.Fatalf("exec %q: exit code %d, stderr %q", command, out.ExitCode, out.Stderr)
	}
	return out.Stdout
}

// polling is a client calling exec in a loop, on one MCP session, as an
// agent waiting on a sandbox would.
type polling struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	ok        int
	retried   int // "unavailable: retry" while the agent restarts
	reopened  int // handles forgotten by a restarted agent
	failures  []string
	lastOK    time.Time
	tolerates bool
}

// startPolling starts the loop. With agentRestarts, the answers an agent's
// restart gives (unavailable, a forgotten handle) are retried, as the
// errors tell a client to; any other error is a failure.
func startPolling(t *testing.T, endpoint, token string, agentRestarts bool) *polling {
	c := connect(t, endpoint, token)
	ctx, cancel := context.WithCancel(context.Background())
	p := &polling{cancel: cancel, done: make(chan struct{}), tolerates: agentRestarts}
	handle := c.open(t).Handle
	go func() {
		defer close(p.done)
		defer c.close()
		for ctx.Err() == nil {
			var out tools.ExecOutput
			err := c.call("exec", map[string]any{"handle": handle, "command": "echo ok"}, &out)
			p.mu.Lock()
			switch msg := fmt.Sprint(err); {
			case err == nil && out.Stdout == "ok\n":
				p.ok++
				p.lastOK = time.Now()
			case err == nil:
				p.failures = append(p.failures, fmt.Sprintf("%s: exec said %q (exit %d)", time.Now().Format(time.TimeOnly), out.Stdout, out.ExitCode))
			case p.tolerates && strings.HasPrefix(msg, "unavailable:"):
				p.retried++
			case p.tolerates && strings.HasPrefix(msg, "not_found: session handle"):
				p.reopened++
				var s tools.OpenSessionOutput
				if err := c.call("open_session", map[string]any{}, &s); err == nil {
					handle = s.Handle
				} else if !strings.HasPrefix(err.Error(), "unavailable:") {
					p.failures = append(p.failures, fmt.Sprintf("%s: open_session: %v", time.Now().Format(time.TimeOnly), err))
				}
			default:
				p.failures = append(p.failures, fmt.Sprintf("%s: %v", time.Now().Format(time.TimeOnly), err))
			}
			p.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return p
}

// settle waits until the client has been answered again after the roll.
func (p *polling) settle(t *testing.T) {
	t.Helper()
	since := time.Now()
	deadline := since.Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		ok := p.lastOK.After(since)
		p.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("the polling client got no answer for 2 minutes after the roll")
}

func (p *polling) stop(t *testing.T, during string) {
	t.Helper()
	p.cancel()
	<-p.done
	t.Logf("during %s: %d answers, %d retried (agent unavailable), %d handles reopened", during, p.ok, p.retried, p.reopened)
	for _, f := range p.failures {
		t.Errorf("during %s the polling client failed: %s", during, f)
	}
	if p.ok == 0 {
		t.Errorf("during %s the polling client was never answered", during)
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
