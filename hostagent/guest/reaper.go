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

// The reaper is the FreeBSD guest's proof of cleanup (reaper_freebsd.go):
// a jail's command runs under `playground-sandbox reap`, which the agent
// ends with SIGTERM and whose exit status says whether every descendant
// is gone. The constants are portable: the agent's side is built and
// tested everywhere.
const (
	// ReapMode is the guest binary's subcommand.
	ReapMode = "reap"
	// ReapProvedExit is the reaper's exit status when, after SIGTERM, the
	// kernel counted no descendant left (PROC_REAP_STATUS).
	ReapProvedExit = 199
	// ReapLostExit is its exit status when descendants outlived
	// ProofTimeout of PROC_REAP_KILL, or the kernel refused to count or
	// kill them: the proof is lost, and the reaper said why on stderr.
	ReapLostExit = 198
	// ReapSetupExit is its exit status when it could not become a reaper
	// or start the command, which then never ran.
	ReapSetupExit = 197
)
