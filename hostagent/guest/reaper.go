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
	"strconv"
	"time"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// The reaper is the FreeBSD guest's proof of cleanup (reaper_freebsd.go):
// a jail's command runs under `playground-sandbox reap`
// (guestapi.ReapMode), which the agent ends with SIGTERM and whose exit
// status says whether every descendant is gone. Its logic is portable, so
// that it is tested everywhere.
//
// reaperOps are the kernel's controls over a reaper's subtree: procctl(2)
// on FreeBSD (reaper_freebsd.go), a fake in tests.
type reaperOps interface {
	// descendants counts the subtree (PROC_REAP_STATUS).
	descendants() (int, error)
	// killAll sends SIGKILL to the whole subtree (PROC_REAP_KILL); nothing
	// left to signal is no error.
	killAll() error
	// reap collects the zombies of the reaper's children.
	reap()
}

// proveSubtreeDead kills the subtree until the kernel counts none left,
// for at most timeout: the exit status of the reaper (ReapProvedExit or
// ReapLostExit) and, when lost, why.
func proveSubtreeDead(ops reaperOps, timeout time.Duration) (int, string) {
	deadline := time.Now().Add(timeout)
	for {
		n, err := ops.descendants()
		if err != nil {
			return guestapi.ReapLostExit, fmt.Sprintf("counting the descendants (PROC_REAP_STATUS): %v", err)
		}
		if n == 0 {
			return guestapi.ReapProvedExit, ""
		}
		if err := ops.killAll(); err != nil {
			return guestapi.ReapLostExit, fmt.Sprintf("killing the descendants (PROC_REAP_KILL): %v", err)
		}
		ops.reap()
		if time.Now().After(deadline) {
			return guestapi.ReapLostExit, fmt.Sprintf("%d descendants still alive after %v of SIGKILL", n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapArgs parses the reaper's command line: -uid N -gid N [--] argv.
func reapArgs(args []string) (uid, gid uint32, argv []string, err error) {
	for len(args) >= 2 && (args[0] == "-uid" || args[0] == "-gid") {
		n, perr := strconv.ParseUint(args[1], 10, 32)
		if perr != nil {
			return 0, 0, nil, fmt.Errorf("%s %q: %v", args[0], args[1], perr)
		}
		if args[0] == "-uid" {
			uid = uint32(n)
		} else {
			gid = uint32(n)
		}
		args = args[2:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || uid == 0 {
		return 0, 0, nil, errors.New("usage: playground-sandbox reap -uid N -gid N -- command... (N not root)")
	}
	return uid, gid, args, nil
}
