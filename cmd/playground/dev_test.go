package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/devenv"
	"github.com/playground-dev/playground/internal/testbin"
)

// TestDev walks the README's `make dev`: the binary starts the control plane,
// applies the samples and says how to reach them; kubectl lists the samples;
// Ctrl-C leaves no process behind; a second run finds the same state.
func TestDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a control plane twice")
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := controlplane.Assets()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "playground")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	guest, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "pg-dev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(state) })

	first := runDevOnce(t, root, bin, guest, assets, state, "echo persisted > kept")
	second := runDevOnce(t, root, bin, guest, assets, state, "cat kept")
	if first.uid != second.uid || first.sandboxID != second.sandboxID {
		t.Fatalf("the second run re-created the sample tenant or its sandbox (%+v, then %+v): its state was not kept", first, second)
	}
	if second.output != "persisted\n" {
		t.Fatalf("a file written in the first run reads %q in the second", second.output)
	}
}

type devRun struct {
	uid, sandboxID, output string
}

// runDevOnce runs `playground dev` until it is ready, checks the cluster
// with kubectl, interrupts it, and returns the sample tenant's UID.
func runDevOnce(t *testing.T, root, bin, guest, assets, state, command string) devRun {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--control-plane", assets, "--state-dir", state, "--guest-binary", guest)
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	var printed strings.Builder
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			printed.WriteString(s.Text() + "\n")
			if s.Text() == devenv.ReadyLine {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(4 * time.Minute):
		t.Fatalf("playground dev did not get ready:\n%s\n%s", printed.String(), stderr.String())
	}
	time.Sleep(100 * time.Millisecond) // the lines after the ready line
	kubeconfig := filepath.Join(state, "kubeconfig")
	if !strings.Contains(printed.String(), "kubeconfig:  "+kubeconfig) {
		t.Fatalf("the kubeconfig path is not printed:\n%s", printed.String())
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
	if !regexp.MustCompile(`(?m)^  token:\s+pgt_\S{43}$`).MatchString(printed.String()) {
		t.Fatalf("no token printed:\n%s", printed.String())
	}
	var sbx playgroundv1alpha1.Sandbox
	if err := json.Unmarshal([]byte(kubectl("get", "sandbox", "demo", "-n", "default", "-o", "json")), &sbx); err != nil {
		t.Fatal(err)
	}
	output := shellIn(t, state, &sbx, command)

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("playground dev exited with %v after Ctrl-C:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("playground dev did not stop within a minute of Ctrl-C")
	}
	if left := processesMentioning(state); len(left) > 0 {
		t.Fatalf("processes left running after Ctrl-C: %v", left)
	}
	left, err := exec.Command("runc", "--root", filepath.Join(state, "node", "runc"), "list", "-q").CombinedOutput()
	if err != nil || strings.TrimSpace(string(left)) != "" {
		t.Fatalf("containers left after Ctrl-C: %q %v", left, err)
	}
	return devRun{uid: uid, sandboxID: sbx.Status.SandboxID, output: output}
}

// shellIn runs a command in the sandbox through its agent's API, with the
// agent token that playground dev keeps in its state directory.
func shellIn(t *testing.T, state string, sbx *playgroundv1alpha1.Sandbox, command string) string {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(state, "agent-token"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentapi.NewClient(sbx.Status.Endpoint, strings.TrimSpace(string(token)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tenant := sbx.Namespace + "/" + sbx.Spec.TenantRef.Name
	h, err := c.Open(ctx, tenant, sbx.Status.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx, tenant, h.ID) }()
	res, err := c.Exec(ctx, tenant, h.ID, hostagent.ExecRequest{Command: command})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q: %+v %v", command, res, err)
	}
	return string(res.Stdout)
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
