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

// Package backend defines what the host agent needs from a way of isolating
// sandboxes (an OCI runtime, FreeBSD jails, Lima VMs): provisioning and
// lifecycle, command execution with streamed output, and the capabilities
// that decide which tools a backend may serve.
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Capabilities is how a backend describes itself, in one place: what it
// can guarantee (the flags) and which optional behaviour it has (the
// interface fields, each nil when it has none; when it has, the backend
// itself or a shared implementation it gives only what differs:
// guestexec.Holder, Snapshots, KeyInstaller, StartCount). The agent asks
// Capabilities, never probes a backend for an interface (test/deps fails
// on a type assertion to a backend's type outside its constructor): a
// wrapper of a backend passes on what it is given, and a backend can offer
// a behaviour on some nodes only.
type Capabilities struct {
	// ProvesCleanup is true when Kill returns only after every descendant of
	// the command (including ones that setsid, double-fork or ignore
	// SIGTERM) is dead. Background jobs are admitted only on such backends.
	ProvesCleanup bool
	// AppendOnlyPile is true when the pile's files are append-only as seen
	// from inside the sandbox (truncation and overwrite are refused).
	AppendOnlyPile bool
	// SharedPile is true when the backend mounts a faculty marked
	// SharedPile at guestapi.SharedPileDir.
	SharedPile bool
	// Egress is true when the backend runs sandboxes whose Spec lists
	// egress rules (network mode egress) on this node; every backend runs
	// network mode none. The agent advertises it in its Lease, and the
	// manager binds a Sandbox of mode egress only where it is offered.
	Egress bool
	// Images is true when the backend runs a sandbox on an OCI image
	// (Spec.Image); a backend without it refuses such a spec.
	Images bool

	// Prober tells cheaply whether a sandbox's init still runs.
	Prober Prober
	// StartCounter counts the inits started per sandbox.
	StartCounter StartCounter
	// Dialer reaches a port on a sandbox's own loopback.
	Dialer Dialer
	// Guest reaches the guest binary's init of a sandbox, where the
	// kernel runs a command itself over the guest protocol; without it,
	// the kernel runs commands through Exec.
	Guest *Guest
	// JobHolder: the sandboxes hold background jobs themselves.
	JobHolder JobHolder
	// OOMCounter counts the OOM kills in a sandbox's memory limit.
	OOMCounter OOMCounter
	// ForkCounter counts the forks a sandbox's process limit refused.
	ForkCounter ForkCounter
	// WorkerSupervisor keeps a worker running inside a sandbox.
	WorkerSupervisor WorkerSupervisor
	// StorageReporter reports the disk limits fixed at provisioning.
	StorageReporter StorageReporter
	// PileReader reads a pile that is not a plain host directory.
	PileReader PileReader
	// FileServer serves the agent's file calls; without it, the agent
	// runs them as shell scripts through Exec (ShellFiles).
	FileServer FileServer
	// Describer has a note on how the backend runs on this node.
	Describer Describer
	// Isolator offers a choice of isolation; without it, container only.
	Isolator Isolator
	// WarmPool keeps blank sandboxes started ahead of demand.
	WarmPool WarmPool
	// Builder builds faculty bundles in a throwaway sandbox.
	Builder Builder
	// Suspender suspends a sandbox with its memory.
	Suspender Suspender
	// Pauser freezes a sandbox's processes.
	Pauser Pauser
	// Snapshotter snapshots sandboxes and provisions forks of them.
	Snapshotter Snapshotter
	// SigningKeyHolder keeps the tenant's signing key in its pile.
	SigningKeyHolder SigningKeyHolder
	// UsageMeter reads what a sandbox uses of the node.
	UsageMeter UsageMeter
	// EgressBroker adds credentials to a sandbox's HTTPS requests.
	EgressBroker EgressBroker
	// EgressMeter counts the sandboxes' egress.
	EgressMeter EgressMeter
}

// Described is a backend's Capabilities, worked out once: its behaviours
// are made on the first call, not at every call, and every call after
// answers the same value. The zero value is ready.
type Described struct {
	once sync.Once
	caps Capabilities
}

// Get returns the Capabilities describe makes, calling it only the first
// time.
func (d *Described) Get(describe func() Capabilities) Capabilities {
	d.once.Do(func() { d.caps = describe() })
	return d.caps
}

// ShellMode selects the environment of the /bin/sh that runs a command:
// the agent protocol's Shell, one type from the gateway to the backend.
type ShellMode = agentapi.Shell

// The shell modes.
const (
	// ShellLogin loads the tenant's login profile (environment and script).
	ShellLogin = agentapi.ShellLogin
	// ShellClean starts from a fixed minimal environment and loads no profile.
	ShellClean = agentapi.ShellClean
)

