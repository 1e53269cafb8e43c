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
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/childproc"
	"github.com/playground-dev/playground/internal/controlplane"
)

const (
	// nodeName is the soak's node; namespace holds its tenants.
	nodeName  = "soak-node"
	namespace = "soak"
	// warmPool is the node's pool of blank sandboxes, as playground-dev
	// keeps: claims, refills, adoption after a crash and the drain of a
	// graceful stop are on the paths the faults cross.
	warmPool = 2
	// termBound is how long a component may take to exit on SIGTERM: a
	// pod's default grace period, after which the kubelet kills it.
	termBound = 30 * time.Second
)

// system is the node and its control plane: kube-apiserver and etcd, and
// manager, agent and gateway as processes, each started again at the same
// address after it is killed.
type system struct {
	opts       options
	state      string
	nodeDir    string
	cp         *controlplane.ControlPlane
	c          client.Client
	kubeconfig string
	tokenFile  string
	bin, guest string
	agentAddr  string
	gwAddr     string
	endpoint   string

	mu    sync.Mutex
	procs map[string]*childproc.Process
	// agentGen counts the agent's ends (a kill or a stop): a session
	// handle opened before one is gone with that agent.
	agentGen atomic.Uint64
	// apiDown is set while kube-apiserver is stopped.
	apiDown atomic.Bool
	// stopped, when set, is told how long a component took to exit on
	// SIGTERM.
	stopped func(name string, d time.Duration)
}

// components are the roles run as processes, in the order they start.
var components = []string{"manager", "agent", "gateway"}

func startSystem(ctx context.Context, opts options, progress func(string, ...any)) (_ *system, err error) {
	s := &system{opts: opts, procs: map[string]*childproc.Process{}}
	if s.state, err = os.MkdirTemp("", "pg-soak-"); err != nil {
		return nil, err
	}
	// Sandboxes' unprivileged roots traverse the path to their bundles.
	if err := os.Chmod(s.state, 0o711); err != nil {
		return nil, err
	}
	s.nodeDir = filepath.Join(s.state, "node")
	if s.bin, err = childproc.BinaryNextToThis(opts.playground, "playground"); err != nil {
		return nil, err
	}
	if s.guest, err = childproc.BinaryNextToThis(opts.guest, "playground-sandbox"); err != nil {
		return nil, err
	}
	crds, err := filepath.Abs("config/crd/bases")
	if err != nil {
		return nil, err
	}
	policies, err := filepath.Abs("config/admission")
	if err != nil {
		return nil, err
	}
	progress("starting kube-apiserver and etcd (state in %s)", s.state)
	s.cp, err = controlplane.Start(controlplane.Options{AssetsDir: opts.controlPlane, DataDir: filepath.Join(s.state, "etcd"),
		CRDDirs: []string{crds}, AdmissionDirs: []string{policies}})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	s.c = s.cp.Client
	s.kubeconfig = filepath.Join(s.state, "kubeconfig")
	if err := s.cp.WriteKubeconfig(s.kubeconfig); err != nil {
		return nil, err
	}
	if err := s.cp.CreateNamespaces(ctx, agentlease.DefaultNamespace, namespace); err != nil {
		return nil, err
	}
	token := make([]byte, 32)
	_, _ = rand.Read(token)
	s.tokenFile = filepath.Join(s.state, "agent-token")
	if err := os.WriteFile(s.tokenFile, []byte(hex.EncodeToString(token)+"\n"), 0o600); err != nil {
		return nil, err
	}
	if s.agentAddr, err = childproc.FreeAddress(); err != nil {
		return nil, err
	}
	if s.gwAddr, err = childproc.FreeAddress(); err != nil {
		return nil, err
	}
	s.endpoint = "http://" + s.gwAddr + "/mcp"
	for _, name := range components {
		if err := s.start(name); err != nil {
			return nil, err
		}
	}
	progress("manager, agent (node %s, warm pool of %d, egress on) and gateway (%s) running", nodeName, warmPool, s.endpoint)
	if err := s.waitUp(ctx, time.Minute); err != nil {
		return nil, err
	}
	return s, nil
}

// args are a component's flags: those of a cluster's, with the agent's
// token file and cleartext on loopback as playground-dev's.
func (s *system) args(name string) []string {
	switch name {
	case "manager":
		return []string{"manager", "--kubeconfig", s.kubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--agent-token-file", s.tokenFile, "--agent-cleartext"}
	case "agent":
		return []string{"agent", "--kubeconfig", s.kubeconfig, "--node-name", nodeName, "--state-dir", s.nodeDir,
			"--guest-binary", s.guest, "--token-file", s.tokenFile, "--listen", s.agentAddr, "--advertise", "http://" + s.agentAddr,
			"--tls=off", "--runsc", "off", "--warm-pool", strconv.Itoa(warmPool), "--network", "egress"}
	case "gateway":
		return []string{"gateway", "--kubeconfig", s.kubeconfig, "--listen", s.gwAddr, "--agent-token-file", s.tokenFile,
			"--agent-cleartext", "--metrics-bind-address", "0"}
	}
	panic("no component " + name)
}

// start runs the component name (again), appending to its log.
func (s *system) start(name string) error {
	// Not the soak's context: a signal ends the soak by its own steps,
	// which stop the components last.
	p, err := childproc.Start(context.Background(), filepath.Join(s.state, name+".log"), s.bin, s.args(name)...)
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
	return nil
}

func (s *system) proc(name string) *childproc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[name]
}

// kill ends the component name with sig and waits for it to exit: a
// SIGTERM that does not end it within termBound is an error (and SIGKILL
// follows).
func (s *system) kill(name string, sig syscall.Signal) error {
	p := s.proc(name)
	if name == "agent" {
		s.agentGen.Add(1)
	}
	start := time.Now()
	p.Signal(sig)
	if p.Wait(termBound) {
		if sig == syscall.SIGTERM && s.stopped != nil {
			s.stopped(name, time.Since(start))
		}
		return nil
	}
	p.Signal(syscall.SIGKILL)
	<-p.Done()
	return fmt.Errorf("playground %s did not exit within %s of %s", name, termBound, sig)
}

// exited returns the first component that ended on its own, or nil.
func (s *system) exited() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range components {
		if err := s.procs[name].Exited(); err != nil {
			return err
		}
	}
	return nil
}

// waitUp waits until the agent has registered and the gateway is ready.
func (s *system) waitUp(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		var lease coordinationv1.Lease
		lerr := s.c.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(nodeName)}, &lease)
		gerr := s.gatewayReady(ctx)
		if lerr == nil && gerr == nil {
			return nil
		}
		if err := s.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the system is not up after %s: agent's Lease: %v; gateway: %v", bound, lerr, gerr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// gatewayReady is nil once the gateway's /readyz answers 200.
func (s *system) gatewayReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.gwAddr+"/readyz", http.NoBody)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// stopComponents stops the components, gateway first, each with SIGTERM
// as a rollout does; the agent's graceful stop drains its warm pool.
func (s *system) stopComponents() error {
	var errs []error
	for i := len(components) - 1; i >= 0; i-- {
		name := components[i]
		p := s.proc(name)
		if p == nil || p.Exited() != nil {
			continue
		}
		if err := s.kill(name, syscall.SIGTERM); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// stop stops everything: components, then the control plane.
func (s *system) stop() {
	_ = s.stopComponents()
	if s.cp != nil {
		if err := s.cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
}
