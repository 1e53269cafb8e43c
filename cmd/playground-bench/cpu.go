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
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

// machineCPU is the CPU time, in core-seconds, the whole machine has spent
// busy since boot (/proc/stat: everything but idle and iowait).
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	busy := 0.0
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / userHZ
}

// processCPU is the CPU time of pid and of its children it has waited for
// (for the agent, the runc processes it ran), in core-seconds.
func processCPU(pid int) float64 {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	total := 0.0
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		n, _ := strconv.ParseFloat(f[i], 64)
		total += n
	}
	return total / userHZ
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which is in parentheses and may hold spaces): the state is f[0]; nil
// when the process is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// newestProcess is the most recently started process running exe, or 0.
func newestProcess(exe string) int {
	entries, _ := os.ReadDir("/proc")
	best, bestStart := 0, -1.0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || target != exe {
			continue
		}
		f := statFields(pid)
		if len(f) < 20 {
			continue
		}
		start, _ := strconv.ParseFloat(f[19], 64) // starttime
		if start > bestStart {
			best, bestStart = pid, start
		}
	}
	return best
}

// cpuShares samples the machine's and some processes' CPU time; the
// difference of two samples says where a benchmark's CPU went.
type cpuShares struct {
	machine float64
	procs   map[string]float64
}

func sampleCPU(pids map[string]int) cpuShares {
	s := cpuShares{machine: machineCPU(), procs: map[string]float64{}}
	for name, pid := range pids {
		s.procs[name] = processCPU(pid)
	}
	return s
}

// perTenantCPU formats the CPU spent between two samples per tenant, in
// core-milliseconds, with each process's share and the rest.
func perTenantCPU(before, after cpuShares, order []string, tenants int) string {
	per := func(d float64) float64 { return 1000 * d / float64(tenants) }
	total := after.machine - before.machine
	rest := total
	var parts []string
	for _, name := range order {
		d := after.procs[name] - before.procs[name]
		rest -= d
		parts = append(parts, fmt.Sprintf("%s %.0f", name, per(d)))
	}
	parts = append(parts, fmt.Sprintf("everything else (sandboxes' init, the kernel) %.0f", per(rest)))
	return fmt.Sprintf("%.0f: %s", per(total), strings.Join(parts, ", "))
}
