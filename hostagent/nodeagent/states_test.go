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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/jobs"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// offsetClock is the real clock moved forward by what the test adds: an
// idle period passes at once, and timers run in real time.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *offsetClock) AfterFunc(d time.Duration, f func()) jobs.Timer { return time.AfterFunc(d, f) }

func (c *offsetClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// stopStart is the test backend (it keeps no memory: an idle sandbox is
// stopped, and started again by its wake) that counts its stops and
// starts, and whose next start waits, once armed, for the test.
type stopStart struct {
	*backendtest.Fake

	mu            sync.Mutex
	stops, starts int
	gate          chan struct{}
}

func (b *stopStart) Stop(ctx context.Context, id string) error {
	b.mu.Lock()
	b.stops++
	b.mu.Unlock()
	return b.Fake.Stop(ctx, id)
}

func (b *stopStart) Start(ctx context.Context, id string) error {
	b.mu.Lock()
	b.starts++
	gate := b.gate
	b.gate = nil
	b.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Fake.Start(ctx, id)
}

func (b *stopStart) counts() (stops, starts int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stops, b.starts
}

func (b *stopStart) arm() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gate = make(chan struct{})
	return b.gate
}

// statusWrites records, through a watch, every write of a Sandbox's
// status, in order.
type statusWrites struct {
	mu     sync.Mutex
	writes []playgroundv1alpha1.SandboxStatus
}

func watchStatus(t *testing.T, ns, name string) *statusWrites {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watcher, err := client.NewWithWatch(cp.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &playgroundv1alpha1.SandboxList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	sw := &statusWrites{}
	var last *playgroundv1alpha1.SandboxStatus
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*playgroundv1alpha1.Sandbox)
			if !ok || s.Name != name || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			if last != nil && equality.Semantic.DeepEqual(*last, s.Status) {
				continue // a write of its spec or metadata
			}
			last = s.Status.DeepCopy()
			sw.mu.Lock()
			sw.writes = append(sw.writes, *last)
			sw.mu.Unlock()
		}
	}()
	return sw
}

// since is the status writes after the first n.
func (sw *statusWrites) since(n int) []playgroundv1alpha1.SandboxStatus {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return append([]playgroundv1alpha1.SandboxStatus(nil), sw.writes[min(n, len(sw.writes)):]...)
}

func (sw *statusWrites) count() int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.writes)
}

func runningOf(s playgroundv1alpha1.SandboxStatus) *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, playgroundv1alpha1.RunningCondition)
}

// waitRunning waits until the watched status says reason in its Running
// condition, and returns that condition.
func (sw *statusWrites) waitRunning(t *testing.T, reason string, within time.Duration) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		all := sw.since(0)
		g.Expect(all).NotTo(BeEmpty())
		c = runningOf(all[len(all)-1])
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason))
	}).WithTimeout(within).WithPolling(50 * time.Millisecond).Should(Succeed())
	return c
}

