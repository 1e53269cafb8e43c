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

package nodeagent_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/rbactest"
)

// The agents under test run in this process, each a node of its own (a
// node name and a state directory), against one real kube-apiserver and
// etcd. No manager runs: the tests bind Sandboxes themselves, as the
// binder would.

const (
	token         = "gateway-token-for-nodeagent-tests"
	leaseDuration = 3 * time.Second
	// timeout bounds the waits for what must come: generous, as a QEMU
	// guest restarted under TCG on a loaded machine takes more than 30 s.
	timeout = 90 * time.Second
)

var (
	cp          *controlplane.ControlPlane
	k8s         client.Client
	agentConfig *rest.Config
	log         logr.Logger
)

func TestMain(m *testing.M) {
	log = logr.Discard()
	if os.Getenv("PG_TEST_LOG") != "" {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
	}
	ctrl.SetLogger(log)
	os.Exit(controlplane.RunTests(m, func(c *controlplane.ControlPlane) (func(), error) {
		cp, k8s = c, c.Client
		if err := cp.CreateNamespaces(context.Background(), agentlease.DefaultNamespace); err != nil {
			return nil, err
		}
		var err error
		agentConfig, err = leastPrivilege()
		return nil, err
	}))
}

// agentUser is who the agents under test are: the API server authorises
// them by the generated RBAC (config/rbac/agent) only.
const agentUser = "system:serviceaccount:playground-system:playground-agent"

// leastPrivilege installs the agent's generated roles, binds them to
// agentUser, and returns a configuration that acts as agentUser.
func leastPrivilege() (*rest.Config, error) {
	return rbactest.Grant(context.Background(), k8s, cp.Config, "agent", agentUser, rbactest.Options{})
}

// node is one running agent.
type node struct {
	name, stateDir, endpoint string
	backend                  *oci.Backend
	client                   *agentapi.Client
	stop                     func()
}

// startNode runs an agent for the node name over stateDir (a new one when
// empty), serving on addr (any loopback port when empty), until stop or
// the end of the test. Each mutate adjusts the agent's options.
func startNode(t *testing.T, name, stateDir, addr string, mutate ...func(*nodeagent.Options)) *node {
	t.Helper()
	ocitest.Require(t)
	if stateDir == "" {
		stateDir = ocitest.StateDir(t)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, stateDir: stateDir, endpoint: "http://" + ln.Addr().String(), backend: ocitest.New(t, stateDir)}
	if n.client, err = agentapi.NewClient(n.endpoint, token, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := nodeagent.Options{
		Config:         rbactest.OnNode(agentConfig, name),
		NodeName:       name,
		StateDir:       stateDir,
		Backends:       []backend.Backend{n.backend},
		Listener:       ln,
		Tokens:         []string{token},
		LeaseDuration:  leaseDuration,
		Labels:         map[string]string{"playground.dev/test-node": name},
		Logger:         log.WithName(name),
		ShutdownGrace:  5 * time.Second,
		ResyncInterval: 200 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&opts)
	}
	go func() { done <- nodeagent.Run(ctx, opts) }()
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent of %s: %v", name, err)
			}
		case <-time.After(timeout):
			t.Errorf("agent of %s did not stop", name)
		}
	}
	t.Cleanup(n.stop)
	return n
}

// containers lists the runc containers of the node.
func (n *node) containers(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("runc", "--root", n.stateDir+"/runc", "list", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("runc list: %v: %s", err, out)
	}
	return strings.Fields(string(out))
}

// idOf is the sandbox ID that the agent reported for the Sandbox.
func idOf(t *testing.T, ns, name string) string {
	t.Helper()
	var sbx playgroundv1alpha1.Sandbox
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sbx); err != nil {
		t.Fatal(err)
	}
	if sbx.Status.SandboxID == "" {
		t.Fatalf("sandbox %s/%s has no ID yet", ns, name)
	}
	return sbx.Status.SandboxID
}

// containerOf is the runc container of the Sandbox's sandbox.
func containerOf(t *testing.T, ns, name string) string { return "pg-" + idOf(t, ns, name) }

func newNamespace(t *testing.T, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// createSandbox creates a Sandbox of the tenant named like it, bound to
// node (unbound when empty).
func createSandbox(t *testing.T, ns, name, node string, mutate ...func(*playgroundv1alpha1.Sandbox)) {
	t.Helper()
	s := &playgroundv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.SandboxSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: name},
			NodeName:  node,
		},
	}
	for _, m := range mutate {
		m(s)
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func getSandbox(g Gomega, ns, name string) *playgroundv1alpha1.Sandbox {
	var s playgroundv1alpha1.Sandbox
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
	return &s
}

func provisioned(s *playgroundv1alpha1.Sandbox) *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
}

// waitProvisioned waits for Provisioned=True on the current generation.
func waitProvisioned(t *testing.T, ns, name string) *playgroundv1alpha1.Sandbox {
	t.Helper()
	var s *playgroundv1alpha1.Sandbox
	NewWithT(t).Eventually(func(g Gomega) {
		s = getSandbox(g, ns, name)
		c := provisioned(s)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(s.Generation))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return s
}

// waitGone waits until the Sandbox no longer exists.
func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &playgroundv1alpha1.Sandbox{})
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Satisfy(apierrors.IsNotFound))
}

// waitEvent waits for an Event about the Sandbox with the reason.
func waitEvent(t *testing.T, ns, name, eventType, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	NewWithT(t).Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == eventType {
				found = e
				return
			}
		}
		g.Expect(list.Items).To(ContainElement(HaveField("Reason", reason)))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return found
}

// updateSandbox changes a Sandbox's spec with mutate, read afresh and
// written again while the agent's status writes (which move its
// resourceVersion too) make the update conflict.
func updateSandbox(t *testing.T, ns, name string, mutate func(*playgroundv1alpha1.Sandbox)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s playgroundv1alpha1.Sandbox
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return err
		}
		mutate(&s)
		return k8s.Update(context.Background(), &s)
	})
	if err != nil {
		t.Fatalf("updating sandbox %s/%s: %v", ns, name, err)
	}
}
