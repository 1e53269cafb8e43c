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

// Command playground-sandbox runs inside every oci sandbox: as the
// container's PID 1 ("init") and as the per-command shepherd that init keeps
// ready ("shepherd"). The host agent bind-mounts it read-only into the
// container, so it must be static (CGO_ENABLED=0) and must not depend on
// the sandbox's base filesystem. See package hostagent/guest.
//
//	playground-sandbox init [-spares N] [-lazy]
//	playground-sandbox shepherd   (started by init only)
//	playground-sandbox vminit     (PID 1 of a vm sandbox's initramfs, as /init)
//	playground-sandbox hold [-attach JOB]  (a job's holder in a jail, started by the agent)
//	playground-sandbox reap -uid N -gid N -- COMMAND  (a jail's command, FreeBSD)
package main

import (
	"fmt"
	"os"
)

func main() {
	// The kernel starts an initramfs's /init without arguments.
	if os.Args[0] == "/init" && len(os.Args) == 1 {
		os.Exit(run("vminit", nil))
	}
	if len(os.Args) < 2 {
		usage()
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: playground-sandbox init [-spares N] [-lazy] | shepherd | hold [-attach JOB] | confine [-as BYTES] [-cpu SECONDS] [-fds N] /PROGRAM [ARGS...] | sync | reap -uid N -gid N -- COMMAND")
	os.Exit(2)
}
