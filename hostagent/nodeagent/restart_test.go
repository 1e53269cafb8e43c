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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/internal/testbin"
)

// agentProcess is `playground agent` run as a process of its own, as a
// DaemonSet runs it: it can be killed and started again, by another build.
type agentProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  string
	done chan error
}

// agentNode is what the agent processes of one node share across their
// restarts: the state directory, the API address and the credentials.
type agentNode struct {
	name, stateDir, listen, kubeconfig, tokenFile, guest string
	client                                               *agentapi.Client
}

func newAgentNode(t *testing.T, name string) *agentNode {
	t.Helper()
	dir := t.TempDir()
	n := &agentNode{name: name, stateDir: ocitest.StateDir(t), guest: ocitest.GuestBinary(t),
		kubeconfig: filepath.Join(dir, "kubeconfig"), tokenFile: filepath.Join(dir, "token")}
	// The agent is the agent's service account, authorised by the
	// generated RBAC only, with its token bound to this node.
	if err := cp.WriteImpersonatingKubeconfig(n.kubeconfig, rbactest.OnNode(agentConfig, name).Impersonate); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// One address for every process of the node: the Sandbox's endpoint.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.listen = ln.Addr().String()
	ln.Close()
	if n.client, err = agentapi.NewClient("http://"+n.listen, token, nil); err != nil {
		t.Fatal(err)
	}
	return n
}

// start runs the agent binary bin for the node; the test's end stops it.
func (n *agentNode) start(t *testing.T, bin string) *agentProcess {
	t.Helper()
	p := &agentProcess{t: t, log: filepath.Join(t.TempDir(), "agent.log"), done: make(chan error, 1)}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "agent",
		"--node-name", n.name, "--state-dir", n.stateDir, "--guest-binary", n.guest,
		"--listen", n.listen, "--advertise", "http://"+n.listen, "--tls", "off", "--token-file", n.tokenFile,
		"--kubeconfig", n.kubeconfig, "--runsc", "off", "--storage-reserve", "0", "--lease-duration", "15s")
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(syscall.SIGTERM) })
	return p
}

// stop sends sig and waits for the process to exit.
func (p *agentProcess) stop(sig syscall.Signal) {
	p.t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("the agent did not exit on %v; its log:\n%s", sig, p.logText())
	}
}

