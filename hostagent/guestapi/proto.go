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

// Package guestapi is the protocol between the host agent and the guest
// binary in a sandbox (playground-sandbox, package guest): its frames and
// their framing, its messages, its limits, its one version, and the
// sandbox's layout (paths, identities, device and mode names) that both
// sides rely on. It imports nothing of Playground, so that neither side's
// internals can leak into the other: the host speaks it through its one
// client (hostagent/backend/guestexec), the guest serves it.
//
// The agent speaks to a shepherd, a process that init keeps ready in the
// sandbox, over a unix socket (a stream of package mux in a VM):
//
//	agent                         shepherd (container root, subreaper)
//	  Start{cmd, mode, cwd} ───▶
//	  Stdin… StdinEnd       ───▶  fork /bin/sh -c CMD as the tenant uid
//	                        ◀───  Started{pid} | Error{message}
//	                        ◀───  Stdout… Stderr… (as produced)
//	  Kill (optional)       ───▶  SIGKILL every descendant until wait4 says ECHILD
//	                        ◀───  Exit{code, signal, killed} | ProofLost{message}
//
// Every frame is a one-byte type, a four-byte big-endian payload length and
// the payload. Lengths are bounded (MaxFrame) so neither side can be made to
// allocate without limit by the other.
package guestapi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/exitstatus"
)

// ProofTimeout bounds how long a shepherd keeps killing and reaping
// before it reports that it cannot prove cleanup (for example a process
// stuck in uninterruptible sleep); the agent waits that long and a little
// more for a kill's answer.
const ProofTimeout = 10 * time.Second

// ProtocolVersion is the guest protocol, carried in every Start frame.
// The agent and the guest binary in a sandbox are built together; a
// shepherd (or init, on its control socket) refuses a request of another
// version (UnsupportedVersion), so a sandbox that runs a guest binary of
// another protocol fails loudly instead of misinterpreting frames.
const ProtocolVersion = 1

// UnsupportedVersionPrefix starts a guest's refusal of a request whose
// protocol version it does not speak (UnsupportedVersion): the agent
// tells it from a refused request by it (guestexec).
const UnsupportedVersionPrefix = "guest protocol version "

// ExhaustedPrefix starts a shepherd's refusal of a command that could not
// start because the sandbox is out of PIDs or memory (fork failed with
// EAGAIN or ENOMEM): the tenant's processes hold them, and the refusal is
// retryable once they let go (guestexec maps it to backend.ErrExhausted).
const ExhaustedPrefix = "out of resources: "

// UnsupportedVersion is the refusal, by a guest that speaks version
// spoken, of a request of version asked.
func UnsupportedVersion(asked, spoken int) string {
	return fmt.Sprintf("%s%d is not spoken by this sandbox's guest, which speaks %d: restart the sandbox to run the agent's guest binary", UnsupportedVersionPrefix, asked, spoken)
}

// Bounds of a job's ring that a shepherd accepts: the agent's defaults are
// well inside them (DESIGN.md: 4 MiB and 1024 chunks).
const (
	MaxJobRingBytes  = 64 << 20
	MaxJobRingChunks = 1 << 16
	// MaxJobPage bounds the output bytes of one Page: with its data frames
	// it stays well inside a frame's bound.
	MaxJobPage = 512 << 10
	// MaxJobMeta bounds the agent's record kept with a job.
	MaxJobMeta = 4 << 10
)

// A Start frame with the longest command, all escaped, fits a frame.
var _ [MaxFrame - 6*bounds.MaxCommandBytes - 4096]struct{}

// Bounds of the protocol.
const (
	// HeaderSize is the size of a frame header: type and payload length.
	HeaderSize = 5
	// MaxFrame bounds any frame's payload; a larger length is a protocol
	// error and ends the connection.
	MaxFrame = 1 << 20
	// MaxStdin bounds the whole standard input of one command. The shepherd
	// holds it in memory (charged to the sandbox's memory limit) so that
	// the command can start only once its input is complete.
	MaxStdin = 8 << 20
	// StdinChunk is the payload size the agent uses for Stdin frames.
	StdinChunk = 64 << 10
	// OutputChunk is the largest Stdout/Stderr payload a shepherd sends.
	OutputChunk = 32 << 10
)

