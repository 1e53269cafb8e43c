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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/playground-dev/playground/cmd/playground-dev/devenv"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/mcpgateway"
)

// hostileCommand writes 4 MiB of \x01 to stdout and 4 MiB to stderr:
// valid UTF-8 that JSON escapes six-fold.
const hostileCommand = `head -c 4194304 /dev/zero | tr '\0' '\1'; head -c 4194304 /dev/zero | tr '\0' '\1' >&2`

// hostileOutput is the "hostile output" row: clients exec hostileCommand
// at once; it reports the peak RSS growth of this process (gateway, agent
// and the clients), the calls' latency against one call's alone, and how
// many were served whole or refused; then the same with 64 calls, against
// the budgets' high-water marks.
func (b *bench) hostileOutput(ctx context.Context) ([]row, error) {
	runtime.GC()
	base := rssKiB("VmRSS:")
	// The baseline: one such call with nothing beside it, three times.
	var alone []time.Duration
	for range 3 {
		r1, err := b.hostileRun(ctx, 1, base)
		if err != nil {
			return nil, err
		}
		alone = append(alone, r1.lat...)
	}
	slices.Sort(alone)
	r16, err := b.hostileRun(ctx, 16, base)
	if err != nil {
		return nil, err
	}
	r64, err := b.hostileRun(ctx, 64, base)
	if err != nil {
		return nil, err
	}
	peaks := budgetPeaks()
	// However the calls are ordered, the median one cannot end before half
	// of them have had all the CPU they need, on the cores there are.
	perCall := (r16.serverCPU + r16.clientCPU) / 16
	floor := time.Duration(float64(8*perCall) / float64(runtime.NumCPU()))
	goal := int64(512 << 20)
	return []row{
		{"hostile output: 16 concurrent exec, each 4 MiB of \\x01 to stdout and to stderr; peak RSS growth of the process holding gateway and agent (clients apart)",
			mib(r16.rss), "", "", "≤ 512 MiB", verdict(r16.rss <= goal)},
		{"hostile output: 16 calls, p50 / max latency; served whole / refused (retryable)",
			fmt.Sprintf("%s / %s; %d / %d", ms(pct(r16.lat, .5)), ms(r16.lat[len(r16.lat)-1]), r16.served, r16.refused), "one call alone " + ms(pct(alone, .5)), fmt.Sprintf("%.1f×", ratio(pct(r16.lat, .5), pct(alone, .5))), "p50 ≤ 3 s, none lost", verdict(pct(r16.lat, .5) <= 3*time.Second && r16.served+r16.refused == 16)},
		{fmt.Sprintf("hostile output: CPU per call of the 16, this process (gateway, agent) / the clients' process (go-sdk's decoding, the check, its 16 connections); the least p50 any order of service allows on %d cores (8 calls' CPU)", runtime.NumCPU()),
			fmt.Sprintf("%.2f / %.2f core-s; %s", (r16.serverCPU / 16).Seconds(), (r16.clientCPU / 16).Seconds(), ms(floor)), "", "", "(explains the p50)", "—"},
		{"hostile output: 64 concurrent calls; peak RSS growth, p50 latency, served whole / refused (retryable)",
			fmt.Sprintf("%s, %s, %d / %d", mib(r64.rss), ms(pct(r64.lat, .5)), r64.served, r64.refused), "", "", "≤ 512 MiB, none lost", verdict(r64.rss <= goal && r64.served+r64.refused == 64)},
		{"hostile output: peak bytes reserved by the budgets over both runs (gateway, agent)",
			peaks, "", "", fmt.Sprintf("≤ %s per tenant (gateway), %s (agent)", mib(budgetPerTenant["gateway"]), mib(budgetPerTenant["agent"])), verdict(!strings.Contains(peaks, "over"))},
	}, nil
}

type hostileResult struct {
	rss             int64
	lat             []time.Duration
	served, refused int
	// serverCPU is this process's CPU time during the run; clientCPU the
	// clients' process's.
	serverCPU, clientCPU time.Duration
}

// hostileRun runs n clients of the sample tenant, sharing one sandbox
// handle, in a child process (this binary with --hostile-client), so that
// this process's memory is the gateway's and the agent's alone (and the
// manager's, idle), as they would run apart from their clients.
// RSS growth is measured from base, this process's RSS before the first
// run.
func (b *bench) hostileRun(ctx context.Context, n int, base int64) (hostileResult, error) {
	self, err := os.Executable()
	if err != nil {
		return hostileResult{}, err
	}
	resetPeakRSS()
	cpu0 := selfCPU()
	cmd := exec.CommandContext(ctx, self, "--hostile-client", fmt.Sprintf("%s %s %s %d", b.env.Endpoint, b.env.Token, b.handle, n))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	peak := rssKiB("VmHWM:")
	if err != nil {
		return hostileResult{}, fmt.Errorf("the clients: %w", err)
	}
	serverCPU := selfCPU() - cpu0
	var rep clientReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return hostileResult{}, fmt.Errorf("the clients' report %q: %w", out, err)
	}
	if rep.Error != "" {
		return hostileResult{}, errors.New(rep.Error)
	}
	res := hostileResult{rss: peak - base, served: rep.Served, refused: rep.Refused,
		serverCPU: serverCPU, clientCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	for _, ms := range rep.LatencyMS {
		res.lat = append(res.lat, time.Duration(ms*float64(time.Millisecond)))
	}
	slices.Sort(res.lat)
	return res, nil
}

