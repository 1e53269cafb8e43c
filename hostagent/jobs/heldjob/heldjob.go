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

// Package heldjob holds the job engine's values that cross its connection
// to a job its sandbox holds (jobs.Held): what the engine asks the job's
// holder (a poll, a screen), and what the holder answers (a page of
// output, the job's end, its screen). They are the engine's own, apart
// from package jobs only so that the guest's client (package guestexec),
// which turns them into the guest protocol's messages and back, can
// implement jobs.Held without importing the engine; package jobs names
// them too.
package heldjob

import (
	"errors"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/exitstatus"
)

// PollRequest asks a job's holder for a page of its output.
type PollRequest struct {
	// Cursor is where to read from (a cursor a page gave; "" for the
	// oldest output kept).
	Cursor string
	// Max bounds the page's output bytes; the holder bounds it too.
	Max int
	// Wait, when there is nothing to read and the job runs, is how long
	// the holder waits for output or the job's end before answering.
	Wait time.Duration
}

// Page is a page of a job's output, as its holder answers a poll.
type Page struct {
	// Chunks are the page's output, in order.
	Chunks []Chunk
	// Next is the cursor after Chunks.
	Next string
	// AtEnd: Next is past all output written so far. With Exit or
	// ProofLost set, the whole job has been read.
	AtEnd bool
	// Gap is the output evicted before it was read, if any.
	Gap *Gap
	// DroppedBytes and DroppedChunks count every eviction so far.
	DroppedBytes, DroppedChunks uint64
	// Exit is set once the job has ended and all its output is in its
	// ring; ProofLost instead when its cleanup could not be proven.
	Exit      *Exit
	ProofLost string
}

// Chunk is a piece of a job's output as a poll returns it.
type Chunk struct {
	Stream backend.Stream
	// Seq numbers the chunk in the job's output, from 0, across both streams.
	Seq uint64
	// Offset is where Data starts within the chunk; it is non-zero only when
	// a poll's byte budget split the chunk and this is a later part.
	Offset int
	// Data is the chunk's bytes, owned by the caller.
	Data []byte
}

// Gap reports output that had not been read when the job's ring evicted
// it. Chunks FromSeq up to, not including, ToSeq were lost (Chunks of
// them, the first possibly after part of it was read) and Bytes bytes of
// them were never received. The poll resumes at ToSeq.
type Gap struct {
	FromSeq uint64
	ToSeq   uint64
	Chunks  uint64
	Bytes   uint64
}

// Exit is how a job ended, as its holder says (exitstatus.Job, the one
// shape of it): its shell's Status (its code or signal, whether a kill
// ended it with every descendant proven dead, and its run time, from its
// start to its end) and its output's totals.
type Exit = exitstatus.Job

// TTYSize is a terminal job's terminal: its size, and, at the job's
// start, how many lines that scroll off its top it keeps (0: the
// holder's default).
type TTYSize struct {
	Rows, Cols int
	Scrollback int
}

// ScreenRequest asks a terminal job's holder for its screen.
type ScreenRequest struct {
	// Scrollback asks for up to this many of the latest lines that
	// scrolled off the top, oldest first.
	Scrollback int
}

// Screen is a terminal job's screen as its holder's emulator renders it.
type Screen struct {
	Rows, Cols int
	// Lines are the screen's rows, top to bottom, trailing blanks cut.
	Lines []string
	// CursorRow and CursorCol are the cursor's position, from 0.
	CursorRow, CursorCol int
	CursorHidden         bool
	// AltScreen is true while a full-screen program (vi, top) has the
	// alternate screen, which keeps no scrollback.
	AltScreen bool
	Title     string
	// Scrollback holds the lines asked for, oldest first;
	// ScrollbackLines counts all the lines kept.
	Scrollback      []string
	ScrollbackLines int
}

// ErrRefused says that the job's holder refused a control request (input
// to a job whose input is closed or full, a terminal request of a job
// without a terminal); the job is as it was. The error says why.
var ErrRefused = errors.New("refused by the job's holder")

// ErrSuperseded ends a job's connection that a newer attachment took
// over (another agent process, or another connection of this one).
var ErrSuperseded = errors.New("a newer connection attached to the job")