// Stream identifies an output stream of a command: in a Page's chunks,
// and in the output rings (package outring) of the guest and the agent.
type Stream uint8

// A command's two output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "unknown"
}

// FrameType identifies a frame.
type FrameType uint8

// Frames sent by the agent.
const (
	// FrameStart carries a JSON StartRequest; it is the first frame.
	FrameStart FrameType = 1
	// FrameStdin carries raw standard-input bytes.
	FrameStdin FrameType = 2
	// FrameStdinEnd closes standard input; the command starts after it.
	FrameStdinEnd FrameType = 3
	// FrameKill asks the shepherd to kill the command and all descendants.
	FrameKill FrameType = 4
	// FramePoll carries a JSON PollRequest, on a job's connection: the
	// shepherd answers with a Page.
	FramePoll FrameType = 5
	// FrameRelease, on a job's connection, ends the job's holder: the
	// agent has what it wanted of the job's output. A running job is
	// killed with proof first; the answer is the final Page.
	FrameRelease FrameType = 6
	// FrameInput, on a job's connection, carries bytes for the job's
	// standard input (its terminal, for a job with a TTY): at most
	// bounds.MaxInputBytes of them. The holder queues them, within
	// MaxJobInputPending, and answers with an Ack.
	FrameInput FrameType = 7
	// FrameInputEnd, on a job's connection, ends the job's input once the
	// queued bytes are written: its pipe is closed, or, on a terminal, the
	// terminal's end-of-file character (Ctrl-D) is typed. Answered by an
	// Ack.
	FrameInputEnd FrameType = 8
	// FrameResize, on a terminal job's connection, carries a JSON TTYSize:
	// the terminal's new size (the job gets SIGWINCH). Answered by an
	// Ack.
	FrameResize FrameType = 9
	// FrameScreen, on a terminal job's connection, carries a JSON
	// ScreenRequest; the holder answers with a FrameScreenState.
	FrameScreen FrameType = 10
)

// Frames sent by the shepherd.
const (
	// FrameStarted carries a JSON Started: the shell is running.
	FrameStarted FrameType = 16
	// FrameError carries a UTF-8 message: the command could not start.
	FrameError FrameType = 17
	// FrameStdout and FrameStderr carry raw output bytes, in order.
	FrameStdout FrameType = 18
	FrameStderr FrameType = 19
	// FrameExit carries a JSON Exit; it is the last frame of a command.
	FrameExit FrameType = 20
	// FrameProofLost carries a UTF-8 message: the shepherd could not prove
	// that every descendant is dead. It is the last frame of a command.
	FrameProofLost FrameType = 21
	// FramePage carries a JSON Page, the answer to a Poll or a Release; a
	// FrameStdout or FrameStderr with each of its chunks' bytes follows it.
	FramePage FrameType = 22
	// FrameJobs carries a JSON []JobRecord: the jobs the sandbox holds.
	FrameJobs FrameType = 23
	// FrameSuperseded, with no payload, is the last frame on a job's
	// connection that a newer attachment took over (an agent that
	// restarted): its reader lost the job, and must not attach again.
	FrameSuperseded FrameType = 24
	// FrameAck carries a JSON Ack: the answer to Input, InputEnd and
	// Resize.
	FrameAck FrameType = 25
	// FrameScreenState carries a JSON Screen: the answer to Screen.
	FrameScreenState FrameType = 26
)

func (t FrameType) String() string {
	switch t {
	case FrameStart:
		return "Start"
	case FrameStdin:
		return "Stdin"
	case FrameStdinEnd:
		return "StdinEnd"
	case FrameKill:
		return "Kill"
	case FrameStarted:
		return "Started"
	case FrameError:
		return "Error"
	case FrameStdout:
		return "Stdout"
	case FrameStderr:
		return "Stderr"
	case FrameExit:
		return "Exit"
	case FrameProofLost:
		return "ProofLost"
	case FramePoll:
		return "Poll"
	case FrameRelease:
		return "Release"
	case FramePage:
		return "Page"
	case FrameJobs:
		return "Jobs"
	case FrameSuperseded:
		return "Superseded"
	case FrameInput:
		return "Input"
	case FrameInputEnd:
		return "InputEnd"
	case FrameResize:
		return "Resize"
	case FrameScreen:
		return "Screen"
	case FrameAck:
		return "Ack"
	case FrameScreenState:
		return "ScreenState"
	case FrameFile:
		return "File"
	}
	return fmt.Sprintf("FrameType(%d)", uint8(t))
}

