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

package nodeagent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent"
)

// The Running condition. Whether a sandbox's processes run is the agent's
// to say: it puts them to sleep for idleness, freezes them for a usage
// limit and suspends them for the spec (hostagent/runtime.go). Each change
// of that state is reported in the Sandbox's Running condition, with an
// Event and a log line, by the agent alone: the manager's phase and Ready
// do not follow it, so a sleep or a wake costs one status write. A storm of
// them (a sandbox that sleeps and wakes again and again, a limit that
// freezes and thaws it) is paced: a change is written at once if the
// sandbox's state was last written --state-write-interval ago or more,
// else when that interval has passed, the latest state winning; a state
// that went back to what the status says meanwhile costs no write at all.
// A write the agent makes anyway (its handles, its usage) carries the
// latest state.

// DefaultStateWriteInterval is Options.StateWriteInterval's default.
const DefaultStateWriteInterval = 10 * time.Second

// statePacer paces the writes of sandboxes' Running condition: at most one
// per interval per sandbox, by UID. It holds an entry per Sandbox of the
// node, forgotten when the Sandbox is deleted.
type statePacer struct {
	interval time.Duration
	queue    chan<- event.GenericEvent

	mu     sync.Mutex
	last   map[types.UID]time.Time
	timers map[types.UID]*time.Timer
}

func newStatePacer(interval time.Duration, queue chan<- event.GenericEvent) *statePacer {
	return &statePacer{interval: interval, queue: queue, last: map[types.UID]time.Time{}, timers: map[types.UID]*time.Timer{}}
}

// wait is how long a change of sbx's state waits before it may be
// written: zero when it may now.
func (p *statePacer) wait(uid types.UID, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[uid]
	if !ok {
		return 0
	}
	return max(last.Add(p.interval).Sub(now), 0)
}

// later queues sbx again once its wait is over, so that its latest state
// is written then; once however many changes come meanwhile.
func (p *statePacer) later(sbx *playgroundv1alpha1.Sandbox, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.timers[sbx.UID]; ok {
		return
	}
	key := &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: sbx.Namespace, Name: sbx.Name, UID: sbx.UID}}
	p.timers[sbx.UID] = time.AfterFunc(wait, func() {
		p.mu.Lock()
		delete(p.timers, key.UID)
		p.mu.Unlock()
		select {
		case p.queue <- event.GenericEvent{Object: key}:
		default: // full: the resync finds the state it did not write
		}
	})
}

// wrote records a write of sbx's state at now.
func (p *statePacer) wrote(uid types.UID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[uid] = now
}

// forget drops what the pacer holds of a deleted Sandbox.
func (p *statePacer) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, uid)
	if t, ok := p.timers[uid]; ok {
		t.Stop()
		delete(p.timers, uid)
	}
}

// watchStates queues the Sandbox of each sandbox whose runtime state the
// kernel says changed, until ctx ends: its reconcile reports it.
func (r *sandboxReconciler) watchStates(ctx context.Context, changes <-chan string) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case id := <-changes:
			owner, ok := r.ids.Owner(id)
			if !ok {
				continue // a warm sandbox, or one deleted meanwhile
			}
			ns, name, _ := strings.Cut(owner, "/")
			select {
			case r.queue <- event.GenericEvent{Object: &playgroundv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}:
			default: // full: the resync finds it
			}
		}
	}
}

