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

// Package machineinfo describes the machine a measurement ran on, for the
// reports of the benchmarks and the soak: these machines are shared and
// differ by more than twice between sessions.
package machineinfo

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Describe is this machine for a report: cores, CPU, memory, kernel, Go,
// and what a first touch of a fresh page costs.
func Describe() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			mem = fmt.Sprintf(", %.0f GiB memory", float64(kb)/(1<<20))
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fault := ""
	if d, err := pageFaultCost(); err == nil {
		fault = fmt.Sprintf("; a first write to a fresh 4 KiB page (a minor fault, which every new process and every new buffer pays) costs %.1f µs", float64(d.Nanoseconds())/1000)
	}
	return fmt.Sprintf("%d × %s%s, Linux %s, %s%s", runtime.NumCPU(), cpu, mem, strings.TrimSpace(string(kernel)), runtime.Version(), fault)
}

// pageFaultCost is the median over three tries of the time a first write
// to a page of fresh anonymous memory takes: the kernel's minor fault,
// zeroing included. Virtual machines differ most here (shadow or nested
// paging), and the figures that allocate or start processes follow it.
func pageFaultCost() (time.Duration, error) {
	const size = 32 << 20
	page := os.Getpagesize()
	var tries []time.Duration
	for range 3 {
		mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		for i := 0; i < size; i += page {
			mem[i] = 1
		}
		tries = append(tries, time.Since(start)/time.Duration(size/page))
		if err := unix.Munmap(mem); err != nil {
			return 0, err
		}
	}
	slices.Sort(tries)
	return tries[1], nil
}