// StartRequest is the payload of FrameStart.
type StartRequest struct {
	// Version is ProtocolVersion of the sender.
	Version int `json:"v"`
	// Command is run as `/bin/sh -c Command` (login: `/bin/sh -l -c`).
	Command string `json:"cmd"`
	// Login selects a login shell, which reads /etc/profile (the tenant's
	// generated login profile) and ~/.profile; otherwise the shell gets
	// CleanEnv and reads no profile.
	Login bool `json:"login,omitempty"`
	// Cwd is the working directory; empty means TenantHome.
	Cwd string `json:"cwd,omitempty"`
	// Dial, when set, asks for no command: the shepherd connects to this
	// TCP port on the sandbox's loopback, answers Started (PID 0) or
	// Error, and from then on relays raw bytes both ways until both
	// directions are closed.
	Dial int `json:"dial,omitempty"`
	// Etc, when set, asks for no command: in a VM, the shepherd (the
	// guest's root) replaces these files of EtcDir, each atomically, and
	// answers Started (PID 0) or Error. Names are those EtcFiles makes. A
	// container refuses it: its /etc is on the host, where the agent
	// writes it.
	Etc map[string]string `json:"etc,omitempty"`
	// Job, when set, runs the command as a job the sandbox holds: its
	// output goes to a ring in the shepherd, read by Poll frames, and the
	// command outlives this connection. The connection carries Poll, Kill
	// and Release frames once the command is Started; another connection
	// takes over through Attach. The holder answers each Poll with a Page
	// and, unasked, sends Exit or ProofLost once when the job ends (at
	// once to a connection that attaches later): a Page never follows
	// them in the middle of its data.
	Job *JobSpec `json:"job,omitempty"`
	// Attach, when set, asks for no command: the shepherd connects to the
	// holder of the job of this ID, answers Started (PID 0) or Error, and
	// relays raw bytes from then on. The newest attachment wins: the
	// previous one is closed.
	Attach string `json:"attach,omitempty"`
	// Jobs, when set, asks for the jobs the sandbox holds, answered by one
	// FrameJobs.
	Jobs bool `json:"jobs,omitempty"`
	// Checkpoint, when set, asks init (on its control socket) to close
	// every socket the node backs, so that the sandbox's runtime can
	// checkpoint it (gVisor refuses to save a sandbox with one): its agent
	// and control sockets and the shepherds' share of the first. Init
	// answers Started (PID 0) once none is left open, or Error, having
	// listened again, when a process of the tenant holds one (a unix
	// socket bound in a directory of the node's, which it names). It
	// listens again on ResumeSignal.
	Checkpoint bool `json:"checkpoint,omitempty"`
	// File, when set, asks for no command: the shepherd serves a file
	// call (files.go), its bytes to write in the Stdin frames.
	File *FileRequest `json:"file,omitempty"`
}

// JobSpec is a job's identity and bounds, kept by its holder.
type JobSpec struct {
	// ID names the job in the sandbox: letters, digits, '-' and '_', at
	// most 64 bytes.
	ID string `json:"id"`
	// RingBytes, RingChunks and ChunkBytes bound the job's output ring
	// (package outring).
	RingBytes  int `json:"ringBytes"`
	RingChunks int `json:"ringChunks"`
	ChunkBytes int `json:"chunkBytes"`
	// TTLSeconds is how long a job that ended is kept, unpolled, before
	// its holder releases it itself: the agent that would have released
	// it is gone for good.
	TTLSeconds int `json:"ttl"`
	// Meta is the agent's record of the job (its tenant, say), returned
	// as it was given by a listing; at most MaxJobMeta bytes.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Stdin keeps the job's standard input open after the Start's stdin:
	// Input frames feed it until InputEnd. Without it (and without a
	// TTY) the job's input ends with the Start's stdin.
	Stdin bool `json:"stdin,omitempty"`
	// TTY runs the job on a pseudo-terminal of this size, its standard
	// input, output and error all the terminal (one stream, Stdout), and
	// keeps a terminal emulator of it in the holder: the screen outlives
	// the agent, as the job does. A job with a TTY takes input.
	TTY *TTYSize `json:"tty,omitempty"`
}

