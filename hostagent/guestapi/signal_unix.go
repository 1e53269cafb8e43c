//go:build unix

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

package guestapi

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// WorkerSignal tells init that WorkerSpecFile changed: the agent sends it
// after writing or removing the file. (A signal, not an inotify watch: an
// inotify instance held by init slows its exit, and with it the teardown of
// the sandbox's PID namespace, by a grace period of the kernel's.)
const WorkerSignal = syscall.SIGUSR1

// ResumeSignal tells init to listen again on the sockets a Checkpoint
// request closed: the agent sends it after the sandbox is restored from a
// checkpoint, or when it gave one up and the sandbox runs on. It also
// tells an init started with -lazy (a pooled sandbox, which keeps no spare
// shepherd) that its sandbox was claimed: it starts its spares. An init
// that listens and keeps its spares ignores it.
const ResumeSignal = syscall.SIGUSR2

// SignalName names signal n as Exit says it: "SIGKILL", or "signal 40"
// for one without a name.
func SignalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}

// signalNumber is the number of the signal SignalName names; 0 for none.
func signalNumber(name string) int {
	if name == "" {
		return 0
	}
	if n := unix.SignalNum(name); n != 0 {
		return int(n)
	}
	var n int
	if _, err := fmt.Sscanf(name, "signal %d", &n); err == nil {
		return n
	}
	return 0
}