// Isolations a Spec may ask for.
const (
	// IsolationContainer is a container on the node's kernel (namespaces,
	// cgroups, seccomp: runc on the oci backend). The default.
	IsolationContainer = "container"
	// IsolationGVisor puts gVisor's user-space kernel between the sandbox
	// and the node's kernel (runsc on the oci backend).
	IsolationGVisor = "gvisor"
)

// IsolationOf is the isolation spec asks for, the default filled in.
func IsolationOf(spec Spec) string {
	if spec.Isolation == "" {
		return IsolationContainer
	}
	return spec.Isolation
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name  string
	Value string
}

// Resources are the limits a sandbox runs under; zero means the backend's
// default.
type Resources struct {
	CPUMillis   int64
	MemoryBytes int64
	PIDs        int64
}

// Storage bounds a sandbox's disk: its writable layer (home, workspace,
// tmp) and its pile, each in bytes and in inodes (files, directories,
// symlinks). Zero means the backend's default. A backend that enforces
// them fixes them when it provisions the sandbox: later values apply only
// to a sandbox provisioned anew.
type Storage struct {
	LayerBytes  int64
	LayerInodes int64
	PileBytes   int64
	PileInodes  int64
}

// Spec is everything a backend needs to provision one sandbox.
type Spec struct {
	// ID is the stable sandbox ID; the backend keys all its state by it.
	ID string
	// Tenant is namespace/name of the owning tenant, for labels and logs.
	Tenant string
	// Backend is the backend class that runs the sandbox (the Sandbox's
	// spec.backend): an agent with several backends routes by it, and
	// empty means the agent's first. A backend itself may ignore it.
	Backend string
	// Isolation is the boundary between the sandbox and the node's kernel
	// on a backend that offers a choice (oci): IsolationContainer (empty
	// means it) or IsolationGVisor. It is fixed when the sandbox is
	// provisioned: a backend refuses to run an existing sandbox with
	// another, rather than silently change its boundary.
	Isolation string `json:",omitempty"`
	// Persona is exported as PERSONA in login shells.
	Persona string
	// Resources bound the sandbox.
	Resources Resources
	// Storage bounds the sandbox's disk.
	Storage Storage
	// LoginEnv and LoginScript are the login profile.
	LoginEnv    []EnvVar
	LoginScript string
	// Egress is what the sandbox may reach on the network. Empty means
	// no network at all (loopback only); a backend that cannot enforce a
	// list refuses a spec that has one, rather than run it unconfined.
	Egress []EgressRule `json:",omitempty"`
	// Faculties are the staged faculty bundle builds installed read-only
	// in the sandbox, their binaries on the PATH of every shell. They are
	// fixed when the sandbox's processes start: a change applies at the
	// next Start after a Stop (a restart), never to running processes.
	Faculties []Faculty `json:",omitempty"`
	// FromSnapshot, on a backend with a Snapshotter, names a snapshot of
	// this node that a sandbox provisioned anew starts from: its writable
	// layer a copy of the snapshot's, its processes restored from the
	// snapshot's memory where both keep memory. It is read only when the
	// sandbox is first provisioned.
	FromSnapshot string `json:",omitempty"`
	// Paused, on a backend with a Pauser, asks Reattach to leave a sandbox
	// it finds paused so (the agent holds it frozen: a spent usage
	// limit), rather than thaw it. A sandbox that is not running is
	// started as ever; the agent pauses it after. Never kept on the node.
	Paused bool `json:"-"`
	// Image, when set, is the sandbox's system in place of the node's:
	// an OCI image the agent holds in its image store while the sandbox
	// exists. A backend without Capabilities.Images refuses a spec with
	// one. A new Digest applies from the sandbox's next start.
	Image *Image `json:",omitempty"`
}

// Image is an OCI image a sandbox runs as its system: its layers unpacked
// (overlayfs lower layers, whiteouts in overlay form) and the part of its
// config a sandbox honours.
type Image struct {
	// Digest is the image's manifest digest (sha256:…).
	Digest string
	// Layers are the layers' directories, bottom first. The backend
	// never writes to them, nor follows a symlink in them on the node.
	Layers []string
	// Env are the image's environment variables (NAME=value), exported
	// in the login profile before the tenant's own.
	Env []string `json:",omitempty"`
	// WorkingDir is the image's working directory, exported in the login
	// profile as PLAYGROUND_IMAGE_WORKDIR.
	WorkingDir string `json:",omitempty"`
}

var imageDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Validate checks an image a spec names (nil: none): a sha256 digest, and
// at least one layer, each a clean absolute directory.
func (img *Image) Validate() error {
	if img == nil {
		return nil
	}
	if !imageDigest.MatchString(img.Digest) {
		return fmt.Errorf("image digest %q is not sha256:<64 hex digits>", img.Digest)
	}
	if len(img.Layers) == 0 {
		return fmt.Errorf("image %s has no layers", img.Digest)
	}
	for _, l := range img.Layers {
		if !filepath.IsAbs(l) || filepath.Clean(l) != l {
			return fmt.Errorf("image %s: layer directory %q is not a clean absolute path", img.Digest, l)
		}
	}
	return nil
}