// running is the Running condition of sandbox id, given the Provisioned
// condition the agent reports with it: the sandbox's runtime state with
// what it means and what the next call does; nil while the agent does not
// serve the sandbox (being provisioned, failing, being destroyed), which
// its phase and Provisioned say. Its message holds no figure that moves
// while the state holds, nor the time of a state an agent's restart
// starts anew (Running, a freeze kept): a status write each.
func (r *sandboxReconciler) running(id string, provStatus metav1.ConditionStatus, provReason string) *metav1.Condition {
	if provStatus != metav1.ConditionTrue && provReason != playgroundv1alpha1.ReasonSuspended {
		return nil
	}
	rt, ok := r.agent.RuntimeOf(id)
	if !ok {
		return nil
	}
	at := rt.Since.UTC().Truncate(time.Second).Format(time.RFC3339)
	idle := fmt.Sprintf("after %s without calls (spec.idleSuspend)", rt.Idle.After)
	c := &metav1.Condition{Type: playgroundv1alpha1.RunningCondition, Status: metav1.ConditionFalse, Reason: string(rt.State)}
	switch rt.State {
	case hostagent.RuntimeRunning:
		c.Status, c.Reason = metav1.ConditionTrue, playgroundv1alpha1.ReasonRunning
		c.Message = fmt.Sprintf("Its processes run on node %s", r.node)
	case hostagent.RuntimeIdlePaused:
		c.Reason = playgroundv1alpha1.ReasonIdlePaused
		c.Message = fmt.Sprintf("Paused at %s %s, mode Pause: its processes are frozen on node %s, their memory kept in RAM; the next call thaws it in milliseconds and is served", at, idle, r.node)
	case hostagent.RuntimeIdleSuspended:
		c.Reason = playgroundv1alpha1.ReasonIdleSuspended
		c.Message = fmt.Sprintf("Suspended at %s %s with its memory: no process of it runs, its processes and jobs are saved on node %s's disk; the next call restores them where they were, then is served", at, idle, r.node)
	case hostagent.RuntimeIdleStopped:
		c.Reason = playgroundv1alpha1.ReasonIdleStopped
		c.Message = fmt.Sprintf("Suspended at %s %s without its memory (its backend on node %s keeps none): its processes were stopped and its files kept; the next call starts it again over its files, then is served", at, idle, r.node)
	case hostagent.RuntimeWaking:
		c.Reason = playgroundv1alpha1.ReasonWaking
		how := "started again over its files"
		if rt.KeptMemory {
			how = "restored with its memory"
		}
		c.Message = fmt.Sprintf("Waking since %s from its idle suspension: a call waits while it is %s on node %s", at, how, r.node)
	case hostagent.RuntimeFrozen:
		c.Reason = playgroundv1alpha1.ReasonCPULimitReached
		c.Message = "Frozen for its usage limit (condition UsageLimited): its processes and jobs are kept, using no CPU, and the calls that run something in it or reach it are refused"
		if acc, ok := r.usage.UsageOf(id); ok && !acc.ExhaustedUntil.IsZero() {
			c.Message += " until " + acc.ExhaustedUntil.UTC().Format(time.RFC3339) + ", when its period resets and it thaws"
		}
		c.Message += "; raising or removing spec.usageLimits thaws it now"
	case hostagent.RuntimeSuspended:
		c.Reason = playgroundv1alpha1.ReasonSuspended
		c.Message = fmt.Sprintf("Suspended through spec.suspended with its memory: no process of it runs, its processes and jobs are saved on node %s's disk; calls are refused until spec.suspended is cleared, which restores them where they were", r.node)
	case hostagent.RuntimeStopped:
		c.Reason = playgroundv1alpha1.ReasonStopped
		c.Message = fmt.Sprintf("Stopped through spec.suspended: its processes ended and its files are kept on node %s; calls are refused until spec.suspended is cleared, which starts it again over its files", r.node)
	default:
		return nil
	}
	return c
}

// sameRunning says whether two Running conditions (nil: none) say the
// same.
func sameRunning(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return (a == nil) == (b == nil)
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// reportState records a written change of sbx's Running condition (was
// from, is to) in an Event. Its first report (the sandbox's
// provisioning), its end, and a change that comes with one of Provisioned
// (a suspension of the spec, its end: said by their own Events) are not
// recorded again.
func (r *sandboxReconciler) reportState(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, from, to *metav1.Condition, provChanged bool) {
	if from == nil || to == nil || provChanged {
		return
	}
	action, kind := "Wake", corev1.EventTypeNormal
	switch to.Reason {
	case playgroundv1alpha1.ReasonIdlePaused, playgroundv1alpha1.ReasonIdleSuspended, playgroundv1alpha1.ReasonIdleStopped:
		action = "Sleep"
	case playgroundv1alpha1.ReasonCPULimitReached:
		action, kind = "Freeze", corev1.EventTypeWarning
	case playgroundv1alpha1.ReasonRunning:
		if from.Reason == playgroundv1alpha1.ReasonCPULimitReached {
			action = "Thaw"
		}
	}
	// The kernel logs each change as it happens ("Sandbox state changed");
	// this is its report, which pacing may have merged with others.
	ctrl.LoggerFrom(ctx).V(1).Info("Reported the sandbox's state", "sandbox", klog.KObj(sbx), "id", sbx.Status.SandboxID, "from", from.Reason, "to", to.Reason)
	r.recorder.Eventf(sbx, nil, kind, to.Reason, action, "%s", to.Message)
}
