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

// Paths and identities inside a sandbox. The host agent builds the
// sandbox's filesystem to match them; init and the shepherds rely on them.
const (
	// Dir holds everything of ours inside the container. It is not part of
	// the tenant's writable storage.
	Dir = "/.playground"
	// Binary is where the playground-sandbox binary is bind-mounted
	// read-only.
	Binary = Dir + "/bin/playground-sandbox"
	// RunDir is bind-mounted from the host and owned by container root with
	// mode 0700, so the tenant cannot reach the socket inside it.
	RunDir = Dir + "/run"
	// SocketName is the name of init's listening socket in RunDir.
	SocketName = "agent.sock"
	// ControlSocketName is init's control socket in RunDir: init itself
	// answers job listings and attachments there, starting no process.
	ControlSocketName = "control.sock"

	// TenantUID and TenantGID run every tenant command. They are not
	// container root, so the tenant cannot signal or trace init and the
	// shepherds, and holds no capabilities.
	TenantUID = 1000
	TenantGID = 1000
	// TenantOOMScoreBoost is how much higher than init's and the
	// shepherds' the OOM score adjustment of tenant commands starts (at
	// most 1000), so that when a tenant fills its memory cgroup the OOM
	// killer takes one of the tenant's processes, not the supervision
	// that proves cleanup. Raising a score needs no privilege, so this
	// works in any sandbox; a tenant can lower its own processes back to
	// the supervisors' score, but not below, and only its sandbox suffers.
	TenantOOMScoreBoost = 500
	// TenantUser names TenantUID in the sandbox's /etc/passwd.
	TenantUser = "sandbox"
	// TenantHome is the tenant's home and the default working directory.
	TenantHome = "/home/" + TenantUser
	// Workspace is a second persistent, tenant-owned directory.
	Workspace = "/workspace"
	// PileDir is where the tenant's append-only pile is mounted.
	PileDir = "/pile"
	// SigningKeyFile, in PileDir, is the tenant's signing key (the 64 hex
	// digits of an Ed25519 seed): the tenant's, mode 0400 and immutable,
	// so that no sandbox process can write, chmod, rename or remove it.
	SigningKeyFile = "self.key"
	// SharedPileDir is where a shared pile (a FacultyBundle's staged
	// files, the same for every tenant that lists it) is mounted
	// read-only, in the tenant's pile; SharedPileName is its entry there.
	SharedPileDir  = PileDir + "/" + SharedPileName
	SharedPileName = "shared"

	// WorkerSpecFile, in RunDir, is the worker init keeps running: a JSON
	// WorkerSpec the agent writes (atomically, by rename) and removes to
	// stop it, then signals init (WorkerSignal); init also reads it when it
	// starts.
	WorkerSpecFile = "worker.json"
	// WorkerStatusFile, in RunDir, is init's JSON WorkerState, rewritten
	// (by rename) on every change.
	WorkerStatusFile = "worker-status.json"
	// WorkerLogFile, in RunDir, holds the worker's output, rotated to
	// WorkerLogFile+".1" past MaxWorkerLog bytes.
	WorkerLogFile = "worker.log"
	// MaxWorkerLog bounds each of the two worker log files.
	MaxWorkerLog = 256 << 10
	// WorkerTokenFile is where init puts the worker's internal bearer:
	// readable by the sandbox user only, on the sandbox's /run tmpfs.
	WorkerTokenFile = "/run/playground-worker/token"
	// WorkerTokenEnv names WorkerTokenFile in the worker's environment.
	WorkerTokenEnv = "PLAYGROUND_WORKER_TOKEN_FILE"

	// FacultiesDir holds the faculty bundles installed in the sandbox,
	// each read-only at FacultiesDir/<bundle>.
	FacultiesDir = "/opt/faculties"
	// FacultiesBin is on PATH in every shell; it holds a symbolic link to
	// each installed faculty binary.
	FacultiesBin = FacultiesDir + "/bin"

	// Shell runs every command.
	Shell = "/bin/sh"
	// DefaultPath is PATH in both shell modes (a login profile may change
	// it). Installed faculties come first, as /usr/local/bin comes before
	// the distribution's directories: an operator who installs a tool
	// means it to be the one a bare name runs.
	DefaultPath = FacultiesBin + ":" + SystemPath
	// SystemPath is PATH without the faculties: the guest's own processes
	// (init, shepherds), which run as the sandbox's root and never run a
	// faculty, so no bundle can stand in for a tool they might run by name.
	SystemPath = "/usr/local/bin:/usr/bin:/bin"
)