// Faculty is one staged build of a FacultyBundle.
type Faculty struct {
	// Name is the FacultyBundle's name; the build is mounted read-only at
	// guestapi.FacultiesDir/Name.
	Name string
	// Fingerprint is the build's content fingerprint, for labels and logs.
	Fingerprint string
	// Dir is the host directory holding the staged binaries, and nothing
	// else; the backend never writes to it.
	Dir string
	// Binaries are the file names in Dir that go on the PATH (through
	// guestapi.FacultiesBin). When two faculties of a sandbox name the same
	// binary, the one listed first wins.
	Binaries []string
	// SharedPile: the build is the sandbox's shared pile, mounted
	// read-only (and not executable) at guestapi.SharedPileDir instead,
	// nothing of it on the PATH. At most one faculty of a Spec is; only a
	// backend whose Capabilities say SharedPile is given one.
	SharedPile bool
}

// BuildRequest is one faculty build, run in a throwaway sandbox.
type BuildRequest struct {
	// ID names the throwaway sandbox, in the format of sandbox IDs and
	// distinct from every tenant's; it is destroyed when Build returns.
	ID string
	// Source is a host directory the build sees read-only at /src.
	Source string
	// Out is an empty host directory the build sees, writable, at /out;
	// the backend makes it writable by the build's user and hands it back
	// owned by the agent.
	Out string
	// Command is the build's argv; the builder runs it as the sandbox
	// user, with no network, in /out.
	Command []string
	// Timeout bounds the build; the builder is killed past it.
	Timeout time.Duration
	// Resources and Storage bound the builder, as a sandbox's.
	Resources Resources
	Storage   Storage
}

// BuildResult is how a build ended.
type BuildResult struct {
	Exit ExitStatus
	// Log is the tail of the build's output, stdout and stderr
	// interleaved, at most MaxBuildLog bytes.
	Log []byte
}

// MaxBuildLog bounds the build log a builder keeps.
const MaxBuildLog = 16 << 10

// Builder is the behaviour, in Capabilities.Builder, of backends that can
// build faculty bundles in a throwaway sandbox of their own kind: no
// network, the node's files out of reach, the sandbox destroyed after the
// build whatever its outcome.
type Builder interface {
	Build(ctx context.Context, req BuildRequest) (BuildResult, error)
}

// EgressRule allows connections to the addresses of a CIDR, on the
// given TCP and UDP ports (every port when Ports is empty).
type EgressRule struct {
	// CIDR is a network (IPv6 ones open something only on a backend that
	// gives sandboxes IPv6); Host, instead, a name or a wildcard
	// (*.example.com) whose answers the sandbox's resolver opens.
	CIDR  string
	Host  string  `json:",omitempty"`
	Ports []int32 `json:",omitempty"`
	// CheckServerName, with Host and Ports, lets through only TLS
	// connections that name Host (SNI), checked at the node.
	CheckServerName bool `json:",omitempty"`
	// Brokered, with an exact Host and Ports, has the node end the TLS of
	// the sandbox's connections to Host (with a CA of the sandbox's own
	// that it trusts) and add to each request the credential the agent
	// was given for Host (EgressBroker); the server name is checked as
	// with CheckServerName.
	Brokered bool `json:",omitempty"`
}

// EgressBroker is the behaviour, in Capabilities.EgressBroker, of backends
// that add credentials to a sandbox's HTTPS requests at the node, so that
// they never exist in the sandbox.
type EgressBroker interface {
	// SetEgressCredentials replaces the credentials of sandbox id, kept
	// in memory only: an agent that restarts is given them again. A
	// credential applies to the hosts of the sandbox's Brokered rules
	// only; the sandbox need not run (nor exist yet).
	SetEgressCredentials(id string, creds []EgressCredential) error
}

// EgressCredential is a header set on a sandbox's requests to Host.
type EgressCredential struct {
	Host, Header string
	// Value is secret: never logged, never written to disk.
	Value string `json:"-"`
}

// EgressMeter is the behaviour, in Capabilities.EgressMeter, of backends
// that count their sandboxes' egress: for each sandbox with an egress
// namespace, since its rules were last applied (a reapplication starts the
// counts again).
type EgressMeter interface {
	EgressUsage(ctx context.Context) ([]EgressUsage, error)
}

// UsageMeter is the behaviour, in Capabilities.UsageMeter, of backends that
// read what their sandboxes use of the node from the kernel's counters
// (cgroups, the filesystem).
type UsageMeter interface {
	// SandboxUsage is sandbox id's use now: its CPU time over every start
	// of it (what each incarnation's counter reached is kept before the
	// counter goes: a stop, a suspension, a checkpoint, a start again
	// after its init died), its memory counters, and, when storage is
	// true, the disk its files take (a walk: slower). ok is false when
	// the backend has no such sandbox or cannot read its counters.
	SandboxUsage(id string, storage bool) (u SandboxUsage, ok bool)
}

