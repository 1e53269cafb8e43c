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

// Package e2e holds the user stories of the whole system on one machine: a
// real kube-apiserver and etcd, the manager's controllers, and host agents
// as distinct nodes (each its own node name and state directory) running
// real runc sandboxes.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/egressdns"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/mcpgateway"
)

// agentToken is the bearer the test presents to agents, as the gateway would.
const agentToken = "e2e-agent-token-0123456789"

// leaseDuration is short so that a stopped agent is noticed quickly.
const leaseDuration = 3 * time.Second

var (
	cp        *controlplane.ControlPlane
	k8sClient client.Client
	// managerConfig acts as the manager's ServiceAccount, with only the
	// rights of its generated RBAC.
	managerConfig *rest.Config
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: skipped, real sandboxes need root")
		os.Exit(0)
	}
	ctrl.SetLogger(logr.Discard())
	os.Exit(controlplane.RunTests(m, func(c *controlplane.ControlPlane) (func(), error) {
		cp, k8sClient = c, c.Client
		ctx := context.Background()
		if err := cp.CreateNamespaces(ctx, agentlease.DefaultNamespace); err != nil {
			return nil, err
		}
		var err error
		managerConfig, err = rbactest.Grant(ctx, k8sClient, cp.Config, "manager", rbactest.ServiceAccountUser("manager"), rbactest.Options{})
		return nil, err
	}))
}

// component is a goroutine-run part of the system that a test can stop.
type component struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// Stop ends the component and waits for it; later calls do nothing.
func (c *component) Stop(t *testing.T) {
	t.Helper()
	c.once.Do(func() {
		c.cancel()
		select {
		case err := <-c.done:
			if err != nil && err != context.Canceled {
				t.Errorf("stopping: %v", err)
			}
		case <-time.After(time.Minute):
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			t.Error("a component did not stop within a minute")
		}
	})
}

// startManager runs the manager's controllers, as the manager's
// ServiceAccount, until stopped or the test ends.
func startManager(t *testing.T, mutate ...func(*controllers.Options)) *component {
	t.Helper()
	return startManagerLogged(t, logr.Logger{}, mutate...)
}

// startManagerLogged is startManager with the manager's logs to log.
func startManagerLogged(t *testing.T, log logr.Logger, mutate ...func(*controllers.Options)) *component {
	t.Helper()
	opts := controllers.ManagerOptions{SkipNameValidation: true, Logger: log}
	// It reaches the suite's agents (signing keys, brokered egress
	// credentials) with their shared token: in cleartext on loopback, or
	// over TLS verified against the CA it publishes (startTLSNode).
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ca := mcpgateway.WatchAgentCA(ctx, kubernetes.NewForConfigOrDie(managerConfig), agentlease.DefaultNamespace, logr.Discard())
	agents, err := mcpgateway.NewAgentClients(nil, mcpgateway.StaticToken(agentToken), ca, true)
	if err != nil {
		t.Fatal(err)
	}
	opts.Agents = agents
	for _, m := range mutate {
		m(&opts.Options)
	}
	mgr, err := controllers.NewManager(managerConfig, opts)
	if err != nil {
		t.Fatal(err)
	}
	return goRun(t, mgr.Start)
}

func goRun(t *testing.T, fn func(context.Context) error) *component {
	ctx, cancel := context.WithCancel(context.Background())
	c := &component{cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- fn(ctx) }()
	t.Cleanup(func() { c.Stop(t) })
	return c
}

