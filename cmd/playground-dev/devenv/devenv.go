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

// Package devenv is `playground-dev`: the whole system on this machine, on
// an embedded control plane, for trying Playground and developing it: the
// manager, one host agent (this machine is the node, oci backend) and the
// MCP gateway, with the samples applied.
package devenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/devconfig"
	"github.com/playground-dev/playground/internal/manifest"
	"github.com/playground-dev/playground/internal/tokenfile"
	"github.com/playground-dev/playground/mcpgateway"
)

// Options configure `playground-dev`.
type Options struct {
	// ControlPlaneDir holds kube-apiserver, etcd and kubectl.
	ControlPlaneDir string
	// StateDir keeps the local cluster's and the node's state across runs.
	StateDir string
	// Samples is a directory of objects applied at start.
	Samples string
	// CRDs is the directory of CRDs to install.
	CRDs string
	// AdmissionPolicies is the kustomize directory of the admission
	// policies to install (config/admission); empty means the
	// repository's.
	AdmissionPolicies string
	// Namespace receives the samples.
	Namespace string
	// Tenant is the sample tenant waited for and whose token is printed.
	Tenant string
	// Listen is the MCP gateway's address.
	Listen string
	// MetricsListen serves the components' metrics (controller-runtime's
	// registry, which the manager, the agent and the gateway of this
	// process share) at /metrics; empty: none.
	MetricsListen string
	// GuestBinary is the in-sandbox binary; empty means next to this one.
	GuestBinary string
	// Network is the node's sandbox networking; empty means none.
	Network oci.Network
	// Runsc is the node's gVisor runtime; empty: gVisor is not offered.
	Runsc string
	// WarmPool and WarmPoolRate are the node's oci warm pool
	// (oci.Options): zero keeps none.
	WarmPool     int
	WarmPoolRate float64
	// ImageStoreBytes bounds the node's image store (the images Tenants
	// name, unpacked); zero: the agent's default.
	ImageStoreBytes int64
	// ImageRegistryPlainHTTP are the image registries (host:port, or a
	// host for any port) the manager and the node reach over cleartext
	// HTTP; every other one over HTTPS only.
	ImageRegistryPlainHTTP []string
	// Workers is how many objects the manager, and how many sandboxes the
	// agent, handle at once; zero: their defaults.
	Workers int
	// FacultyHostPathPrefixes are the directories under which the node's
	// agent reads FacultyBundles' host paths (nodeagent.Options): the
	// samples' worker bundle reads DefaultFacultyHostPath.
	FacultyHostPathPrefixes []string
	// VM makes the node's vm backend over a state directory; nil, or a nil
	// backend, offers none. Its VMs are stopped when dev ends.
	VM func(ctx context.Context, stateDir string) (VMBackend, error)
	// Logger receives the components' logs; the zero value discards them.
	// LogFile, when set, is where they go, printed for the user to find.
	Logger  logr.Logger
	LogFile string
}

// VMBackend is a backend whose sandboxes dev stops when it ends.
type VMBackend interface {
	backend.Backend
	StopAll(ctx context.Context) error
}

// DefaultFacultyHostPath is the directory from which the sample worker
// bundle (config/samples) takes the example worker, as `make dev` puts it
// there (EXAMPLE_WORKER_DIR).
const DefaultFacultyHostPath = "/opt/playground/faculties"

// ReadyLine is printed once everything runs; scripts wait for it.
const ReadyLine = "Playground dev is running."

// Env is a running local system.
type Env struct {
	// Client is an administrator's client of the API server, and Config
	// its configuration.
	Client client.Client
	Config *rest.Config
	// Endpoint is the MCP gateway's URL and Token the sample tenant's token.
	Endpoint, Token string
	// Tenant is the sample tenant, Ready.
	Tenant *playgroundv1alpha1.Tenant
	// Node is this machine's node name; Backend runs its sandboxes.
	Node    string
	Backend *oci.Backend
	// Kubeconfig and Kubectl reach the API server; State holds it all.
	Kubeconfig, Kubectl, State string
	// AgentEndpoint and AgentToken reach the node's agent API.
	AgentEndpoint, AgentToken string
	// Metrics is the URL of the components' metrics ("" when not
	// served); AuditLog the audit trail's file.
	Metrics, AuditLog string

	errs     chan error
	cleanups []func()
}