// clientReport is what the --hostile-client child prints.
type clientReport struct {
	LatencyMS       []float64 `json:"latency_ms"`
	Served, Refused int
	Error           string `json:"error,omitempty"`
}

// hostileClients is the child: "endpoint token handle n" in arg; it runs
// the calls at once and prints a clientReport.
func hostileClients(arg string) {
	var endpoint, token, handle string
	var n int
	if _, err := fmt.Sscan(arg, &endpoint, &token, &handle, &n); err != nil {
		fmt.Fprintln(os.Stderr, "--hostile-client:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	b := &bench{env: &devenv.Env{Endpoint: endpoint}}
	var sessions []*mcp.ClientSession
	rep := clientReport{}
	for range n {
		cs, err := b.connect(ctx, token)
		if err != nil {
			rep.Error = err.Error()
			break
		}
		defer cs.Close() //nolint:gocritic // deferInLoop: every client stays connected until the report
		sessions = append(sessions, cs)
	}
	want := bytes.Repeat([]byte{1}, 4<<20)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r, err := sessions[i].CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": handle, "command": hostileCommand}})
			took := time.Since(start)
			var bad error
			served := false
			switch {
			case err != nil:
				bad = err
			case r.IsError:
				var msg string
				if len(r.Content) > 0 {
					if t, ok := r.Content[0].(*mcp.TextContent); ok {
						msg = t.Text
					}
				}
				if !strings.HasPrefix(msg, "resource_exhausted: ") {
					bad = fmt.Errorf("exec: %s", msg)
				}
			default:
				bad = checkHostile(r, want)
				served = bad == nil
			}
			mu.Lock()
			defer mu.Unlock()
			rep.LatencyMS = append(rep.LatencyMS, float64(took.Microseconds())/1000)
			switch {
			case bad != nil:
				errs = append(errs, bad)
			case served:
				rep.Served++
			default:
				rep.Refused++
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 && rep.Error == "" {
		rep.Error = fmt.Sprintf("%d of %d calls failed, the first: %v", len(errs), n, errs[0])
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		// The bench reads no report, and says so.
		fmt.Fprintln(os.Stderr, "--hostile-client:", err)
	}
}

// checkHostile checks that a served call returned all 4 MiB of each
// stream, byte-exact, and that its command was not killed.
func checkHostile(r *mcp.CallToolResult, want []byte) error {
	m, ok := r.StructuredContent.(map[string]any)
	if !ok {
		return fmt.Errorf("structured content is %T", r.StructuredContent)
	}
	if m["exit_code"] != 0.0 || m["timed_out"] != false { //nolint:revive // bool-literal-in-expr: a value of any, which may be absent
		return fmt.Errorf("the command did not exit normally: %v", m["exit_code"])
	}
	for _, s := range []string{"stdout", "stderr"} {
		var got []byte
		switch m[s+"_encoding"] {
		case "base64":
			got, _ = base64.StdEncoding.DecodeString(m[s].(string))
		case "text":
			got = []byte(m[s].(string))
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: %d bytes back, not the 4 MiB written", s, len(got))
		}
	}
	return nil
}

// selfCPU is the CPU time this process has used, its children apart.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets this process's VmHWM to its current RSS.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// rssKiB reads a field of /proc/self/status in KiB.
func rssKiB(field string) int64 { return procKiB("/proc/self/status", field) }

// budgetPerTenant is the default budget of bytes per tenant of each component.
var budgetPerTenant = map[string]int64{
	"gateway": mcpgateway.DefaultBudgetBytesPerTenant,
	"agent":   budget.Limits{}.WithDefaults().BytesPerTenant,
}

// budgetPeaks reads the budgets' high-water marks from the metrics of the
// gateway and the agent in this process.
func budgetPeaks() string {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return "metrics: " + err.Error()
	}
	var parts []string
	for _, mf := range mfs {
		if mf.GetName() != "playground_budget_bytes_in_flight_peak" {
			continue
		}
		for _, m := range mf.GetMetric() {
			who := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "component" {
					who = l.GetValue()
				}
			}
			v := int64(m.GetGauge().GetValue())
			s := fmt.Sprintf("%s %s", who, mib(v))
			if v > budgetPerTenant[who] {
				s += " (over)"
			}
			parts = append(parts, s)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
