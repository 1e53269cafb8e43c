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

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/playground-dev/devenv"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/registrytest"
	"github.com/playground-dev/playground/internal/sysctltest"
	"github.com/playground-dev/playground/internal/testbin"
)

// TestDev walks the README's `make dev`: the binary starts the control plane,
// applies the samples and says how to reach them; kubectl lists the samples;
// the sample workers tenant reaches its worker; it is a complete small
// cluster (checkCluster: garbage collection, namespace deletion, metrics,
// the plugin without flags, its exec in the audit trail, a log without the
// MCP SDK's per-session lines); Ctrl-C leaves no process behind; a second
// run finds the same state.
func TestDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a control plane twice")
	}
	// make dev's egress turns on forwarding (and IPv6's) and the
	// connection tracker's accounting: the machine gets back what it had.
	sysctltest.HoldIPv4Forwarding(t)
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := controlplane.Assets()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "playground-dev")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	guest, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	samples, faculties := devSamples(t, root)
	state, err := os.MkdirTemp("", "pg-dev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The piles' files are append-only: the backend's Destroy lifts that
		// before it removes them, as an operator's cleanup would.
		if be, err := oci.New(oci.Options{StateDir: filepath.Join(state, "node"), GuestBinary: guest}); err == nil {
			entries, _ := os.ReadDir(filepath.Join(state, "node", "sandboxes"))
			for _, e := range entries {
				if err := be.Destroy(context.Background(), e.Name(), false); err != nil {
					t.Errorf("removing sandbox %s: %v", e.Name(), err)
				}
			}
		}
		if err := os.RemoveAll(state); err != nil {
			t.Errorf("removing the state directory: %v", err)
		}
	})

	plugin, err := testbin.Build("github.com/playground-dev/playground/cmd/kubectl-playground")
	if err != nil {
		t.Fatal(err)
	}
	first := runDevOnce(t, root, bin, guest, assets, state, samples, faculties, "echo persisted > kept", plugin)
	// The sample tenant lists the sample bundle: the node built it, and
	// its hello runs by name.
	second := runDevOnce(t, root, bin, guest, assets, state, samples, faculties, "cat kept && hello", "")
	if first.uid != second.uid || first.sandboxID != second.sandboxID {
		t.Fatalf("the second run re-created the sample tenant or its sandbox (%+v, then %+v): its state was not kept", first, second)
	}
	if second.output != "persisted\nhello from a faculty bundle, demo-agent\n" {
		t.Fatalf("a file written in the first run reads %q in the second", second.output)
	}
}

// checkEgress: make dev offers egress out of the box. A Tenant with an
// egress list becomes Ready, and from its sandbox the node's addresses
// (every one, and the sandbox's own gateway) are unreachable on a port a
// server of the node listens on, as the gateway's and agent's are.
func checkEgress(t *testing.T, kubectl func(...string) string, endpoint string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: make dev offers no egress here")
		return
	}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("reached\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	manifest := filepath.Join(t.TempDir(), "tenant.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: playground.dev/v1alpha1\nkind: Tenant\nmetadata: {name: egress-demo, namespace: default}\n"+
		"spec: {sandbox: {network: {mode: egress, egress: [{host: pypi.org, ports: [443]}, {cidr: 192.0.2.0/24}]}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-f", manifest)
	defer kubectl("delete", "-f", manifest, "--wait=false")
	kubectl("wait", "--for=condition=Ready", "--timeout=3m", "-n", "default", "tenant/egress-demo")
	secret := kubectl("get", "secret", playgroundv1alpha1.CredentialSecretName("egress-demo"), "-n", "default", "-o", "jsonpath={.data.token}")
	token, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	targets := []string{"$(ip route show default 2>/dev/null | awk '{print $3}')"}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			targets = append(targets, ip.IP.String())
		}
	}
	script := fmt.Sprintf("for a in %s; do timeout 2 bash -c \"cat </dev/tcp/$a/%d\" 2>/dev/null; done; grep -c eth0 /proc/net/dev", strings.Join(targets, " "), port)
	_, out := execOverMCP(t, endpoint, string(token), script)
	if strings.Contains(out, "reached") || strings.TrimSpace(out) != "1" {
		t.Fatalf("from an egress sandbox of make dev (with an interface: %q), the node's addresses on a port it serves: %q; want none reached", strings.TrimSpace(out), out)
	}
}

