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

package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/rbactest"
)

// The controller tests run against one real kube-apiserver and etcd with
// the CRDs installed, and one manager running every reconciler of
// controllers.Setup in this process, as `playground manager` does, with the
// rights of its generated RBAC (config/rbac/manager) and no more: the API
// server refuses anything else it tries. No node agent runs: tests that
// need one write its Lease and its part of a Sandbox's status themselves.
//
// Helpers for every test file of the package:
//   - k8sClient: an uncached administrator's client (reads see the API
//     server, not the manager's cache);
//   - newNamespace(t): a fresh namespace for one test;
//   - eventually(t, f): Gomega's Eventually with the suite's timeouts;
//   - restartManager(t): stops the manager and starts a new one on the same
//     API server. Tests that call it must not call t.Parallel();
//   - managerLogs(): everything the managers logged so far.
var (
	cp         *controlplane.ControlPlane
	restConfig *rest.Config
	// managerConfig acts as the manager's ServiceAccount.
	managerConfig *rest.Config
	testScheme    *runtime.Scheme
	k8sClient     client.Client

	mgrMu sync.Mutex
	mgr   *testManager
)

// Timeouts of eventually: generous, as two cores are shared with builds.
const (
	eventuallyTimeout = 30 * time.Second
	eventuallyPolling = 100 * time.Millisecond
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(testLogger())
	os.Exit(controlplane.RunTests(m, func(c *controlplane.ControlPlane) (func(), error) {
		cp, restConfig, k8sClient, testScheme = c, c.Config, c.Client, c.Client.Scheme()
		ctx := context.Background()
		if err := cp.CreateNamespaces(ctx, agentlease.DefaultNamespace); err != nil {
			return nil, err
		}
		var err error
		if managerConfig, err = rbactest.Grant(ctx, k8sClient, restConfig, "manager", rbactest.ServiceAccountUser("manager"), rbactest.Options{}); err != nil {
			return nil, err
		}
		managerConfig.Wrap(managerRequests.wrap)
		if mgr, err = startManager(); err != nil {
			return nil, err
		}
		return func() {
			mgrMu.Lock()
			defer mgrMu.Unlock()
			if err := mgr.stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the manager:", err)
			}
		}, nil
	}))
}

// managerRequests records every request the managers make to the API
// server, for tests that count them.
var managerRequests requestLog

// requestLog records requests as "VERB path".
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, req.Method+" "+req.URL.Path)
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// matching returns the requests recorded so far whose "VERB path" holds
// every one of parts.
func (l *requestLog) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(r, p) }) {
			out = append(out, r)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// testManager is a controller-runtime manager running in a goroutine that
// stop ends and waits for.
type testManager struct {
	cancel context.CancelFunc
	done   chan error
}

// startManager starts a manager with every reconciler, as `playground
// manager` runs it, and waits until its caches have synced.
func startManager() (*testManager, error) {
	// A restarted manager registers the same controller names again.
	// The test registries (internal/registrytest) serve cleartext HTTP on
	// loopback.
	m, err := NewManager(managerConfig, ManagerOptions{SkipNameValidation: true, Options: Options{Images: ImageOptions{
		PlainHTTP: []string{"127.0.0.1"},
		// A failed resolution is tried again within seconds, not minutes.
		RetryBase: 500 * time.Millisecond, RetryCap: 2 * time.Second,
	}}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	tm := &testManager{cancel: cancel, done: make(chan error, 1)}
	go func() { tm.done <- m.Start(ctx) }()
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if !m.GetCache().WaitForCacheSync(sctx) {
		_ = tm.stop()
		return nil, errors.New("the manager's caches did not sync")
	}
	return tm, nil
}

func (tm *testManager) stop() error {
	tm.cancel()
	select {
	case err := <-tm.done:
		return err
	case <-time.After(time.Minute):
		return errors.New("the manager did not stop within a minute")
	}
}

// restartManager stops the running manager and starts a new one on the
// same API server, as a rollout of the manager's Deployment would; each
// whileStopped runs in between (what a previous version left behind).
func restartManager(t *testing.T, whileStopped ...func()) {
	t.Helper()
	mgrMu.Lock()
	defer mgrMu.Unlock()
	if err := mgr.stop(); err != nil {
		t.Fatalf("stopping the manager: %v", err)
	}
	for _, f := range whileStopped {
		f()
	}
	var err error
	if mgr, err = startManager(); err != nil {
		t.Fatalf("starting a new manager: %v", err)
	}
}

// newNamespace creates a namespace for one test and returns its name. (The
// test control plane runs no namespace controller, so its objects stay
// after the test; the names never collide.)
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}

// eventually asserts that f passes within the suite's timeout.
func eventually(t *testing.T, f func(g Gomega), msgAndArgs ...any) {
	t.Helper()
	NewWithT(t).Eventually(f).WithTimeout(eventuallyTimeout).WithPolling(eventuallyPolling).Should(Succeed(), msgAndArgs...)
}

// consistently asserts that f keeps passing for d.
func consistently(t *testing.T, d time.Duration, f func(g Gomega), msgAndArgs ...any) {
	t.Helper()
	NewWithT(t).Consistently(f).WithTimeout(d).WithPolling(eventuallyPolling).Should(Succeed(), msgAndArgs...)
}

// The managers' logs are kept (up to logLimit) so that tests can check
// what never appears in them; PLAYGROUND_TEST_LOGS=1 also prints them.
const logLimit = 64 << 20

var (
	logMu  sync.Mutex
	logBuf bytes.Buffer
)

func testLogger() logr.Logger {
	echo := os.Getenv("PLAYGROUND_TEST_LOGS") != ""
	return funcr.New(func(prefix, args string) {
		line := prefix + " " + args + "\n"
		logMu.Lock()
		if logBuf.Len() < logLimit {
			logBuf.WriteString(line)
		}
		logMu.Unlock()
		if echo {
			fmt.Fprint(os.Stderr, line)
		}
	}, funcr.Options{Verbosity: 5})
}

// managerLogs returns what the managers logged so far.
func managerLogs() string {
	logMu.Lock()
	defer logMu.Unlock()
	return logBuf.String()
}