// TestRuntimeStateWrites: each change of a sandbox's runtime state is in
// its status (the Running condition, with what it means and what the next
// call does) and an Event, in one status write of the agent's; a wake
// that takes long is Waking meanwhile; and a storm of sleeps and wakes
// costs at most one status write per --state-write-interval, the latest
// state winning. Every status write is seen through a watch. (The backend
// is the test double, which stops a sandbox for idleness and starts it
// again, at once: what is measured is the API server's side; runc's and
// gVisor's states are TestIdlePause's and TestIdleSuspendGVisor's.)
func TestRuntimeStateWrites(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "state-writes")
	clock := &offsetClock{}
	const interval = 3 * time.Second
	be := &stopStart{Fake: backendtest.New("oci", backendtest.Writes(backendtest.Piece{Stream: backend.Stdout, Data: []byte("ok")}))}
	n := startNode(t, "state-writes-a", "", "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{be}
		o.Agent.Clock = clock
		o.Agent.WakeNotice = 200 * time.Millisecond
		o.StateWriteInterval = interval
	})
	createSandbox(t, ns, "ws", n.name, func(s *playgroundv1alpha1.Sandbox) {
		// Idle after a minute of the test's clock, which the test moves: a
		// loaded machine's own minute of waits does not make it idle.
		s.Spec.IdleSuspend = &playgroundv1alpha1.IdleSuspend{After: metav1.Duration{Duration: time.Minute}}
	})
	writes := watchStatus(t, ns, "ws")
	s := openSession(t, n, ns, "ws")
	c := writes.waitRunning(t, playgroundv1alpha1.ReasonRunning, timeout)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Message).To(ContainSubstring("run on node " + n.name))
	// The session's handle is in status before the clock moves.
	g.Eventually(func() int32 { all := writes.since(0); return all[len(all)-1].OpenHandles }).WithTimeout(timeout).Should(BeEquivalentTo(1))
	time.Sleep(interval) // no state written within the interval before the sleep

	// A sleep: one status write, which says it, and an Event.
	before := writes.count()
	clock.advance(61 * time.Second)
	c = writes.waitRunning(t, playgroundv1alpha1.ReasonIdleStopped, timeout)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Message).To(SatisfyAll(ContainSubstring("after 1m0s without calls"), ContainSubstring("the next call starts it again over its files")))
	g.Expect(writes.since(before)).To(HaveLen(1), "the sleep's status writes")
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonIdleStopped).Action).To(Equal("Sleep"))

	// Its wake, within the interval after the sleep's write: served at
	// once, written when the interval has passed, in one write.
	before = writes.count()
	woken := time.Now()
	g.Expect(s.exec(t, "echo")).To(Equal("ok"))
	writes.waitRunning(t, playgroundv1alpha1.ReasonRunning, timeout)
	g.Expect(writes.since(before)).To(HaveLen(1), "the wake's status writes")
	t.Logf("the wake was written %s after it", time.Since(woken))
	g.Expect(waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonRunning).Action).To(Equal("Wake"))

	// A wake that takes long is Waking meanwhile, and Running after.
	clock.advance(61 * time.Second)
	writes.waitRunning(t, playgroundv1alpha1.ReasonIdleStopped, timeout)
	gate := be.arm()
	served := make(chan error, 1)
	go func() {
		_, err := s.client.Exec(context.Background(), s.tenant, s.handle, agentapi.ExecRequest{Command: "echo"})
		served <- err
	}()
	c = writes.waitRunning(t, playgroundv1alpha1.ReasonWaking, timeout)
	g.Expect(c.Message).To(ContainSubstring("a call waits while it is started again over its files"))
	close(gate)
	g.Expect(<-served).To(Succeed())
	writes.waitRunning(t, playgroundv1alpha1.ReasonRunning, timeout)
	waitEvent(t, ns, "ws", corev1.EventTypeNormal, playgroundv1alpha1.ReasonWaking)

	// A storm: it sleeps and is woken again and again, faster than the
	// interval. Each change is the agent's; the status takes the latest
	// at most once per interval, and ends Running.
	time.Sleep(interval)
	before = writes.count()
	stops0, starts0 := be.counts()
	start := time.Now()
	const cycles = 8
	for i := range cycles {
		clock.advance(61 * time.Second)
		g.Eventually(func() int { stops, _ := be.counts(); return stops }).WithTimeout(timeout).WithPolling(20*time.Millisecond).
			Should(Equal(stops0+i+1), "sleep %d", i+1)
		g.Expect(s.exec(t, "echo")).To(Equal("ok"))
	}
	elapsed := time.Since(start)
	stops, starts := be.counts()
	g.Expect(stops - stops0).To(Equal(cycles))
	g.Expect(starts - starts0).To(Equal(cycles))
	// The latest state wins: the last write says Running (a paced write
	// may still be due: on a loaded machine it comes later than its
	// interval), and no write follows it that says otherwise.
	last := func() string { return runningOf(writes.since(0)[writes.count()-1]).Reason }
	g.Eventually(last).WithTimeout(timeout).WithPolling(50*time.Millisecond).Should(Equal(playgroundv1alpha1.ReasonRunning), "the latest state wins")
	time.Sleep(interval)
	g.Expect(last()).To(Equal(playgroundv1alpha1.ReasonRunning), "a write after the latest state's")
	storm := writes.since(before)
	bound := int(elapsed/interval) + 2
	t.Logf("%d sleeps and %d wakes in %s: %d status writes (at most %d; %d without pacing)", cycles, cycles, elapsed.Round(time.Millisecond), len(storm), bound, 2*cycles)
	g.Expect(len(storm)).To(BeNumerically("<=", bound), "status writes during the storm")
	g.Expect(bound).To(BeNumerically("<", 2*cycles), "the storm is faster than the pacing, or it proves nothing")
}
