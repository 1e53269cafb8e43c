package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/devenv"
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
	state := t.TempDir()

	firstUID := runDevOnce(t, root, bin, assets, state)
	secondUID := runDevOnce(t, root, bin, assets, state)
	if firstUID != secondUID {
		t.Fatalf("the second run re-created the sample tenant (uid %s, then %s): its state was not kept", firstUID, secondUID)
	}
}

// runDevOnce runs `playground dev` until it is ready, checks the cluster
// with kubectl, interrupts it, and returns the sample tenant's UID.
func runDevOnce(t *testing.T, root, bin, assets, state string) string {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--control-plane", assets, "--state-dir", state)
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
	case <-time.After(3 * time.Minute):
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
	for _, want := range []string{`tenant.playground.dev/demo\s+sandbox`, `workermapping.playground.dev/worker-demo\s+worker-demo`, `facultybundle.playground.dev/hello-tools`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("kubectl get does not show %s:\n%s", want, out)
		}
	}
	uid := kubectl("get", "tenant", "demo", "-n", "default", "-o", "jsonpath={.metadata.uid}")

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
	return uid
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