// The /etc files a backend generates for a sandbox (backend.EtcFiles).
const (
	// EtcDir holds a VM's generated /etc files: the root image's /etc has
	// a symlink to each (hack/vm-image.sh), so that the agent replaces
	// them in a running VM (an Etc request) as it does on a container's
	// host directory. It is in init's own tmpfs, the guest root's,
	// readable by all.
	EtcDir = Dir + "/etc"
	// NoNetworkResolv is resolv.conf in a sandbox without network.
	NoNetworkResolv = "# No network: this sandbox has only a loopback interface.\n"
)

// EtcNames are the files of EtcDir: those the agent generates, and the
// only ones an Etc request may replace.
var EtcNames = []string{"passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf", "profile"}

// The vm backend boots its kernel with an initramfs that holds the guest
// binary as /init and the kernel modules the guest needs; the guest's
// first stage mounts the sandbox's disks and execs init, which serves the
// agent over a virtio-serial port instead of a bind-mounted socket.
const (
	// VMModulesDir, in the initramfs, holds the modules to load.
	VMModulesDir = "/modules"
	// VMModulesOrder, in VMModulesDir, names them one a line, each after
	// the modules it depends on.
	VMModulesOrder = "order"
	// VMPortName is the name of the virtio-serial port to the agent.
	VMPortName = "playground.agent"
	// VMRootDevice is the read-only root image; VMDiskDevice the sandbox's
	// own disk (ext4, made by the agent), holding workspace and home.
	VMRootDevice = "/dev/vda"
	VMDiskDevice = "/dev/vdb"
	// VMPileDevice is the sandbox's pile (ext4, made by the agent with
	// the pile's files), mounted at PileDir and sealed append-only.
	VMPileDevice = "/dev/vdc"
	// VMConfigEtc, in the initramfs, holds the sandbox's own /etc files
	// (passwd, hosts, profile…), which the agent appends to the initramfs
	// at each start: they start EtcDir.
	VMConfigEtc = "/config/etc"
	// VMPIDsParam is the guest kernel's command-line parameter that
	// carries the sandbox's PIDs limit: playground.pids=N.
	VMPIDsParam = "playground.pids"
)

// Subcommands of the guest binary that the agent runs, and what they
// answer.
const (
	// ConfineMode is `playground-sandbox confine`, which bounds and
	// confines a program before it execs it (Linux): the agent runs what
	// parses a file a guest wrote under it.
	ConfineMode = "confine"

	// SyncMode is `playground-sandbox sync` (Linux), sync(2): the vm
	// backend flushes a guest's file systems with it before its VM ends,
	// whatever tools the guest's root has (an image may have no sync).
	SyncMode = "sync"

	// HoldMode is `playground-sandbox hold`, a job's holder started for
	// that one job where no init keeps shepherds (the jail backend): its
	// standard input is the agent's connection, on which it takes the
	// job's start as a shepherd does and then holds the job as a
	// shepherd does, socket and record under HoldRunFlag's directory's
	// "jobs". With HoldAttachFlag it instead connects to that job's
	// socket and hands the connection back over standard input
	// (SCM_RIGHTS), with a Started frame, or sends an Error frame.
	HoldMode = "hold"
	// HoldAttachFlag names the job a holder started with it attaches to.
	HoldAttachFlag = "-attach"

	// ReapMode is `playground-sandbox reap`, the FreeBSD guest's proof of
	// cleanup: a jail's command runs under it, which the agent ends with
	// SIGTERM and whose exit status says whether every descendant is
	// gone.
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

// LazyInitEnv is the variable that, set to "1" in init's environment,
// starts it as init -lazy does: no spare shepherd until the sandbox is
// first used or ResumeSignal wakes it (a sandbox waiting in the warm
// pool). In the environment, not on the command line that a tenant reads
// in /proc/1/cmdline, so that a claimed pooled sandbox looks like a
// cold-started one; init passes its environment on to nothing (its
// shepherds get OwnEnv).
const LazyInitEnv = "PLAYGROUND_INIT_LAZY"

// OwnEnv is the environment of the guest's own processes, init and its
// shepherds (never a command's): PATH, and one P for the Go runtime. They
// only wait and hand file descriptors on, so more Ps would buy nothing but
// threads and per-P caches, paid once per idle sandbox.
func OwnEnv() []string {
	return []string{"PATH=" + SystemPath, "GOMAXPROCS=1"}
}

// CleanEnv is the whole environment of a clean-mode shell: fixed, minimal
// and independent of any profile.
func CleanEnv() []string {
	return []string{"PATH=" + DefaultPath, "HOME=" + TenantHome}
}

// LoginEnv is the environment a login-mode shell starts with, before
// /etc/profile (which exports the tenant's login variables and PERSONA) and
// ~/.profile run.
func LoginEnv() []string {
	return []string{
		"PATH=" + DefaultPath,
		"HOME=" + TenantHome,
		"USER=" + TenantUser,
		"LOGNAME=" + TenantUser,
		"SHELL=" + Shell,
	}
}
