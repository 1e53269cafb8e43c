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

// Command playground-bench measures Playground against the floor of this
// machine: every figure beside a baseline measured in the same run (a bare
// fork/exec, a pipe, runc exec), since the machines it runs on are shared
// and noisy. It starts what `playground-dev` starts, in a temporary state
// directory, runs each benchmark after a warm-up, prints one table and
// writes it to docs/benchmarks.md. `make bench` runs it; --quick keeps it
// to a few minutes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	var opts options
	flag.BoolVar(&opts.quick, "quick", false, "fewer repetitions and smaller payloads: a few minutes")
	flag.StringVar(&opts.out, "out", "docs/benchmarks.md", "where to write the report (empty: nowhere)")
	flag.StringVar(&opts.controlPlane, "control-plane", "", "directory of kube-apiserver, etcd and kubectl (default: hack/controlplane.sh)")
	flag.StringVar(&opts.guest, "guest-binary", "", "the static playground-sandbox binary (default: next to this one)")
	flag.BoolVar(&opts.verbose, "v", false, "print the system's progress while it starts")
	flag.StringVar(&opts.profileDir, "profile-dir", "", "write a CPU profile of each benchmark (this process: gateway, agent, manager and client), and of the API server, the manager and the agent during the first minute of each P5 burst, into this directory")
	flag.StringVar(&opts.playground, "playground-binary", "", "the playground binary P5 runs as manager and agent (default: next to this one)")
	flag.StringVar(&opts.runsc, "runsc", "", "runsc, for the gVisor isolation rows (make bench passes hack/runsc.sh's; empty: not measured)")
	flag.StringVar(&opts.vmKernel, "vm-kernel", os.Getenv("PLAYGROUND_VM_KERNEL"), "the vm backend's kernel, for the VM isolation rows ($PLAYGROUND_VM_KERNEL; empty: not measured)")
	flag.StringVar(&opts.vmModules, "vm-modules", os.Getenv("PLAYGROUND_VM_MODULES"), "the vm backend's modules ($PLAYGROUND_VM_MODULES)")
	flag.StringVar(&opts.vmRoot, "vm-root", os.Getenv("PLAYGROUND_VM_ROOT"), "the vm backend's root image ($PLAYGROUND_VM_ROOT)")
	client := flag.String("hostile-client", "", "internal: run the hostile-output clients (\"endpoint token handle n\") and print their report")
	edgeClient := flag.String("edge-client", "", "internal: run the hostile-edges client (\"junk endpoint n conns\" or \"idle endpoint n seconds\") and print its report")
	only := flag.String("only", "", "run only the benchmarks whose name matches this regular expression (e.g. P5); the report is then printed, not written")
	flag.Func("p5-pools", "P5's warm pool sizes, comma-separated, 0 for none (default: none, a quarter of the burst, the burst and 5)", func(s string) error {
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a pool size", f)
			}
			opts.pools = append(opts.pools, n)
		}
		return nil
	})
	flag.Parse()
	if *client != "" {
		hostileClients(*client)
		return
	}
	if *edgeClient != "" {
		edgeClients(*edgeClient)
		return
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "playground-bench: --only:", err)
			os.Exit(2)
		}
		opts.only = re
	}

	ctrl.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	log := io.Discard
	if opts.verbose {
		log = os.Stderr
	}
	err := run(ctx, opts, os.Stdout, log)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "playground-bench:", err)
		os.Exit(1)
	}
}
