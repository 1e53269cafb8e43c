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

// Package agentapi is the host agent's network API: the calls the gateway
// (and the manager) make to the agent of a node, as JSON over HTTP/2 (TLS,
// or cleartext h2c on a trusted network; a poll's page may come as raw
// bytes after a JSON header, PollMediaType), authenticated by a bearer token
// that only the gateway and the manager hold. Every call names the tenant;
// the agent checks that the handle or job belongs to it. docs/agent-api.md
// describes the wire format.
package agentapi

import (
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// MaxRequestBytes bounds a request body: a 3 MiB payload as base64 is 4 MiB,
// plus the JSON around it.
const MaxRequestBytes = 5 << 20

// TenantRequest is the body of calls that need only the tenant.
type TenantRequest struct {
	Tenant string `json:"tenant"`
}

// ExecRequest is the body of exec and job start.
type ExecRequest struct {
	Tenant string `json:"tenant"`
	hostagent.ExecRequest
}

// PollRequest is the body of a job poll.
type PollRequest struct {
	Tenant   string `json:"tenant"`
	Cursor   string `json:"cursor,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
	// Wait is how long to wait for new output when there is none yet.
	Wait time.Duration `json:"wait,omitempty"`
}

// PollResponse is a page of a job's output.
type PollResponse struct {
	Job           jobs.JobInfo        `json:"job"`
	Chunks        []jobs.EncodedChunk `json:"chunks"`
	NextCursor    string              `json:"next_cursor"`
	Gap           *jobs.Gap           `json:"gap,omitempty"`
	DroppedBytes  uint64              `json:"dropped_bytes"`
	DroppedChunks uint64              `json:"dropped_chunks"`
	Done          bool                `json:"done"`
}

// PollMediaType is the media type of a poll's binary answer, which a
// client asks for with Accept: a JSON header on one line, then the chunks'
// bytes, raw and back to back (see docs/agent-api.md). It spares both ends
// the JSON escaping of megabytes of output; an agent that does not know it
// answers JSON, which the client reads too.
const PollMediaType = "application/vnd.playground.poll"

// PollHeader is the first line of a binary poll answer: a PollResponse
// whose chunks carry their sizes instead of their data.
type PollHeader struct {
	Job           jobs.JobInfo  `json:"job"`
	Chunks        []ChunkHeader `json:"chunks"`
	NextCursor    string        `json:"next_cursor"`
	Gap           *jobs.Gap     `json:"gap,omitempty"`
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

// ExecMediaType is the media type of exec's binary answer, which a client
// asks for with Accept: an ExecHeader as JSON on one line, then the
// stdout bytes, then the stderr bytes, raw. Like PollMediaType it spares
// both ends encoding and decoding up to 8 MiB of output as base64 inside
// JSON; an agent that does not know it answers JSON (hostagent.ExecResult),
// which the client reads too.
const ExecMediaType = "application/vnd.playground.exec"

// ExecHeader is the first line of a binary exec answer: an ExecResult
// whose output is given by its sizes.
type ExecHeader struct {
	StdoutSize    int           `json:"stdout_size"`
	StderrSize    int           `json:"stderr_size"`
	StdoutDropped int64         `json:"stdout_dropped,omitempty"`
	StderrDropped int64         `json:"stderr_dropped,omitempty"`
	ExitCode      int           `json:"exit_code"`
	Signal        string        `json:"signal,omitempty"`
	TimedOut      bool          `json:"timed_out,omitempty"`
	OOMKilled     bool          `json:"oom_killed,omitempty"`
	Duration      time.Duration `json:"duration"`
}

// ReadRequest is the body of a file read.
type ReadRequest struct {
	Tenant string `json:"tenant"`
	Path   string `json:"path"`
	Cwd    string `json:"cwd,omitempty"`
}

// WriteRequest is the body of a file write; Data is base64 on the wire.
type WriteRequest struct {
	Tenant string `json:"tenant"`
	Path   string `json:"path"`
	Cwd    string `json:"cwd,omitempty"`
	Data   []byte `json:"data"`
}

// ErrorResponse is the body of every failed call.
type ErrorResponse struct {
	Code    hostagent.Code `json:"code"`
	Message string         `json:"message"`
}
