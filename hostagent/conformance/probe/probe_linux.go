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
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// families are the address families the probe knows by name.
var families = map[string]int{
	"unix": unix.AF_UNIX, "inet": unix.AF_INET, "inet6": unix.AF_INET6, "netlink": unix.AF_NETLINK,
	"vsock": unix.AF_VSOCK, "packet": unix.AF_PACKET, "alg": unix.AF_ALG, "key": unix.AF_KEY,
	"bluetooth": unix.AF_BLUETOOTH, "can": unix.AF_CAN, "tipc": unix.AF_TIPC, "rds": unix.AF_RDS,
	"xdp": unix.AF_XDP, "appletalk": unix.AF_APPLETALK, "x25": unix.AF_X25, "llc": unix.AF_LLC,
	"nfc": unix.AF_NFC, "qipcrtr": unix.AF_QIPCRTR, "smc": unix.AF_SMC, "kcm": unix.AF_KCM,
}

// trySocket opens a socket of the family with the first type the family
// supports, so that a refusal is the family's, not the type's.
func trySocket(name string) string {
	family, ok := families[name]
	if !ok {
		return "unsupported"
	}
	var err error
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_SEQPACKET, unix.SOCK_RAW} {
		var fd int
		fd, err = unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			return "ok"
		}
		// The family exists, but not with this type (or protocol 0).
		if !errors.Is(err, unix.ESOCKTNOSUPPORT) && !errors.Is(err, unix.EPROTONOSUPPORT) &&
			!errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPROTOTYPE) {
			break
		}
	}
	var errno unix.Errno
	if errors.As(err, &errno) && unix.ErrnoName(errno) != "" {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// watched makes a system call on a thread of its own and says how it
// ended: "returned" and its result, or "killed" once the thread is gone
// (seccomp's SECCOMP_RET_KILL_THREAD, libseccomp's answer to an ABI its
// filter does not list).
func watched(call func() uintptr) string {
	tids := make(chan int, 1)
	done := make(chan uintptr, 1)
	go func() {
		runtime.LockOSThread() // the thread is not reused: it may die
		tids <- unix.Gettid()
		done <- call()
	}()
	stat := fmt.Sprintf("/proc/self/task/%d/stat", <-tids)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case r := <-done:
			return fmt.Sprintf("returned %d", int(r))
		case <-time.After(10 * time.Millisecond):
		}
		if !alive(stat) {
			return "killed"
		}
	}
	return "hung"
}

// alive says whether the thread of a /proc/…/stat file still runs: it is
// gone, or a zombie (the main thread stays one until the process ends).
func alive(stat string) bool {
	data, err := os.ReadFile(stat)
	if err != nil {
		return false
	}
	// The state follows the command, which is in parentheses and may hold
	// any byte: read after the last ')'.
	rest := data[bytes.LastIndexByte(data, ')')+1:]
	fields := bytes.Fields(rest)
	return len(fields) > 0 && string(fields[0]) != "Z" && string(fields[0]) != "X"
}
