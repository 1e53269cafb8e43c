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
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/childproc"
	"github.com/playground-dev/playground/internal/controlplane"
)

// scaleNode is the node name of P5's agent.
const scaleNode = "bench-scale"

// scale is P5: n tenants applied at once on one node, until every one is
// Ready. Unlike the other benchmarks, the manager and the agent run as the
// `playground manager` and `playground agent` processes a cluster runs, on
// a control plane of their own, so that their peak memory (VmHWM: the most
// resident memory the kernel saw) is theirs alone.
//
// With pool > 0 the agent keeps a warm pool of that size, filled before the
// clock starts and refilled during the burst at the agent's default rate:
// the refills' CPU counts, the fill before the burst does not (it is
// reported apart).
func scale(ctx context.Context, opts options, n, pool int, out io.Writer) (_ []row, err error) {
	state, err := os.MkdirTemp("", "pg-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(out, "P5 failed; the manager's and the agent's logs are kept in %s\n", state)
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
	if err := cp.CreateNamespaces(ctx, agentlease.DefaultNamespace, "scale"); err != nil {
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
	listen, err := childproc.FreeAddress()
	if err != nil {
		return nil, err
	}
	nodeDir := filepath.Join(state, "node")
	managerArgs := []string{"manager", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--agent-token-file", tokenFile, "--agent-cleartext"}
	// Cleartext on loopback, as playground-dev: the agent acts as the
	// administrator here, whose token is bound to no node, so the signer
	// would not issue it a certificate.
	agentArgs := []string{"agent", "--kubeconfig", kubeconfig, "--node-name", scaleNode, "--state-dir", nodeDir,
		"--token-file", tokenFile, "--listen", listen, "--tls=off"}
	pprof := map[string]string{} // component → its --pprof-bind-address
	if opts.profileDir != "" {
		for _, name := range []string{"manager", "agent"} {
			if pprof[name], err = childproc.FreeAddress(); err != nil {
				return nil, err
			}
		}
		managerArgs = append(managerArgs, "--pprof-bind-address", pprof["manager"])
		agentArgs = append(agentArgs, "--pprof-bind-address", pprof["agent"])
	}
	manager, err := childproc.Start(ctx, filepath.Join(state, "manager.log"), bin, managerArgs...)
	if err != nil {
		return nil, err
	}
	defer manager.Stop()
	if opts.guest != "" {
		agentArgs = append(agentArgs, "--guest-binary", opts.guest)
	}
	metrics := ""
	if pool > 0 {
		if metrics, err = childproc.FreeAddress(); err != nil {
			return nil, err
		}
		agentArgs = append(agentArgs, "--warm-pool", strconv.Itoa(pool), "--metrics-bind-address", metrics)
	}
	agent, err := childproc.Start(ctx, filepath.Join(state, "agent.log"), bin, agentArgs...)
	if err != nil {
		return nil, err
	}
	defer func() {
		agent.Stop()
		destroySandboxes(nodeDir, opts.guest)
	}()
	if err := waitLease(ctx, c, manager, agent); err != nil {
		return nil, err
	}
	var filled time.Duration
	var before poolCounts
	if pool > 0 {
		t0 := time.Now()
		for {
			if before, err = scrapePool(ctx, metrics); err == nil && before.ready >= pool {
				break
			}
			if err := childproc.Failed(manager, agent); err != nil {
				return nil, err
			}
			if time.Since(t0) > 15*time.Minute {
				return nil, fmt.Errorf("the warm pool holds %d of %d after 15 minutes", before.ready, pool)
			}
			time.Sleep(200 * time.Millisecond)
		}
		filled = time.Since(t0)
	}

	writesBefore, err := apiWrites(ctx, cp.Config)
	if err != nil {
		return nil, err
	}
	rw, err := watchReady(ctx, cp.Config, "scale")
	if err != nil {
		return nil, err
	}
	pids := map[string]int{
		"kube-apiserver":  newestProcess(filepath.Join(cp.Assets(), "kube-apiserver")),
		"etcd":            newestProcess(filepath.Join(cp.Assets(), "etcd")),
		"manager":         manager.Pid(),
		"agent with runc": agent.Pid(),
		// The clients that apply the tenants and the watch that sees them
		// Ready, as kubectl and a user's controller would be.
		"this process": os.Getpid(),
	}
	cpuBefore := sampleCPU(pids)
	if opts.profileDir != "" {
		// The burst's first minute in the API server, the manager and the
		// agent, beside this process's (startProfile).
		wait := profileBurst(ctx, cp.Config, pprof, 60, opts.profileDir, fmt.Sprintf("p5-pool-%d", pool))
		defer func() {
			if perr := wait(); perr != nil {
				fmt.Fprintln(out, "P5:", perr)
			}
		}()
	}
	// Applied at once: eight clients create the tenants as fast as the API
	// server takes them, as `kubectl apply` of one big file would.
	start := time.Now()
	created := make([]time.Time, n)
	names := make(chan int)
	var wg sync.WaitGroup
	var createErr error
	var mu sync.Mutex
	for range 8 {
		wg.Go(func() {
			for i := range names {
				created[i] = time.Now()
				t := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "scale", Name: fmt.Sprintf("t%04d", i)}}
				if err := c.Create(ctx, t); err != nil {
					mu.Lock()
					createErr = errors.Join(createErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		names <- i
	}
	close(names)
	wg.Wait()
	if createErr != nil {
		return nil, createErr
	}
	applied := time.Since(start)

	readyAt, err := rw.wait(ctx, n, 15*time.Minute, func(ready int) {
		fmt.Fprintf(out, "  after %s: %d of %d tenants Ready; sandboxes %s\n", time.Since(start).Round(time.Second), ready, n, sandboxPhases(ctx, c))
	}, func() error { return childproc.Failed(manager, agent) })
	if err != nil {
		return nil, err
	}
	var latencies []time.Duration
	last := start
	for name, at := range readyAt {
		i, _ := strconv.Atoi(strings.TrimPrefix(name, "t"))
		latencies = append(latencies, at.Sub(created[i]))
		if at.After(last) {
			last = at
		}
	}
	all := last.Sub(start)
	slices.Sort(latencies)
	managerPeak, agentPeak := peak(manager), peak(agent)
	cpu := perTenantCPU(cpuBefore, sampleCPU(pids), []string{"kube-apiserver", "etcd", "agent with runc", "manager", "this process"}, n)
	writesAfter, err := apiWrites(ctx, cp.Config)
	if err != nil {
		return nil, err
	}
	writes, total := perTenant(writesBefore, writesAfter, n)

	label := ""
	if pool > 0 {
		label = fmt.Sprintf(", warm pool of %d", pool)
	}
	rows := []row{
		{fmt.Sprintf("P5 %d tenants applied at once on one node%s → all Ready (separate manager and agent processes)", n, label),
			fmt.Sprintf("%.1f s (applied in %.1f s; p50 %.1f s per tenant)", all.Seconds(), applied.Seconds(), pct(latencies, .5).Seconds()),
			"", "", "≤ 60 s", verdict(all <= 60*time.Second)},
		{"P5 API server writes per tenant" + label + " (by resource, from apiserver_request_total)", fmt.Sprintf("%.2f: %s", total, writes), "", "", "≤ 8", verdict(total <= 8)},
		{"P5 CPU per tenant" + label + " (core-ms, the whole machine while they became Ready)", cpu, "", "", "≤ 150", verdict(cpuTotal(cpu) <= 150)},
		{"P5 manager peak memory (VmHWM)" + label, mib(managerPeak), "", "", "≤ 300 MiB", verdict(managerPeak <= 300<<20)},
		{"P5 agent peak memory (VmHWM)" + label, mib(agentPeak), "", "", "(no goal set)", "—"},
	}
	if pool > 0 {
		after, err := scrapePool(ctx, metrics)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{"P5" + label + ": claims during the burst, and the pool's own starts",
			fmt.Sprintf("%d hits, %d misses; %d pooled sandboxes started during it (counted above), %d before it, in %.1f s (not counted)",
				after.hits-before.hits, after.misses-before.misses, after.started-before.started, before.started, filled.Seconds()), "", "", "", ""})
	}
	return rows, nil
}

// poolCounts is the agent's warm pool as its metrics say.
type poolCounts struct {
	ready                 int
	hits, misses, started int
}

// scrapePool reads the warm pool's metrics from the agent at addr.
func scrapePool(ctx context.Context, addr string) (poolCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", http.NoBody)
	if err != nil {
		return poolCounts{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return poolCounts{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return poolCounts{}, err
	}
	var pc poolCounts
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "playground_warm_pool_ready{"):
			pc.ready = int(v)
		case strings.HasPrefix(name, "playground_warm_pool_claims_total{") && strings.Contains(name, `result="hit"`):
			pc.hits = int(v)
		case strings.HasPrefix(name, "playground_warm_pool_claims_total{") && strings.Contains(name, `result="miss"`):
			pc.misses = int(v)
		case strings.HasPrefix(name, "playground_warm_pool_starts_total{") && strings.Contains(name, `result="started"`):
			pc.started = int(v)
		}
	}
	return pc, nil
}

// cpuTotal is the total of a perTenantCPU row ("445: …").
func cpuTotal(s string) float64 {
	head, _, _ := strings.Cut(s, ":")
	v, _ := strconv.ParseFloat(strings.TrimSpace(head), 64)
	return v
}

// sandboxPhases counts P5's Sandboxes by phase, for the progress lines.
func sandboxPhases(ctx context.Context, c client.Client) string {
	var list playgroundv1alpha1.SandboxList
	if err := c.List(ctx, &list, client.InNamespace("scale")); err != nil {
		return err.Error()
	}
	unbound := 0
	count := map[playgroundv1alpha1.SandboxPhase]int{}
	for _, s := range list.Items {
		if s.Spec.NodeName == "" {
			unbound++
		}
		count[s.Status.Phase]++
	}
	parts := []string{fmt.Sprintf("%d created", len(list.Items)), fmt.Sprintf("%d unbound", unbound)}
	for _, p := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%d %s", count[p], cmp.Or(string(p), "(no phase)")))
	}
	return strings.Join(parts, ", ")
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// peak is a process's peak resident memory, VmHWM in /proc/<pid>/status.
func peak(p *childproc.Process) int64 {
	return procKiB(fmt.Sprintf("/proc/%d/status", p.Pid()), "VmHWM:")
}

// waitLease waits for the agent's registration, so that the clock starts
// on a system ready to serve.
func waitLease(ctx context.Context, c client.Client, ps ...*childproc.Process) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var lease coordinationv1.Lease
		err := c.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(scaleNode)}, &lease)
		if err == nil {
			return nil
		}
		if err := childproc.Failed(ps...); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not register within a minute: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// destroySandboxes removes every sandbox under nodeDir, files included.
func destroySandboxes(nodeDir, guest string) {
	be, err := oci.New(oci.Options{StateDir: nodeDir, GuestBinary: guest})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		err = be.DestroyAll(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "removing the P5 sandboxes:", err)
	}
}

// profileBurst writes CPU profiles of the next seconds of the API server
// (its /debug/pprof, which serves an administrator) and of the processes
// serving Go's profiles at pprof (name → address), into dir as
// <prefix>-<name>.pprof, in the background; wait returns once they are
// written, or why not.
func profileBurst(ctx context.Context, cfg *rest.Config, pprof map[string]string, seconds int, dir, prefix string) (wait func() error) {
	query := "seconds=" + strconv.Itoa(seconds)
	get := map[string]func() ([]byte, error){
		"kube-apiserver": func() ([]byte, error) {
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			return cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(seconds)).Timeout(time.Duration(seconds+30) * time.Second).DoRaw(ctx)
		},
	}
	for name, addr := range pprof {
		get[name] = func() ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/profile?"+query, http.NoBody)
			if err != nil {
				return nil, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s", resp.Status)
			}
			return io.ReadAll(resp.Body)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs error
	for name, fetch := range get {
		wg.Go(func() {
			raw, err := fetch()
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, prefix+"-"+name+".pprof"), raw, 0o644)
			}
			if err != nil {
				mu.Lock()
				errs = errors.Join(errs, fmt.Errorf("profiling %s: %w", name, err))
				mu.Unlock()
			}
		})
	}
	return func() error {
		wg.Wait()
		return errs
	}
}

// startControlPlane starts a control plane with Playground's CRDs and
// admission policies for a benchmark whose components run as processes
// over state (made traversable: sandboxes' unprivileged roots reach their
// bundles through it), and writes its kubeconfig there.
func startControlPlane(opts options, state string) (_ *controlplane.ControlPlane, kubeconfig string, err error) {
	if err := os.Chmod(state, 0o711); err != nil {
		return nil, "", err
	}
	crds, err := filepath.Abs("config/crd/bases")
	if err != nil {
		return nil, "", err
	}
	policies, err := filepath.Abs("config/admission")
	if err != nil {
		return nil, "", err
	}
	cp, err := controlplane.Start(controlplane.Options{AssetsDir: opts.controlPlane, CRDDirs: []string{crds}, AdmissionDirs: []string{policies}})
	if err != nil {
		return nil, "", err
	}
	kubeconfig = filepath.Join(state, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		_ = cp.Stop()
		return nil, "", err
	}
	return cp, kubeconfig, nil
}
