//go:build linux

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
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/playground-dev/playground/internal/machineinfo"
	"github.com/playground-dev/playground/internal/mdsection"
)

// report is the run's report, as printed and as docs/benchmarks.md's
// section.
type report struct{ text, markdown string }

// rows are the report's lines: what, and the figure.
type rows [][2]string

func (s *soak) report(total, faultTime time.Duration, faults int) report {
	l := s.led
	l.mu.Lock()
	defer l.mu.Unlock()
	mode := "long"
	if s.opts.short {
		mode = "short"
	}
	var r rows
	add := func(what, format string, args ...any) { r = append(r, [2]string{what, fmt.Sprintf(format, args...)}) }

	add("run", "%s mode, seed %d: %s in all, faults over %s", mode, s.opts.seed, total.Round(time.Second), faultTime.Round(time.Second))
	add("tenants", "%d well-behaved (a client checking every answer), %d hostile: %s", len(s.good), len(s.hostile), hostileList(s.hostile))
	add("faults injected", "%d: %s", faults, counts(l.faults, faultKinds))
	restarts := 0
	for _, k := range []string{faultAgentKill, faultAgentTerm, faultGateway, faultManager, faultAPIServer} {
		restarts += len(l.serve[k])
	}
	add("restarts survived (served again after)", "%d of %d component restarts; %d of %d tenants deleted and created again",
		restarts, faults-l.faults[faultRecreate], len(l.serve[faultRecreate]), l.faults[faultRecreate])
	for _, k := range faultKinds {
		if ds := l.serve[k]; len(ds) > 0 {
			from := "from its start again"
			if k == faultRecreate {
				from = "from its creation again"
			}
			add("time to serve again: "+k, "p50 %s, max %s (%d; %s, every good tenant served an exec)", pct(ds, .5), pct(ds, 1), len(ds), from)
		}
	}
	for _, name := range components {
		if ds := l.stops[name]; len(ds) > 0 {
			add("SIGTERM to exit: "+name, "p50 %s, max %s (%d)", pct(ds, .5), pct(ds, 1), len(ds))
		}
	}
	if len(l.deleted) > 0 {
		add("a hostile tenant deleted → it and its Sandbox gone", "p50 %s, max %s (%d)", pct(l.deleted, .5), pct(l.deleted, 1), len(l.deleted))
	}
	calls := 0
	for _, n := range l.calls {
		calls += n
	}
	add("calls by the good clients", "%d (%s), %d succeeded", calls, counts(l.calls, nil), l.ok)
	retryable := 0
	for _, n := range l.retryable {
		retryable += n
	}
	add("errors, retryable", "%d: %s", retryable, counts(l.retryable, nil))
	add("the longest a good client went without a call served", "%s (%s, until %s)", l.longestGap.Round(100*time.Millisecond), l.longestGapWhy, l.longestGapEnd.Round(time.Second))
	add("errors, not retryable or wrong answers", "%d", l.violations[invRetryable]+l.violations[invAnswer])
	add("job output checked byte for byte", "%d jobs, %d bytes", l.jobsChecked, l.bytesChecked)
	add("cancels proven (killed, descendants gone from the host)", "%d", l.cancelsProven)
	add("job_exec answers lost (sent again with their idempotency_key until answered)", "%d: %d answered with their job, %d refused (none had started)", l.lostJobAnswers, l.lostJobsAnswered, l.lostJobsRefused)
	add("job_exec answers lost for good (the job's fate unknown to its client)", "%d", l.unknownJobs)
	add("what the hostile tenants did and saw", "%s", counts(l.hostile, nil))
	add("sandboxes started again by the agent because their init had exited", "%s", counts(l.restarts, nil))
	s.mu.Lock()
	egress := len(s.egress)
	s.mu.Unlock()
	add("egress sandboxes whose veth and nftables table were looked for at the end", "%d", egress)
	if len(l.notes) > 0 {
		add("other things seen", "%s", counts(l.notes, nil))
	}
	add("leaks found", "%d%s", len(l.leaks), listOrEmpty(l.leaks))

	var verdicts []string
	for _, inv := range invariants {
		if n := l.violations[inv]; n > 0 {
			verdicts = append(verdicts, fmt.Sprintf("VIOLATED  %s (%d):\n    %s", inv, n, strings.Join(l.examples[inv], "\n    ")))
		} else {
			verdicts = append(verdicts, "held      "+inv)
		}
	}

	machine := machineinfo.Describe()
	load, _ := os.ReadFile("/proc/loadavg")
	var text strings.Builder
	fmt.Fprintf(&text, "Soak with faults (%s mode)\nMachine: %s; load average at the end %s\n\n", mode, machine, strings.Join(strings.Fields(string(load))[:3], " "))
	for _, row := range r {
		fmt.Fprintf(&text, "%-58s %s\n", row[0]+":", row[1])
	}
	fmt.Fprintf(&text, "\nInvariants:\n  %s\n", strings.Join(verdicts, "\n  "))

	var md strings.Builder
	fmt.Fprintf(&md, "## Soak with faults (`make soak`)\n\nWritten by `make soak` (long mode) on %s. Machine: %s; load average at the end %s (shared with other work: the times below are this machine's, at that load).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), machine, strings.Join(strings.Fields(string(load))[:3], " "))
	md.WriteString("| | |\n| --- | --- |\n")
	for _, row := range r {
		fmt.Fprintf(&md, "| %s | %s |\n", row[0], strings.ReplaceAll(row[1], "|", "\\|"))
	}
	md.WriteString("\n| invariant | |\n| --- | --- |\n")
	for _, inv := range invariants {
		v := "held"
		if n := l.violations[inv]; n > 0 {
			v = fmt.Sprintf("**violated** (%d): %s", n, strings.ReplaceAll(strings.Join(l.examples[inv], "; "), "|", "\\|"))
		}
		fmt.Fprintf(&md, "| %s | %s |\n", inv, v)
	}
	md.WriteString(soakNotes)
	return report{text: text.String(), markdown: md.String()}
}

// writeSection writes the long mode's report into path's soak section.
func writeSection(path, markdown string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(path, []byte(mdsection.Replace(string(old), "soak", markdown)), 0o644)
}

func hostileList(hs []*hostile) string {
	var names []string
	for _, h := range hs {
		names = append(names, string(h.k))
	}
	return strings.Join(names, ", ")
}

// counts renders a count map in order's order, then the rest sorted.
func counts(m map[string]int, order []string) string {
	var parts []string
	for _, k := range order {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(order, k) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func listOrEmpty(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ": " + strings.Join(xs, "; ")
}

// pct is the p-quantile of ds (1: the max), rounded for the report.
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return s[i].Round(time.Millisecond)
}

// soakNotes says how the soak measures, under its table.
const soakNotes = `
How it runs: kube-apiserver and etcd (internal/controlplane), and
` + "`playground manager`, `agent` and `gateway`" + ` as processes (the agent with
a warm pool of 2 and egress on, cleartext on loopback as playground-dev's),
the well-behaved tenants' clients go-sdk MCP clients over Streamable HTTP.
Each client loops: exec of a command whose answer it knows, write and read
back of random text and binary files, sequence jobs (batches of known lines
a quarter of a second apart, 15 to 60 s each, polled every second across
every fault and checked byte for byte at their end), and cancels of jobs
whose two detached descendants (setsid, double fork; TERM ignored) are seen
on the host before and must be gone after. A failure is retryable when the
tool says unavailable or resource_exhausted, when a session handle is gone
with an agent that ended (documented: the client opens a new session), or
when the transport fails while a component is down or coming back (from its
kill until every good tenant is served again, plus 10 s); anything else, and
any wrong answer, is a violation. The hostile tenants, on a tenth or a fifth
of a core: a perl fork bomb held as a job on 32 PIDs, jobs allocating until
the OOM killer ends them on 64 MiB, an unread job writing without end beside
4 MiB execs, a 48 MiB writable layer filled to ENOSPC again and again, eight
jobs that never end (a ninth must be refused, the eight must survive every
restart), and an egress sandbox (its own network namespace and nftables
table). Faults, one at a time, at seeded random moments: the agent killed
(SIGKILL) or stopped (SIGTERM), the gateway and the manager either, each
started again at the same address after up to 2 s; kube-apiserver stopped
and started again on the same etcd; a hostile tenant deleted and created
again (its deletion must end, its sandbox destroyed, within the bound). The
time to serve again is from the component's new start until every good
tenant has been served an exec through a new session (for the API server,
the agent must also renew its Lease on it). At the end every tenant is
deleted, and the node is searched for what is left of them with the agent
running (only its warm pool may remain), then again after its graceful stop:
runc containers, processes (naming the state directory, in the sandboxes'
cgroups, or the cancelled jobs' marked ones), cgroups under the agent's
parent, mounts and loop devices of the state directory, the egress
sandboxes' links and nftables tables, and the sandboxes' directories and
records.
`
