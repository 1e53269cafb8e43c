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

// Package agentapi is the host agent's protocol: the calls the gateway
// makes to the agent of a node, as JSON over HTTP/2 (TLS, or cleartext h2c
// on a trusted network; exec and poll may answer as raw bytes after a JSON
// header), authenticated by a bearer token that only the gateway and the
// manager hold, and the client that makes them. Every call names the
// tenant; the agent checks that the handle or job belongs to it.
//
// The types here are the wire format. A command (ExecRequest, Shell) and
// its result (ExecResult) are the kernel's too: package hostagent takes
// and returns them as they are, and the agent's server sends them
// unchanged, so that a command is one value from the gateway to the
// backend's edge. Where the kernel and its job engine have types of their
// own (sessions, jobs, files), the agent's server (package agentserver)
// maps between the two, so that a change of the kernel cannot change what
// a gateway and an agent of different releases say to each other during
// a rollout. The protocol is versioned (Version);
// docs/agent-api.md is its reference.
package agentapi

import (
	"fmt"
	"strings"
	"time"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/exitstatus"
)

// MaxRequestBytes bounds a request body: a payload of bounds.MaxFileBytes as
// base64 is 4 MiB, plus the JSON around it.
const MaxRequestBytes = 5 << 20

// The limits of a call, which the gateway checks before a call travels
// and the agent where it enters, are package bounds's: defined there
// once, for the guest too.

// Shell selects the environment of the /bin/sh that runs a command.
type Shell string

const (
	// ShellLogin loads the tenant's login profile (environment and script).
	ShellLogin Shell = "login"
	// ShellClean starts from a fixed minimal environment and loads no profile.
	ShellClean Shell = "clean"
)

// TenantRequest is the body of calls that need only the tenant.
type TenantRequest struct {
	Tenant string `json:"tenant"`
}

// EgressCredentialsRequest replaces the credentials the node's egress
// broker adds to a sandbox's requests (its rules name the hosts and
// headers they are for). Only the manager, which reads them from the
// Tenant's Secrets, may send it; the agent keeps them in memory only.
type EgressCredentialsRequest struct {
	Tenant      string             `json:"tenant"`
	Credentials []EgressCredential `json:"credentials"`
}

// SigningKeyRequest makes Key the signing key, /pile/self.key, of the
// Sandbox object Namespace/Name with that UID, bound to the agent's node:
// it is addressed by object, not by sandbox ID, so that the key can be
// there before the sandbox is first started. Only the manager, which
// reads it from the Tenant's Secret, may send it; the agent keeps it in
// memory and writes it into the pile, nowhere else.
type SigningKeyRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Key is the 64 hexadecimal digits of an Ed25519 seed.
	Key string `json:"key"`
}

// SigningKeyResult says which key the sandbox holds after the call
// (Fingerprint, "" for none): the new one when Live; otherwise the new
// one is written at the sandbox's next start.
type SigningKeyResult struct {
	Fingerprint string `json:"fingerprint,omitempty"`
	Live        bool   `json:"live"`
}

// ImageCredentialsRequest replaces the registry credentials with which
// the agent pulls the image of the Sandbox object Namespace/Name with
// that UID, bound to the agent's node: the .dockerconfigjson of each pull
// Secret its spec.image names, in that order; none forgets them. It is
// addressed by object, as a signing key is, so that the credentials are
// there before the sandbox's first pull. Only the manager, which reads
// the Secrets, may send it; the agent keeps them in memory only. At most
// MaxImageCredentialConfigs, each of at most
// MaxImageCredentialConfigBytes (Validate).
type ImageCredentialsRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Configs are the Secrets' .dockerconfigjson bytes (base64 in JSON).
	Configs [][]byte `json:"configs"`
}

// The bounds of an ImageCredentialsRequest: one config per pull Secret a
// Sandbox may name, and the size of one, ample for a few registries'
// tokens (a cloud registry's is 2 to 4 KiB), small enough that a node's
// sandboxes cannot make its agent hold much for them.
const (
	MaxImageCredentialConfigs     = playgroundv1alpha1.MaxImagePullSecrets
	MaxImageCredentialConfigBytes = 16 << 10
)

