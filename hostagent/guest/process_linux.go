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
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// What a shepherd asks of Linux to run a command and prove its end; the
// FreeBSD holder's are in process_freebsd.go.

// becomeSubreaper makes every orphaned descendant of this process
// reparent to it, so that "no children" proves "no descendants".
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return nil
}

// forkShell starts argv[0]=guestapi.Shell as the tenant, in a session of
// its own, with files as its descriptors 0, 1 and 2: its PID and a pidfd
// that becomes readable when it exits. The command starts with an OOM
// score TenantOOMScoreBoost above the shepherd's: the child inherits the
// score at fork, so the shepherd raises its own for the fork only, then
// lowers it back (allowed down to the score it was given).
func forkShell(argv, env []string, dir string, files []uintptr, ctty bool) (pid, exited int, err error) {
	exited = -1
	guarded := ownOOMScoreAdj < 1000 && setOOMScoreAdj(min(ownOOMScoreAdj+guestapi.TenantOOMScoreBoost, 1000)) == nil
	attr := shellAttr(env, dir, files, ctty)
	attr.Sys.PidFD = &exited
	pid, err = syscall.ForkExec(guestapi.Shell, argv, attr)
	if guarded {
		_ = setOOMScoreAdj(ownOOMScoreAdj)
	}
	if err != nil {
		return 0, -1, err
	}
	if exited < 0 {
		// Without a pidfd the supervision loop cannot see the shell end.
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		return 0, -1, errors.New("the kernel did not return a pidfd for the shell (Linux 5.3 or later is required)")
	}
	return pid, exited, nil
}

// killDescendants sends SIGKILL to every descendant of this process that
// /proc shows.
func killDescendants() error {
	for _, p := range descendants(os.Getpid()) {
		killProc(p)
	}
	return nil
}

// liveDescendants describes the descendants still alive.
func liveDescendants() string { return describeProcs(descendants(os.Getpid())) }
