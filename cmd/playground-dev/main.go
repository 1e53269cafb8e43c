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

// Command playground-dev is Playground on this machine, for trying it and
// developing it: an embedded control plane (kube-apiserver and etcd, as the
// tests run them), the CRDs, the manager, one host agent (this machine is
// the node) and the MCP gateway, with the samples applied; it prints the MCP
// endpoint and a token. `make dev` builds and runs it. It is a command of
// its own so that the components' binary, playground, links no test
// support.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/playground-dev/playground/cmd/internal/cmdflags"
	"github.com/playground-dev/playground/cmd/playground-dev/devenv"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/internal/boundedlog"
)

const usage = `Usage: playground-dev [flags]

Runs the control plane, Playground's components and the samples on this
machine, and prints the MCP endpoint and a token; Ctrl-C stops it all.
Run from the repository (make dev), whose config/ it reads.

`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runDev(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "playground-dev:", err)
		os.Exit(1)
	}
}

// devLogName and devLogBytes are the components' log of playground-dev,
// in its state directory, and its bound (it keeps one predecessor).
const (
	devLogName  = "playground.log"
	devLogBytes = 16 << 20
)

// runDev runs the local system until ctx ends.
func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("playground-dev", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	var opts devenv.Options
	fs.StringVar(&opts.ControlPlaneDir, "control-plane", "", "directory holding kube-apiserver, etcd and kubectl (default: built by hack/controlplane.sh)")
	fs.StringVar(&opts.StateDir, "state-dir", ".dev", "directory for the local cluster's state; kept across runs")
	fs.StringVar(&opts.Samples, "samples", "config/samples", "directory of sample objects to apply")
	fs.StringVar(&opts.CRDs, "crds", "config/crd/bases", "directory of the CRDs to install")
	fs.StringVar(&opts.AdmissionPolicies, "admission-policies", "config/admission", "kustomize directory of the admission policies to install")
	fs.StringVar(&opts.Namespace, "namespace", "default", "namespace for the samples")
	fs.StringVar(&opts.Tenant, "tenant", "demo", "the sample tenant to wait for and print the token of")
	fs.StringVar(&opts.Listen, "listen", "127.0.0.1:7080", "address of the MCP gateway")
	fs.StringVar(&opts.MetricsListen, "metrics-listen", "127.0.0.1:7081", "address serving the manager's, the agent's and the gateway's Prometheus metrics at /metrics (docs/metrics.md); empty: none")
	fs.StringVar(&opts.GuestBinary, "guest-binary", "", "the static playground-sandbox binary (default: next to this one)")
	network := fs.String("network", "auto", "sandbox networking: egress (Tenants' egress lists, by address or by name, enforced with nftables; see docs/isolation.md), none (loopback only), or auto: egress where this machine can (root, with nft, ip and nsenter), else none")
	runsc := fs.String("runsc", "", "runsc, for Sandboxes of isolation gvisor (default: runsc from PATH, e.g. built by hack/runsc.sh; none: gVisor not offered); \"off\" refuses gVisor")
	opts.FacultyHostPathPrefixes = []string{devenv.DefaultFacultyHostPath}
	fs.Var(cmdflags.StringList(&opts.FacultyHostPathPrefixes), "faculty-host-path-prefix", "a directory under which FacultyBundles' hostPath sources are read, beside the samples' (repeatable, or comma-separated); see the agent's flag")
	fs.IntVar(&opts.WarmPool, "warm-pool", 2, "how many blank container sandboxes the node keeps started ahead of demand (0: none); see the agent's --warm-pool")
	// A registry on this machine is reached in cleartext, as Docker's
	// daemon does: no credential leaves the machine.
	opts.ImageRegistryPlainHTTP = []string{"localhost", "127.0.0.1", "::1"}
	fs.Var(cmdflags.StringList(&opts.ImageRegistryPlainHTTP), "image-registry-plain-http", "an image registry (host:port, or a host for any port) reached over cleartext HTTP, beside this machine's own (localhost, 127.0.0.1, ::1); repeatable. Every other one is reached over HTTPS only")
	imageStoreBytes := fs.String("image-store-bytes", "20Gi", "disk the node's image store may take (a quantity); see the agent's --image-store-bytes")
	vmf := cmdflags.AddVMFlags(fs)
	verbose := fs.Bool("v", false, "print the components' logs to standard error too (they always go to playground.log in the state directory, formatted by the --zap-* flags)")
	logOpts := cmdflags.LogFlags(fs, "console")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch n := oci.Network(*network); n {
	case "auto":
		opts.Network = oci.NetworkEgress
		if why := egressMissing(); why != "" {
			fmt.Fprintf(os.Stderr, "playground-dev: sandboxes get no egress (--network none): %s\n", why)
			opts.Network = oci.NetworkNone
		}
	case oci.NetworkNone, oci.NetworkEgress:
		opts.Network = n
	default:
		return fmt.Errorf("--network: want none or egress, not %q", *network)
	}
	q, err := resource.ParseQuantity(*imageStoreBytes)
	if err != nil || q.Sign() <= 0 {
		return fmt.Errorf("--image-store-bytes: want a positive quantity such as 20Gi, not %q", *imageStoreBytes)
	}
	opts.ImageStoreBytes = q.Value()
	if opts.Runsc, err = cmdflags.LookRunsc(*runsc); err != nil {
		return err
	}
	// The components log to a file in the state directory, bounded on
	// disk, whatever -v says: a stuck object is debugged from it.
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return err
	}
	if opts.LogFile, err = filepath.Abs(filepath.Join(opts.StateDir, devLogName)); err != nil {
		return err
	}
	logFile, err := boundedlog.Open(opts.LogFile, devLogBytes)
	if err != nil {
		return fmt.Errorf("the components' log: %w", err)
	}
	defer logFile.Close()
	logOpts.DestWriter = logFile
	if *verbose {
		logOpts.DestWriter = io.MultiWriter(logFile, os.Stderr)
	}
	opts.Logger = logOpts.SetLogger()
	opts.VM = func(ctx context.Context, stateDir string) (devenv.VMBackend, error) {
		// Which accelerator, and why, is said whatever -v says.
		say := funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, "playground-dev: vm backend:", args) }, funcr.Options{})
		be, err := vmf.Backend(ctx, stateDir, opts.GuestBinary, 0, say)
		if be == nil || err != nil {
			return nil, err
		}
		return be, nil
	}
	return devenv.Run(ctx, opts, os.Stdout)
}

// egressMissing says what this machine lacks to offer egress, or "".
func egressMissing() string {
	if os.Geteuid() != 0 {
		return "not running as root"
	}
	for _, tool := range []string{"nft", "ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (make prereqs installs it)"
		}
	}
	return ""
}
