//go:build linux || (freebsd && (amd64 || arm64))

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

import "syscall"

// shellAttr is how forkShell starts the tenant's shell on Linux and on
// FreeBSD: in dir with env, with files as its descriptors 0, 1 and 2, as
// the tenant (not container root, no capabilities, no supplementary
// groups), in a session of its own (so that job control in the command
// reaches neither init nor other commands), and, for a terminal job
// (ctty), with its descriptor 0, its terminal, as the session's
// controlling terminal. Each OS adds what it watches the shell's end with.
func shellAttr(env []string, dir string, files []uintptr, ctty bool) *syscall.ProcAttr {
	return &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: tenantUID, Gid: tenantGID, Groups: []uint32{}},
			Setsid:     true,
			Setctty:    ctty,
		},
	}
}