// SandboxUsage is one sandbox's use of its node.
type SandboxUsage struct {
	// CPUSeconds is the CPU time its processes used, over its starts.
	CPUSeconds float64
	// Stopped: nothing of it runs now; it holds no memory, and
	// MemoryPeakBytes says nothing.
	Stopped bool
	// MemoryBytes is the memory it holds now, MemoryPeakBytes the most
	// it held since it started.
	MemoryBytes, MemoryPeakBytes uint64
	// WorkspaceBytes is the disk its files take (home, workspace, /tmp),
	// PileBytes its pile's; read only when asked.
	WorkspaceBytes, PileBytes int64
}

// EgressUsage is one sandbox's egress counts.
type EgressUsage struct {
	SandboxID, Tenant string
	// BytesOut and BytesIn are what the sandbox sent and received on the
	// flows let out; Allowed counts the flows let out; Denied the packets
	// dropped (a connection attempt is a few).
	BytesOut, BytesIn uint64
	Allowed, Denied   uint64
}

// ExecRequest is one command to run in a fresh /bin/sh: the agent
// protocol's, as the kernel took it, one value from the gateway to the
// backend. A backend runs its Command, Shell (empty: login), Cwd (empty:
// the sandbox user's home) and Stdin (nil: empty); the kernel has done
// the rest (Timeout, Input and TTY are its and its job engine's), and
// checked it against every bound.
type ExecRequest = agentapi.ExecRequest

// Stream identifies an output stream of a command.
type Stream uint8

// String names the stream as the guest protocol does.
func (s Stream) String() string { return guestapi.Stream(s).String() }

// The streams of a command's output, numbered as on the guest protocol
// (guestexec converts them as they are).
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// Sink receives a command's output as it is produced, in order per stream.
// Write must not retain p and must not block for long: a slow consumer
// buffers or drops, it never stalls the command.
type Sink interface {
	Write(stream Stream, p []byte)
}

// ExitStatus is how a command ended (exitstatus.Status, the one shape of
// it from the guest to the agent API): a backend sets ExitCode (-1 when
// the shell did not exit normally), Signal, Killed when its Kill ended the
// command, OOMKilled when the sandbox's OOM killer killed one of its
// processes while it ran (a command that ended by a signal or lost its
// shepherd is checked), and Duration, from start to end; TimedOut is the
// kernel's to set.
type ExitStatus = agentapi.ExitStatus

// Ended is a Process's end as its Wait answers it: the goroutine that
// sees the command end sets Status and Err, then closes Done, once. A
// backend's process embeds it for its Wait.
type Ended struct {
	Done   chan struct{}
	Status ExitStatus // valid once Done is closed
	Err    error      // valid once Done is closed
}

// NewEnded is an Ended whose command has not ended yet.
func NewEnded() Ended { return Ended{Done: make(chan struct{})} }

// Wait implements Process: the end, once there is one, or ctx's error.
func (e *Ended) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-e.Done:
		return e.Status, e.Err
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
}

// Process is a running command.
type Process interface {
	// Wait blocks until the command's shell has exited and all its output
	// has reached the sink, or ctx ends.
	Wait(ctx context.Context) (ExitStatus, error)
	// Kill ends the command and every descendant. On a backend that
	// ProvesCleanup it returns nil only once none is left; otherwise it
	// returns an error wrapping ErrProofLost.
	Kill(ctx context.Context) error
}

// Backend provisions sandboxes and runs commands in them. Implementations
// are safe for concurrent use.
type Backend interface {
	// Name is the backend class, e.g. "oci".
	Name() string
	Capabilities() Capabilities
	// Provision creates the sandbox's storage and definition; it is
	// idempotent and keeps existing files.
	Provision(ctx context.Context, spec Spec) error
	// Start runs a provisioned sandbox; starting a running one is a no-op.
	Start(ctx context.Context, id string) error
	// Reattach takes over a sandbox that a previous agent process left,
	// keeping its files and its running processes.
	Reattach(ctx context.Context, spec Spec) error
	// Detach releases the agent's hold on a sandbox when its last session
	// closes; files stay, and the backend may keep it running.
	Detach(ctx context.Context, id string) error
	// Stop ends every process of the sandbox and keeps its files; Start
	// runs it again over them (a Suspender's checkpoint goes with Stop). When it returns nil no process of the
	// sandbox is left, so a restart (Stop, then Start) proves it clean.
	// Stopping a sandbox that is not running succeeds.
	Stop(ctx context.Context, id string) error
	// Destroy removes the sandbox and its workspace; the pile directory is
	// removed too unless keepPile.
	Destroy(ctx context.Context, id string, keepPile bool) error
	// Exec starts a command; output goes to sink until the Process ends.
	Exec(ctx context.Context, id string, req ExecRequest, sink Sink) (Process, error)
	// PileDir is the host directory of the sandbox's pile.
	PileDir(id string) string
}

