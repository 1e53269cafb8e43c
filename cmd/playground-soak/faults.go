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
	"math/rand"
	"net/http"
	"regexp"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/mcpclient"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// The kinds of fault.
const (
	faultAgentKill = "agent SIGKILL"
	faultAgentTerm = "agent SIGTERM"
	faultGateway   = "gateway SIGKILL or SIGTERM"
	faultManager   = "manager SIGKILL or SIGTERM"
	faultAPIServer = "kube-apiserver stop and start"
	faultRecreate  = "tenant deleted and created again"
)

var faultKinds = []string{faultAgentKill, faultAgentTerm, faultGateway, faultManager, faultAPIServer, faultRecreate}

// selectKinds are the kinds of fault whose names re matches.
func selectKinds(re *regexp.Regexp) []string {
	var kinds []string
	for _, k := range faultKinds {
		if re.MatchString(k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// schedule is the order of the short mode's faults: perKind of each of
// kinds, shuffled by the seed.
func schedule(rng *rand.Rand, kinds []string, perKind int) []string {
	var all []string
	for _, k := range kinds {
		for range perKind {
			all = append(all, k)
		}
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all
}

// inject injects one fault and waits until the system serves again,
// recording the time it took.
func (s *soak) inject(ctx context.Context, rng *rand.Rand, kind string) {
	s.led.fault(kind)
	// A component's down time: the next start follows its end after up to
	// two seconds, as a pod's restart would after its backoff.
	down := time.Duration(rng.Intn(2000)) * time.Millisecond
	sig := syscall.SIGKILL
	if rng.Intn(2) == 0 {
		sig = syscall.SIGTERM
	}
	switch kind {
	case faultAgentKill, faultAgentTerm, faultGateway, faultManager:
		name := map[string]string{faultAgentKill: "agent", faultAgentTerm: "agent", faultGateway: "gateway", faultManager: "manager"}[kind]
		switch kind {
		case faultAgentKill:
			sig = syscall.SIGKILL
		case faultAgentTerm:
			sig = syscall.SIGTERM
		}
		w := s.win.open()
		defer s.win.close(w)
		s.led.logf("fault: %s %s, down %s", name, sig, down)
		if err := s.sys.kill(name, sig); err != nil {
			s.led.violatef(invStop, "%v", err)
		}
		sleep(ctx, down)
		restarted := time.Now()
		if err := s.sys.start(name); err != nil {
			s.led.violatef(invStop, "%v", err)
			return
		}
		s.servedAgain(ctx, kind, restarted)
	case faultAPIServer:
		w := s.win.open()
		defer s.win.close(w)
		s.led.logf("fault: kube-apiserver stopped, down %s", down)
		s.sys.apiDown.Store(true)
		if err := s.sys.cp.StopAPIServer(); err != nil {
			// kube-apiserver's own graceful stop, not Playground's: said
			// in the report, not an invariant.
			s.led.note(fmt.Sprintf("kube-apiserver's stop failed (%v); killed, it was started again", firstLine(err.Error())))
		}
		sleep(ctx, down)
		restarted := time.Now()
		err := s.sys.cp.StartAPIServer()
		s.sys.apiDown.Store(false)
		if err != nil {
			s.led.violatef(invStop, "starting kube-apiserver again: %v", err)
			return
		}
		// The components reconnect: the agent renews its Lease on the new
		// API server, and the tenants are served.
		s.servedAgain(ctx, kind, restarted)
		if err := s.waitLeaseRenewed(ctx, restarted); err != nil {
			s.led.violatef(invServed, "after the API server's restart: %v", err)
		}
	case faultRecreate:
		h := s.hostile[rng.Intn(len(s.hostile))]
		s.recreate(ctx, h)
	}
}

// servedAgain waits until every good tenant is served an exec again, each
// through a new session as a client that reconnects opens one, and records
// the longest wait from since.
func (s *soak) servedAgain(ctx context.Context, kind string, since time.Time) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	for _, g := range s.good {
		wg.Go(func() {
			if err := s.probe(ctx, g.token, since.Add(s.opts.serveBound)); err != nil {
				if ctx.Err() == nil {
					s.led.violatef(invServed, "%s: %s not served again within %s: %v", kind, g.name, s.opts.serveBound, err)
				}
				return
			}
			mu.Lock()
			worst = max(worst, time.Since(since))
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() == nil {
		s.led.served(kind, worst)
		s.led.logf("  served again after %s", worst.Round(time.Millisecond))
	}
}

// probe tries, until deadline, to open a session with token and run an
// exec through it, with a new connection each try.
func (s *soak) probe(ctx context.Context, token string, deadline time.Time) error {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if last = s.probeOnce(ctx, tr, token); last == nil {
			return nil
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return last
}

func (s *soak) probeOnce(ctx context.Context, tr http.RoundTripper, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cs, err := mcpclient.Connect(ctx, s.sys.endpoint, token, tr, "playground-soak-probe")
	if err != nil {
		return err
	}
	defer cs.Close()
	var open tools.OpenSessionOutput
	if err := mcpclient.Call(ctx, cs, "open_session", map[string]any{}, &open); err != nil {
		return err
	}
	defer func() { _ = mcpclient.Call(ctx, cs, "close_session", map[string]any{"handle": open.Handle}, nil) }()
	var out tools.ExecOutput
	if err := mcpclient.Call(ctx, cs, "exec", map[string]any{"handle": open.Handle, "command": "echo served"}, &out); err != nil {
		return err
	}
	if out.Stdout != "served\n" || out.ExitCode != 0 {
		return fmt.Errorf("exec answered exit %d, stdout %q", out.ExitCode, out.Stdout)
	}
	return nil
}

// waitLeaseRenewed waits until the agent has renewed its Lease after
// since: it has reconnected to the restarted API server.
func (s *soak) waitLeaseRenewed(ctx context.Context, since time.Time) error {
	deadline := since.Add(s.opts.serveBound)
	for {
		var lease coordinationv1.Lease
		err := s.sys.c.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(nodeName)}, &lease)
		if err == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(since) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the agent's Lease not renewed within %s (last error %v)", s.opts.serveBound, err)
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// recreate deletes a hostile tenant, waits until it and its Sandbox are
// gone (the agent has destroyed its sandbox), creates it again, and waits
// until it is served: an exec with its new token.
func (s *soak) recreate(ctx context.Context, h *hostile) {
	kind := faultRecreate
	s.setRecreating(h.name, true)
	defer s.setRecreating(h.name, false)
	h.recreated()
	s.led.logf("fault: tenant %s deleted", h.name)
	start := time.Now()
	if err := s.sys.deleteTenant(ctx, h.name); err != nil {
		s.led.violatef(invConverge, "deleting tenant %s: %v", h.name, err)
		return
	}
	if err := s.sys.waitGone(ctx, h.name, s.opts.convergeBound); err != nil {
		s.led.violatef(invConverge, "%v", err)
		return
	}
	gone := time.Since(start)
	s.led.mu.Lock()
	s.led.deleted = append(s.led.deleted, gone)
	s.led.mu.Unlock()
	created := time.Now()
	if err := s.sys.createTenant(ctx, h.name, h.k); err != nil {
		s.led.violatef(invConverge, "creating tenant %s again: %v", h.name, err)
		return
	}
	token, _, err := s.sys.waitTenant(ctx, h.name, s.opts.convergeBound)
	if err != nil {
		s.led.violatef(invConverge, "%v", err)
		return
	}
	if err := s.probe(ctx, token, created.Add(s.opts.serveBound)); err != nil {
		s.led.violatef(invServed, "tenant %s created again: not served within %s: %v", h.name, s.opts.serveBound, err)
		return
	}
	d := time.Since(created)
	s.led.served(kind, d)
	s.led.logf("  %s gone in %s, served again %s after its creation", h.name, gone.Round(time.Millisecond), d.Round(time.Millisecond))
}
