// Package agentapi is the host agent's network API: the calls the gateway
// (and the manager) make to the agent of a node, as JSON over HTTP/2 (TLS,
// or cleartext h2c on a trusted network), authenticated by a bearer token
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
