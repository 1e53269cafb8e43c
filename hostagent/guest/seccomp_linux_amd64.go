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

import "golang.org/x/sys/unix"

const (
	// nativeAuditArch is the ABI the seccomp filter admits.
	nativeAuditArch = unix.AUDIT_ARCH_X86_64
	// foreignSyscallBit marks x32's calls, which share x86_64's
	// AUDIT_ARCH (__X32_SYSCALL_BIT).
	foreignSyscallBit = 0x40000000
)

// archDeniedSyscalls are the denied calls only this architecture has:
// raw port I/O.
var archDeniedSyscalls = []uintptr{unix.SYS_IOPL, unix.SYS_IOPERM}
