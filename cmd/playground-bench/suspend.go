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

// forks is how many forks of one snapshot the fork rows start.
const forks = 3

// suspendCosts measures suspension with memory, snapshots and forks,
// through the backends directly (as the isolation rows): for a gVisor
// sandbox, and a QEMU VM where one runs here, whose process holds M MiB of
// memory, the time to suspend it (its memory saved, its processes gone)
// and to resume it to its first exec, the host memory it holds before and
// while suspended, and the image on disk; the baseline is what a
// suspension without memory costs, a stop and a fresh start of the same
// sandbox. Then a snapshot of a gVisor sandbox and forks of it, each to
// its first exec, against fresh sandboxes.
func suspendCosts(ctx context.Context, opts options, out io.Writer) ([]row, error) {
	if opts.runsc == "" {
		return nil, nil
	}
	dir, err := os.MkdirTemp("", "pgsus")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	guest := opts.guest
	if guest == "" {
		if guest, err = backend.FindGuestBinary(); err != nil {
			return nil, err
		}
	}
	gv, err := oci.New(oci.Options{StateDir: filepath.Join(dir, "oci"), GuestBinary: guest, GVisorRuntime: opts.runsc})
	if err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = gv.StopAll(sctx)
	}()
	type subject struct {
		name  string
		be    backend.Backend
		iso   string
		image func(id string) string
		pids  func(id string) []int
	}
	subjects := []subject{{"gVisor", gv, backend.IsolationGVisor,
		func(id string) string { return filepath.Join(dir, "oci", "sandboxes", id, "checkpoint") },
		func(id string) []int { return processesInCgroup("pg-" + id) }}}
	if opts.vmKernel != "" {
		vmb, err := vm.New(ctx, vm.Options{StateDir: filepath.Join(dir, "vm"), GuestBinary: guest, Kernel: opts.vmKernel, Modules: opts.vmModules, Root: opts.vmRoot})
		if err != nil {
			return nil, err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = vmb.StopAll(sctx)
		}()
		accel, _ := vmb.Accel()
		subjects = append(subjects, subject{"QEMU VM (" + strings.ToUpper(accel) + ")", vmb, "",
			func(id string) string { return filepath.Join(dir, "vm", "sandboxes", id, "memory.img") },
			func(id string) []int {
				b, err := os.ReadFile(filepath.Join(dir, "vm", "sandboxes", id, "qemu.pid"))
				if err != nil {
					return nil
				}
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return []int{pid}
			}})
	}
	sizes := []int64{16, 256}
	if opts.quick {
		sizes = []int64{16, 128}
	}
	var rows []row
	for _, s := range subjects {
		for _, mib := range sizes {
			fmt.Fprintf(out, "  suspend and resume: %s, %d MiB in use...\n", s.name, mib)
			id := fmt.Sprintf("sus-%d-%d", len(rows), mib)
			spec := backend.Spec{ID: id, Tenant: "bench/" + id, Isolation: s.iso,
				Resources: backend.Resources{MemoryBytes: (2*mib + 256) << 20}}
			if err := s.be.Provision(ctx, spec); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			if err := s.be.Start(ctx, id); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			if err := fill(ctx, s.be, id, mib); err != nil {
				return nil, fmt.Errorf("%s: filling %d MiB: %w", s.name, mib, err)
			}
			var before int64
			for _, pid := range s.pids(id) {
				before += pssOf(pid)
			}
			sus := s.be.Capabilities().Suspender
			t0 := time.Now()
			if err := sus.Suspend(ctx, id); err != nil {
				return nil, fmt.Errorf("%s: suspend: %w", s.name, err)
			}
			suspend := time.Since(t0)
			image := backend.DiskUsage(s.image(id))
			var after int64
			left := 0
			for _, pid := range s.pids(id) {
				// A process that has exited (a zombie, a PID file's)
				// holds no memory.
				if n := pssOf(pid); n > 0 {
					after += n
					left++
				}
			}
			t0 = time.Now()
			if err := startAndRun(ctx, s.be, id); err != nil {
				return nil, fmt.Errorf("%s: resume: %w", s.name, err)
			}
			resume := time.Since(t0)
			// The baseline: a suspension that keeps no memory.
			t0 = time.Now()
			if err := s.be.Stop(ctx, id); err != nil {
				return nil, fmt.Errorf("%s: stop: %w", s.name, err)
			}
			stop := time.Since(t0)
			t0 = time.Now()
			if err := startAndRun(ctx, s.be, id); err != nil {
				return nil, fmt.Errorf("%s: start: %w", s.name, err)
			}
			fresh := time.Since(t0)
			_ = s.be.Destroy(ctx, id, false)
			what := fmt.Sprintf("%s, %d MiB in use", s.name, mib)
			rows = append(rows,
				row{"suspend with memory: " + what + ", suspend", ms(suspend), "stop " + ms(stop), fmt.Sprintf("%.1f×", ratio(suspend, stop)), "(for reference)", "—"},
				row{"suspend with memory: " + what + ", resume → first exec", ms(resume), "fresh start " + ms(fresh), fmt.Sprintf("%.1f×", ratio(resume, fresh)), "(for reference)", "—"},
				row{"suspend with memory: " + what + ", host memory while suspended", fmt.Sprintf("%d processes, PSS %s; image %s", left, pssMiB(after), pssMiB(image)), "running: PSS " + pssMiB(before), "—", "no process left", verdict(left == 0)})
		}
	}

	fmt.Fprintf(out, "  snapshot and %d forks: gVisor...\n", forks)
	src := backend.Spec{ID: "snap-src", Tenant: "bench/snap-src", Isolation: backend.IsolationGVisor, Resources: backend.Resources{MemoryBytes: 512 << 20}}
	if err := gv.Provision(ctx, src); err != nil {
		return nil, err
	}
	if err := gv.Start(ctx, src.ID); err != nil {
		return nil, err
	}
	if err := fill(ctx, gv, src.ID, 64); err != nil {
		return nil, err
	}
	t0 := time.Now()
	info, err := gv.Capabilities().Snapshotter.Snapshot(ctx, src.ID, "snap")
	if err != nil {
		return nil, err
	}
	snap := time.Since(t0)
	var forked, fresh []time.Duration
	for i := range forks {
		for _, from := range []string{"snap", ""} {
			id := fmt.Sprintf("fork-%d-%t", i, from != "")
			t0 := time.Now()
			err := gv.Provision(ctx, backend.Spec{ID: id, Tenant: "bench/" + id, Isolation: backend.IsolationGVisor, Resources: src.Resources, FromSnapshot: from})
			if err == nil {
				err = startAndRun(ctx, gv, id)
			}
			if err != nil {
				return nil, fmt.Errorf("fork %s: %w", id, err)
			}
			if from != "" {
				forked = append(forked, time.Since(t0))
			} else {
				fresh = append(fresh, time.Since(t0))
			}
		}
	}
	rows = append(rows,
		row{"snapshot: gVisor, 64 MiB in use (the sandbox away meanwhile)", ms(snap), "", "", fmt.Sprintf("(for reference; %s on disk)", pssMiB(info.Bytes)), "—"},
		row{fmt.Sprintf("fork → first exec: gVisor, median of %d", forks), ms(pct(forked, .5)), "fresh sandbox " + ms(pct(fresh, .5)), fmt.Sprintf("%.1f×", ratio(pct(forked, .5), pct(fresh, .5))), "(for reference)", "—"})
	return rows, nil
}

// startAndRun starts sandbox id and runs its first command.
func startAndRun(ctx context.Context, be backend.Backend, id string) error {
	if err := be.Start(ctx, id); err != nil {
		return err
	}
	return runTrue(ctx, be, id)
}

// fill has sandbox id hold mib MiB of memory it wrote: a process's
// (python3), or, where the sandbox has no python3 (a VM), its kernel's
// page cache of a file it wrote.
func fill(ctx context.Context, be backend.Backend, id string, mib int64) error {
	cmd := fmt.Sprintf(`if command -v python3 >/dev/null; then
python3 -c 'import os, time
b = os.urandom(%d << 20)
open("/tmp/filled", "w").close()
time.sleep(1e6)' >/dev/null 2>&1 &
i=0; while [ ! -e /tmp/filled ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; test -e /tmp/filled
else
head -c %dM /dev/urandom > /tmp/filled
fi`, mib, mib)
	p, err := be.Exec(ctx, id, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}, nil)
	if err != nil {
		return err
	}
	st, err := p.Wait(ctx)
	if err == nil && st.ExitCode != 0 {
		err = fmt.Errorf("the filler did not start (exit %d): the sandbox needs python3, or room in /tmp", st.ExitCode)
	}
	return err
}
