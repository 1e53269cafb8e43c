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

package tools

import "time"

// The tools' inputs and outputs. Their JSON schemas are derived from these
// types (jsonschema tags are the descriptions a model reads) and refined in
// schemas.go with enums, defaults and bounds.

// OpenSessionInput takes nothing: the tenant comes from the credential.
type OpenSessionInput struct{}

// OpenSessionOutput is an open session.
type OpenSessionOutput struct {
	SandboxID string    `json:"sandbox_id" jsonschema:"the stable ID of your sandbox: the same in every session, so the files and processes you left are still there"`
	Handle    string    `json:"handle" jsonschema:"the session handle: pass it to exec, job_exec, read, write and close_session"`
	Expires   time.Time `json:"expires" jsonschema:"when the handle expires if it goes unused; every call with it renews it"`
}

// CloseSessionInput names the handle to release.
type CloseSessionInput struct {
	Handle string `json:"handle" jsonschema:"the handle that open_session returned"`
}

// CloseSessionOutput confirms the release.
type CloseSessionOutput struct {
	Handle string `json:"handle" jsonschema:"the handle that was closed; it cannot be used again"`
	Closed bool   `json:"closed" jsonschema:"always true: the handle is released (files and processes in the sandbox stay)"`
}

// ExecInput is a command to run to its end.
type ExecInput struct {
	Handle         string `json:"handle" jsonschema:"the session handle from open_session"`
	Command        string `json:"command" jsonschema:"shell text run by a fresh /bin/sh -c; a cd or variable does not carry into the next command (use cwd, or chain with &&)"`
	Shell          string `json:"shell,omitempty" jsonschema:"login (default) loads your profile (PATH, environment); clean starts from a minimal environment"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"working directory, absolute or relative to the home directory (default: the home directory); it must exist"`
	Stdin          string `json:"stdin,omitempty" jsonschema:"standard input as UTF-8 text (default: empty); use stdin_base64 for bytes that are not text"`
	StdinBase64    string `json:"stdin_base64,omitempty" jsonschema:"standard input as base64, for binary input; give stdin or stdin_base64, not both"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill the command and all its processes after this many seconds (default 600); for longer work use job_exec"`
}

// ExecOutput is how a command ended and what it wrote. Output is byte-exact:
// a stream that is valid UTF-8 is text, anything else base64.
type ExecOutput struct {
	ExitCode       int    `json:"exit_code" jsonschema:"the shell's exit code; -1 when it was killed by a signal"`
	Signal         string `json:"signal,omitempty" jsonschema:"the signal that ended the shell, if any"`
	TimedOut       bool   `json:"timed_out" jsonschema:"true when timeout_seconds passed and the command and its processes were killed"`
	OOMKilled      bool   `json:"oom_killed,omitempty" jsonschema:"true when the sandbox ran out of memory while the command ran and the kernel killed one of its processes"`
	Stdout         string `json:"stdout" jsonschema:"standard output, encoded as stdout_encoding says"`
	StdoutEncoding string `json:"stdout_encoding" jsonschema:"text when stdout is valid UTF-8, else base64"`
	StdoutDropped  int64  `json:"stdout_dropped" jsonschema:"bytes of stdout beyond the 4 MiB exec limit that were not kept; use job_exec to page through large output"`
	Stderr         string `json:"stderr" jsonschema:"standard error, encoded as stderr_encoding says"`
	StderrEncoding string `json:"stderr_encoding" jsonschema:"text when stderr is valid UTF-8, else base64"`
	StderrDropped  int64  `json:"stderr_dropped" jsonschema:"bytes of stderr beyond the 4 MiB exec limit that were not kept"`
	DurationMS     int64  `json:"duration_ms" jsonschema:"how long the command ran, in milliseconds"`
}

// JobExecInput is a command to start in the background.
type JobExecInput struct {
	Handle         string `json:"handle" jsonschema:"the session handle from open_session"`
	Command        string `json:"command" jsonschema:"shell text run by a fresh /bin/sh -c in the background"`
	Shell          string `json:"shell,omitempty" jsonschema:"login (default) loads your profile (PATH, environment); clean starts from a minimal environment"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"working directory, absolute or relative to the home directory (default: the home directory); it must exist"`
	Stdin          string `json:"stdin,omitempty" jsonschema:"standard input as UTF-8 text (default: empty)"`
	StdinBase64    string `json:"stdin_base64,omitempty" jsonschema:"standard input as base64; give stdin or stdin_base64, not both"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill the job and all its processes after this many seconds (default: no timeout; cancel it with job_cancel)"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"a key of your own (a UUID, say) that makes the start safe to retry: if you lost the answer, send the same job_exec with the same key and you get the same job (its job_id and its state now), not a second one, for as long as the job is kept (until you acknowledge its final page, or its result expires); the same key with another command is refused"`
	// The extended tool set's options (Options.Extended); the standard
	// set's schema has none of them.
	TTY       bool `json:"tty,omitempty" jsonschema:"run the job on a terminal (a pseudo-terminal: its input, output and error, one output stream); read what it shows with job_screen, type with job_input, resize with job_resize"`
	Rows      int  `json:"rows,omitempty" jsonschema:"the terminal's rows (default 24)"`
	Cols      int  `json:"cols,omitempty" jsonschema:"the terminal's columns (default 80)"`
	StdinOpen bool `json:"stdin_open,omitempty" jsonschema:"keep the job's standard input open after stdin: write to it with job_input, end it with job_input end_input (a terminal job takes input anyway)"`
}