// Errors a backend returns for expected states.
var (
	// ErrNotFound: no sandbox with that ID on this node.
	ErrNotFound = errors.New("sandbox not found")
	// ErrNotRunning: the sandbox exists but is not started.
	ErrNotRunning = errors.New("sandbox not running")
	// ErrInvalidRequest: the sandbox could not start the command as asked
	// (a cwd that does not exist or cannot be entered); the error's message
	// says why, for the caller to fix.
	ErrInvalidRequest = errors.New("the command could not start as requested")
	// ErrExhausted: the command could not start because the sandbox is
	// out of something its processes share (its PID limit, its memory);
	// the error's message says which. Retryable once the tenant frees it.
	ErrExhausted = errors.New("the sandbox is out of a resource the command needs")
	// ErrProofLost: the backend cannot prove that a command's descendants
	// are dead. The agent stops admitting jobs on this backend.
	ErrProofLost = errors.New("cannot prove cleanup of the command's processes")
	// ErrInsufficientStorage: the node's free disk space is below the
	// reserve it keeps, so no new sandbox is provisioned there; existing
	// ones keep running.
	ErrInsufficientStorage = errors.New("insufficient free disk space on the node")
)

// ErrNoCheckpoint means the backend cannot keep this sandbox's memory (its
// isolation has no checkpoint on this node); the error's message says why.
// Nothing was done: the caller stops the sandbox instead, keeping its files.
var ErrNoCheckpoint = errors.New("the sandbox's memory cannot be checkpointed")

// Suspender is the behaviour, in Capabilities.Suspender, of backends that
// suspend a sandbox with its memory: its processes, their memory and open
// files, and the jobs it holds are saved to the node's disk and the sandbox
// stops, freeing its memory and CPU; the next Start (or Reattach) restores
// it as it was, without starting its init again (StartCounter does not
// count it). Its files stay as Stop keeps them.
type Suspender interface {
	// Suspend checkpoints sandbox id and stops it. ErrNoCheckpoint when it
	// cannot keep this sandbox's memory, having done nothing; any other
	// error leaves the sandbox running, unless Alive says otherwise (a
	// checkpoint that failed half-way ends it, as a Stop).
	Suspend(ctx context.Context, id string) error
	// Checkpointed says whether sandbox id has a checkpoint that its next
	// start restores.
	Checkpointed(id string) bool
	// CheckpointIsolations are the isolations whose sandboxes Suspend
	// checkpoints on this node (the agent publishes them in its Lease).
	CheckpointIsolations() []string
}

// SnapshotInfo describes a snapshot taken by a Snapshotter.
type SnapshotInfo struct {
	// Memory is true when the snapshot holds the sandbox's processes and
	// their memory, not only its files.
	Memory bool
	// Bytes is the disk the snapshot takes on the node.
	Bytes int64
	// LayerBytes is the size limit of the writable layer it holds: a fork
	// gets a layer of this size, whatever its Spec asks.
	LayerBytes int64
	// Isolation is the source sandbox's: a fork runs with the same.
	Isolation string
	// Note says, when Memory is false, why the memory was not kept.
	Note string
}

// Snapshotter is the behaviour, in Capabilities.Snapshotter, of backends
// that snapshot a sandbox: its writable layer (home, workspace, /tmp)
// and, where Suspender keeps memory, its processes, copied to the node's
// disk under an ID the caller picks, the sandbox going on as it was. A
// Spec whose FromSnapshot names one provisions a fork of it. The pile is
// not in a snapshot: it is its tenant's record, and a fork has its own.
type Snapshotter interface {
	// Snapshot snapshots sandbox id as snapshot snapID; taken already,
	// it returns what it took. ErrNotFound when there is no such sandbox.
	Snapshot(ctx context.Context, id, snapID string) (SnapshotInfo, error)
	// DeleteSnapshot frees a snapshot's disk; a snapshot that does not
	// exist is deleted already. Forks made from it are not affected.
	DeleteSnapshot(ctx context.Context, snapID string) error
	// Snapshots lists the snapshots on the node.
	Snapshots() ([]string, error)
}

// Pauser is the behaviour, in Capabilities.Pauser, of backends that freeze
// a running sandbox's processes (the cgroup freezer): they get no CPU and
// keep their memory in RAM; Unpause thaws them where they were. A paused
// sandbox is running for Alive and Reattach (which thaws it, unless its
// Spec says Paused). Stop ends a paused sandbox as a running one.
type Pauser interface {
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
}

// Prober is the behaviour, in Capabilities.Prober, of backends that can tell
// cheaply, without a runtime call, whether a sandbox's init still runs. The
// node agent asks on every resync, so that a sandbox whose init died
// (killed, out of memory) is started again over its files within seconds
// instead of at its next spec change. Alive is true when the backend cannot
// tell.
type Prober interface {
	Alive(id string) bool
}

