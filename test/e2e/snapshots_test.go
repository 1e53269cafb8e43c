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
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/kubectl-playground/kubectlplugin"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// TestSnapshotAndForks: a SandboxSnapshot of a running gVisor tenant's
// sandbox is taken on its node with its memory; three Tenants that start
// from it are bound to that node and go on from where the source was (a
// counter that lived only in memory counts on from the snapshot's count;
// the files are there, the tenant's, as each fork's MCP client sees them
// through the gateway with its own token; a job the source held is ended
// in each fork); each then lives on its own. A
// Sandbox of another namespace cannot name the snapshot. Deleting the
// snapshot frees its disk on the node and leaves the forks running; a
// snapshot on the disk that no object names is swept.
func TestSnapshotAndForks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	stateDir := ocitest.StateDir(t)
	n := &node{name: "snap-1", labels: pool("snap"), stateDir: stateDir, backends: []backend.Backend{ocitest.NewGVisor(t, stateDir)}, snapshotsPerSandbox: 2}
	// A snapshot no object names, as one whose object went while no agent
	// ran: the agent sweeps it once it has started.
	stray := filepath.Join(stateDir, "snapshots", "stray-snapshot")
	g.Expect(os.MkdirAll(stray, 0o700)).To(Succeed())
	startNode(t, n)
	g.Eventually(func() bool { _, err := os.Stat(stray); return os.IsNotExist(err) }, settle, 100*time.Millisecond).Should(BeTrue(),
		"the agent sweeps a snapshot no SandboxSnapshot names")
	ns := newNamespace(t)
	gvisor := func(tn *playgroundv1alpha1.Tenant) {
		inPool("snap")(tn)
		tn.Spec.Sandbox.Isolation = playgroundv1alpha1.IsolationGVisor
	}
	applyTenant(t, ns, "source", gvisor)
	_, src := waitReady(t, ns, "source")
	shell(t, src, `echo base > ~/note; (i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.05; done) >/dev/null 2>&1 & echo $! > /tmp/counter.pid`)
	count := func(sbx *playgroundv1alpha1.Sandbox) int {
		n, err := strconv.Atoi(strings.TrimSpace(shell(t, sbx, "cat /tmp/c 2>/dev/null || echo 0")))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	g.Eventually(func() int { return count(src) }, settle, 50*time.Millisecond).Should(BeNumerically(">", 5))

	// A job the source holds at the snapshot is not the forks' (its ID
	// and record are the source's): each fork ends its copy.
	c, err := agentapi.NewClient(src.Status.Endpoint, agentToken, nil)
	g.Expect(err).NotTo(HaveOccurred())
	tenant := ns + "/source"
	h, err := c.Open(ctx, tenant, src.Status.SandboxID)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.StartJob(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "exec sleep 1001"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { return shell(t, src, "pgrep -f 'sleep 100[1]' >/dev/null && echo held || true") }, settle, 100*time.Millisecond).Should(Equal("held\n"))

	before := count(src)
	snap := &playgroundv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "base"},
		Spec:       playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "source"}},
	}
	g.Expect(k8sClient.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap)).To(Succeed())
		g.Expect(snap.Status.Phase).To(Equal(playgroundv1alpha1.SnapshotReady), "%+v", snap.Status.Conditions)
	}, settle, 100*time.Millisecond).Should(Succeed())
	g.Expect(snap.Status.NodeName).To(Equal(n.name))
	g.Expect(snap.Status.SandboxID).To(Equal(src.Status.SandboxID))
	g.Expect(snap.Status.Memory).To(BeTrue(), "a gVisor sandbox's snapshot keeps its memory")
	g.Expect(snap.Status.SizeBytes).To(BeNumerically(">", 0))
	g.Expect(snap.Status.Size).To(Equal(playgroundv1alpha1.ByteSize(snap.Status.SizeBytes)), "the SIZE column is for people")
	g.Expect(snap.Status.TakenAt).NotTo(BeNil())
	g.Expect(snap.Finalizers).To(ContainElement(playgroundv1alpha1.SnapshotFinalizer))
	onDisk := filepath.Join(stateDir, "snapshots", snap.Status.SnapshotID)
	g.Expect(onDisk).To(BeADirectory())
	g.Expect(strings.TrimSpace(shell(t, src, "kill -0 $(cat /tmp/counter.pid) && echo alive"))).To(Equal("alive"), "the source goes on")

	// The node keeps two snapshots of a sandbox: a third is refused, saying
	// why, and takes no disk.
	for _, name := range []string{"base-2", "base-3"} {
		g.Expect(k8sClient.Create(ctx, &playgroundv1alpha1.SandboxSnapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "source"}},
		})).To(Succeed())
		var s playgroundv1alpha1.SandboxSnapshot
		g.Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
			g.Expect(s.Status.Phase).To(BeElementOf(playgroundv1alpha1.SnapshotReady, playgroundv1alpha1.SnapshotFailed))
		}, settle, 100*time.Millisecond).Should(Succeed())
		if name == "base-2" {
			g.Expect(s.Status.Phase).To(Equal(playgroundv1alpha1.SnapshotReady))
			continue
		}
		g.Expect(s.Status.Phase).To(Equal(playgroundv1alpha1.SnapshotFailed))
		g.Expect(meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ReadyCondition).Message).To(ContainSubstring("keeps 2 snapshots of sandbox " + src.Status.SandboxID))
		_, err := os.Stat(filepath.Join(stateDir, "snapshots", string(s.UID)))
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "a refused snapshot takes no disk: %v", err)
	}

	// Three forks, as Tenants of their own.
	forks := []string{"fork-a", "fork-b", "fork-c"}
	for _, name := range forks {
		applyTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) {
			gvisor(tn)
			tn.Spec.Sandbox.FromSnapshot = "base"
		})
	}
	for _, name := range forks {
		_, f := waitReady(t, ns, name)
		g.Expect(f.Spec.NodeName).To(Equal(n.name), "a fork lands on its snapshot's node")
		g.Expect(f.Status.SandboxID).NotTo(Equal(src.Status.SandboxID))
		first := count(f)
		g.Expect(first).To(BeNumerically(">=", before), "fork %s starts from the snapshot's count", name)
		// Only the restored process writes the count: it counts on.
		g.Eventually(func() int { return count(f) }, settle, 50*time.Millisecond).Should(BeNumerically(">", first+3))
		g.Expect(shell(t, f, "cat /tmp/counter.pid")).To(Equal(shell(t, src, "cat /tmp/counter.pid")), "the source's counter, restored")
		g.Expect(shell(t, f, "cat ~/note; stat -c %U ~/note")).To(Equal("base\nsandbox\n"), "the snapshot's files, the tenant's")
		g.Expect(shell(t, f, "echo $PERSONA")).To(Equal(name+"\n"), "a new shell has the fork's login profile")
		g.Eventually(func() string { return shell(t, f, "pgrep -f 'sleep 100[1]' >/dev/null && echo held || echo released") }, settle, 100*time.Millisecond).
			Should(Equal("released\n"), "fork %s ends the job it restored, which is the source's", name)
		shell(t, f, "echo "+name+" > ~/mine")
	}
	g.Expect(shell(t, src, "cat ~/mine 2>/dev/null; true")).To(BeEmpty(), "a fork's files are its own")
	gateway := startGateway(t)
	for _, name := range forks {
		cs, err := mcpConnect(gateway, tokenOf(g, ns, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mcpExec(g, cs, "cat ~/note ~/mine")).To(Equal("base\n"+name+"\n"), "fork %s through the gateway", name)
		_ = cs.Close()
	}

	// The same through the plugin: a snapshot of a fork, and a fork of it.
	kubectl := func(args ...string) (string, error) {
		var out, errOut strings.Builder
		err := kubectlplugin.Run(ctx, append([]string{"-n", ns, "--timeout", "60s"}, args...), kubectlplugin.Env{Out: &out, ErrOut: &errOut, Config: cp.Config})
		return out.String() + errOut.String(), err
	}
	out, err := kubectl("snapshot", "fork-a", "--name", "of-a")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`sandboxsnapshot/of-a taken of tenant fork-a on node snap-1: its files and its processes' memory, \d`))
	out, err = kubectl("fork", "of-a", "grandchild")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("tenant/grandchild forked from sandboxsnapshot/of-a"))
	_, gc := waitReady(t, ns, "grandchild")
	g.Expect(shell(t, gc, "cat ~/mine ~/note")).To(Equal("fork-a\nbase\n"))
	_, err = kubectl("fork", "no-such", "x")
	g.Expect(err).To(MatchError(ContainSubstring(`no snapshot "no-such"`)))

	// Another namespace cannot start from it.
	other := newNamespace(t)
	stranger := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "stranger"},
		Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef:       playgroundv1alpha1.LocalObjectReference{Name: "stranger"},
			SandboxTemplate: playgroundv1alpha1.SandboxTemplate{Isolation: playgroundv1alpha1.IsolationGVisor, FromSnapshot: "base"},
		},
	}
	g.Expect(k8sClient.Create(ctx, stranger)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(stranger), stranger)).To(Succeed())
		c := meta.FindStatusCondition(stranger.Status.Conditions, playgroundv1alpha1.BoundCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonWaitingForSnapshot))
		g.Expect(c.Message).To(ContainSubstring("does not exist in namespace " + other))
	}, settle, 100*time.Millisecond).Should(Succeed())
	g.Expect(stranger.Spec.NodeName).To(BeEmpty())

	// Deleting the snapshot frees its disk; the forks run on.
	g.Expect(k8sClient.Delete(ctx, snap)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap))
	}, settle, 100*time.Millisecond).Should(BeTrue(), "the agent's finalizer lets the snapshot go")
	_, err = os.Stat(onDisk)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the snapshot's disk is freed: %v", err)
	for _, name := range forks {
		_, f := waitReady(t, ns, name)
		g.Expect(shell(t, f, "cat ~/mine")).To(Equal(name + "\n"))
	}
}

// mcpExec runs a command in the tenant's sandbox through the gateway and
// returns its stdout.
func mcpExec(g Gomega, cs *mcp.ClientSession, command string) string {
	ctx := context.Background()
	decode := func(res *mcp.CallToolResult, err error, out any) {
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.IsError).To(BeFalse(), "%v", res.Content)
		b, err := json.Marshal(res.StructuredContent)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(json.Unmarshal(b, out)).To(Succeed())
	}
	var open tools.OpenSessionOutput
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_session", Arguments: map[string]any{}})
	decode(res, err, &open)
	var out tools.ExecOutput
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": open.Handle, "command": command}})
	decode(res, err, &out)
	return out.Stdout
}
