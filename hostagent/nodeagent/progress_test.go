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
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// slowStarts is the test backend whose starts wait until released, as a
// loaded node's do; it records when each start began.
type slowStarts struct {
	*backendtest.Fake
	release chan struct{}

	mu      sync.Mutex
	started map[string]time.Time
}

func (s *slowStarts) Start(ctx context.Context, id string) error {
	s.mu.Lock()
	s.started[id] = time.Now()
	s.mu.Unlock()
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Fake.Start(ctx, id)
}

// waited is how long ago the last of n starts began; 0 until n have.
func (s *slowStarts) waited(n int) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.started) < n {
		return 0
	}
	var last time.Time
	for _, at := range s.started {
		if at.After(last) {
			last = at
		}
	}
	return time.Since(last)
}

// The agent says that a slow first start is under way (Provisioned False,
// reason Provisioning) five seconds into it, unless the Sandbox already
// says it waits for this agent in the manager's words: one report of
// progress per sandbox, not two. Every status write is seen through a
// watch, and the agent's outcome is written after any notice of it.
func TestSlowStartReportsProgressOnce(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "slow-start")
	be := &slowStarts{Fake: backendtest.New("oci", backendtest.Writes()), release: make(chan struct{}), started: map[string]time.Time{}}
	n := startNode(t, "slow-start-a", "", "", func(o *nodeagent.Options) { o.Backends = []backend.Backend{be} })
	ctx := context.Background()

	watcher, err := client.NewWithWatch(cp.Config, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := watcher.Watch(ctx, &playgroundv1alpha1.SandboxList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var (
		mu           sync.Mutex
		noticed, out = map[string]bool{}, map[string]bool{}
	)
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*playgroundv1alpha1.Sandbox)
			if !ok || ev.Type == watch.Error {
				continue
			}
			c := meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ProvisionedCondition)
			mu.Lock()
			switch {
			case c == nil:
			case c.Status == metav1.ConditionFalse && c.Reason == playgroundv1alpha1.ReasonProvisioning:
				noticed[s.Name] = true
			case c.Status == metav1.ConditionTrue:
				out[s.Name] = true
			}
			mu.Unlock()
		}
	}()
	wasNoticed := func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		return noticed[name]
	}
	outcomeSeen := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return out["waiting"] && out["quiet"]
	}

	// "waiting" already holds the manager's Pending status (its grace
	// ended while it queued); "quiet" holds nothing.
	createSandbox(t, ns, "waiting", n.name)
	ready := metav1ac.Condition().WithType(playgroundv1alpha1.ReadyCondition).WithStatus(metav1.ConditionFalse).
		WithReason(playgroundv1alpha1.ReasonProvisioning).WithMessage("Waiting for the agent of node " + n.name + " to provision the sandbox").
		WithObservedGeneration(1).WithLastTransitionTime(metav1.Now())
	g.Expect(k8s.Status().Apply(ctx, playgroundv1alpha1ac.Sandbox("waiting", ns).WithStatus(playgroundv1alpha1ac.SandboxStatus().
		WithPhase(playgroundv1alpha1.SandboxPending).WithObservedGeneration(1).WithConditions(ready)),
		client.FieldOwner(playgroundv1alpha1.SandboxControllerFieldOwner), client.ForceOwnership)).To(Succeed())
	createSandbox(t, ns, "quiet", n.name)

	// Both starts run past the notice's five seconds.
	g.Eventually(func() bool { return wasNoticed("quiet") }).WithTimeout(timeout).WithPolling(100*time.Millisecond).
		Should(BeTrue(), "no notice of a start running for more than five seconds")
	g.Eventually(func() time.Duration { return be.waited(2) }).WithTimeout(timeout).WithPolling(100 * time.Millisecond).
		Should(BeNumerically(">", 6*time.Second))
	close(be.release)

	for _, name := range []string{"waiting", "quiet"} {
		waitProvisioned(t, ns, name)
	}
	// A notice is written before the outcome, and the watch delivers in
	// order: once it has shown both outcomes it has shown every notice.
	g.Eventually(outcomeSeen).WithTimeout(timeout).Should(BeTrue())
	g.Expect(wasNoticed("waiting")).To(BeFalse(), "the agent wrote a notice over the manager's report of the same wait")
}