// extendedJobExecFields are JobExecInput's fields of the extended set.
var extendedJobExecFields = []string{"tty", "rows", "cols", "stdin_open"}

// JobExecOutput is a started job.
type JobExecOutput struct {
	JobID  string `json:"job_id" jsonschema:"the job's ID for job_poll and job_cancel; it stays valid across gateway restarts and sessions"`
	State  string `json:"state" jsonschema:"running; or, for a job_exec retried with its idempotency_key, the job's state now"`
	Cursor string `json:"cursor" jsonschema:"the cursor of the job's first output: pass it to job_poll (empty means the start)"`
}

// JobPollInput asks for a page of a job's output.
type JobPollInput struct {
	JobID       string `json:"job_id" jsonschema:"the job_id that job_exec returned"`
	Cursor      string `json:"cursor,omitempty" jsonschema:"where to continue: the next_cursor of your previous job_poll of this job (empty: the oldest output kept)"`
	MaxBytes    int    `json:"max_bytes,omitempty" jsonschema:"the most output bytes to return in this page (default 1 MiB, at most 4 MiB)"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"when there is no new output yet, wait up to this many seconds for some (default 10, at most 30, 0 returns at once)"`
}

// JobPollOutput is a page of a job's output.
type JobPollOutput struct {
	JobID         string     `json:"job_id" jsonschema:"the job"`
	State         string     `json:"state" jsonschema:"running, cancelling, or terminal: exited, killed, timed_out, failed"`
	Chunks        []Chunk    `json:"chunks" jsonschema:"the output after the cursor, oldest first"`
	NextCursor    string     `json:"next_cursor" jsonschema:"pass this as cursor to the next job_poll"`
	Gap           *Gap       `json:"gap,omitempty" jsonschema:"set when output after your cursor was evicted before you read it"`
	DroppedBytes  uint64     `json:"dropped_bytes" jsonschema:"bytes of this job's output evicted so far from its 4 MiB buffer, read or not"`
	DroppedChunks uint64     `json:"dropped_chunks" jsonschema:"chunks of this job's output evicted so far"`
	Done          bool       `json:"done" jsonschema:"true when the job has ended and this page reaches the end of its output; poll once more with next_cursor to acknowledge, so the job is recycled"`
	Result        *JobResult `json:"result,omitempty" jsonschema:"how the job ended, once it is terminal"`
}

// Chunk is a piece of a job's output.
type Chunk struct {
	Stream   string `json:"stream" jsonschema:"stdout or stderr"`
	Seq      uint64 `json:"seq" jsonschema:"the chunk's number in the job's output, across both streams"`
	Offset   int    `json:"offset,omitempty" jsonschema:"where data starts within the chunk, when a page boundary split it"`
	Encoding string `json:"encoding" jsonschema:"text (valid UTF-8) or base64"`
	Data     string `json:"data" jsonschema:"the bytes, in the chunk's encoding"`
}

// Gap is output lost before it was read.
type Gap struct {
	FromSeq uint64 `json:"from_seq" jsonschema:"the first lost chunk"`
	ToSeq   uint64 `json:"to_seq" jsonschema:"the chunk after the last lost one; this page resumes there"`
	Chunks  uint64 `json:"chunks" jsonschema:"how many chunks were lost"`
	Bytes   uint64 `json:"bytes" jsonschema:"how many bytes you never received"`
}

// JobResult is how a job ended.
type JobResult struct {
	ExitCode   int    `json:"exit_code" jsonschema:"the shell's exit code, or -1 when it did not exit by itself"`
	Signal     string `json:"signal,omitempty" jsonschema:"the signal that ended the shell, if any"`
	Killed     bool   `json:"killed" jsonschema:"true when job_cancel or the timeout ended it and all its processes were proven dead"`
	TimedOut   bool   `json:"timed_out" jsonschema:"true when its timeout ended it"`
	OOMKilled  bool   `json:"oom_killed,omitempty" jsonschema:"true when the sandbox ran out of memory while the job ran and the kernel killed one of its processes"`
	Error      string `json:"error,omitempty" jsonschema:"why a failed job failed, or a caveat of a killed one"`
	DurationMS int64  `json:"duration_ms" jsonschema:"from start to end, in milliseconds"`
}