// Validate checks the request's bounds, saying which config is past
// which (never with its content).
func (r *ImageCredentialsRequest) Validate() error {
	if r.Namespace == "" || r.Name == "" || r.UID == "" {
		return &Error{Code: CodeInvalid, Message: "the request names no Sandbox: namespace, name and uid are required"}
	}
	if len(r.Configs) > MaxImageCredentialConfigs {
		return &Error{Code: CodeInvalid, Message: fmt.Sprintf("%d registry credentials for Sandbox %s/%s: at most %d (one per pull Secret of spec.image)",
			len(r.Configs), r.Namespace, r.Name, MaxImageCredentialConfigs)}
	}
	for i, c := range r.Configs {
		if len(c) == 0 || len(c) > MaxImageCredentialConfigBytes {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("registry credentials %d of Sandbox %s/%s are %d bytes: a pull Secret's .dockerconfigjson must hold 1 to %d bytes",
				i+1, r.Namespace, r.Name, len(c), MaxImageCredentialConfigBytes)}
		}
	}
	return nil
}

// PilesRequest lists the piles the agent's node retains of Sandboxes that
// are gone (reclaim policy Retain), in Namespace ("": in every
// namespace). A user needs the RBAC verb list on sandboxes.playground.dev
// there; the manager may ask.
type PilesRequest struct {
	Namespace string `json:"namespace"`
}

// Piles is the answer to a PilesRequest: the node's retained piles,
// ordered by namespace and name.
type Piles struct {
	Node  string         `json:"node"`
	Piles []RetainedPile `json:"piles"`
}

// RetainedPile is a pile a node keeps of a Sandbox that is gone: a
// Sandbox created again under the same name on that node takes it up.
type RetainedPile struct {
	// Namespace and Name are the Sandbox's (a tenant's Sandbox has the
	// tenant's name).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	SandboxID string `json:"sandbox_id"`
}

// RemovePileRequest removes the pile the node retains of Sandbox
// Namespace/Name, and the node's record of it. A user needs the RBAC verb
// delete on that Sandbox (sandboxes.playground.dev of that name in that
// namespace, which need not exist); the manager may ask.
type RemovePileRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// RemovedPile says what RemovePile removed: the pile of SandboxID on
// Node, every file of it, and the node's record of it.
type RemovedPile struct {
	Node      string `json:"node"`
	SandboxID string `json:"sandbox_id"`
}

// EgressCredential is one header for one host.
type EgressCredential struct {
	Host   string `json:"host"`
	Header string `json:"header"`
	Value  string `json:"value"`
}

