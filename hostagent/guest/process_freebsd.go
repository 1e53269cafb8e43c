//go:build freebsd && (amd64 || arm64)

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
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// What a job's holder asks of FreeBSD to run a command and prove its end
// (Linux's are in process_linux.go): a reaper (procctl(2)) instead of a
// child subreaper, a kqueue watching the shell instead of a pidfd, and
// PROC_REAP_KILL instead of a walk of /proc.

// becomeSubreaper makes this process a reaper (PROC_REAP_ACQUIRE): every
// orphaned descendant reparents to it, so "no children" proves "no
// descendants".
func becomeSubreaper() error {
	if err := procctl(procReapAcquire, nil); err != nil {
		return fmt.Errorf("procctl(PROC_REAP_ACQUIRE): %w", err)
	}
	return nil
}

// forkShell starts argv[0]=guestapi.Shell as the tenant, in a session of
// its own, with files as its descriptors 0, 1 and 2: its PID and a
// descriptor that becomes readable when it exits (a kqueue with
// EVFILT_PROC NOTE_EXIT on it; poll(2) reports a kqueue readable while it
// has an event).
func forkShell(argv, env []string, dir string, files []uintptr, ctty bool) (pid, exited int, err error) {
	pid, err = syscall.ForkExec(guestapi.Shell, argv, shellAttr(env, dir, files, ctty))
	if err != nil {
		return 0, -1, err
	}
	kq, err := unix.Kqueue()
	if err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return 0, -1, fmt.Errorf("kqueue: %w", err)
	}
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		unix.Close(kq)
		if !errors.Is(err, unix.ESRCH) {
			_ = unix.Kill(pid, unix.SIGKILL)
			return 0, -1, fmt.Errorf("kevent(EVFILT_PROC): %w", err)
		}
		// Gone already: a pipe with no writer is readable (end of file).
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return 0, -1, err
		}
		unix.Close(p[1])
		return pid, p[0], nil
	}
	return pid, kq, nil
}

// killDescendants sends SIGKILL to this reaper's whole subtree.
func killDescendants() error { return procctlReaper{}.killAll() }

// liveDescendants says how many descendants the kernel still counts.
func liveDescendants() string {
	n, err := procctlReaper{}.descendants()
	if err != nil {
		return fmt.Sprintf("the kernel could not count them: %v", err)
	}
	return fmt.Sprintf("%d in the reaper's subtree", n)
}

// dropListener: a FreeBSD holder is started for its job (RunHold) and
// shares no listening socket.
func dropListener() {}