// Bounds of a terminal job that a holder accepts.
const (
	// (Its size and scrollback are bounded by bounds.CheckTTY.)
	//
	// MaxTerminalString bounds a string a program sends its terminal: a
	// title or icon name, a working directory (OSC 7), a hyperlink (OSC
	// 8), a clipboard (OSC 52), any OSC, DCS, SOS, PM or APC sequence.
	// The holder's emulator drops a longer one whole, as if it had not
	// been sent, so a Screen's Title is never longer.
	MaxTerminalString = 4 << 10
)

// Bounds of a job's input.
const (
	// MaxJobInputPending bounds the input a holder keeps that its job has
	// not read yet: past it, Input is refused until the job reads.
	MaxJobInputPending = 256 << 10
)

// TTYSize is a terminal's size, and, at a job's start, the scrollback
// its emulator keeps.
type TTYSize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
	// Scrollback is how many lines that scroll off the top the emulator
	// keeps (at most bounds.MaxScrollback); only a job's start sets it.
	Scrollback int `json:"scrollback,omitempty"`
}

// Check refuses a size out of the holder's bounds.
func (t TTYSize) Check() error { return bounds.CheckTTY(t.Rows, t.Cols, t.Scrollback) }

// Ack is the payload of FrameAck.
type Ack struct {
	// Error refuses the request, saying why (input closed, too much
	// pending, not a terminal); empty when it was done.
	Error string `json:"error,omitempty"`
	// Pending is the input queued that the job has not read yet.
	Pending int `json:"pending,omitempty"`
}

// ScreenRequest is the payload of FrameScreen.
type ScreenRequest struct {
	// Scrollback asks for up to this many of the latest lines that
	// scrolled off the top, oldest first.
	Scrollback int `json:"scrollback,omitempty"`
}

// Screen is the payload of FrameScreenState: a terminal job's screen as
// its emulator renders it, as text.
type Screen struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
	// Lines are the screen's rows, top to bottom, trailing blanks cut.
	Lines []string `json:"lines"`
	// CursorRow and CursorCol are the cursor's position, from 0.
	CursorRow    int  `json:"cursorRow"`
	CursorCol    int  `json:"cursorCol"`
	CursorHidden bool `json:"cursorHidden,omitempty"`
	// AltScreen is true while a full-screen program (vi, top) has the
	// alternate screen, which keeps no scrollback.
	AltScreen bool   `json:"altScreen,omitempty"`
	Title     string `json:"title,omitempty"`
	// Scrollback holds the lines asked for, oldest first;
	// ScrollbackLines counts all the lines kept.
	Scrollback      []string `json:"scrollback,omitempty"`
	ScrollbackLines int      `json:"scrollbackLines,omitempty"`
}

// JobRecord is a job the sandbox holds, as FrameJobs lists it.
type JobRecord struct {
	Spec JobSpec `json:"spec"`
	// PID is the job's shell in the sandbox's PID namespace.
	PID int `json:"pid"`
	// Started is when the shell started (RFC 3339).
	Started time.Time `json:"started"`
}

// PollRequest is the payload of FramePoll.
type PollRequest struct {
	// Cursor is where to read from (outring.Cursor's text; "" for the
	// oldest output kept).
	Cursor string `json:"cursor"`
	// Max bounds the page's output bytes (at most MaxJobPage).
	Max int `json:"max"`
	// WaitMillis, when there is nothing to read and the job runs, is how
	// long the holder waits for output or the job's end before answering.
	WaitMillis int `json:"wait,omitempty"`
}