// ExecRequest is the body of exec and job start: a command for a fresh
// /bin/sh of the handle's sandbox.
type ExecRequest struct {
	Tenant  string `json:"tenant"`
	Command string `json:"command"`
	// Shell is login (the default) or clean.
	Shell Shell  `json:"shell,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
	// Stdin is the command's whole standard input (base64 on the wire).
	Stdin []byte `json:"stdin,omitempty"`
	// Timeout kills the command and its descendants when it passes; zero
	// means none for jobs and the caller's deadline for exec. Nanoseconds
	// on the wire.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Input keeps a job's standard input open after Stdin: input calls
	// write to it until one ends it. Jobs only.
	Input bool `json:"input,omitempty"`
	// TTY runs a job on a pseudo-terminal of this size (its input, output
	// and error; the output is one stream, stdout) whose screen the
	// sandbox keeps; such a job takes input. Jobs only.
	TTY *TTYSize `json:"tty,omitempty"`
	// IdempotencyKey makes a job start idempotent (jobs only): a second
	// start of the tenant's with the same key, while the job the first
	// started is kept, returns that job; with another request it is
	// refused (CodeInvalid). Empty means none, and is not sent, so an
	// agent that predates the field serves a request without a key as
	// before; one with a key it refuses as a malformed body (unknown
	// field), starting nothing. See CheckIdempotencyKey.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Validate refuses a command no sandbox runs, saying what to do: an
// empty one or one over bounds.MaxCommandBytes, an unknown shell (empty
// is login), stdin over maxStdin bytes, a timeout out of range, a
// terminal out of bounds. The gateway checks it before the request
// travels, the agent where it enters; below, it is trusted.
func (r ExecRequest) Validate(maxStdin int) error {
	invalid := func(format string, args ...any) error {
		return &Error{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
	}
	switch r.Shell {
	case "", ShellLogin, ShellClean:
	default:
		shell := string(r.Shell)
		if len(shell) > 64 {
			shell = shell[:64] + "..."
		}
		shell = strings.ToValidUTF8(shell, "?")
		return invalid("shell %q is not known: use login (loads the tenant's profile) or clean", shell)
	}
	switch {
	case r.Command == "":
		return invalid("command is empty: give the shell text to run")
	case len(r.Command) > bounds.MaxCommandBytes:
		return &Error{Code: CodeTooLarge, Message: bounds.CommandTooLong(len(r.Command))}
	case len(r.Stdin) > maxStdin:
		return &Error{Code: CodeTooLarge, Message: fmt.Sprintf("stdin is %d bytes (limit %d): write it to a file with write and redirect from it", len(r.Stdin), maxStdin)}
	case r.Timeout < 0 || r.Timeout > bounds.MaxTimeout:
		return invalid("timeout %s is out of range (0 to %s)", r.Timeout, bounds.MaxTimeout)
	}
	if r.TTY != nil {
		if err := CheckTTY(*r.TTY); err != nil {
			return invalid("%v", err)
		}
	}
	if err := CheckIdempotencyKey(r.IdempotencyKey); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// TTYSize is a terminal's size; Scrollback, at a job's start only, is how
// many lines that scroll off its top it keeps (0: the sandbox's default,
// 1000).
type TTYSize struct {
	Rows       int `json:"rows"`
	Cols       int `json:"cols"`
	Scrollback int `json:"scrollback,omitempty"`
}

// CheckTTY refuses a size out of bounds, saying which.
func CheckTTY(t TTYSize) error { return bounds.CheckTTY(t.Rows, t.Cols, t.Scrollback) }

// InputRequest is the body of a job's input: Data (base64 on the wire,
// at most bounds.MaxInputBytes) is written to its input, then End ends it (a
// pipe is closed; a terminal gets Ctrl-D).
type InputRequest struct {
	Tenant string `json:"tenant"`
	Data   []byte `json:"data,omitempty"`
	End    bool   `json:"end,omitempty"`
}

// ResizeRequest is the body of a terminal job's resize.
type ResizeRequest struct {
	Tenant string `json:"tenant"`
	Rows   int    `json:"rows"`
	Cols   int    `json:"cols"`
}

// ScreenRequest is the body of a terminal job's screen read.
type ScreenRequest struct {
	Tenant string `json:"tenant"`
	// Scrollback asks for up to this many of the latest lines that
	// scrolled off the top.
	Scrollback int `json:"scrollback,omitempty"`
}

// Screen is a terminal job's screen as the sandbox's terminal emulator
// renders it, as text.
type Screen struct {
	Job  JobInfo `json:"job"`
	Rows int     `json:"rows"`
	Cols int     `json:"cols"`
	// Lines are the screen's rows, top to bottom, trailing blanks cut.
	Lines []string `json:"lines"`
	// CursorRow and CursorCol are the cursor's position, from 0.
	CursorRow    int    `json:"cursor_row"`
	CursorCol    int    `json:"cursor_col"`
	CursorHidden bool   `json:"cursor_hidden,omitempty"`
	AltScreen    bool   `json:"alt_screen,omitempty"`
	Title        string `json:"title,omitempty"`
	// Scrollback are the lines asked for, oldest first; ScrollbackLines
	// counts those kept.
	Scrollback      []string `json:"scrollback,omitempty"`
	ScrollbackLines int      `json:"scrollback_lines,omitempty"`
}

// ExitStatus is how a command or a job ended: the one shape of it
// (package exitstatus), which the guest reports, a backend's process
// returns (backend.ExitStatus), the kernel answers inside ExecResult,
// ExecHeader and JobResult, and the wire carries as it is.
type ExitStatus = exitstatus.Status

// ExecOutputSizes are what an exec answer says of its output besides the
// bytes: how much the agent's exec output limit dropped.
type ExecOutputSizes struct {
	// StdoutDropped and StderrDropped count output beyond the agent's exec
	// output limit, which is not returned.
	StdoutDropped int64 `json:"stdout_dropped,omitempty"`
	StderrDropped int64 `json:"stderr_dropped,omitempty"`
}

// ExecResult is how a synchronous command ended, with its output. A timed
// out command's descendants were proven dead before it was returned.
type ExecResult struct {
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	ExecOutputSizes
	ExitStatus
}

// Handle is an open session on a sandbox: a lease that expires unless used
// or renewed.
type Handle struct {
	ID        string    `json:"handle"`
	SandboxID string    `json:"sandbox_id"`
	Expires   time.Time `json:"expires"`
}

// Activity is what a tenant has open in its sandbox (the answer to a
// listing): its session handles and the jobs it can still poll or cancel,
// oldest first.
type Activity struct {
	Handles []HandleInfo `json:"handles"`
	Jobs    []JobInfo    `json:"jobs"`
}

// HandleInfo is an open handle in a listing: when it was opened and when
// a call last used or renewed it.
type HandleInfo struct {
	Handle
	Opened   time.Time `json:"opened"`
	LastUsed time.Time `json:"last_used"`
}

// ReadRequest is the body of a file read: of the whole file (of at most
// bounds.MaxFileBytes; a larger one is refused, never truncated), of a range of
// it when Offset or Length is set, or of its digest alone.
type ReadRequest struct {
	Tenant string `json:"tenant"`
	Path   string `json:"path"`
	Cwd    string `json:"cwd,omitempty"`
	// Offset, set, reads a range that starts at that byte (0: the first).
	Offset *int64 `json:"offset,omitempty"`
	// Length bounds the bytes of a range, 1 to bounds.MaxFileBytes; 0 means up
	// to bounds.MaxFileBytes. Set alone, it reads a range from the start.
	Length int `json:"length,omitempty"`
	// Digest asks for the whole file's size and sha256 (FileDigest), of a
	// file of any size, without its content; no range may be set.
	Digest bool `json:"digest,omitempty"`
}

// Ranged reports whether r reads a range rather than the whole file.
func (r ReadRequest) Ranged() bool { return r.Offset != nil || r.Length != 0 }

// Validate refuses a read no file can answer: a negative offset, a length
// out of range, a digest of a range. The client checks it before the
// request travels, and the agent again.
func (r ReadRequest) Validate() error {
	switch {
	case r.Offset != nil && *r.Offset < 0:
		return &Error{Code: CodeInvalid, Message: NegativeOffset(*r.Offset)}
	case r.Length < 0 || r.Length > bounds.MaxFileBytes:
		return &Error{Code: CodeInvalid, Message: LengthOutOfRange(r.Length, bounds.MaxFileBytes)}
	case r.Digest && r.Ranged():
		return &Error{Code: CodeInvalid, Message: "digest is of the whole file, and offset and length select a range: ask for the digest without them, and compare it with the bytes of all the ranges"}
	}
	return nil
}

// WriteRequest is the body of a file write; Data is base64 on the wire.
// Without Offset or Append it replaces the file atomically; with either
// it writes a range of a file of any size, in place and not atomically.
type WriteRequest struct {
	Tenant string `json:"tenant"`
	Path   string `json:"path"`
	Cwd    string `json:"cwd,omitempty"`
	Data   []byte `json:"data"`
	// Offset, set, writes Data at that byte of the file, creating it if
	// it is missing, without truncating it.
	Offset *int64 `json:"offset,omitempty"`
	// Append writes Data at the end of the file, creating it if it is
	// missing.
	Append bool `json:"append,omitempty"`
}

// Validate refuses a write no file can take: a negative offset, or both
// an offset and append. The client checks it before the request travels,
// and the agent again.
func (r WriteRequest) Validate() error {
	switch {
	case r.Offset != nil && *r.Offset < 0:
		return &Error{Code: CodeInvalid, Message: NegativeOffset(*r.Offset)}
	case r.Offset != nil && r.Append:
		return &Error{Code: CodeInvalid, Message: "offset and append are both given: append writes at the end of the file, offset at that byte; give one of them, or neither to replace the file whole"}
	}
	return nil
}

// NegativeOffset is the one message for a negative file offset.
func NegativeOffset(off int64) string {
	return fmt.Sprintf("offset %d is negative: give the byte offset from the start of the file, 0 or more", off)
}

// LengthOutOfRange is the one message for the length of a ranged read
// out of 0 to limit.
func LengthOutOfRange(n, limit int) string {
	return fmt.Sprintf("length %d is out of range: give 1 to %d bytes, or omit it for up to %d; read a larger file in ranges, one call each", n, limit, limit)
}

// FileContent is a file, or a range of one, read from a sandbox.
type FileContent struct {
	// Path is absolute, its directory's links resolved.
	Path string `json:"path"`
	Data []byte `json:"data"`
	// Size is the number of bytes in Data.
	Size int    `json:"size"`
	MIME string `json:"mime"`
	// SHA256 is the digest of Data: of the whole file for a whole read,
	// of the range for a ranged one.
	SHA256 string `json:"sha256"`
	// FileSize is the whole file's size when it was read.
	FileSize int64 `json:"file_size"`
	// Offset is where Data starts in the file.
	Offset int64 `json:"offset"`
	// EOF is true when Data reaches the end of the file: a range read
	// at or past it has no bytes and EOF.
	EOF bool `json:"eof"`
}

// FileDigest is the size and sha256 of a whole file, the answer to a read
// that asks for its digest.
type FileDigest struct {
	Path     string `json:"path"`
	FileSize int64  `json:"file_size"`
	SHA256   string `json:"sha256"`
}

// FileInfo describes a file written to a sandbox.
type FileInfo struct {
	// Path is absolute, its directory's links resolved.
	Path string `json:"path"`
	// Size is the number of bytes written, and SHA256 their digest: of
	// the range for a ranged write, not of the whole file (a read with
	// Digest gives that).
	Size   int    `json:"size"`
	MIME   string `json:"mime"`
	SHA256 string `json:"sha256"`
	// FileSize is the whole file's size after the write.
	FileSize int64 `json:"file_size"`
}

// JobState is a background job's lifecycle state.
type JobState string

// The states of a job.
const (
	JobRunning    JobState = "running"
	JobCancelling JobState = "cancelling" // cancel was asked; the proof of cleanup is pending
	JobExited     JobState = "exited"     // the command ended by itself
	JobKilled     JobState = "killed"     // cancelled, its process tree proven dead
	JobTimedOut   JobState = "timed_out"  // its timeout ended it, with the same proof
	JobFailed     JobState = "failed"     // the agent lost track of it; Result.Error says why
)

// Terminal reports whether the job has ended.
func (s JobState) Terminal() bool { return s != JobRunning && s != JobCancelling }

// JobInfo describes a background job.
type JobInfo struct {
	ID        string `json:"id"`
	Tenant    string `json:"tenant"`
	SandboxID string `json:"sandbox_id"`
	// Command is the job's command, its first 200 bytes (a longer one
	// ends with "…"); empty when not known.
	Command string `json:"command,omitempty"`
	// Input says the job takes input; TTY is its terminal's size, for a
	// terminal job.
	Input     bool      `json:"input,omitempty"`
	TTY       *TTYSize  `json:"tty,omitempty"`
	State     JobState  `json:"state"`
	StartedAt time.Time `json:"started_at"`
	// EndedAt is when the job became terminal; zero while active.
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Result is set once the job is terminal.
	Result *JobResult `json:"result,omitempty"`
}

// JobResult is how a job ended.
type JobResult struct {
	ExitStatus
	// Error explains a failed job, or a caveat of a killed one (output the
	// backend did not deliver in time).
	Error string `json:"error,omitempty"`
}

// PollRequest is the body of a job poll.
type PollRequest struct {
	Tenant   string `json:"tenant"`
	Cursor   string `json:"cursor,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
	// Wait is how long to wait for new output when there is none yet.
	Wait time.Duration `json:"wait,omitempty"`
}