// StartCounter is the behaviour, in Capabilities.StartCounter, of backends
// that count the inits they started per sandbox. Reattach starts a sandbox
// whose init is gone: the count tells the kernel that it did, where Alive
// alone cannot (the init may die between an Alive and the Reattach that
// follows it).
type StartCounter interface {
	Starts(id string) uint64
}

// Guest is the behaviour, in Capabilities.Guest, of backends whose
// sandboxes run the guest binary's init (oci's containers, vm's and
// Lima's VMs): how to reach an idle shepherd of a sandbox's init, and
// what only the backend knows about a command run there. The kernel runs
// a command itself over the guest protocol (its client,
// guestexec.Exec, with this Guest), and such a backend's Exec is that
// same call: the backend is out of the command's way once it has given
// the connection.
type Guest struct {
	// StartTimeout bounds a command's start, its connection included,
	// where the caller set no deadline.
	StartTimeout time.Duration
	// Connect connects to an idle shepherd of sandbox id's init for one
	// command (ctx bounds it), with that command's hooks; its error is
	// the command's as it is (ErrNotFound, ErrNotRunning, ...).
	Connect func(ctx context.Context, id string) (net.Conn, GuestHooks, error)
}

// GuestHooks are what only the backend knows about a command run in its
// guest (Guest.Connect); each may be nil.
type GuestHooks struct {
	// Lost explains a connection that broke without the command's result
	// (err is the read's error): nil when the backend knows that no
	// process of the command is left (the sandbox's teardown, the end of
	// the kernel that ran it), else an error wrapping ErrProofLost. Nil
	// means the proof is lost.
	Lost func(err error) error
	// OOMKilled says whether the sandbox's OOM killer killed a process
	// since the command started; nil when the backend cannot tell.
	OOMKilled func() bool
	// Release runs once when the command's connection is done with, after
	// the result is known or the start failed.
	Release func()
	// StartFailed explains a start that failed once the guest was reached
	// (err, the shepherd's refusal or the transport's failure; timedOut
	// when the start's bound passed first): the error the start returns.
	// A refusal of the request (ErrInvalidRequest) or of its resources
	// (ErrExhausted) is returned as it is, without it. Nil: err as it is.
	StartFailed func(err error, timedOut bool) error
}

// Dialer is the behaviour, in Capabilities.Dialer, of backends that reach a
// TCP port on a sandbox's own loopback from the host: the agent's relay to
// the MCP worker of a sandbox that has no network. The connection is the
// worker's; closing it ends the relay inside the sandbox.
type Dialer interface {
	DialSandbox(ctx context.Context, id string, port int) (net.Conn, error)
}

// JobHolder is the behaviour, in Capabilities.JobHolder, of backends whose
// sandboxes hold background jobs themselves: a job's processes, its output
// ring and its result live in the sandbox, charged to it, and outlive the
// agent; the agent keeps only its account and reaches the job again after
// a restart. Every backend that proves cleanup holds jobs. The connections
// speak the guest protocol (package guestapi; the agent's side is package
// guestexec).
type JobHolder interface {
	// JobConn opens a connection to a process of the sandbox that takes a
	// job's start request and becomes the job's holder: an idle shepherd
	// of the sandbox's init, or (jail) a holder started for the job.
	JobConn(ctx context.Context, id string) (net.Conn, error)
	// AttachJob opens a connection to the holder of job jobID, on which
	// the job's own frames flow (Poll, Kill, Release); ErrNotFound when
	// the sandbox holds no such job. No process of the sandbox need start
	// for it where the sandbox's init joins the agent to the holder, so a
	// tenant that holds every PID cannot keep its jobs from the agent.
	AttachJob(ctx context.Context, id, jobID string) (net.Conn, error)
	// ListJobs reads the records of the jobs the sandbox holds.
	ListJobs(ctx context.Context, id string) ([]JobRecord, error)
}

// JobSpec is what a sandbox holds a job under, given at its start (with
// its ExecRequest) and kept with it for the next agent to list.
type JobSpec struct {
	// ID names the job in the sandbox: letters, digits, '-' and '_', at
	// most 64 bytes.
	ID string
	// RingBytes, RingChunks and ChunkBytes bound the job's output ring;
	// the holder's own bounds cap them.
	RingBytes, RingChunks, ChunkBytes int
	// TTL is how long a job that ended is kept, unpolled, before its
	// holder releases it itself: the agent that would have released it is
	// gone for good. The holder counts it in whole seconds, rounded up.
	TTL time.Duration
	// Meta is the job engine's record of the job (its tenant, say),
	// listed as it was given.
	Meta json.RawMessage
	// Input keeps the job's standard input open after its start, for the
	// job engine's Input, until it ends it.
	Input bool
	// TTY runs the job on a pseudo-terminal of this size, its standard
	// input, output and error all the terminal (one stream, Stdout).
	TTY *agentapi.TTYSize
}