// JobCancelInput names the job to cancel.
type JobCancelInput struct {
	JobID string `json:"job_id" jsonschema:"the job_id that job_exec returned"`
}

// JobCancelOutput is the job's state after the cancel.
type JobCancelOutput struct {
	JobID  string     `json:"job_id" jsonschema:"the job"`
	State  string     `json:"state" jsonschema:"cancelling until every process of the job is proven dead, then killed (or the terminal state it had already reached)"`
	Result *JobResult `json:"result,omitempty" jsonschema:"how the job ended, once it is terminal"`
}

// ReadInput names a file to read.
type ReadInput struct {
	Handle string `json:"handle" jsonschema:"the session handle from open_session"`
	Path   string `json:"path" jsonschema:"the file, absolute or relative to cwd"`
	Cwd    string `json:"cwd,omitempty" jsonschema:"the directory relative paths start from (default: the home directory)"`
	// The extended set's (extendedReadFields).
	Offset int64 `json:"offset,omitempty" jsonschema:"read a range of the file starting at this byte (default 0); any size of file can be read in ranges"`
	Length int   `json:"length,omitempty" jsonschema:"read at most this many bytes from offset (at most 3 MiB; default 3 MiB when offset is given); eof in the result says the range reached the end"`
	Digest bool  `json:"digest,omitempty" jsonschema:"return no content: only the whole file's size and sha256, to check a file moved in ranges"`
}

// ReadOutput describes the file read; its bytes are in the result's content.
type ReadOutput struct {
	Path    string `json:"path" jsonschema:"the file's absolute path, symlinks in its directory resolved (as write gives it)"`
	Size    int    `json:"size" jsonschema:"the file's size in bytes"`
	MIME    string `json:"mime" jsonschema:"the file's media type, from its extension or else its content"`
	SHA256  string `json:"sha256" jsonschema:"the SHA-256 of the file's bytes, in hex"`
	Content string `json:"content" jsonschema:"how the bytes are returned in the result's content: text (a text block), image (an image block) or blob (an embedded resource with base64 data)"`
	// The extended set's (extendedReadOutputFields).
	FileSize int64 `json:"file_size,omitempty" jsonschema:"the whole file's size; for a range, size and sha256 are the range's"`
	Offset   int64 `json:"offset,omitempty" jsonschema:"where the range starts"`
	EOF      bool  `json:"eof,omitempty" jsonschema:"true when the range reaches the end of the file"`
}

// The fields of read and write that only the extended set serves.
var (
	extendedReadFields        = []string{"offset", "length", "digest"}
	extendedReadOutputFields  = []string{"file_size", "offset", "eof"}
	extendedWriteFields       = []string{"offset", "append"}
	extendedWriteOutputFields = []string{"file_size"}
)

// WriteInput is a file to replace.
type WriteInput struct {
	Handle string  `json:"handle" jsonschema:"the session handle from open_session"`
	Path   string  `json:"path" jsonschema:"the file to create or replace, absolute or relative to cwd; its directory must exist"`
	Text   *string `json:"text,omitempty" jsonschema:"the new content as UTF-8 text; give exactly one of text or base64"`
	Base64 *string `json:"base64,omitempty" jsonschema:"the new content as base64 (standard or URL alphabet, padding optional), for bytes that are not text; at most 3 MiB decoded"`
	Cwd    string  `json:"cwd,omitempty" jsonschema:"the directory relative paths start from (default: the home directory)"`
	// The extended set's (extendedWriteFields).
	Offset *int64 `json:"offset,omitempty" jsonschema:"write at this byte of the file, keeping the rest (not atomic; the file is created if missing): chunks of a large file, in any order"`
	Append bool   `json:"append,omitempty" jsonschema:"append to the file (not atomic; created if missing): chunks of a large file, in order"`
}

// WriteOutput describes the file written.
type WriteOutput struct {
	Path   string `json:"path" jsonschema:"the file's absolute path, symlinks in its directory resolved"`
	Size   int    `json:"size" jsonschema:"bytes written"`
	MIME   string `json:"mime" jsonschema:"the file's media type, from its extension or else its content"`
	SHA256 string `json:"sha256" jsonschema:"the SHA-256 of the bytes written, in hex"`
	// The extended set's.
	FileSize int64 `json:"file_size,omitempty" jsonschema:"the file's size after a ranged write (offset or append)"`
}
