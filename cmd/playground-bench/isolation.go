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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/vm"
)

// isolationSandboxes is how many sandboxes each isolation starts: the
// first exec is timed on each, the idle memory averaged over them.
const isolationSandboxes = 3

// isolationCosts measures each way of isolating a sandbox this machine
// offers, through the backend directly (no gateway, no control plane), so
// that the rows compare the isolations and nothing else: runc (the
// baseline), gVisor's runsc, and a QEMU VM (TCG where KVM does not work):
// provision → first exec, exec `true` p50, and the host memory (PSS) of an
// idle sandbox's processes.
func isolationCosts(ctx context.Context, opts options, execs int, out io.Writer) ([]row, error) {
	dir, err := os.MkdirTemp("", "pgiso")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Sandboxes' unprivileged roots traverse the path to their bundles.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	guest := opts.guest
	if guest == "" {
		if guest, err = backend.FindGuestBinary(); err != nil {
			return nil, err
		}
	}
	type subject struct {
		name  string
		be    backend.Backend
		iso   string
		execs int // how many execs to time
		pids  func(id string) []int
		stop  func()
	}
	var subjects []subject
	runc, err := oci.New(oci.Options{StateDir: filepath.Join(dir, "oci"), GuestBinary: guest, GVisorRuntime: opts.runsc})
	if err != nil {
		return nil, err
	}
	stopOCI := func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = runc.StopAll(sctx)
	}
	inCgroup := func(id string) []int { return processesInCgroup("pg-" + id) }
	subjects = append(subjects, subject{"runc (container)", runc, backend.IsolationContainer, execs, inCgroup, stopOCI})
	if opts.runsc != "" {
		subjects = append(subjects, subject{"runsc (gVisor)", runc, backend.IsolationGVisor, execs, inCgroup, stopOCI})
	}
	var vmNote string
	if opts.vmKernel != "" {
		vmb, err := vm.New(ctx, vm.Options{
			StateDir: filepath.Join(dir, "vm"), GuestBinary: guest,
			Kernel: opts.vmKernel, Modules: opts.vmModules, Root: opts.vmRoot,
		})
		if err != nil {
			return nil, err
		}
		accel, _ := vmb.Accel()
		vmNote = strings.ToUpper(accel)
		qemu := func(id string) []int {
			b, err := os.ReadFile(filepath.Join(dir, "vm", "sandboxes", id, "qemu.pid"))
			if err != nil {
				return nil
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return []int{pid}
		}
		// A VM's exec takes tens of milliseconds under TCG.
		subjects = append(subjects, subject{"QEMU VM (" + vmNote + ")", vmb, "", min(execs, 30), qemu, func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = vmb.StopAll(sctx)
		}})
	}

	var rows []row
	var baseStart, baseExec time.Duration
	var basePss int64
	for i, s := range subjects {
		fmt.Fprintf(out, "  %s...\n", s.name)
		var starts []time.Duration
		var ids []string
		for n := range isolationSandboxes {
			id := fmt.Sprintf("iso%d-%d", i, n)
			ids = append(ids, id)
			t0 := time.Now()
			err := s.be.Provision(ctx, backend.Spec{ID: id, Tenant: "bench/" + id, Isolation: s.iso})
			if err == nil {
				err = s.be.Start(ctx, id)
			}
			if err == nil {
				err = runTrue(ctx, s.be, id)
			}
			if err != nil {
				s.stop()
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			starts = append(starts, time.Since(t0))
		}
		lat, err := timeN(s.execs, func() error { return runTrue(ctx, s.be, ids[0]) })
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		// Idle: nothing runs but what the sandbox keeps (init, a spare
		// shepherd; the sentry and gofer; QEMU and its guest).
		time.Sleep(2 * time.Second)
		var pss int64
		for _, id := range ids {
			for _, pid := range s.pids(id) {
				pss += pssOf(pid)
			}
		}
		pss /= isolationSandboxes
		s.stop()
		start, exec := pct(starts, .5), pct(lat, .5)
		if i == 0 {
			baseStart, baseExec, basePss = start, exec, pss
			rows = append(rows,
				row{"isolation: runc, provision → first exec (median of 3)", ms(start), "", "", "(baseline of the rows below)", "—"},
				row{"isolation: runc, exec `true` p50 (backend)", ms(exec), "", "", "(baseline)", "—"},
				row{"isolation: runc, host memory per idle sandbox (PSS)", pssMiB(pss), "", "", "(baseline)", "—"})
			continue
		}
		rows = append(rows,
			row{"isolation: " + s.name + ", provision → first exec (median of 3)", ms(start), "runc " + ms(baseStart), fmt.Sprintf("%.1f×", ratio(start, baseStart)), "(for reference)", "—"},
			row{"isolation: " + s.name + ", exec `true` p50 (backend)", ms(exec), "runc " + ms(baseExec), fmt.Sprintf("%.1f×", ratio(exec, baseExec)), "(for reference)", "—"},
			row{"isolation: " + s.name + ", host memory per idle sandbox (PSS)", pssMiB(pss), "runc " + pssMiB(basePss), fmt.Sprintf("%.1f×", float64(pss)/float64(max(basePss, 1))), "(for reference)", "—"})
	}
	return rows, nil
}

// runTrue runs `true` in sandbox id and waits for it.
func runTrue(ctx context.Context, be backend.Backend, id string) error {
	p, err := be.Exec(ctx, id, backend.ExecRequest{Command: "true", Shell: backend.ShellClean}, nil)
	if err != nil {
		return err
	}
	st, err := p.Wait(ctx)
	if err == nil && st.ExitCode != 0 {
		err = fmt.Errorf("true exited %d", st.ExitCode)
	}
	return err
}

// processesInCgroup lists the processes whose cgroup path has an element
// name (a container's cgroup, and under gVisor its sentry's and gofer's).
func processesInCgroup(name string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "/"+name) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func pssMiB(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
