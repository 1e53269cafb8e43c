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
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend/oci"
)

// soak is one run: the system, its tenants and what it found.
type soak struct {
	opts options
	sys  *system
	led  *ledger
	win  windows

	good    []*goodClient
	hostile []*hostile

	shortPlan []string // the short mode's faults, in order

	mu            sync.Mutex
	marks         []string          // every cancelled job's marks
	egress        map[string]string // egress sandbox ID → its veth's host end
	recreatingSet map[string]bool   // tenants a fault is deleting and creating again
}

func (s *soak) addMarks(m []string) {
	s.mu.Lock()
	s.marks = append(s.marks, m...)
	s.mu.Unlock()
}

func (s *soak) allMarks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.marks...)
}

func (s *soak) setRecreating(name string, on bool) {
	s.mu.Lock()
	s.recreatingSet[name] = on
	s.mu.Unlock()
}

// recreating says whether a fault is deleting and creating again the
// tenant key names ("Tenant x", "Sandbox x" or "x").
func (s *soak) recreating(key string) bool {
	if _, name, ok := strings.Cut(key, " "); ok {
		key = name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recreatingSet[key]
}

// run is the soak: it returns the exit status (1 when an invariant was
// violated) and an error when it could not run.
func run(ctx context.Context, opts options, out io.Writer) (int, error) {
	started := time.Now()
	if opts.kinds == nil {
		opts.kinds = faultKinds
	}
	mode := fmt.Sprintf("long mode: faults for at least %s and at least %d of them", opts.duration, opts.minFaults)
	if opts.short {
		mode = fmt.Sprintf("short mode: %d faults of each of %d kinds", opts.perKind, len(opts.kinds))
	}
	fmt.Fprintf(out, "playground-soak: seed %d (replay with --seed %d), %s\n", opts.seed, opts.seed, mode)
	verbose := io.Discard
	if opts.verbose {
		verbose = out
	}
	progress := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }
	for _, tool := range []string{"runc", "nft", "nsenter", "perl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return 0, fmt.Errorf("%s is missing (make prereqs installs it): %w", tool, err)
		}
	}
	s := &soak{opts: opts, led: newLedger(verbose), egress: map[string]string{}, recreatingSet: map[string]bool{}}
	sys, err := startSystem(ctx, opts, progress)
	if err != nil {
		return 0, err
	}
	s.sys = sys
	sys.stopped = s.led.stopped
	defer func() { s.cleanup(opts.keep, out) }()

	rng := rand.New(rand.NewSource(opts.seed))
	if err := s.setUp(ctx, rng, progress); err != nil {
		return 0, err
	}

	// The load: the good clients and the hostile tenants, and the monitor.
	loadCtx, stopLoad := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoad()
	drain := make(chan struct{})
	var clients, others sync.WaitGroup
	for _, g := range s.good {
		clients.Go(func() { g.run(loadCtx, drain) })
	}
	for _, h := range s.hostile {
		others.Go(func() { h.run(loadCtx) })
	}
	others.Go(func() { s.monitor(loadCtx) })
	progress("load running: %d good tenants, %d hostile; faults follow", len(s.good), len(s.hostile))
	warmUp := 20 * time.Second
	if opts.short {
		warmUp = 5 * time.Second
	}
	sleep(ctx, warmUp)

	faultsStart := time.Now()
	n := 0
	next := func() (string, bool) {
		if ctx.Err() != nil {
			return "", false
		}
		if opts.short {
			if n >= len(s.shortPlan) {
				return "", false
			}
			return s.shortPlan[n], true
		}
		if time.Since(faultsStart) >= opts.duration && n >= opts.minFaults {
			return "", false
		}
		return opts.kinds[rng.Intn(len(opts.kinds))], true
	}
	if opts.short {
		s.shortPlan = schedule(rng, opts.kinds, opts.perKind)
	}
	for {
		kind, ok := next()
		if !ok {
			break
		}
		n++
		progress("fault %d (%s): %s", n, time.Since(faultsStart).Round(time.Second), kind)
		s.inject(ctx, rng, kind)
		pause := time.Duration(1000+rng.Intn(1500)) * time.Millisecond
		if !opts.short {
			pause = time.Duration(5000+rng.Intn(35000)) * time.Millisecond
		}
		sleep(ctx, pause)
	}
	faultTime := time.Since(faultsStart)

	progress("faults over (%d in %s); the clients finish their jobs", n, faultTime.Round(time.Second))
	close(drain)
	drained := make(chan struct{})
	go func() { clients.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(3 * time.Minute):
		s.led.violatef(invBytes, "the clients' jobs did not all end within 3 minutes of the last fault")
	}
	stopLoad()
	clients.Wait()
	others.Wait()

	s.tearDown(ctx, progress)
	failed := s.failed()
	report := s.report(time.Since(started), faultTime, n)
	fmt.Fprint(out, "\n"+report.text)
	if !opts.short && opts.out != "" && ctx.Err() == nil {
		if err := writeSection(opts.out, report.markdown); err != nil {
			return 1, err
		}
		fmt.Fprintf(out, "\nwritten into %s\n", opts.out)
	}
	if failed {
		return 1, nil
	}
	if ctx.Err() != nil {
		return 1, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return 0, nil
}

