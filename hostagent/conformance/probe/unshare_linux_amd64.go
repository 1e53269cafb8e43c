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

import "golang.org/x/sys/unix"

// int80 makes a system call through i386's ABI (int_amd64.s).
func int80(trap, a1, a2, a3 uintptr) uintptr

const (
	nrUnshare386 = 310        // __NR_unshare of i386
	nrUnsharex32 = 0x40000110 // __X32_SYSCALL_BIT | __NR_unshare of x86_64
)

func unshare32() string {
	return watched(func() uintptr { return int80(nrUnshare386, unix.CLONE_NEWUSER, 0, 0) })
}

func unsharex32() string {
	return watched(func() uintptr {
		r, _, errno := unix.RawSyscall(nrUnsharex32, unix.CLONE_NEWUSER, 0, 0)
		if errno != 0 {
			return uintptr(-int(errno))
		}
		return r
	})
}