// Page is the payload of FramePage.
type Page struct {
	Chunks []PageChunk `json:"chunks,omitempty"`
	// Next is the cursor after Chunks.
	Next string `json:"next"`
	// AtEnd: Next is past all output written so far. With Exit or
	// ProofLost set, the client has read the whole job (the agent's
	// job_poll says done).
	AtEnd bool `json:"atEnd,omitempty"`
	// Gap is the output evicted before the client read it, if any.
	Gap *PageGap `json:"gap,omitempty"`
	// DroppedBytes and DroppedChunks count every eviction so far.
	DroppedBytes  uint64 `json:"droppedBytes,omitempty"`
	DroppedChunks uint64 `json:"droppedChunks,omitempty"`
	// Exit is set once the job has ended and all its output is in the
	// ring; ProofLost instead when its cleanup could not be proven.
	Exit      *End   `json:"exit,omitempty"`
	ProofLost string `json:"proofLost,omitempty"`
	// Error refuses the poll (a cursor that does not fit), with the reason.
	Error string `json:"error,omitempty"`
}

// PageChunk is one chunk of a Page: its bytes follow the Page, in order,
// each in one frame of its stream.
type PageChunk struct {
	Stream Stream `json:"stream"`
	Seq    uint64 `json:"seq"`
	Offset int    `json:"offset,omitempty"`
	Len    int    `json:"len"`
}

// PageGap is outring.Gap on the wire.
type PageGap struct {
	FromSeq uint64 `json:"from"`
	ToSeq   uint64 `json:"to"`
	Chunks  uint64 `json:"chunks"`
	Bytes   uint64 `json:"bytes"`
}

// Started is the payload of FrameStarted.
type Started struct {
	// PID is the shell's process ID in the sandbox's PID namespace.
	PID int `json:"pid"`
}

// Exit is how a command ended (exitstatus.Status, the one shape of it
// from the guest to the agent API's wire), as a shepherd reports it: its
// code (-1 when a signal ended it) or its signal (SignalName), and whether
// a Kill (or the agent's going away) ended it with every descendant
// proven dead. What only the host knows, TimedOut and OOMKilled, a guest
// leaves zero; Duration too, but for a held job's end.
type Exit = exitstatus.Status

// End is the payload of FrameExit, and a Page's Exit: how the command
// ended and, of a held job, its run time (Duration: an agent that
// attaches after the end has no other way to know it) and its output's
// totals (exitstatus.Job; zero for a command that is not a job). It is
// the protocol's own type so that its JSON is the protocol's, which
// version 1 fixed (endV1), not the agent API's.
type End exitstatus.Job

// endV1 is End's JSON in protocol version 1: the signal by its number, the
// run time in milliseconds.
type endV1 struct {
	Code          int    `json:"code"`
	Signal        int    `json:"signal,omitempty"`
	Killed        bool   `json:"killed,omitempty"`
	Millis        int64  `json:"ms,omitempty"`
	Output        uint64 `json:"out,omitempty"`
	DroppedBytes  uint64 `json:"droppedBytes,omitempty"`
	DroppedChunks uint64 `json:"droppedChunks,omitempty"`
}

// MarshalJSON writes e in version 1's form.
func (e End) MarshalJSON() ([]byte, error) {
	return json.Marshal(endV1{
		Code: e.ExitCode, Signal: signalNumber(e.Signal), Killed: e.Killed, Millis: e.Duration.Milliseconds(),
		Output: e.Output, DroppedBytes: e.DroppedBytes, DroppedChunks: e.DroppedChunks,
	})
}

// UnmarshalJSON reads version 1's form.
func (e *End) UnmarshalJSON(b []byte) error {
	var w endV1
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = End{
		Status: Exit{ExitCode: w.Code, Killed: w.Killed, Duration: time.Duration(w.Millis) * time.Millisecond},
		Output: w.Output, DroppedBytes: w.DroppedBytes, DroppedChunks: w.DroppedChunks,
	}
	if w.Signal != 0 {
		e.ExitCode, e.Signal = -1, SignalName(w.Signal)
	}
	return nil
}

// WorkerSpec is the worker that init keeps running (WorkerSpecFile).
type WorkerSpec struct {
	// Argv is run without a shell as TenantUID, in TenantHome; Argv[0] is
	// looked up on DefaultPath when it has no slash.
	Argv []string `json:"argv"`
	// Env is the worker's whole environment.
	Env []string `json:"env"`
	// Token is written to WorkerTokenFile before the worker starts; the
	// worker's environment names the file (WorkerTokenEnv).
	Token string `json:"token"`
	// Port is where the worker serves, for the agent's relay; init does
	// not use it.
	Port int `json:"port,omitempty"`
}