// Gap reports output the client had not read when the agent evicted it:
// chunks FromSeq up to, not including, ToSeq (Chunks of them, Bytes bytes
// the client never received). The poll resumes at ToSeq.
type Gap struct {
	FromSeq uint64 `json:"from_seq"`
	ToSeq   uint64 `json:"to_seq"`
	Chunks  uint64 `json:"chunks"`
	Bytes   uint64 `json:"bytes"`
}

// PollResponse is a page of a job's output.
type PollResponse struct {
	Job           JobInfo `json:"job"`
	Chunks        []Chunk `json:"chunks"`
	NextCursor    string  `json:"next_cursor"`
	Gap           *Gap    `json:"gap,omitempty"`
	DroppedBytes  uint64  `json:"dropped_bytes"`
	DroppedChunks uint64  `json:"dropped_chunks"`
	// Done is true when the job is terminal and this page reaches the end
	// of its output.
	Done bool `json:"done"`
}

// PollMediaType is the media type of a poll's binary answer, which a
// client asks for with Accept: a JSON header on one line, then the chunks'
// bytes, raw and back to back (see docs/agent-api.md). It spares both ends
// the JSON escaping of megabytes of output. The client asks for it; a
// request that does not is answered JSON (PollResponse).
const PollMediaType = "application/vnd.playground.poll"

