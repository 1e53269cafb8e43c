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
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/scheme"
)

// newClient is a client of Kubernetes' and Playground's kinds that can
// also watch.
func newClient(cfg *rest.Config) (client.WithWatch, error) {
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
}

// readyWatch records when each Tenant of a namespace first turns Ready. It
// watches rather than polls: listing a thousand Tenants every few
// milliseconds would cost the API server more than the system measured.
type readyWatch struct {
	mu      sync.Mutex
	readyAt map[string]time.Time
	err     error
	changed chan struct{}
}

// watchReady starts watching the Tenants of ns; it stops with ctx.
func watchReady(ctx context.Context, cfg *rest.Config, ns string) (*readyWatch, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	rw := &readyWatch{readyAt: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	var list playgroundv1alpha1.TenantList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		rw.observe(&list.Items[i])
	}
	go rw.run(ctx, c, ns, list.ResourceVersion)
	return rw, nil
}

func (rw *readyWatch) run(ctx context.Context, c client.WithWatch, ns, rv string) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, &playgroundv1alpha1.TenantList{}, client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			rw.fail(err)
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rw.fail(fmt.Errorf("watching tenants: %v", ev.Object))
				w.Stop()
				return
			}
			if t, ok := ev.Object.(*playgroundv1alpha1.Tenant); ok {
				rv = t.ResourceVersion
				rw.observe(t)
			}
		}
		w.Stop() // closed by the server: resume where it ended
	}
}

func (rw *readyWatch) observe(t *playgroundv1alpha1.Tenant) {
	if !meta.IsStatusConditionTrue(t.Status.Conditions, playgroundv1alpha1.ReadyCondition) {
		return
	}
	now := time.Now()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if _, seen := rw.readyAt[t.Name]; !seen {
		rw.readyAt[t.Name] = now
		select {
		case rw.changed <- struct{}{}:
		default:
		}
	}
}

func (rw *readyWatch) fail(err error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.err = err
	select {
	case rw.changed <- struct{}{}:
	default:
	}
}

// waitName returns when the Tenant name turned Ready.
func (rw *readyWatch) waitName(ctx context.Context, name string, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		rw.mu.Lock()
		at, ok := rw.readyAt[name]
		err := rw.err
		rw.mu.Unlock()
		switch {
		case ok:
			return at, nil
		case err != nil:
			return time.Time{}, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline:
			return time.Time{}, fmt.Errorf("tenant %s not Ready after %s", name, timeout)
		case <-rw.changed:
		}
	}
}

// wait returns once n Tenants are Ready, with when each turned Ready. Every
// ten seconds it calls progress with the count so far; check may end the
// wait early with an error (a component that died).
func (rw *readyWatch) wait(ctx context.Context, n int, timeout time.Duration, progress func(ready int), check func() error) (map[string]time.Time, error) {
	deadline := time.After(timeout)
	report := time.NewTicker(10 * time.Second)
	defer report.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		rw.mu.Lock()
		ready, err := len(rw.readyAt), rw.err
		rw.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if ready >= n {
			rw.mu.Lock()
			readyAt := maps.Clone(rw.readyAt)
			rw.mu.Unlock()
			return readyAt, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			return nil, fmt.Errorf("%d of %d tenants Ready after %s", ready, n, timeout)
		case <-report.C:
			progress(ready)
		case <-poll.C:
			if err := check(); err != nil {
				return nil, err
			}
		case <-rw.changed:
		}
	}
}

// stages records when each tenant's path first reaches each milestone, as
// seen by watching its Tenant and its Sandbox (which share its name): which
// hop of the Tenant → Sandbox → binding → agent → status chain takes the
// time.
type stages struct {
	mu sync.Mutex
	at map[string]map[string]time.Time // by tenant, by milestone
}

// The milestones, in the order the path passes them.
var stageOrder = []string{"tenant finalizer", "sandbox created", "bound", "token", "agent finalizer", "provisioning", "provisioned", "sandbox Ready", "tenant Ready"}

// watchStages watches the Tenants and Sandboxes of ns, only the one named
// name unless it is empty; it stops with ctx.
func watchStages(ctx context.Context, cfg *rest.Config, ns, name string) (*stages, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	st := &stages{at: map[string]map[string]time.Time{}}
	opts := []client.ListOption{client.InNamespace(ns)}
	if name != "" {
		opts = append(opts, client.MatchingFields{"metadata.name": name})
	}
	for _, list := range []client.ObjectList{&playgroundv1alpha1.TenantList{}, &playgroundv1alpha1.SandboxList{}} {
		w, err := c.Watch(ctx, list, opts...)
		if err != nil {
			return nil, err
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				st.observe(ev.Object)
			}
		}()
	}
	return st, nil
}

func (st *stages) observe(o kruntime.Object) {
	now := time.Now()
	var reached []string
	var name string
	switch o := o.(type) {
	case *playgroundv1alpha1.Tenant:
		name = o.Name
		if len(o.Finalizers) > 0 {
			reached = append(reached, "tenant finalizer")
		}
		if meta.IsStatusConditionTrue(o.Status.Conditions, playgroundv1alpha1.CredentialsReadyCondition) {
			reached = append(reached, "token")
		}
		if meta.IsStatusConditionTrue(o.Status.Conditions, playgroundv1alpha1.ReadyCondition) {
			reached = append(reached, "tenant Ready")
		}
	case *playgroundv1alpha1.Sandbox:
		name = o.Name
		reached = append(reached, "sandbox created")
		if o.Spec.NodeName != "" {
			reached = append(reached, "bound")
		}
		if slices.Contains(o.Finalizers, playgroundv1alpha1.SandboxFinalizer) {
			reached = append(reached, "agent finalizer")
		}
		if meta.FindStatusCondition(o.Status.Conditions, playgroundv1alpha1.ProvisionedCondition) != nil {
			reached = append(reached, "provisioning")
		}
		if meta.IsStatusConditionTrue(o.Status.Conditions, playgroundv1alpha1.ProvisionedCondition) {
			reached = append(reached, "provisioned")
		}
		if meta.IsStatusConditionTrue(o.Status.Conditions, playgroundv1alpha1.ReadyCondition) {
			reached = append(reached, "sandbox Ready")
		}
	default:
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	at := st.at[name]
	if at == nil {
		at = map[string]time.Time{}
		st.at[name] = at
	}
	for _, s := range reached {
		if _, seen := at[s]; !seen {
			at[s] = now
		}
	}
}

// since returns each milestone of the tenant name's path after start.
func (st *stages) since(name string, start time.Time) map[string]time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	d := map[string]time.Duration{}
	for s, at := range st.at[name] {
		d[s] = at.Sub(start)
	}
	return d
}

// medianStages formats the median time of each milestone over runs.
func medianStages(runs []map[string]time.Duration) string {
	var parts []string
	for _, s := range stageOrder {
		var ds []time.Duration
		for _, r := range runs {
			if d, ok := r[s]; ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		parts = append(parts, fmt.Sprintf("%s %d", s, pct(ds, .5).Milliseconds()))
	}
	return strings.Join(parts, ", ") + " (ms)"
}