// Err reports a component that stopped on its own.
func (e *Env) Err() <-chan error { return e.errs }

// Stop stops everything Start started, in reverse order: the components,
// then the sandbox containers (their files stay), then the control plane.
func (e *Env) Stop() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

// Run starts the local system, prints how to reach it to out, and runs until
// ctx ends; then it stops everything it started, sandboxes included (their
// files stay for the next run).
func Run(ctx context.Context, opts Options, out io.Writer) error {
	env, err := Start(ctx, opts, out)
	if err != nil {
		return err
	}
	defer env.Stop()
	clientConfig, err := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"playground": map[string]any{
		"type": "http", "url": env.Endpoint, "headers": map[string]string{"Authorization": "Bearer " + env.Token},
	}}}, "  ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, `
%s
  MCP endpoint:  %s   (Streamable HTTP)
  token:         %s
  tenant:        %s/%s (sandbox %s on node %s)
  kubeconfig:    %s
  kubectl:       %s --kubeconfig %s get playground -A
  plugin:        kubectl playground --kubeconfig %s exec %s -- uname -a
  metrics:       %s
  audit trail:   %s   (kubectl playground audit %s)
  logs:          %s

An MCP client configuration (Claude Code, Cursor and others read this shape):
  %s

Press Ctrl-C to stop; the cluster's and the sandboxes' state stays in %s.
`, ReadyLine, env.Endpoint, env.Token, env.Tenant.Namespace, env.Tenant.Name, env.Tenant.Status.SandboxID, env.Node,
		env.Kubeconfig, env.Kubectl, env.Kubeconfig, env.Kubeconfig, env.Tenant.Name, orNone(env.Metrics), env.AuditLog, env.Tenant.Name,
		orNone(opts.LogFile), clientConfig, env.State)

	select {
	case <-ctx.Done():
		return nil
	case err := <-env.Err():
		return err
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Start starts the local system and returns once the sample tenant is
// Ready, printing progress to out. On error it stops what it started.
func Start(ctx context.Context, opts Options, out io.Writer) (_ *Env, err error) {
	state, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	crds, err := filepath.Abs(opts.CRDs)
	if err != nil {
		return nil, err
	}
	var policies []string
	if opts.AdmissionPolicies != "" {
		dir, err := filepath.Abs(opts.AdmissionPolicies)
		if err != nil {
			return nil, err
		}
		policies = []string{dir}
	}
	progress := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }
	env := &Env{State: state, errs: make(chan error, 8)} // room for every component's error
	defer func() {
		if err != nil {
			env.Stop()
		}
	}()

	if opts.LogFile != "" {
		progress("the components log to %s", opts.LogFile)
	}
	progress("starting kube-apiserver and etcd (state in %s)", state)
	started := time.Now()
	// The kubeconfig presents a token, as a user's does in a cluster:
	// the kubectl plugin presents it to the agent (exec, shell, jobs),
	// which a client certificate cannot be. A new one each run, as the
	// API server's certificates are.
	adminToken := randomHex(32)
	cp, err := controlplane.Start(controlplane.Options{
		AssetsDir:  opts.ControlPlaneDir,
		AdminToken: adminToken,
		DataDir:    filepath.Join(state, "etcd"),
		CRDDirs:    []string{crds},
		// The installation's admission policies, as kubectl apply -k
		// config/default installs them in a cluster.
		AdmissionDirs: policies,
	})
	if err != nil {
		return nil, err
	}
	env.cleanups = append(env.cleanups, func() {
		progress("stopping the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	})
	progress("control plane up with the CRDs and admission policies installed in %s", time.Since(started).Round(100*time.Millisecond))

	env.Kubectl = filepath.Join(cp.Assets(), "kubectl")
	c := cp.Client
	env.Client, env.Config = c, cp.Config
	if err := cp.CreateNamespaces(ctx, agentlease.DefaultNamespace); err != nil {
		return nil, err
	}

	// Garbage collection (a deleted Tenant's Secrets), namespace deletion
	// and the rest of controlplane.ControllerManagerControllers, as a
	// cluster's controller manager does them.
	kcm, err := cp.StartControllerManager(ctx, controlplane.KlogLines(opts.Logger.WithName("kube-controller-manager")))
	if err != nil {
		return nil, err
	}
	progress("kube-controller-manager running: garbage collection, namespace deletion, service accounts, quotas, role aggregation")

	nodeDir := filepath.Join(state, "node")
	if err := os.MkdirAll(nodeDir, 0o711); err != nil {
		return nil, err
	}
	// Sandboxes' unprivileged roots traverse the path to their bundles.
	if err := os.Chmod(state, 0o711); err != nil {
		return nil, err
	}
	egress := &egressdns.Hub{}
	be, err := oci.New(oci.Options{StateDir: nodeDir, GuestBinary: opts.GuestBinary, Network: opts.Network, GVisorRuntime: opts.Runsc,
		// IPv6 where this machine has a route out over it.
		EgressIPv6: opts.Network == oci.NetworkEgress && oci.HasIPv6Route(),
		WarmPool:   opts.WarmPool, WarmPoolRate: opts.WarmPoolRate, NewID: sandboxids.New, OnEgressDNS: egress.Record})
	if err != nil {
		return nil, fmt.Errorf("the oci backend: %w", err)
	}
	env.Backend = be
	env.cleanups = append(env.cleanups, func() {
		progress("stopping the sandboxes (their files stay in %s)", nodeDir)
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		if err := be.StopAll(sctx); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the sandboxes:", err)
		}
	})

	// The audit trail of every tool call and of every command a user runs
	// at the agent (the kubectl plugin's exec), in the state directory
	// (playground audit verify checks it): the gateway's records and the
	// agent's, each its own chain, in one file. Closed once the
	// components have stopped.
	env.AuditLog = filepath.Join(state, "audit.log")
	auditSink, err := audit.File(audit.FileOptions{Path: env.AuditLog})
	if err != nil {
		return nil, err
	}
	env.cleanups = append(env.cleanups, func() { _ = auditSink.Close() })
	gatewayTrail := audit.New(audit.LevelRequest, "gateway", auditSink)
	agentTrail := audit.New(audit.LevelRequest, "agent", auditSink)

	// The components run until Stop; it waits for them all before the
	// sandboxes are stopped, so that no agent restarts what is stopping.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	env.cleanups = append(env.cleanups, func() { cancel(); wg.Wait() })
	goRun := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				env.errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}

	goRun("kube-controller-manager", func(ctx context.Context) error {
		select {
		case <-kcm.Done():
			return kcm.Err()
		case <-ctx.Done():
			return nil
		}
	})

	if env.AgentToken, err = loadOrCreateToken(filepath.Join(state, "agent-token")); err != nil {
		return nil, err
	}
	// The manager reaches the agent (brokered egress credentials) with
	// the shared token, in cleartext over loopback, as the gateway does.
	agents, err := mcpgateway.NewAgentClients(nil, mcpgateway.StaticToken(env.AgentToken), nil, true)
	if err != nil {
		return nil, err
	}
	mgr, err := controllers.NewManager(cp.Config, controllers.ManagerOptions{Logger: opts.Logger.WithName("manager"), Options: controllers.Options{Workers: opts.Workers, Agents: agents,
		Images: controllers.ImageOptions{PlainHTTP: opts.ImageRegistryPlainHTTP}},
		// A process may run several (the benchmarks do).
		SkipNameValidation: true})
	if err != nil {
		return nil, err
	}
	goRun("manager", mgr.Start)
	progress("manager running")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	env.AgentEndpoint = "http://" + ln.Addr().String()
	env.Node = nodeName()
	backends, names := []backend.Backend{be}, "oci"
	if opts.VM != nil {
		vmb, err := opts.VM(ctx, nodeDir)
		if err != nil {
			return nil, err
		}
		if vmb != nil {
			backends, names = append(backends, vmb), "oci and vm"
			env.cleanups = append(env.cleanups, func() {
				progress("stopping the VMs (their disks stay in %s)", nodeDir)
				sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
				defer scancel()
				if err := vmb.StopAll(sctx); err != nil {
					fmt.Fprintln(os.Stderr, "stopping the VMs:", err)
				}
			})
		}
	}
	images, err := openImages(filepath.Join(nodeDir, "image-store"), opts.ImageStoreBytes, opts.ImageRegistryPlainHTTP)
	if err != nil {
		return nil, err
	}
	goRun("agent", func(ctx context.Context) error {
		return nodeagent.Run(ctx, nodeagent.Options{
			Images:   images,
			Config:   cp.Config,
			NodeName: env.Node,
			StateDir: nodeDir,
			Backends: backends,
			Listener: ln,
			// The record of egress by name: metrics, logs, Events.
			EgressDNS: egress,
			Tokens:    []string{env.AgentToken},
			// Users who reach the agent themselves (kubectl playground
			// exec with this kubeconfig's token) are recorded; the
			// gateway's calls are in its own records.
			Audit:   agentTrail,
			Workers: opts.Workers,
			Logger:  opts.Logger.WithName("agent"),

			FacultyHostPathPrefixes: opts.FacultyHostPathPrefixes,
		})
	})
	progress("host agent running as node %s (%s backends, state in %s)", env.Node, names, nodeDir)

	gw, err := mcpgateway.New(mcpgateway.Options{
		Config:     cp.Config,
		Audit:      gatewayTrail,
		AgentToken: func() (string, error) { return env.AgentToken, nil },
		// The agent shares this process and loopback: cleartext HTTP/2.
		AgentCleartext: true,
		Logger:         opts.Logger.WithName("gateway"),
	})
	if err != nil {
		return nil, err
	}
	gwln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("the MCP gateway's address (--listen): %w", err)
	}
	goRun("gateway", func(ctx context.Context) error { return gw.Run(ctx, gwln) })
	env.Endpoint = "http://" + gwln.Addr().String() + "/mcp"
	progress("MCP gateway listening on %s (audit trail in %s)", env.Endpoint, env.AuditLog)

	if opts.MetricsListen != "" {
		mln, err := net.Listen("tcp", opts.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("the metrics' address (--metrics-listen): %w", err)
		}
		metricsLog := opts.Logger.WithName("metrics")
		goRun("metrics", func(ctx context.Context) error { return mcpgateway.ServeMetrics(ctx, mln, metricsLog) })
		env.Metrics = "http://" + mln.Addr().String() + "/metrics"
		progress("serving the manager's, the agent's and the gateway's metrics at %s", env.Metrics)
	}

	// The kubeconfig says this is playground-dev (package devconfig): the
	// kubectl plugin then reaches this agent on loopback without flags,
	// and finds the endpoint and the audit trail.
	env.Kubeconfig = filepath.Join(state, "kubeconfig")
	kc := cp.TokenKubeconfig(adminToken)
	if err := devconfig.Add(kc, devconfig.Extension{MCPEndpoint: env.Endpoint, AuditLog: env.AuditLog, Metrics: env.Metrics}); err != nil {
		return nil, err
	}
	if err := clientcmd.WriteToFile(*kc, env.Kubeconfig); err != nil {
		return nil, err
	}

	objs, err := manifest.ReadKustomization(opts.Samples)
	if err != nil {
		return nil, fmt.Errorf("reading the samples: %w", err)
	}
	if err := manifest.Apply(ctx, c, opts.Namespace, objs); err != nil {
		return nil, err
	}
	progress("applied %d sample objects from %s to namespace %s", len(objs), opts.Samples, opts.Namespace)

	progress("waiting for tenant %s/%s to be Ready", opts.Namespace, opts.Tenant)
	if env.Tenant, err = waitTenant(ctx, c, client.ObjectKey{Namespace: opts.Namespace, Name: opts.Tenant}, env.AgentEndpoint, env.errs, progress); err != nil {
		return nil, err
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.Tenant.Namespace, Name: env.Tenant.Status.Credentials.SecretRef.Name}, &secret); err != nil {
		return nil, err
	}
	env.Token = string(secret.Data[playgroundv1alpha1.CredentialTokenKey])
	// The gateway's view trails the API server: announce the endpoint only
	// once the gateway itself would serve this token.
	if err := waitServing(ctx, gw, env.Token, env.errs, progress); err != nil {
		return nil, err
	}
	return env, nil
}

// waitServing waits until the gateway would serve a tool call made with
// token (Gateway.Serves), printing the reason while it waits.
func waitServing(ctx context.Context, gw *mcpgateway.Gateway, token string, errs <-chan error, progress func(string, ...any)) error {
	last, err := waitUntil(ctx, 50*time.Millisecond, time.Minute, errs, func() (bool, string, error) {
		if err := gw.Serves(token); err != nil {
			return false, "waiting for the gateway: " + err.Error(), nil //nolint:nilerr // not serving yet: wait on
		}
		return true, "", nil
	}, progress)
	if errors.Is(err, errWaitTimedOut) {
		return fmt.Errorf("the MCP gateway does not serve the sample tenant after a minute: %s", last)
	}
	return err
}

// waitTenant waits until the tenant is Ready and its sandbox is served by
// this run's agent (a previous run's Ready stays in etcd until the manager
// and the agent catch up), printing the reason while it waits.
func waitTenant(ctx context.Context, c client.Client, key client.ObjectKey, agentEndpoint string, errs <-chan error, progress func(string, ...any)) (*playgroundv1alpha1.Tenant, error) {
	var t playgroundv1alpha1.Tenant
	last, err := waitUntil(ctx, 200*time.Millisecond, 3*time.Minute, errs, func() (bool, string, error) {
		if err := c.Get(ctx, key, &t); client.IgnoreNotFound(err) != nil {
			return false, "", err
		}
		ready := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.ReadyCondition)
		var sbx playgroundv1alpha1.Sandbox
		if err := c.Get(ctx, key, &sbx); client.IgnoreNotFound(err) != nil {
			return false, "", err
		}
		if ready != nil && ready.Status == metav1.ConditionTrue && t.Status.Credentials.SecretRef != nil &&
			sbx.Status.Endpoint == agentEndpoint && meta.IsStatusConditionTrue(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition) {
			return true, "", nil
		}
		if ready == nil {
			return false, "", nil
		}
		return false, ready.Reason + ": " + ready.Message, nil
	}, progress)
	if errors.Is(err, errWaitTimedOut) {
		return nil, fmt.Errorf("tenant %s is not Ready after 3 minutes: %s", key, last)
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

var errWaitTimedOut = errors.New("timed out")

// waitUntil calls check every interval until it is done or fails, a
// component stops (errs), ctx ends or timeout passes (errWaitTimedOut);
// each new reason check gives for waiting is printed, and the last one is
// returned.
func waitUntil(ctx context.Context, every, timeout time.Duration, errs <-chan error, check func() (done bool, why string, err error), progress func(string, ...any)) (string, error) {
	last := ""
	err := wait.PollUntilContextTimeout(ctx, every, timeout, true, func(context.Context) (bool, error) {
		select {
		case err := <-errs:
			return false, err
		default:
		}
		done, why, err := check()
		if why != "" && why != last {
			last = why
			progress("  %s", why)
		}
		return done, err
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return last, errWaitTimedOut
	}
	return last, err
}

// loadOrCreateToken keeps the agent's API token across runs, in the
// token-file format of a deployment's agent-token Secret.
func loadOrCreateToken(path string) (string, error) {
	if toks, err := tokenfile.Read(path, 32); err == nil && len(toks) > 0 {
		return toks[0], nil
	}
	token := randomHex(32)
	return token, os.WriteFile(path, []byte(token+"\n"), 0o600)
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	raw := make([]byte, n)
	_, _ = rand.Read(raw)
	return hex.EncodeToString(raw)
}

// nodeName is this machine's name as a node name (a DNS label).
func nodeName() string {
	h, _ := os.Hostname()
	h = strings.Trim(regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(h), "-"), "-")
	if h == "" {
		return "local"
	}
	return h
}
