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

package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testWorker: a backend that is a backend.WorkerSupervisor keeps a worker
// running in the sandbox as the sandbox user, with its token readable by
// that user only, restarts it when it dies, keeps it across an agent
// restart, and stops it when asked.
func testWorker(t *testing.T, n *node) {
	caps := n.be.Capabilities()
	sup, d := caps.WorkerSupervisor, caps.Dialer
	if sup == nil || d == nil {
		t.Skip("the backend supervises no worker (backend.WorkerSupervisor, backend.Dialer)")
	}
	s := n.open(t, n.spec("worker"))
	s.probeInside(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*patience)
	defer cancel()
	w := &backend.Worker{
		Argv:  []string{guestapi.TenantHome + "/.conformance-probe", "serve", "18081"},
		Env:   []string{"PATH=" + guestapi.DefaultPath, "HOME=" + guestapi.TenantHome},
		Token: "inner-token",
	}
	if err := sup.SetWorker(ctx, s.id, w); err != nil {
		t.Fatal(err)
	}
	// until polls cond, a real condition of the sandbox, until it holds.
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(patience); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				st, err := sup.WorkerStatus(ctx, s.id)
				log, _ := sup.WorkerLog(ctx, s.id, 4096)
				t.Fatalf("%s: not after %s (status %+v, %v; log %q)", what, patience, st, err, log)
			}
		}
	}
	answers := func() bool {
		c, err := d.DialSandbox(ctx, s.id, 18081)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	// Init records the worker as running once its start returns, which
	// may be after the worker already listens: wait for both.
	until("the worker listens and is reported running", func() bool {
		st, err := sup.WorkerStatus(ctx, s.id)
		return err == nil && st.Running && answers()
	})
	st, err := sup.WorkerStatus(ctx, s.id)
	if err != nil || !st.Running || st.Restarts != 0 {
		t.Fatalf("a started worker: %+v, %v", st, err)
	}

	t.Run("runs as the sandbox user with its token", func(t *testing.T) {
		n.known(t)
		got := s.sh(t, "ps -o user= -C .conformance-pro 2>/dev/null || ps -eo user,args | grep '[c]onformance-probe serve'")
		if !strings.Contains(got, "sandbox") && !strings.Contains(got, "1000") {
			t.Errorf("the worker runs as %q, want the sandbox user", got)
		}
		if got := s.sh(t, "cat "+guestapi.WorkerTokenFile+"; stat -c ' %a %u' "+guestapi.WorkerTokenFile); got != "inner-token 400 1000\n" {
			t.Errorf("the token file: %q, want the token, mode 400, the sandbox user's", got)
		}
	})

	t.Run("restarted when it dies", func(t *testing.T) {
		n.known(t)
		s.sh(t, "pkill -KILL -f '[c]onformance-probe serve'")
		until("the restart is reported", func() bool {
			st, err := sup.WorkerStatus(ctx, s.id)
			return err == nil && st.Restarts == 1 && st.Running
		})
		st, _ := sup.WorkerStatus(ctx, s.id)
		if !strings.Contains(st.LastExit, "SIGKILL") || st.LastExitTime.IsZero() {
			t.Errorf("the last exit: %q at %v, want SIGKILL and a time", st.LastExit, st.LastExitTime)
		}
		until("the restarted worker listens", answers)
	})

	t.Run("kept across an agent restart", func(t *testing.T) {
		n.known(t)
		before := s.sh(t, "pgrep -f '[c]onformance-probe serve'")
		n2 := n.restarted(t)
		s2 := n2.open(t, n.spec("worker"))
		if after := s2.sh(t, "pgrep -f '[c]onformance-probe serve'"); after != before {
			t.Errorf("the worker was %q before the agent restart, %q after", before, after)
		}
	})

	t.Run("stopped when unset", func(t *testing.T) {
		n.known(t)
		if err := sup.SetWorker(ctx, s.id, nil); err != nil {
			t.Fatal(err)
		}
		until("the worker is gone", func() bool { return !answers() })
		if _, err := sup.WorkerStatus(ctx, s.id); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("the status of an unset worker: %v, want ErrNotFound", err)
		}
	})
}
