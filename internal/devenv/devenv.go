// Package devenv is `playground dev`: the whole system on this machine, on
// an embedded control plane, for trying Playground and developing it.
package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/manifest"
)

// Options configure `playground dev`.
type Options struct {
	// ControlPlaneDir holds kube-apiserver, etcd and kubectl.
	ControlPlaneDir string
	// StateDir keeps the local cluster's state across runs.
	StateDir string
	// Samples is a directory of objects applied at start.
	Samples string
	// CRDs is the directory of CRDs to install.
	CRDs string
	// Namespace receives the samples.
	Namespace string
}

// ReadyLine is printed once everything runs; scripts wait for it.
const ReadyLine = "Playground dev is running."

// Run starts the local system, prints how to reach it to out, and runs until
// ctx ends; then it stops everything it started.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	state, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return err
	}
	crds, err := filepath.Abs(opts.CRDs)
	if err != nil {
		return err
	}
	progress := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }

	progress("starting kube-apiserver and etcd (state in %s)", state)
	started := time.Now()
	cp, err := controlplane.Start(controlplane.Options{
		AssetsDir: opts.ControlPlaneDir,
		DataDir:   filepath.Join(state, "etcd"),
		CRDDirs:   []string{crds},
	})
	if err != nil {
		return err
	}
	defer func() {
		progress("stopping the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	progress("control plane up with the CRDs installed in %s", time.Since(started).Round(100*time.Millisecond))

	kubeconfig := filepath.Join(state, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	if err := playgroundv1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return err
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	objs, err := manifest.ReadKustomization(opts.Samples)
	if err != nil {
		return fmt.Errorf("reading the samples: %w", err)
	}
	if err := manifest.Apply(ctx, c, opts.Namespace, objs); err != nil {
		return err
	}
	progress("applied %d sample objects from %s to namespace %s", len(objs), opts.Samples, opts.Namespace)

	kubectl := filepath.Join(cp.Assets(), "kubectl")
	fmt.Fprintf(out, `
%s
  kubeconfig:  %s
  kubectl:     %s
  try:         %s --kubeconfig %s get playground -A

What runs yet: kube-apiserver and etcd with the Playground CRDs and the samples.
The manager, host agent and MCP gateway come with the next issues, and with
them the MCP endpoint and token.

Press Ctrl-C to stop; the cluster's state stays in %s for the next run.
`, ReadyLine, kubeconfig, kubectl, kubectl, kubeconfig, state)

	<-ctx.Done()
	return nil
}