func (p *agentProcess) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// TestJobsSurviveAgentRestarts is issue 18's acceptance, with the agent
// as a real process: a job writing a line every 200 ms runs across three
// restarts of it (SIGKILL, SIGTERM, and a newer build); the client polls
// before, during (the node is unavailable: retry) and after, and receives
// every line once, in order, with no gap. The tenant's active-job bound
// holds right after a restart, and a cancel after the restarts still
// proves a detached, TERM-ignoring descendant dead. Session handles do not
// survive: the client opens a new one; job IDs do.
func TestJobsSurviveAgentRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent twice and restarts it three times")
	}
	ocitest.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	older, err := testbin.Build("github.com/playground-dev/playground/cmd/playground", "-ldflags=-X main.version=v0.0.1-restarts")
	if err != nil {
		t.Fatal(err)
	}
	newer, err := testbin.Build("github.com/playground-dev/playground/cmd/playground", "-ldflags=-X main.version=v0.0.2-restarts")
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, "job-restarts")
	n := newAgentNode(t, "job-restarts")
	proc := n.start(t, older)
	createSandbox(t, ns, "a", n.name)
	id := waitProvisioned(t, ns, "a").Status.SandboxID
	tenant := ns + "/a"
	c := n.client

	open := func() string {
		t.Helper()
		var h agentapi.Handle
		g.Eventually(func() error {
			var err error
			h, err = c.Open(ctx, tenant, id)
			return err
		}).WithTimeout(timeout).Should(Succeed())
		return h.ID
	}
	handle := open()
	sh := func(cmd string) string {
		t.Helper()
		res, err := c.Exec(ctx, tenant, handle, agentapi.ExecRequest{Command: cmd, Shell: agentapi.ShellClean})
		g.Expect(err).NotTo(HaveOccurred(), cmd)
		g.Expect(res.ExitCode).To(BeZero(), "%s: %s", cmd, res.Stderr)
		return strings.TrimSpace(string(res.Stdout))
	}
	start := func(cmd string) (agentapi.JobInfo, error) {
		return c.StartJob(ctx, tenant, handle, agentapi.ExecRequest{Command: cmd, Shell: agentapi.ShellClean})
	}

	sentinel := sh("setsid sleep 100000 </dev/null >/dev/null 2>&1 & echo $!")
	counter, err := start(`i=0; while [ ! -e /tmp/stop ]; do echo line $i; i=$((i+1)); sleep 0.2; done; echo end >&2`)
	g.Expect(err).NotTo(HaveOccurred())
	escaping, err := start(`setsid sh -c 'trap "" TERM; echo $$ > /tmp/escapee; exec sleep 1000' </dev/null >/dev/null 2>&1 &
while [ ! -s /tmp/escapee ]; do sleep 0.01; done; echo ready; sleep 1000`)
	g.Expect(err).NotTo(HaveOccurred())
	limit := 8 // the shipped per-tenant bound on active jobs
	for range limit - 2 {
		_, err := start("sleep 1000")
		g.Expect(err).NotTo(HaveOccurred())
	}

	// The client reads the counter's output as it comes, page by page.
	var stdout, stderr strings.Builder
	cursor, done := "", false
	var last agentapi.PollResponse
	poll := func() error {
		page, err := c.Poll(ctx, agentapi.PollRequest{Tenant: tenant, Cursor: cursor, Wait: time.Second}, counter.ID)
		if err != nil {
			return err
		}
		g.Expect(page.Gap).To(BeNil(), "a gap the ring did not cause")
		for _, ch := range page.Chunks {
			b, err := ch.Bytes()
			g.Expect(err).NotTo(HaveOccurred())
			if ch.Stream == "stderr" {
				stderr.Write(b)
			} else {
				stdout.Write(b)
			}
		}
		cursor, done, last = page.NextCursor, page.Done, page
		return nil
	}
	lines := func() int { return strings.Count(stdout.String(), "\n") }
	readPast := func(n int) {
		t.Helper()
		g.Eventually(func() int {
			g.Expect(poll()).To(Succeed())
			return lines()
		}).WithTimeout(timeout).Should(BeNumerically(">", n))
	}
	readPast(3)

	restart := func(sig syscall.Signal, bin string) {
		t.Helper()
		proc.stop(sig)
		// The node is down: the client is told to retry, not that the
		// job is gone.
		err := poll()
		g.Expect(err).To(HaveOccurred())
		g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeUnavailable), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("retry"))
		seen := lines()
		proc = n.start(t, bin)
		// Polled until the new process serves: every answer until then
		// says to retry.
		g.Eventually(func() error {
			err := poll()
			if err != nil {
				g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeUnavailable), "%v", err)
			}
			return err
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
		// Right after the restart, the tenant's jobs count against its
		// bound again: a ninth is refused.
		handle = open()
		_, err = start("sleep 1000")
		g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeExhausted), "a job past the bound after a restart: %v", err)
		g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("(limit %d)", limit)))
		readPast(seen + 2) // the job ran on meanwhile
	}
	restart(syscall.SIGKILL, older)
	restart(syscall.SIGTERM, older)
	restart(syscall.SIGTERM, newer)
	g.Expect(proc.logText()).To(ContainSubstring("v0.0.2-restarts"), "the third agent is the newer build")

	// The cancel after three restarts still proves the escapee dead, and
	// spares the sentinel, which no job owns.
	escapee := sh("cat /tmp/escapee")
	info, err := c.Cancel(ctx, tenant, escaping.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.State).To(Equal(agentapi.JobKilled))
	g.Expect(sh(fmt.Sprintf("[ -e /proc/%s ] && echo alive || echo gone", escapee))).To(Equal("gone"))
	g.Expect(sh(fmt.Sprintf("[ -e /proc/%s ] && echo alive || echo gone", sentinel))).To(Equal("alive"))

	// Every line once, in order, from the first to the last.
	sh("touch /tmp/stop")
	g.Eventually(func() bool {
		g.Expect(poll()).To(Succeed())
		return done
	}).WithTimeout(timeout).Should(BeTrue())
	g.Expect(last.Job.State).To(Equal(agentapi.JobExited))
	g.Expect(stderr.String()).To(Equal("end\n"))
	got := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	for i, line := range got {
		if line != "line "+strconv.Itoa(i) {
			t.Fatalf("line %d of %d read across the restarts is %q, want %q", i, len(got), line, "line "+strconv.Itoa(i))
		}
	}
	t.Logf("%d lines read across three agent restarts", len(got))
}
