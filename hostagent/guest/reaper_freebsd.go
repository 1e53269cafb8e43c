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
	"os"
	"os/signal"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// procctl(2) commands and structures (sys/procctl.h); x/sys/unix has the
// system call's number only.
const (
	procReapAcquire = 2
	procReapStatus  = 4
	procReapKill    = 6
	pPID            = 0 // idtype_t P_PID
)

type reaperStatus struct {
	Flags       uint32
	Children    uint32
	Descendants uint32
	Reaper      int32
	Pid         int32
	_           [15]uint32
}

type reaperKill struct {
	Sig     int32
	Flags   uint32
	Subtree int32
	Killed  uint32
	Fpid    int32
	_       [15]uint32
}

// procctl acts on this process. id_t is 64 bits: passed in one register,
// as on the 64-bit platforms this is built for (amd64, arm64).
func procctl(cmd int, data unsafe.Pointer) error {
	_, _, e := unix.Syscall6(unix.SYS_PROCCTL, pPID, uintptr(os.Getpid()), uintptr(cmd), uintptr(data), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// RunReaper runs argv (after -uid N -gid N) as a child of this process,
// which becomes a reaper first (PROC_REAP_ACQUIRE): every descendant of
// the command, whatever it does (setsid, double fork, ignoring SIGTERM),
// stays in this process's reaper subtree. The reaper runs as the jail's
// root, the command as the sandbox user, who therefore cannot signal it.
//
// When the command's shell ends, the reaper exits with its status (a
// signal is raised again), and what the shell left in the background
// belongs to the jail, as after any command. On SIGTERM it kills the
// subtree with SIGKILL (PROC_REAP_KILL) and reaps until the kernel counts
// no descendant (PROC_REAP_STATUS), then exits ReapProvedExit; past
// ProofTimeout, or when the kernel refuses, ReapLostExit.
func RunReaper(args []string) int {
	uid, gid, argv, err := reapArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox reap: %v\n", err)
		return guestapi.ReapSetupExit
	}
	if err := procctl(procReapAcquire, nil); err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox reap: procctl(PROC_REAP_ACQUIRE): %v\n", err)
		return guestapi.ReapSetupExit
	}
	// Notified before the child starts: no SIGCHLD or SIGTERM is missed.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM)
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "playground-sandbox reap: starting %s: %v\n", argv[0], err)
		return guestapi.ReapSetupExit
	}
	for sig := range sigs {
		if sig == unix.SIGTERM {
			return killSubtree()
		}
		// Reap every zombie: the shell, and orphans the reaper inherited.
		for {
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if wpid <= 0 || err != nil {
				break
			}
			if wpid != pid {
				continue
			}
			if ws.Signaled() {
				signal.Reset(ws.Signal())
				_ = unix.Kill(os.Getpid(), ws.Signal())
				time.Sleep(time.Second)
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
	return guestapi.ReapLostExit
}

// killSubtree kills every descendant and proves none is left.
func killSubtree() int {
	code, why := proveSubtreeDead(procctlReaper{}, guestapi.ProofTimeout)
	if why != "" {
		fmt.Fprintf(os.Stderr, "playground-sandbox reap: %s\n", why)
	}
	return code
}

// procctlReaper is this process's reaper subtree, through procctl(2).
type procctlReaper struct{}

func (procctlReaper) descendants() (int, error) {
	var st reaperStatus
	if err := procctl(procReapStatus, unsafe.Pointer(&st)); err != nil { //nolint:gosec // procctl(2) takes its argument by address
		return 0, err
	}
	return int(st.Descendants), nil
}

func (procctlReaper) killAll() error {
	rk := reaperKill{Sig: int32(unix.SIGKILL)}
	// ESRCH: nothing was left to signal between the count and the kill.
	if err := procctl(procReapKill, unsafe.Pointer(&rk)); err != nil && !errors.Is(err, unix.ESRCH) { //nolint:gosec // procctl(2) takes its argument by address
		return fmt.Errorf("%w (first failed pid %d)", err, rk.Fpid)
	}
	return nil
}

func (procctlReaper) reap() {
	for {
		var ws unix.WaitStatus
		if wpid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); wpid <= 0 || err != nil {
			return
		}
	}
}
