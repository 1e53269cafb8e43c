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
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/childproc"
	"github.com/playground-dev/playground/internal/manifest"
	"github.com/playground-dev/playground/internal/mcpclient"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// execCPUNode is the node name of the exec CPU benchmark's agent.
const execCPUNode = "bench-exec"

// minCPUExecs is the fewest calls the CPU per call is taken over: /proc
// counts CPU time in ticks of 10 ms, a few hundredths of a second of
// CPU over the loop.
const minCPUExecs = 500

// execCPU is P1 again with the agent and the gateway as the `playground
// agent` and `playground gateway` processes a cluster runs (cleartext on
// loopback, as playground-dev), so that the CPU each spends per exec
// call is its process's own (utime + stime, /proc/<pid>/stat) over n
// calls of exec `true`. The baseline is the CPU a bare fork/exec of
// /bin/sh -c true costs (this process's children's, getrusage).
func execCPU(ctx context.Context, opts options, n int, out io.Writer) (_ []row, err error) {
	n = max(n, minCPUExecs)
	state, err := os.MkdirTemp("", "pg-bench-exec-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(out, "The exec CPU benchmark failed; the components' logs are kept in %s\n", state)
			return
		}
		os.RemoveAll(state)
	}()
	cp, kubeconfig, err := startControlPlane(opts, state)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cp.Stop() }()
	c, err := newClient(cp.Config)
	if err != nil {
		return nil, err
	}
	if err := cp.CreateNamespaces(ctx, agentlease.DefaultNamespace); err != nil {
		return nil, err
	}
	bin, err := childproc.BinaryNextToThis(opts.playground, "playground")
	if err != nil {
		return nil, err
	}
	token := make([]byte, 32)
	_, _ = rand.Read(token)
	tokenFile := filepath.Join(state, "agent-token")
	if err := os.WriteFile(tokenFile, []byte(hex.EncodeToString(token)+"\n"), 0o600); err != nil {
		return nil, err
	}
	agentAddr, err := childproc.FreeAddress()
	if err != nil {
		return nil, err
	}
	gwAddr, err := childproc.FreeAddress()
	if err != nil {
		return nil, err
	}
	nodeDir := filepath.Join(state, "node")
	manager, err := childproc.Start(ctx, filepath.Join(state, "manager.log"), bin, "manager", "--kubeconfig", kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--agent-token-file", tokenFile, "--agent-cleartext")
	if err != nil {
		return nil, err
	}
	defer manager.Stop()
	agentArgs := []string{"agent", "--kubeconfig", kubeconfig, "--node-name", execCPUNode, "--state-dir", nodeDir,
		"--token-file", tokenFile, "--listen", agentAddr, "--advertise", "http://" + agentAddr, "--tls=off", "--runsc", "off"}
	if opts.guest != "" {
		agentArgs = append(agentArgs, "--guest-binary", opts.guest)
	}
	agent, err := childproc.Start(ctx, filepath.Join(state, "agent.log"), bin, agentArgs...)
	if err != nil {
		return nil, err
	}
	defer func() {
		agent.Stop()
		destroySandboxes(nodeDir, opts.guest)
	}()
	gateway, err := childproc.Start(ctx, filepath.Join(state, "gateway.log"), bin, "gateway", "--kubeconfig", kubeconfig,
		"--listen", gwAddr, "--agent-token-file", tokenFile, "--agent-cleartext", "--metrics-bind-address", "0")
	if err != nil {
		return nil, err
	}
	defer gateway.Stop()

	objs, err := manifest.ReadKustomization("config/samples")
	if err != nil {
		return nil, err
	}
	if err := manifest.Apply(ctx, c, "default", objs); err != nil {
		return nil, err
	}
	tok, err := waitTenantToken(ctx, c, client.ObjectKey{Namespace: "default", Name: "demo"}, manager, agent, gateway)
	if err != nil {
		return nil, err
	}
	cs, handle, err := openWhenServed(ctx, "http://"+gwAddr+"/mcp", tok, manager, agent, gateway)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return measureExecCPU(ctx, &bench{handle: handle}, cs, n, agent.Pid(), gateway.Pid())
}