// setUp creates the tenants and waits until each is Ready.
func (s *soak) setUp(ctx context.Context, rng *rand.Rand, progress func(string, ...any)) error {
	progress("creating %d good tenants and %d hostile ones", s.opts.good, len(hostileKinds))
	for i := range s.opts.good {
		if err := s.sys.createTenant(ctx, tenantName(good, i), good); err != nil {
			return err
		}
	}
	for _, k := range hostileKinds {
		if err := s.sys.createTenant(ctx, tenantName(k, 0), k); err != nil {
			return err
		}
		s.hostile = append(s.hostile, &hostile{s: s, k: k, name: tenantName(k, 0)})
	}
	for i := range s.opts.good {
		name := tenantName(good, i)
		token, _, err := s.sys.waitTenant(ctx, name, 3*time.Minute)
		if err != nil {
			return err
		}
		s.good = append(s.good, newGoodClient(s, name, token, rng.Int63()))
	}
	for _, h := range s.hostile {
		if _, _, err := s.sys.waitTenant(ctx, h.name, 3*time.Minute); err != nil {
			return err
		}
	}
	progress("all tenants Ready")
	return nil
}

// tearDown checks that every tenant converged, deletes them all, checks
// that the node keeps nothing of them, stops the components and checks
// again.
func (s *soak) tearDown(ctx context.Context, progress func(string, ...any)) {
	ctx = context.WithoutCancel(ctx)
	progress("waiting for every tenant to be Ready, then deleting them all")
	var names []string
	for _, g := range s.good {
		names = append(names, g.name)
	}
	for _, h := range s.hostile {
		names = append(names, h.name)
	}
	for _, name := range names {
		if _, _, err := s.sys.waitTenant(ctx, name, s.opts.convergeBound); err != nil {
			s.led.violatef(invConverge, "at the end: %v", err)
		}
	}
	s.countRestarts(ctx)
	start := time.Now()
	for _, name := range names {
		if err := s.sys.deleteTenant(ctx, name); err != nil {
			s.led.violatef(invConverge, "deleting %s: %v", name, err)
		}
	}
	for _, name := range names {
		if err := s.sys.waitGone(ctx, name, max(s.opts.convergeBound-time.Since(start), 0)); err != nil {
			s.led.violatef(invConverge, "at the end: %v", err)
		}
	}
	progress("all tenants deleted in %s; looking for what is left of them", time.Since(start).Round(100*time.Millisecond))
	// The agent destroys each sandbox before it lets its Sandbox go: what
	// is left now is left for good.
	for _, leak := range s.leaks(false) {
		s.leak("with the agent running: " + leak)
	}
	progress("stopping the gateway, the manager and the agent (SIGTERM)")
	if err := s.sys.stopComponents(); err != nil {
		s.led.violatef(invStop, "at the end: %v", err)
	}
	for _, leak := range s.leaks(true) {
		s.leak("with the components stopped: " + leak)
	}
}

// countRestarts counts the sandboxes their agent started again because
// their init had exited (its Warning events): the supervision died, and
// every process of the sandbox with it. Every one is a violation: a
// good tenant's jobs end, and a hostile tenant must not reach the
// supervision of its own sandbox either (its PIDs and memory are bounded
// below what init and the job holders keep).
func (s *soak) countRestarts(ctx context.Context) {
	var events eventsv1.EventList
	if err := s.sys.c.List(ctx, &events, client.InNamespace(namespace)); err != nil {
		s.led.logf("listing the Events: %v", err)
		return
	}
	for _, e := range events.Items {
		if e.Reason != playgroundv1alpha1.ReasonRestarted || e.Type != corev1.EventTypeWarning {
			continue
		}
		n := max(int(e.DeprecatedCount), 1)
		if e.Series != nil {
			n = max(n, int(e.Series.Count))
		}
		s.led.mu.Lock()
		s.led.restarts[e.Regarding.Name] += n
		s.led.mu.Unlock()
		s.led.violatef(invInit, "sandbox %s: %s", e.Regarding.Name, e.Note)
	}
}

func (s *soak) leak(what string) {
	s.led.mu.Lock()
	s.led.leaks = append(s.led.leaks, what)
	s.led.mu.Unlock()
	s.led.violatef(invLeaks, "%s", what)
}

func (s *soak) failed() bool {
	s.led.mu.Lock()
	defer s.led.mu.Unlock()
	return len(s.led.violations) > 0
}

// cleanup stops everything and removes the run's state directory; what a
// failed run left on the node is removed first (the backend destroys each
// sandbox left), or, with keep, the directory is kept for its logs.
func (s *soak) cleanup(keep bool, out io.Writer) {
	s.sys.stop()
	if keep {
		fmt.Fprintf(out, "kept %s (the components' logs, etcd, the node's state)\n", s.sys.state)
		return
	}
	if err := removeState(s.sys.state); err != nil {
		fmt.Fprintln(out, err)
	}
}

// removeState destroys the sandboxes left in a run's state directory
// (the backend's own destroy: containers, network, volumes) and removes
// the directory.
func removeState(state string) error {
	nodeDir := filepath.Join(state, "node")
	be, err := oci.New(oci.Options{StateDir: nodeDir})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err = be.DestroyAll(ctx)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("removing the sandboxes left in %s: %w", nodeDir, err)
	}
	if err := os.RemoveAll(state); err != nil {
		return fmt.Errorf("removing %s: %w", state, err)
	}
	return nil
}
