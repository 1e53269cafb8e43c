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

// Command playground-soak proves that a node keeps serving through
// restarts, failures and hostile tenants. On an embedded control plane it
// runs the components as the processes a cluster runs (`playground
// manager`, `agent`, `gateway`), well-behaved tenants whose MCP clients
// check every answer, and hostile ones (PID and memory exhaustion, output
// floods, a full disk, jobs that never end), while it kills and restarts
// the agent, the gateway, the manager and the API server and deletes and
// re-creates tenants at random moments (seeded: the seed is printed, and
// --seed replays the schedule). It checks the invariants throughout and at
// the end (docs/benchmarks.md, "Soak with faults"), prints a report, and
// exits non-zero naming each violated invariant. `make soak` runs it;
// --short keeps it to a few minutes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// options configure one soak.
type options struct {
	short bool
	seed  int64
	// duration and minFaults: the long mode injects faults until both are
	// reached; perKind: the short mode injects that many of each kind.
	duration  time.Duration
	minFaults int
	perKind   int
	// good is how many well-behaved tenants run clients.
	good int
	// serveBound: the longest a well-behaved tenant may wait to be served
	// again after a restart; convergeBound: the longest a Tenant or Sandbox
	// may stay not Ready, or deleting.
	serveBound, convergeBound time.Duration
	controlPlane, playground  string
	guest                     string
	out                       string
	keep                      bool
	verbose                   bool
	// kinds are the fault kinds injected (--faults); nil: all.
	kinds []string
}

func main() {
	var opts options
	flag.BoolVar(&opts.short, "short", false, "the short mode: a few faults of each kind, in about three minutes (CI)")
	flag.Int64Var(&opts.seed, "seed", 0, "the seed of the fault schedule and the workloads (default: from the clock; printed, so that a run can be replayed)")
	flag.DurationVar(&opts.duration, "duration", 30*time.Minute, "the long mode: inject faults for at least this long")
	flag.IntVar(&opts.minFaults, "min-faults", 50, "the long mode: inject at least this many faults")
	flag.IntVar(&opts.perKind, "per-kind", 2, "the short mode: faults of each kind")
	flag.IntVar(&opts.good, "tenants", 3, "well-behaved tenants, each with an MCP client checking every answer (beside the hostile ones)")
	flag.DurationVar(&opts.serveBound, "serve-bound", time.Minute, "the longest a well-behaved tenant may wait to be served again after a fault")
	flag.DurationVar(&opts.convergeBound, "converge-bound", 2*time.Minute, "the longest a Tenant or Sandbox may stay not Ready, or being deleted")
	flag.StringVar(&opts.controlPlane, "control-plane", "", "directory of kube-apiserver, etcd and kubectl (default: hack/controlplane.sh)")
	flag.StringVar(&opts.playground, "playground-binary", "", "the playground binary run as manager, agent and gateway (default: next to this one)")
	flag.StringVar(&opts.guest, "guest-binary", "", "the static playground-sandbox binary (default: next to this one)")
	flag.StringVar(&opts.out, "out", "docs/benchmarks.md", "the long mode writes its report into this file's soak section (empty: nowhere)")
	flag.BoolVar(&opts.keep, "keep", false, "keep the state directory (the components' logs, etcd) after the run; remove it later with --remove")
	flag.BoolVar(&opts.verbose, "v", false, "print each call that failed and each step of each fault")
	only := flag.String("faults", "", "inject only the kinds of fault whose name matches this regular expression (e.g. 'agent|apiserver'); default: every kind")
	remove := flag.String("remove", "", "remove what a run kept (--keep) in this state directory: its sandboxes, then the directory; its processes must have ended")
	flag.Parse()
	if *remove != "" {
		if err := removeState(*remove); err != nil {
			fmt.Fprintln(os.Stderr, "playground-soak:", err)
			os.Exit(1)
		}
		return
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err == nil {
			opts.kinds = selectKinds(re)
		}
		if err != nil || len(opts.kinds) == 0 {
			fmt.Fprintf(os.Stderr, "playground-soak: --faults %q matches no kind of fault (%v)\n", *only, err)
			os.Exit(2)
		}
	}
	if opts.seed == 0 {
		opts.seed = time.Now().UnixNano()
	}

	ctrl.SetLogger(logr.Discard())
	// A signal ends the faults and the load early; the run still cleans up
	// and reports.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code, err := run(ctx, opts, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "playground-soak:", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}
