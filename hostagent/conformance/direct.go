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
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Sink is a backend.Sink that keeps everything and can wait for a marker.
type Sink struct {
	mu     sync.Mutex
	out    bytes.Buffer
	err    bytes.Buffer
	change chan struct{}
}

// NewSink returns an empty Sink.
func NewSink() *Sink { return &Sink{change: make(chan struct{}, 1)} }

// Write implements backend.Sink.
func (s *Sink) Write(stream backend.Stream, p []byte) {
	s.mu.Lock()
	if stream == backend.Stdout {
		s.out.Write(p)
	} else {
		s.err.Write(p)
	}
	s.mu.Unlock()
	select {
	case s.change <- struct{}{}:
	default:
	}
}

// Stdout is the standard output so far.
func (s *Sink) Stdout() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// Stderr is the standard error so far.
func (s *Sink) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err.String()
}

// WaitFor waits until the standard output contains marker.
func (s *Sink) WaitFor(tb testing.TB, marker string) {
	tb.Helper()
	deadline := time.After(patience)
	for !strings.Contains(s.Stdout(), marker) {
		select {
		case <-s.change:
		case <-deadline:
			tb.Fatalf("timed out waiting for %q; stdout %q, stderr %q", marker, s.Stdout(), s.Stderr())
		}
	}
}

// Result is how a command run directly on a backend ended.
type Result struct {
	Stdout, Stderr string
	Status         backend.ExitStatus
}

// Exec runs a command directly on the backend, to its end.
func Exec(tb testing.TB, be backend.Backend, id string, req backend.ExecRequest) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	s := NewSink()
	p, err := be.Exec(ctx, id, req, s)
	if err != nil {
		tb.Fatalf("exec %q: %v", req.Command, err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		tb.Fatalf("wait %q: %v", req.Command, err)
	}
	return Result{s.Stdout(), s.Stderr(), st}
}

// Sh runs a command in a clean shell directly on the backend; it must
// succeed. It returns the standard output.
func Sh(tb testing.TB, be backend.Backend, id, cmd string) string {
	tb.Helper()
	r := Exec(tb, be, id, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean})
	if r.Status.ExitCode != 0 || r.Status.Signal != "" {
		tb.Fatalf("%q: %+v, stderr %q", cmd, r.Status, r.Stderr)
	}
	return r.Stdout
}

// StartSentinel starts a detached process that no later command owns, and
// returns its PID: it must outlive every kill of another command.
func StartSentinel(tb testing.TB, be backend.Backend, id string) string {
	tb.Helper()
	return startSentinel(direct(tb, be, id))
}

// Alive says, for each PID, whether a process with it exists in the
// sandbox. A zombie exists: proof of cleanup means reaped.
func Alive(tb testing.TB, be backend.Backend, id string, pids ...string) []bool {
	tb.Helper()
	return alive(direct(tb, be, id), pids...)
}

// StartNamed starts a detached process whose command line is cmdline (say
// "sleep 7654321"), and returns once it runs under that name: unlike a PID,
// a name finds it, or not, in a later incarnation of the sandbox.
func StartNamed(tb testing.TB, be backend.Backend, id, cmdline string) {
	tb.Helper()
	startNamed(tb, direct(tb, be, id), cmdline)
}

// Running counts the sandbox's processes whose command line is cmdline.
func Running(tb testing.TB, be backend.Backend, id, cmdline string) int {
	tb.Helper()
	return running(direct(tb, be, id), cmdline)
}

// shell runs a command in a clean shell of one sandbox, which must
// succeed, and returns its standard output: directly on a backend, or
// through a kernel's session.
type shell func(cmd string) string

func direct(tb testing.TB, be backend.Backend, id string) shell {
	return func(cmd string) string { tb.Helper(); return Sh(tb, be, id, cmd) }
}

func startSentinel(sh shell) string {
	return strings.TrimSpace(sh("setsid sleep 100000 </dev/null >/dev/null 2>&1 & echo $!"))
}

func alive(sh shell, pids ...string) []bool {
	// kill -0 succeeds on zombies; the process must be gone altogether:
	// from /proc where there is one, else from ps.
	script := ""
	for _, p := range pids {
		script += fmt.Sprintf("if [ -d /proc/self ]; then [ -e /proc/%[1]s ]; else ps -p %[1]s >/dev/null; fi && echo 1 || echo 0; ", p)
	}
	out := strings.Fields(sh(script))
	res := make([]bool, len(pids))
	for i := range res {
		res[i] = i < len(out) && out[i] == "1"
	}
	return res
}

// escapees is a command whose descendants escape every way a shell
// allows: one calls setsid and ignores SIGTERM, one is double-forked and
// ignores SIGTERM and SIGHUP. Once both run it prints "ready" and sleeps.
type escapees struct{ setsid, doubleFork string }

// newEscapees names the fixture's PID files; n keeps rounds apart.
func newEscapees(n int) escapees {
	return escapees{fmt.Sprintf("/tmp/escapee-setsid-%d.pid", n), fmt.Sprintf("/tmp/escapee-fork-%d.pid", n)}
}

func (e escapees) command() string {
	return fmt.Sprintf(`rm -f %[1]s %[2]s
setsid sh -c 'trap "" TERM; echo $$ > %[1]s; exec sleep 1000' </dev/null >/dev/null 2>&1 &
( sh -c 'sh -c "echo \$\$ > %[2]s; trap \"\" TERM HUP; sleep 1000" &' & )
while [ ! -s %[1]s ] || [ ! -s %[2]s ]; do sleep 0.01; done
echo ready
sleep 1000
`, e.setsid, e.doubleFork)
}

// pids returns the escapees' PIDs, once the command has said ready.
func (e escapees) pids(t testing.TB, sh shell) []string {
	t.Helper()
	pids := strings.Fields(sh("cat " + e.setsid + " " + e.doubleFork))
	if len(pids) != 2 {
		t.Fatalf("the escapees' PIDs: %q", pids)
	}
	return pids
}

// checkProof fails t unless the escapees are gone and the sentinel lives.
func checkProof(t testing.TB, sh shell, what string, escapeePIDs []string, sentinel string) {
	t.Helper()
	got := alive(sh, append(escapeePIDs, sentinel)...)
	if got[0] || got[1] {
		t.Fatalf("%s: descendants survived (setsid %s alive %v, double fork %s alive %v)", what, escapeePIDs[0], got[0], escapeePIDs[1], got[1])
	}
	if !got[2] {
		t.Fatalf("%s: the sentinel %s, started by an earlier command, died", what, sentinel)
	}
}

func startNamed(tb testing.TB, sh shell, cmdline string) {
	tb.Helper()
	sh("setsid " + cmdline + " </dev/null >/dev/null 2>&1 &")
	// Until it execs, the forked shell has the shell's command line.
	eventually(tb, "a process "+cmdline, func() error {
		if n := running(sh, cmdline); n != 1 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
}

func running(sh shell, cmdline string) int {
	out := sh(`if [ -d /proc/self ]; then
  for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done 2>/dev/null
else
  ps ax -o args=
fi`)
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == cmdline {
			n++
		}
	}
	return n
}