// checkImage: make dev runs a Tenant on its own image, from a registry on
// this machine (reached in cleartext, as dev allows for loopback), as
// its sandbox's system.
func checkImage(t *testing.T, kubectl func(...string) string, endpoint string) {
	t.Helper()
	reg := registrytest.Start(t)
	ref := reg.Push(t, "dev/system", "v1", registrytest.Image(t, []string{"PATH=/usr/bin:/bin"},
		registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=dev-image\n", true, "dash", "cat")...))), nil)
	tag := reg.Host + "/dev/system:v1"
	manifest := filepath.Join(t.TempDir(), "tenant.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: playground.dev/v1alpha1\nkind: Tenant\nmetadata: {name: image-dev, namespace: default}\n"+
		"spec: {sandbox: {image: {reference: "+tag+"}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-f", manifest)
	defer kubectl("delete", "-f", manifest, "--wait=false")
	kubectl("wait", "--for=condition=Ready", "--timeout=3m", "-n", "default", "tenant/image-dev")
	secret := kubectl("get", "secret", playgroundv1alpha1.CredentialSecretName("image-dev"), "-n", "default", "-o", "jsonpath={.data.token}")
	token, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, out := execOverMCP(t, endpoint, string(token), "cat /etc/os-release"); out != "ID=dev-image\n" {
		t.Fatalf("a make dev sandbox on image %s reads /etc/os-release %q; want the image's", ref, out)
	}
}

type devRun struct {
	uid, sandboxID, output string
}

// runDevOnce runs `playground-dev` until it is ready, checks the cluster
// with kubectl (and with the kubectl plugin, the egress and the rest of
// checkCluster when plugin, its binary, is given), interrupts it, and
// returns the sample tenant's UID.
func runDevOnce(t *testing.T, root, bin, guest, assets, state, samples, faculties, command, plugin string) devRun {
	t.Helper()
	cmd := exec.Command(bin, "--control-plane", assets, "--state-dir", state, "--guest-binary", guest, "--listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--samples", samples, "--faculty-host-path-prefix", faculties)
	cmd.Dir = root
	stdout, stderr := newLineLog(), newLineLog()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// However the test ends, dev is interrupted as Ctrl-C would, so that
	// it stops the control plane and the containers it started; a kill
	// would leave its kube-apiserver and etcd running.
	stopped := false
	defer func() {
		if stopped {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	}()

	// The announcement ends with the Ctrl-C line; everything it says is
	// printed by then.
	select {
	case <-stdout.seen("Press Ctrl-C to stop"):
	case err := <-done:
		stopped = true
		t.Fatalf("playground-dev exited (%v) before it got ready:\n%s\n%s", err, stdout, stderr)
	case <-time.After(4 * time.Minute):
		t.Fatalf("playground-dev did not get ready:\n%s\n%s", stdout, stderr)
	}
	printed := stdout.String()
	if !strings.Contains(printed, "\n"+devenv.ReadyLine+"\n") {
		t.Fatalf("the ready line %q is not printed:\n%s", devenv.ReadyLine, printed)
	}
	kubeconfig := filepath.Join(state, "kubeconfig")
	if !strings.Contains(printed, "kubeconfig:    "+kubeconfig) {
		t.Fatalf("the kubeconfig path is not printed:\n%s", printed)
	}

	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := kubectl("get", "tenants,workermappings,facultybundles,sandboxes", "-A")
	if !regexp.MustCompile(`tenant.playground.dev/demo\s+sandbox\s+True`).MatchString(out) {
		t.Fatalf("the sample tenant is not Ready:\n%s", out)
	}
	for _, want := range []string{`tenant.playground.dev/demo\s+sandbox`, `workermapping.playground.dev/worker-demo\s+worker-demo`, `facultybundle.playground.dev/hello-tools`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("kubectl get does not show %s:\n%s", want, out)
		}
	}
	uid := kubectl("get", "tenant", "demo", "-n", "default", "-o", "jsonpath={.metadata.uid}")
	token := regexp.MustCompile(`(?m)^  token:\s+(pgt_\S{43})$`).FindStringSubmatch(printed)
	endpoint := regexp.MustCompile(`(?m)^  MCP endpoint:\s+(http://\S+/mcp)`).FindStringSubmatch(printed)
	if token == nil || endpoint == nil {
		t.Fatalf("no MCP endpoint or token printed:\n%s", printed)
	}
	sandboxID, output := execOverMCP(t, endpoint[1], token[1], command)
	if plugin != "" {
		checkEgress(t, kubectl, endpoint[1])
		checkImage(t, kubectl, endpoint[1])
		checkCluster(t, kubectl, printed, plugin, kubeconfig)
	}

	// The sample workers tenant: its worker, from the sample's faculty
	// bundle, answers through the same gateway with its own tools.
	kubectl("wait", "--for=condition=Ready", "--timeout=3m", "-n", "default", "tenant/worker-demo")
	workerToken := kubectl("get", "secret", playgroundv1alpha1.CredentialSecretName("worker-demo"), "-n", "default", "-o", "jsonpath={.data.token}")
	decoded, err := base64.StdEncoding.DecodeString(workerToken)
	if err != nil {
		t.Fatal(err)
	}
	if persona := workerWhoAmI(t, endpoint[1], string(decoded)); persona != "worker-demo" {
		t.Fatalf("the sample worker says its persona is %q", persona)
	}
	if plugin != "" {
		// The worker's tools are in the trail too: they run in the sandbox.
		waitAudited(t, plugin, kubeconfig, "worker-demo", "the worker's whoami", func(r auditRecord) bool {
			return r.Component == "gateway" && r.Tool == "whoami" && r.Identity == "token of tenant default/worker-demo"
		})
	}

	checkLog(t, filepath.Join(state, "playground.log"))

	// Its kube-controller-manager names no state directory: found as its
	// descendant (with the script that ends it with dev), and checked gone
	// with the rest.
	kcm := descendantsNamed(cmd.Process.Pid, "kube-controller")
	if len(kcm) == 0 {
		t.Fatal("playground-dev runs no kube-controller-manager")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("playground-dev exited with %v after Ctrl-C:\n%s", err, stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("playground-dev did not stop within a minute of Ctrl-C")
	}
	if left := processesMentioning(state); len(left) > 0 {
		t.Fatalf("processes left running after Ctrl-C: %v", left)
	}
	for _, pid := range kcm {
		if alive(pid) {
			t.Fatalf("kube-controller-manager (%d) left running after Ctrl-C", pid)
		}
	}
	left, err := exec.Command("runc", "--root", filepath.Join(state, "node", "runc"), "list", "-q").CombinedOutput()
	if err != nil || strings.TrimSpace(string(left)) != "" {
		t.Fatalf("containers left after Ctrl-C: %q %v", left, err)
	}
	if left := mountsUnder(state); len(left) > 0 {
		t.Fatalf("sandbox disk mounts or loop devices left after Ctrl-C: %v", left)
	}
	return devRun{uid: uid, sandboxID: sandboxID, output: output}
}

// checkCluster: make dev is a complete small cluster. A Tenant's Secrets
// go when it is deleted (garbage collection) and a deleted namespace goes
// (namespace deletion), as kube-controller-manager does it; the metrics
// the banner prints serve the manager's, the agent's and the gateway's
// metrics; the kubectl plugin, given only dev's kubeconfig, runs a command
// in the sample tenant's sandbox, and finds that command in the audit
// trail, recorded by the agent as the kubeconfig's user. (The worker's
// tools' calls are checked in the trail where runDevOnce calls them.)
func checkCluster(t *testing.T, kubectl func(...string) string, printed, plugin, kubeconfig string) {
	t.Helper()
	const ns = "dev-team"
	tenant := func(name string) string {
		manifest := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(manifest, []byte("apiVersion: playground.dev/v1alpha1\nkind: Tenant\nmetadata: {name: "+name+", namespace: "+ns+"}\nspec: {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		kubectl("apply", "-f", manifest)
		kubectl("wait", "--for=condition=Ready", "--timeout=3m", "-n", ns, "tenant/"+name)
		return kubectl("get", "tenant", name, "-n", ns, "-o", "jsonpath={.metadata.uid}")
	}
	kubectl("create", "namespace", ns)
	uid := tenant("collected")
	// A team's own Secret that goes with its Tenant (an egress
	// credential, say): only the garbage collector deletes it.
	own := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(own, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: teams-own\n  namespace: "+ns+"\n  ownerReferences:\n"+
		"  - {apiVersion: playground.dev/v1alpha1, kind: Tenant, name: collected, uid: "+uid+"}\nstringData: {key: value}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-f", own)
	var secrets []string
	for _, line := range strings.Fields(kubectl("get", "secrets", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.ownerReferences[*].uid}{" "}{end}`)) {
		if name, owner, _ := strings.Cut(line, "="); owner == uid {
			secrets = append(secrets, "secret/"+name)
		}
	}
	if !slices.Contains(secrets, "secret/teams-own") {
		t.Fatalf("the Tenant's Secrets are %v, without the team's own", secrets)
	}
	kubectl("delete", "tenant", "collected", "-n", ns, "--timeout=2m")
	kubectl(append([]string{"wait", "--for=delete", "--timeout=2m", "-n", ns}, secrets...)...)

	// A namespace that holds a Ready Tenant (finalizers: the manager's,
	// the agent's on its Sandbox) goes whole.
	tenant("left-in-namespace")
	kubectl("delete", "namespace", ns, "--wait=false")
	kubectl("wait", "--for=delete", "--timeout=3m", "namespace/"+ns)

	metrics := regexp.MustCompile(`(?m)^  metrics:\s+(http://\S+/metrics)$`).FindStringSubmatch(printed)
	if metrics == nil {
		t.Fatalf("no metrics endpoint printed:\n%s", printed)
	}
	resp, err := http.Get(metrics[1])
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", metrics[1], resp.Status, err)
	}
	for component, want := range map[string]string{
		"manager": `playground_sandboxes\{phase="(Ready|Detached)"\} [1-9]`, // Detached: no session open
		"agent":   `playground_exec_duration_seconds_count\{[^}]*\} [1-9]`,
		"gateway": `playground_gateway_tool_calls_total\{[^}]*tool="exec"[^}]*\} [1-9]`,
	} {
		if !regexp.MustCompile(want).Match(body) {
			t.Errorf("the metrics at %s have no %s metric %s:\n%s", metrics[1], component, want,
				strings.Join(regexp.MustCompile(`(?m)^playground_\S+ .*$`).FindAllString(string(body), -1), "\n"))
		}
	}

	// The plugin, with nothing but the kubeconfig, as the README shows it.
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(plugin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("kubectl playground %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	if out := run("exec", "demo", "--", "echo", "from", "the plugin"); out != "from the plugin\n" {
		t.Fatalf("kubectl playground exec demo: %q", out)
	}
	waitAudited(t, plugin, kubeconfig, "demo", "the plugin's exec, by the agent, as playground-admin", func(r auditRecord) bool {
		return r.Component == "agent" && r.Tool == "exec" && r.Command == "echo from 'the plugin'" && r.Identity == "playground-admin"
	})
}

// auditRecord is what the tests read of an audit record.
type auditRecord struct {
	Component, Identity, Tool, Command string
}

// waitAudited waits until `kubectl playground audit TENANT`, with dev's
// kubeconfig alone, shows a record that match accepts: a component hands
// its record to the trail's queue as it answers, and the file has it a
// moment later.
func waitAudited(t *testing.T, plugin, kubeconfig, tenant, what string, match func(auditRecord) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(plugin, "--kubeconfig", kubeconfig, "audit", tenant, "-o", "json").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl playground audit %s: %v\n%s", tenant, err, out)
		}
		var recs []auditRecord
		if err := json.Unmarshal(out, &recs); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(recs, match) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl playground audit %s does not show %s: %+v", tenant, what, recs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkLog: dev's log, where the README sends users, holds the
// controller manager's lines with the components', and none of the MCP
// SDK's per-session lines (they were most of it).
func checkLog(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log := string(data)
	for _, noise := range []string{"server session connected", "session initialized", "server session ended"} {
		if n := strings.Count(log, noise); n > 0 {
			t.Errorf("%s holds %d lines of the MCP SDK's %q", path, n, noise)
		}
	}
	if !strings.Contains(log, "kube-controller-manager") || !strings.Contains(log, "garbage") {
		t.Errorf("%s holds no line of kube-controller-manager's", path)
	}
}

// descendantsNamed lists the processes below pid whose name starts with
// prefix (the kernel's comm: at most 15 bytes).
func descendantsNamed(pid int, prefix string) []int {
	parents := map[int]int{}
	names := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		open, closeParen := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closeParen < open {
			continue
		}
		f := strings.Fields(s[closeParen+1:])
		if len(f) < 2 {
			continue
		}
		p, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		parents[p], _ = strconv.Atoi(f[1])
		names[p] = s[open+1 : closeParen]
	}
	var found []int
	for p, name := range names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for q := parents[p]; q > 1; q = parents[q] {
			if q == pid {
				found = append(found, p)
				break
			}
		}
	}
	return found
}

// alive says whether pid exists and is not a zombie waiting to be reaped.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// bearer adds the tenant's token to every request, as an MCP client
// configured with an Authorization header does.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// execOverMCP opens a session through the gateway with the go-sdk client,
// runs a command, and returns the sandbox ID and the command's output.
func execOverMCP(t *testing.T, endpoint, token, command string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := connectMCP(ctx, t, endpoint, token)
	defer cs.Close()
	call := func(name string, args, out any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			var msg []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					msg = append(msg, tc.Text)
				}
			}
			t.Fatalf("%s failed: %s", name, strings.Join(msg, "; "))
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
	var session struct {
		SandboxID string `json:"sandbox_id"`
		Handle    string `json:"handle"`
	}
	call("open_session", map[string]any{}, &session)
	var res struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	call("exec", map[string]any{"handle": session.Handle, "command": command}, &res)
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d", command, res.ExitCode)
	}
	var closed struct{}
	call("close_session", map[string]any{"handle": session.Handle}, &closed)
	return session.SandboxID, res.Stdout
}

// mountsUnder lists the mounts below dir and the loop devices backed by a
// file below it (the sandboxes' disk images).
func mountsUnder(dir string) []string {
	var found []string
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
				found = append(found, "mount "+f[4])
			}
		}
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(data), dir+"/") {
			found = append(found, "loop device of "+strings.TrimSpace(string(data)))
		}
	}
	return found
}