// WorkerState is init's account of the worker (WorkerStatusFile).
type WorkerState struct {
	// Running is true while a worker process runs; PID is its PID in the
	// sandbox and StartedAt when it started.
	Running   bool      `json:"running"`
	PID       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// Restarts counts starts after the first of this spec.
	Restarts int `json:"restarts"`
	// LastExit says how the last worker process ended, and when.
	LastExit     string    `json:"lastExit,omitempty"`
	LastExitTime time.Time `json:"lastExitTime,omitzero"`
	// Error says why the worker cannot start (its binary is missing, say).
	Error string `json:"error,omitempty"`
}

// ErrFrameTooLarge is returned for a header announcing more than MaxFrame.
var ErrFrameTooLarge = errors.New("guest protocol: frame too large")

// AppendFrame appends a frame with the given type and payload to dst.
func AppendFrame(dst []byte, t FrameType, payload []byte) []byte {
	var hdr [HeaderSize]byte
	hdr[0] = byte(t)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	dst = append(dst, hdr[:]...)
	return append(dst, payload...)
}

// AppendJSONFrame appends a frame whose payload is v encoded as JSON.
func AppendJSONFrame(dst []byte, t FrameType, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	if len(b) > MaxFrame {
		return dst, ErrFrameTooLarge
	}
	return AppendFrame(dst, t, b), nil
}

// ParseFrame decodes the first frame of b. It returns n == 0 (and no error)
// when b does not yet hold a whole frame; payload aliases b.
func ParseFrame(b []byte) (t FrameType, payload []byte, n int, err error) {
	if len(b) < HeaderSize {
		return 0, nil, 0, nil
	}
	size := binary.BigEndian.Uint32(b[1:HeaderSize])
	if size > MaxFrame {
		return 0, nil, 0, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, size)
	}
	end := HeaderSize + int(size)
	if len(b) < end {
		return 0, nil, 0, nil
	}
	return FrameType(b[0]), b[HeaderSize:end], end, nil
}

// FrameReader reads frames from a stream. It reuses one buffer, grown up to
// MaxFrame as needed, so a payload is valid only until the next ReadFrame.
type FrameReader struct {
	r   io.Reader
	hdr [HeaderSize]byte
	buf []byte
}

// NewFrameReader returns a FrameReader on r; r should be buffered if it is
// read in small pieces.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: r}
}

// ReadFrame returns the next frame. io.EOF means the stream ended cleanly
// between frames; io.ErrUnexpectedEOF means it ended inside one.
func (fr *FrameReader) ReadFrame() (FrameType, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, nil, err
	}
	size := binary.BigEndian.Uint32(fr.hdr[1:])
	if size > MaxFrame {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, size)
	}
	if cap(fr.buf) < int(size) {
		fr.buf = make([]byte, size)
	}
	p := fr.buf[:size]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return FrameType(fr.hdr[0]), p, nil
}

// maxJobRecord bounds a job record read back: a spec, its Meta, a PID and
// a time.
const maxJobRecord = MaxJobMeta + 4096

// ReadJobRecords reads the records of the jobs a sandbox holds from its
// jobs directory, fsys (JobsDir: <id>.json, written by each job's holder),
// by ID. A record removed meanwhile (its job was released), unreadable, or
// not named by its own ID is left out; no directory is no jobs.
func ReadJobRecords(fsys fs.FS) ([]JobRecord, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := []JobRecord{}
	for _, n := range names {
		b, err := readBounded(fsys, n, maxJobRecord)
		if err != nil {
			continue
		}
		var r JobRecord
		if json.Unmarshal(b, &r) == nil && strings.TrimSuffix(n, ".json") == r.Spec.ID {
			out = append(out, r)
		}
	}
	return out, nil
}

// readBounded reads file name of fsys if it is a regular file of at most
// limit bytes.
func readBounded(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("%s: not a job record", name)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