// node is one host agent: a node name, a state directory, an endpoint.
type node struct {
	name, stateDir, endpoint string
	labels                   map[string]string
	agent                    *component
	// config, when set, is who the agent acts as (default: the
	// administrator); tls serves its API with a certificate from the
	// manager's signer.
	config *rest.Config
	tls    bool
	// hostPathPrefixes are the directories its FacultyBundles' host
	// paths may lie under.
	hostPathPrefixes []string
	// snapshotsPerSandbox, when set, bounds the snapshots it keeps of a
	// sandbox.
	snapshotsPerSandbox int
	// backends, when set, are its backends over stateDir, for one start
	// (the agent closes them when it stops); default: a new oci backend
	// with runc alone, without network, at each start.
	backends []backend.Backend
	// tracer, when set, makes its spans.
	tracer trace.TracerProvider
	// usageInterval, when set, is how often it reads its sandboxes'
	// usage.
	usageInterval time.Duration
	// stateWriteInterval, when set, paces the writes of its sandboxes'
	// runtime states.
	stateWriteInterval time.Duration
	// egressDNS, when set, is the hub of its resolvers' decisions, as
	// `playground agent` always has: the agent then records egress
	// (its counters, logs and Events).
	egressDNS *egressdns.Hub
	// imageCredentials, when set, is its kernel's pull-credential
	// service, for one start (a new agent process starts with none).
	imageCredentials *hostagent.ImageCredentials
	// images, when set, is its image store.
	images nodeagent.ImageStore
	// logger, when set, receives its logs.
	logger logr.Logger
}

// startNode runs an agent for n until stopped or the test ends.
func startNode(t *testing.T, n *node) {
	t.Helper()
	ocitest.Require(t)
	if n.stateDir == "" {
		n.stateDir = ocitest.StateDir(t)
	}
	addr := "127.0.0.1:0"
	if n.endpoint != "" {
		addr = strings.TrimPrefix(strings.TrimPrefix(n.endpoint, "http://"), "https://")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http://"
	if n.tls {
		scheme = "https://"
	}
	n.endpoint = scheme + ln.Addr().String()
	backends := n.backends
	if backends == nil {
		backends = []backend.Backend{ociBackend(t, n.stateDir)}
	}
	cfg := cp.Config
	if n.config != nil {
		cfg = n.config
	}
	opts := nodeagent.Options{
		Config:         cfg,
		StateDir:       n.stateDir,
		TLSFromCSR:     n.tls,
		NodeName:       n.name,
		Backends:       backends,
		Listener:       ln,
		Tokens:         []string{agentToken},
		LeaseDuration:  leaseDuration,
		Labels:         n.labels,
		ResyncInterval: time.Second,

		FacultyHostPathPrefixes: n.hostPathPrefixes,
		SnapshotsPerSandbox:     n.snapshotsPerSandbox,
		EgressDNS:               n.egressDNS,
	}
	opts.Agent.Tracer = n.tracer
	opts.Agent.ImageCredentials = n.imageCredentials
	opts.Images = n.images
	opts.Logger = n.logger
	opts.UsageInterval = n.usageInterval
	opts.StateWriteInterval = n.stateWriteInterval
	// The node leaves the cluster with its test, as an operator removes a
	// decommissioned node's registration: otherwise the next tests would
	// see an agent that stopped renewing (the pile commands ask every
	// registered agent, and say which could not be asked). Cleanups run
	// last first: this one after the agent's stop.
	t.Cleanup(func() {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(n.name)}}
		if err := k8sClient.Delete(context.Background(), lease); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing node %s's registration: %v", n.name, err)
		}
	})
	n.agent = goRun(t, func(ctx context.Context) error { return nodeagent.Run(ctx, opts) })
}

// runcContainers lists the containers runc runs for a node.
func runcContainers(t *testing.T, n *node) string {
	t.Helper()
	out, err := exec.Command("runc", "--root", filepath.Join(n.stateDir, "runc"), "list", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("runc list: %v\n%s", err, out)
	}
	return string(out)
}

// ociBackend is the oci backend of a node over stateDir, as cmd builds it.
func ociBackend(t *testing.T, stateDir string) backend.Backend {
	t.Helper()
	be, err := oci.New(oci.Options{StateDir: stateDir, GuestBinary: ocitest.GuestBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	return be
}
