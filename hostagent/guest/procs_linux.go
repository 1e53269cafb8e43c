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

package guest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// proc identifies a process: a PID alone can be reused once the process is
// reaped, PID and start time cannot.
type proc struct {
	pid   int
	ppid  int
	start uint64 // clock ticks after boot, field 22 of /proc/PID/stat
	state byte
}

// readStat parses /proc/PID/stat. The command name (field 2) may contain
// spaces and parentheses, so fields are counted from its last ')'.
func readStat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22.
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || f[0] == "" {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, start: start, state: f[0][0]}, true
}

// descendants lists every process whose parent chain leads to root, from a
// scan of /proc (the sandbox's own PID namespace).
func descendants(root int) []proc {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	children := make(map[int][]proc)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// killProc sends SIGKILL to p through a pidfd, after checking that the PID
// still names the process that was scanned: without that check a PID
// reused by an unrelated process (say a sentinel's new child) could be hit.
func killProc(p proc) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	if now, ok := readStat(p.pid); !ok || now.start != p.start {
		return
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

func describeProcs(ps []proc) string {
	if len(ps) == 0 {
		return "none visible"
	}
	var b strings.Builder
	for i, p := range ps {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(ps)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "pid %d (state %c)", p.pid, p.state)
	}
	return b.String()
}