// JobRecord is a job a sandbox holds, as ListJobs lists it.
type JobRecord struct {
	Spec JobSpec
	// PID is the job's shell in the sandbox's PID namespace.
	PID int
	// Started is when the shell started.
	Started time.Time
}

// OOMCounter is the behaviour, in Capabilities.OOMCounter, of backends that
// count the OOM kills in a sandbox's memory limit since it last started: a
// held job that ended by a signal while the count grew was the OOM killer's
// (its holder, in the sandbox, cannot tell).
type OOMCounter interface {
	OOMKills(id string) (uint64, bool)
}

// ForkCounter is the behaviour, in Capabilities.ForkCounter, of backends
// that count the forks a sandbox's process limit refused since it last
// started: a command that could not start while the count grew met the limit
// (its tenant holds every PID, so no process could take the command),
// whatever else its start said.
type ForkCounter interface {
	ForksRefused(id string) (uint64, bool)
}

// Worker is a long-running process that a sandbox keeps running, started
// again with backoff when it exits: a tenant's native MCP worker. It runs
// as the sandbox user, without a shell, in the user's home, and lives in
// the sandbox: it outlives the agent, and a sandbox restart starts it again.
type Worker struct {
	// Argv is the command; Argv[0] is looked up on Env's PATH.
	Argv []string
	// Env is the worker's environment; the backend adds
	// PLAYGROUND_WORKER_TOKEN_FILE.
	Env []string
	// Token is the internal bearer the worker expects from its callers;
	// the backend puts it in a file that only the sandbox user reads,
	// named by PLAYGROUND_WORKER_TOKEN_FILE.
	Token string
	// Port is the loopback port the worker serves on, which the agent's
	// relay dials; the backend keeps it with the rest.
	Port int
}

// WorkerStatus is a sandbox's worker as the sandbox supervises it.
type WorkerStatus struct {
	Running   bool
	StartedAt time.Time
	// Restarts counts starts after the first.
	Restarts int
	// LastExit says how the last worker process ended, and when.
	LastExit     string
	LastExitTime time.Time
	// Error says why the worker does not start, when it does not.
	Error string
}

// WorkerSupervisor is the behaviour, in Capabilities.WorkerSupervisor, of
// backends that keep a worker running inside a sandbox.
type WorkerSupervisor interface {
	// SetWorker makes w the sandbox's worker (nil: none), replacing and
	// stopping the one it had; it applies while the sandbox runs and
	// whenever it starts again.
	SetWorker(ctx context.Context, id string, w *Worker) error
	// Worker is the sandbox's worker as last set (nil: none): an agent
	// that starts again keeps its token, so that the worker is not
	// restarted for a new one.
	Worker(ctx context.Context, id string) (*Worker, error)
	// WorkerStatus reports the sandbox's worker; ErrNotFound when it has
	// none.
	WorkerStatus(ctx context.Context, id string) (WorkerStatus, error)
	// WorkerLog returns at most limit bytes of the end of the worker's
	// output.
	WorkerLog(ctx context.Context, id string, limit int) ([]byte, error)
}

// StorageReporter is the behaviour, in Capabilities.StorageReporter, of
// backends that fix a sandbox's disk limits when they provision it: Storage
// returns the limits in force, defaults resolved, so that a spec asking for
// others can be told so.
type StorageReporter interface {
	Storage(id string) (Storage, error)
}

// PileReader is the behaviour, in Capabilities.PileReader, of backends whose
// pile is not a plain host directory (a VM's pile is a disk image): PileFile
// reads one file of it from the host, whether the sandbox runs or not.
type PileReader interface {
	PileFile(id, name string) ([]byte, error)
}

// ReadPileFile reads file name of sandbox id's pile from the host.
func ReadPileFile(be Backend, id, name string) ([]byte, error) {
	if r := be.Capabilities().PileReader; r != nil {
		return r.PileFile(id, name)
	}
	return os.ReadFile(filepath.Join(be.PileDir(id), name))
}

// SigningKeyHolder is the behaviour, in Capabilities.SigningKeyHolder, of
// backends that keep a tenant's signing key in its pile, as the file
// guestapi.SigningKeyFile: owned by the tenant, mode 0400, and immutable
// (chattr +i, or schg on FreeBSD), so that the tenant reads it and no
// sandbox process can write, chmod, rename or remove it. It is in the
// pile, so it follows the pile: kept by close, suspension, restart and a
// destroy that keeps the pile; gone with the pile.
type SigningKeyHolder interface {
	// InstallSigningKey makes key (the whole file: 64 hex digits, as
	// internal/signingkey validates) sandbox id's signing key, replacing
	// the one it had. live says whether the sandbox's processes see it
	// now; otherwise they see it from the sandbox's next start, and the
	// pile holds the previous key until then. ErrNotFound when there is
	// no such sandbox.
	InstallSigningKey(ctx context.Context, id string, key []byte) (live bool, err error)
	// InstallSigningKeyUntouched is InstallSigningKey into a sandbox
	// that has run nothing of its tenant's yet (a warm claim whose calls
	// wait for this key): a backend that pauses a running sandbox while
	// its key changes, so that no process of it can take hold of the
	// file, need not.
	InstallSigningKeyUntouched(ctx context.Context, id string, key []byte) (live bool, err error)
}