// PollHeader is the first line of a binary poll answer: a PollResponse
// whose chunks carry their sizes instead of their data.
type PollHeader struct {
	Job           JobInfo       `json:"job"`
	Chunks        []ChunkHeader `json:"chunks"`
	NextCursor    string        `json:"next_cursor"`
	Gap           *Gap          `json:"gap,omitempty"`
	DroppedBytes  uint64        `json:"dropped_bytes"`
	DroppedChunks uint64        `json:"dropped_chunks"`
	Done          bool          `json:"done"`
}

// ChunkHeader describes a chunk of a binary poll answer; its Size bytes
// follow those of the chunks before it.
type ChunkHeader struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Offset int    `json:"offset,omitempty"`
	Size   int    `json:"size"`
}

// ReadMediaType is the media type of read's binary answer, which a client
// asks for with Accept: a FileContent as JSON on one line, its Data left
// out, then its Size bytes, raw. Like ExecMediaType it spares both ends
// encoding and decoding up to 3 MiB as base64 inside JSON. A request that
// does not ask for it, or for a digest, is answered JSON.
const ReadMediaType = "application/vnd.playground.read"

// ExecMediaType is the media type of exec's binary answer, which a client
// asks for with Accept: an ExecHeader as JSON on one line, then the stdout
// bytes, then the stderr bytes, raw. Like PollMediaType it spares both
// ends encoding and decoding up to 8 MiB of output as base64 inside JSON.
// The client asks for it; a request that does not is answered JSON
// (ExecResult).
const ExecMediaType = "application/vnd.playground.exec"

// ExecHeader is the first line of a binary exec answer: an ExecResult
// whose output is given by its sizes.
type ExecHeader struct {
	StdoutSize int `json:"stdout_size"`
	StderrSize int `json:"stderr_size"`
	ExecOutputSizes
	ExitStatus
}

// Header is r's ExecHeader: the one mapping of a result to the first line
// of its binary answer.
func (r ExecResult) Header() ExecHeader {
	return ExecHeader{StdoutSize: len(r.Stdout), StderrSize: len(r.Stderr), ExecOutputSizes: r.ExecOutputSizes, ExitStatus: r.ExitStatus}
}

// ErrorResponse is the body of every failed call.
type ErrorResponse struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}
