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

package kubectlplugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/testbin"
)

// runMain runs the plugin as its binary does, as the administrator, and
// returns its exit status and what it printed.
func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, admin(&out, &errOut))
	return code, out.String(), errOut.String()
}

// TestHelpAndMistakes: help is asked for and given (stdout, status 0); a
// mistake is one line of error and where the help is (stderr, status 1),
// as kubectl does.
func TestHelpAndMistakes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {}, {"tenant", "--help"}, {"tenant"}, {"help", "tenant", "create"}, {"tenant", "create", "-h"}, {"exec", "--help"}} {
		code, out, errOut := runMain(t, args...)
		if code != 0 || !strings.Contains(out, "Usage:") || errOut != "" {
			t.Errorf("%q: status %d, stdout %q, stderr %q: want the help on stdout and status 0", args, code, firstLine(out), errOut)
		}
	}
	if _, out, _ := runMain(t, "exec", "--help"); !strings.Contains(out, "no streaming") && !strings.Contains(out, "once it has ended") {
		t.Errorf("exec's help does not say its output comes once the command ended:\n%s", out)
	}
	if _, out, _ := runMain(t, "shell", "--help"); !strings.Contains(out, "no terminal (PTY)") {
		t.Errorf("shell's help does not say there is no terminal:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		err  string
		help string
	}{
		{[]string{"stauts"}, `unknown command "stauts" for "kubectl playground" (did you mean "status"?)`, "kubectl playground"},
		{[]string{"tenant", "frobnicate", "cli"}, `unknown command "frobnicate" for "kubectl playground tenant"`, "kubectl playground tenant"},
		{[]string{"tenant", "create"}, "tenant create needs the tenant's name", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "a", "b"}, `tenant create takes one tenant's name, not "a b"`, "kubectl playground tenant create"},
		{[]string{"status", "--bogus"}, "unknown flag: --bogus", "kubectl playground status"},
		{[]string{"status", "-o", "table"}, `--output "table": want json or yaml (or none, for a table)`, "kubectl playground status"},
		{[]string{"exec", "x"}, "exec needs a command after the tenant's name: exec x -- COMMAND [ARG...]", "kubectl playground exec"},
		{[]string{"exec", "--", "uname"}, "exec needs the tenant's name and a command: exec NAME -- COMMAND [ARG...]", "kubectl playground exec"},
		{[]string{"exec", "x", "y", "--", "uname"}, `exec takes one tenant's name before --, not "x y"`, "kubectl playground exec"},
		{[]string{"tenant", "create", "x", "--isolation", "gvisor", "--backend", "vm"}, "--isolation is a choice of backend oci; backend vm takes none", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--memory", "lots"}, `--memory "lots": want a positive quantity, such as 500m, 2, 512Mi or 4Gi`, "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--idle-suspend", "2s"}, "--idle-suspend 2s: want at least 10s", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--reclaim-policy", "Recycle"}, `--reclaim-policy "Recycle": want Retain, Delete`, "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--pile-size", "big"}, `--pile-size "big": want a positive quantity, such as 500m, 2, 512Mi or 4Gi`, "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--pile-inodes", "10"}, "--pile-inodes 10: want at least 256", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--faculty", "commons", "--shared-pile", "commons"}, `--faculty "commons" is the --shared-pile too: a FacultyBundle is either a faculty or the shared pile, not both`, "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--idle-mode", "Pause"}, "--idle-mode and --idle-with-running-jobs say how the sandbox is suspended after --idle-suspend: give it too", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--tools", "all"}, `--tools "all": want standard, extended`, "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--tools", "extended", "--catalog", "workers"}, "--tools is the tool set of catalog sandbox; a workers tenant is served its worker's own tools", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--pids", "8"}, "--pids 8: want 16 to 1048576", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--env", "1X=y"}, `--env "1X=y": want NAME=VALUE, NAME of letters, digits and underscores, not starting with a digit`, "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--usage-period", "1h"}, "--usage-period 1h0m0s: want at least 10s, with --usage-cpu-seconds", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--network", "egress"}, "--network egress needs what the sandbox may reach: --egress CIDR[:PORT,...] or HOST[:PORT,...]", "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--egress", "PyPI.org:443"}, `--egress "PyPI.org:443": want a lower-case host name such as pypi.org or *.githubusercontent.com, or a network such as 10.0.0.0/8, then optionally :PORT,PORT`, "kubectl playground tenant create"},
		{[]string{"tenant", "create", "x", "--egress", "2001:db8::1/32:443"}, `--egress "2001:db8::1/32:443": want a network such as 10.0.0.0/8 or 2001:db8::/32 (host bits zero), then optionally :PORT,PORT`, "kubectl playground tenant create"},
	} {
		code, out, errOut := runMain(t, tc.args...)
		want := "error: " + tc.err + "\nSee '" + tc.help + " --help' for usage.\n"
		if code != 1 || out != "" || errOut != want {
			t.Errorf("%q: status %d, stdout %q, stderr\n%q\nwant status 1 and stderr\n%q", tc.args, code, out, errOut, want)
		}
	}
	// An error of the cluster is one line, without the pointer to help.
	code, _, errOut := runMain(t, "-n", "nowhere", "status", "ghost")
	if code != 1 || errOut != "error: no tenant \"ghost\" in namespace nowhere\n" {
		t.Errorf("status of a tenant that does not exist: %d %q", code, errOut)
	}
	if code, out, _ := runMain(t, "version"); code != 0 || out != "kubectl-playground v0.0.0-test\n" {
		t.Errorf("version: %d %q", code, out)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestBinaryAndCompletion: the built plugin exits as kubectl's commands do
// and says the version it was linked with; kubectl_complete-playground,
// found beside it as kubectl finds it on PATH, completes subcommands and
// flags, and tenant names from the API server.
func TestBinaryAndCompletion(t *testing.T) {
	bin, err := testbin.Build("github.com/playground-dev/playground/cmd/kubectl-playground", "-ldflags=-X main.version=v0.0.0-linked")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "kubectl-playground")); err != nil {
		t.Fatal(err)
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "cmd", "kubectl-playground", "kubectl_complete-playground"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-playground"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns = "completion"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice", "albert", "bob"} {
		if err := k8s.Create(ctx, &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	runWith := func(kubeconfig, name string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, name), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	run := func(name string, args ...string) (int, string, string) {
		t.Helper()
		return runWith(kubeconfig, name, args...)
	}
	if code, out, errOut := run("kubectl-playground", "--help"); code != 0 || !strings.Contains(out, "Usage:") || errOut != "" {
		t.Errorf("--help: status %d, stderr %q", code, errOut)
	}
	if code, out, errOut := run("kubectl-playground", "statsu"); code != 1 || out != "" || strings.Count(errOut, "\n") != 2 {
		t.Errorf("a typo: status %d, stdout %q, stderr %q: want status 1 and two lines on stderr", code, out, errOut)
	}
	if code, out, _ := run("kubectl-playground", "version"); code != 0 || out != "kubectl-playground v0.0.0-linked\n" {
		t.Errorf("version: %d %q", code, out)
	}
	// A client dry run needs no cluster, nor a kubeconfig.
	if code, out, errOut := runWith(filepath.Join(dir, "none"), "kubectl-playground", "tenant", "create", "x", "--dry-run", "-o", "yaml"); code != 0 || !strings.Contains(out, "namespace: default\n") {
		t.Errorf("a client dry run without a kubeconfig: %d %q %q", code, out, errOut)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"ten"}, []string{"tenant\t"}},
		{[]string{"tenant", "cr"}, []string{"create\t"}},
		{[]string{"-n", ns, "status", "al"}, []string{"albert", "alice"}},
		{[]string{"exec", "-n", ns, "b"}, []string{"bob"}},
		{[]string{"tenant", "create", "x", "--isolation", ""}, []string{"container", "gvisor"}},
		{[]string{"status", "--all-n"}, []string{"--all-namespaces\t"}},
	} {
		code, out, errOut := run("kubectl_complete-playground", tc.args...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != 0 || len(lines) < 1 || !strings.HasPrefix(lines[len(lines)-1], ":") {
			t.Errorf("completing %q: status %d, %q, %s", tc.args, code, out, errOut)
			continue
		}
		got := lines[:len(lines)-1]
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.HasPrefix(got[i], tc.want[i])
		}
		if !ok {
			t.Errorf("completing %q: %q, want lines starting %q", tc.args, got, tc.want)
		}
	}
}