// processesMentioning lists the command lines of processes that name s.
func processesMentioning(s string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(line, s) {
			found = append(found, line)
		}
	}
	return found
}

// lineLog collects a process's output, safe to read while it is written,
// and tells when a line with a given prefix has been printed.
type lineLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	waiters map[string]chan struct{}
}

func newLineLog() *lineLog { return &lineLog{waiters: map[string]chan struct{}{}} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	l.notifyLocked()
	return len(p), nil
}

// seen returns a channel closed once a whole line starting with prefix
// has been written.
func (l *lineLog) seen(prefix string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	l.waiters[prefix] = ch
	l.notifyLocked()
	return ch
}

func (l *lineLog) notifyLocked() {
	for prefix, ch := range l.waiters {
		for _, line := range strings.SplitAfter(l.buf.String(), "\n") {
			if strings.HasPrefix(line, prefix) && strings.HasSuffix(line, "\n") {
				close(ch)
				delete(l.waiters, prefix)
				break
			}
		}
	}
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// devSamples is config/samples with the sample worker bundle's host path
// pointing at a directory holding the example worker, as `make dev` puts
// it in /opt/playground/faculties: a test leaves the machine's /opt alone.
// It returns the samples' directory and the worker's, which dev's agent
// must be granted.
func devSamples(t *testing.T, root string) (string, string) {
	t.Helper()
	worker, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-example-worker", "-trimpath")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	faculties := filepath.Join(dir, "faculties")
	if err := os.Mkdir(faculties, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(worker)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(faculties, "playground-example-worker"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	replaced := false
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, "config", "samples", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.Contains(s, "path: /opt/playground/faculties\n") {
			b, replaced = []byte(strings.ReplaceAll(s, "path: /opt/playground/faculties\n", "path: "+faculties+"\n")), true
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !replaced {
		t.Fatal("no sample names /opt/playground/faculties: update the test with the samples")
	}
	return dir, faculties
}

// workerWhoAmI calls the sample worker's whoami tool through the gateway
// with the workers tenant's token, and returns the persona it reports.
func workerWhoAmI(t *testing.T, endpoint, token string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := connectMCP(ctx, t, endpoint, token)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("whoami: %v %v", err, res)
	}
	var who struct {
		Persona string `json:"persona"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &who); err != nil {
		t.Fatal(err)
	}
	return who.Persona
}

// connectMCP connects the go-sdk client to the gateway with a tenant's token.
func connectMCP(ctx context.Context, t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "dev-test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	return cs
}