// Describer is the behaviour, in Capabilities.Describer, of backends with
// something to say about how they run sandboxes on this node (the vm
// backend: under KVM, or under TCG emulation, for development only). The
// agent publishes the note in its Lease and, when it is a caveat, in the
// Provisioned condition of each Sandbox the backend runs.
type Describer interface {
	Describe() (note string, caveat bool)
}

// Isolator is the behaviour, in Capabilities.Isolator, of backends that
// offer a choice of isolation (Spec.Isolation): Isolations lists what this
// one can run, on this node. A backend without it runs IsolationContainer
// only.
type Isolator interface {
	Isolations() []string
}

// Isolations is what be can run: its own list, or IsolationContainer.
func Isolations(be Backend) []string {
	if i := be.Capabilities().Isolator; i != nil {
		return i.Isolations()
	}
	return []string{IsolationContainer}
}

// WarmPool is the behaviour, in Capabilities.WarmPool, of backends that keep
// blank sandboxes started ahead of demand, so that a new tenant's sandbox is
// claimed, not started. A pooled sandbox already has its ID (Claim returns
// it), its ID-map slot, its disk images, its container and its init;
// Provision with the claimed ID makes it the tenant's (its login profile,
// /etc, limits) in place, and the Start that follows finds it running.
type WarmPool interface {
	// Claim takes out of the pool a ready sandbox that can run spec (its
	// ID ignored) without a start: the pool's shape (isolation, storage,
	// no egress, no faculties; other resources are applied in place). ok
	// is false, and a miss is counted, when none is ready or spec does
	// not fit. The caller records the ID as the tenant's, then Provisions
	// it; a claim it cannot record goes back with Unclaim.
	Claim(spec Spec) (id string, ok bool)
	// Unclaim returns a claimed sandbox that was not provisioned.
	Unclaim(id string)
	// RunPool fills the pool and keeps it filled, at a bounded rate,
	// until ctx ends; pooled sandboxes outlive it (the next agent adopts
	// the ones still running). owned reports whether the node's records
	// give a sandbox ID an owner: a sandbox an earlier agent claimed but
	// did not record (it died in between) has none, and is destroyed. It
	// returns at once when the pool's size is zero.
	RunPool(ctx context.Context, owned func(id string) bool)
	// DrainPool destroys the pool's unclaimed sandboxes. The agent calls
	// it when it stops gracefully, after RunPool returned: an upgrade's
	// next agent fills its pool with its own guest, and an uninstall
	// leaves no blank sandbox running on the node. After a crash the
	// next agent adopts them instead (RunPool).
	DrainPool(ctx context.Context) error
	// PoolStats reports the pool, for metrics: Hits and Misses count
	// every Claim, whichever pool it was for; the rest is the blank
	// sandboxes'.
	PoolStats() PoolStats
	// SetImagePools sets the images the pool keeps sandboxes of, beside
	// its blank ones, and how many of each (ImagePool): a Claim whose
	// spec names one of them (by Image.Digest) takes one of its
	// sandboxes. An image left out has its unclaimed sandboxes destroyed
	// by RunPool, then its Release called. Pooled images' sandboxes are
	// started by RunPool at the rate of the blank ones, sharing it.
	SetImagePools(pools []ImagePool)
	// ImagePoolStats reports the image pools, for metrics, in the order
	// of the last SetImagePools.
	ImagePoolStats() []ImagePoolStats
}

// ImagePool is the pool of one image (WarmPool.SetImagePools).
type ImagePool struct {
	// Image is what its sandboxes run: an image the caller holds in the
	// node's image store until Release.
	Image *Image
	// Size is how many of its sandboxes are kept started.
	Size int
	// Release, when set, is called once, when the pool keeps no sandbox
	// of the image any more: it left the pools and its unclaimed
	// sandboxes are destroyed (a claimed one is its tenant's, holding
	// the image on its own).
	Release func()
}

// ImagePoolStats is one image pool's state and history (Size, Ready,
// Hits, Empty, Started, Failed as in PoolStats, for its image alone).
type ImagePoolStats struct {
	Digest string
	PoolStats
}

// PoolStats is a warm pool's state and history.
type PoolStats struct {
	// Size is the configured number of pooled sandboxes.
	Size int
	// Ready is how many are started and unclaimed now.
	Ready int
	// Hits and Misses count Claims that found a sandbox and ones that
	// did not (none ready, or the spec did not fit); Empty counts the
	// misses whose spec fitted: the pool was too small or refilled too
	// slowly for the demand.
	Hits, Misses, Empty uint64
	// Started counts pooled sandboxes started; Failed, starts that failed.
	Started, Failed uint64
}