// TestAudit: `audit NAME --file` shows the tenant's calls of a trail,
// newest last, skipping other tenants' and lines that are no record (a
// gateway's logs piped in); without --file it says where the trail is.
func TestAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	sink, err := audit.File(audit.FileOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	trail := audit.New(audit.LevelRequest, "gateway", sink)
	trail.Record(audit.Record{Tenant: "team-a/alice", Identity: "token of tenant team-a/alice", Tool: "exec", Command: "make test", Outcome: "ok"})
	trail.Record(audit.Record{Tenant: "team-a/bob", Tool: "exec", Command: "rm -rf /tmp/bob", Outcome: "ok"})
	trail.Record(audit.Record{Tenant: "team-a/alice", Tool: "read", Path: "/workspace/out.txt", Outcome: "error", Code: "not_found"})
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"level":"info","msg":"a log line, not a record"}` + "\nnot json\n")
	f.Close()

	code, out, errOut := runMain(t, "-n", "team-a", "audit", "alice", "--file", path)
	if code != 0 || errOut != "" {
		t.Fatalf("audit: %d %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "make test") || !strings.Contains(lines[2], "error (not_found)") || strings.Contains(out, "bob") {
		t.Errorf("alice's calls:\n%s", out)
	}
	if code, out, _ := runMain(t, "-n", "team-a", "audit", "alice", "--file", path, "-o", "json"); code != 0 || !strings.Contains(out, `"command": "make test"`) {
		t.Errorf("-o json: %d\n%s", code, out)
	}
	if code, _, errOut := runMain(t, "-n", "team-a", "audit", "alice"); code != 1 || !strings.Contains(errOut, "audit needs --file") {
		t.Errorf("without --file: %d %q", code, errOut)
	}
}

// TestSuspendAndResumeSayOneThing: resume and tenant resume (suspend and
// tenant suspend) are one command in two places, and say the same.
func TestSuspendAndResumeSayOneThing(t *testing.T) {
	for _, verb := range []string{"suspend", "resume"} {
		_, top, _ := runMain(t, verb, "--help")
		_, under, _ := runMain(t, "tenant", verb, "--help")
		top, _, _ = strings.Cut(top, "Usage:")
		under, _, _ = strings.Cut(under, "Usage:")
		if top != under || !strings.Contains(top, "spec.suspended") {
			t.Errorf("%s --help says\n%s\nand tenant %s --help says\n%s", verb, top, verb, under)
		}
	}
	_, list, _ := runMain(t, "--help")
	_, tenantList, _ := runMain(t, "tenant", "--help")
	for _, verb := range []string{"suspend", "resume"} {
		short := func(help string) string {
			for _, l := range strings.Split(help, "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == verb {
					return strings.Join(f[1:], " ")
				}
			}
			return ""
		}
		if a, b := short(list), short(tenantList); a == "" || a != b {
			t.Errorf("the command lists say of %s %q and %q", verb, a, b)
		}
	}
}