// openWhenServed opens a session of the tenant of token at the gateway's
// endpoint, retrying while the gateway's view, which trails the API
// server, does not serve it yet.
func openWhenServed(ctx context.Context, endpoint, token string, ps ...*childproc.Process) (*mcp.ClientSession, string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		cs, err := mcpclient.Connect(ctx, endpoint, token, transport, "playground-bench")
		if err == nil {
			var open tools.OpenSessionOutput
			if err = call(ctx, cs, "open_session", map[string]any{}, &open); err == nil {
				return cs, open.Handle, nil
			}
			cs.Close()
		}
		if ferr := childproc.Failed(ps...); ferr != nil {
			return nil, "", ferr
		}
		if time.Now().After(deadline) {
			return nil, "", fmt.Errorf("the gateway does not serve the tenant after a minute: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// measureExecCPU times n execs of `true` through cs and takes the CPU
// the agent's and the gateway's processes spent meanwhile.
func measureExecCPU(ctx context.Context, b *bench, cs *mcp.ClientSession, n, agentPid, gatewayPid int) ([]row, error) {
	run := func() error { return b.exec(ctx, cs, "true") }
	agentBefore, gwBefore := processCPU(agentPid), processCPU(gatewayPid)
	ds, err := timeN(n, run)
	if err != nil {
		return nil, err
	}
	agentCPU, gwCPU := processCPU(agentPid)-agentBefore, processCPU(gatewayPid)-gwBefore
	// The bare baseline's CPU: its children's, as the kernel accounts
	// them to this process once waited for.
	childBefore := childrenCPU()
	bare, err := timeN(n, bareShell)
	if err != nil {
		return nil, err
	}
	// Both loops ran timeN's warm-up calls too (n/10, at least 3).
	calls := float64(n + max(n/10, 3))
	bareCPU := (childrenCPU() - childBefore) / calls
	perCall := func(d float64) float64 { return 1e6 * d / calls }
	return []row{
		{"P1 exec `true` p50, agent and gateway as processes", ms(pct(ds, .5)), "bare fork/exec " + ms(pct(bare, .5)), fmt.Sprintf("%.1f×", ratio(pct(ds, .5), pct(bare, .5))), "≤ 1.5×", verdict(ratio(pct(ds, .5), pct(bare, .5)) <= 1.5)},
		{fmt.Sprintf("CPU per exec call: agent, over %.0f calls", calls), fmt.Sprintf("%.0f core-µs", perCall(agentCPU)), fmt.Sprintf("bare fork/exec %.0f core-µs", 1e6*bareCPU), fmt.Sprintf("%.1f×", perCall(agentCPU)/(1e6*bareCPU)), "(no goal set)", "—"},
		{fmt.Sprintf("CPU per exec call: gateway, over %.0f calls", calls), fmt.Sprintf("%.0f core-µs", perCall(gwCPU)), fmt.Sprintf("bare fork/exec %.0f core-µs", 1e6*bareCPU), fmt.Sprintf("%.1f×", perCall(gwCPU)/(1e6*bareCPU)), "(no goal set)", "—"},
	}, nil
}

// childrenCPU is the CPU time, in core-seconds, of this process's
// children that it has waited for.
func childrenCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// waitTenantToken waits until the tenant is Ready with its sandbox on
// the agent, and returns its token.
func waitTenantToken(ctx context.Context, c client.Client, key client.ObjectKey, ps ...*childproc.Process) (string, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var t playgroundv1alpha1.Tenant
		var sbx playgroundv1alpha1.Sandbox
		err := c.Get(ctx, key, &t)
		if err == nil {
			err = c.Get(ctx, key, &sbx)
		}
		if err == nil && meta.IsStatusConditionTrue(t.Status.Conditions, playgroundv1alpha1.ReadyCondition) && t.Status.Credentials.SecretRef != nil &&
			meta.IsStatusConditionTrue(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition) {
			var secret corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Status.Credentials.SecretRef.Name}, &secret); err != nil {
				return "", err
			}
			return string(secret.Data[playgroundv1alpha1.CredentialTokenKey]), nil
		}
		if ferr := childproc.Failed(ps...); ferr != nil {
			return "", ferr
		}
		if time.Now().After(deadline) {
			why := "not found"
			if cond := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.ReadyCondition); cond != nil && cond.Status != metav1.ConditionTrue {
				why = cond.Reason + ": " + cond.Message
			}
			return "", fmt.Errorf("tenant %s is not Ready after 3 minutes: %s", key, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
