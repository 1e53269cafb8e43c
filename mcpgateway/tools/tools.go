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

// Package tools is the sandbox catalog: the eight MCP tools of DESIGN.md
// section 3 (open_session, close_session, exec, job_exec, job_poll,
// job_cancel, read, write) on a go-sdk server. Each call is routed to the
// calling tenant's sandbox (by a Router that knows the tenant from the
// credential) and served by that sandbox's host agent. The tools keep no
// state: handles and jobs live in the agents.
//
// Failures are tool results with isError and a message that says what to do
// next; protocol errors are left to the SDK (malformed JSON-RPC).
package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/budget"
)

// Defaults of Options.
const (
	// DefaultExecTimeout bounds an exec that names no timeout, so that a
	// synchronous call cannot hang forever.
	DefaultExecTimeout = 10 * time.Minute
	// DefaultProgressInterval is how often a running call sends a progress
	// notification when the client asked for them.
	DefaultProgressInterval = 5 * time.Second
	// DefaultPollWait is job_poll's wait when the caller names none.
	DefaultPollWait = 10 * time.Second
	// MaxPollWait and MaxPollBytes are the agent's caps on a poll.
	MaxPollWait  = bounds.MaxPollWait
	MaxPollBytes = bounds.MaxPollBytes
)

// Names are the tools of the sandbox catalog, in the order they are listed.
var Names = []string{"open_session", "close_session", "exec", "job_exec", "job_poll", "job_cancel", "read", "write"}

// ExtendedNames are the tools the extended set serves beside Names.
var ExtendedNames = []string{"job_input", "job_resize", "job_screen", "job_list"}

// Agent is what the tools need of a host agent: agentapi.Client.
type Agent interface {
	Open(ctx context.Context, tenant, sandboxID string) (agentapi.Handle, error)
	Close(ctx context.Context, tenant, handle string) error
	Exec(ctx context.Context, tenant, handle string, req agentapi.ExecRequest) (agentapi.ExecResult, error)
	StartJob(ctx context.Context, tenant, handle string, req agentapi.ExecRequest) (agentapi.JobInfo, error)
	Poll(ctx context.Context, req agentapi.PollRequest, jobID string) (agentapi.PollResponse, error)
	Cancel(ctx context.Context, tenant, jobID string) (agentapi.JobInfo, error)
	Read(ctx context.Context, tenant, handle, path, cwd string) (agentapi.FileContent, error)
	Write(ctx context.Context, tenant, handle, path, cwd string, data []byte) (agentapi.FileInfo, error)
	// The extended set's.
	Input(ctx context.Context, tenant, jobID string, data []byte, end bool) (agentapi.JobInfo, error)
	Resize(ctx context.Context, tenant, jobID string, rows, cols int) (agentapi.JobInfo, error)
	Screen(ctx context.Context, tenant, jobID string, scrollback int) (agentapi.Screen, error)
	Activity(ctx context.Context, tenant, sandboxID string) (agentapi.Activity, error)
	ReadRange(ctx context.Context, tenant, handle, path, cwd string, offset int64, length int) (agentapi.FileContent, error)
	Digest(ctx context.Context, tenant, handle, path, cwd string) (agentapi.FileDigest, error)
	Append(ctx context.Context, tenant, handle, path, cwd string, data []byte) (agentapi.FileInfo, error)
	WriteAt(ctx context.Context, tenant, handle, path, cwd string, offset int64, data []byte) (agentapi.FileInfo, error)
}

var _ Agent = (*agentapi.Client)(nil)

// Route is where one call goes: the caller's tenant, its sandbox and the
// agent serving that sandbox.
type Route struct {
	// Tenant is "namespace/name", as the agents know tenants.
	Tenant    string
	SandboxID string
	// Node is the sandbox's node, and ImageDigest the digest of the
	// image it runs (none: the node's system), for the audit trail.
	Node        string
	ImageDigest string
	Agent       Agent
	// Extended says the tenant is served the extended tool set now: a
	// session that began with it keeps its tools, and the calls check.
	Extended bool
}

// Router resolves the calling tenant from the request (its credential, never
// its arguments) and the tenant's sandbox. Its errors are shown to the
// caller as they are: they must say what to do and reveal nothing of other
// tenants.
type Router interface {
	Route(ctx context.Context, req *mcp.CallToolRequest) (Route, error)
}

// Options configure the tools.
type Options struct {
	Router Router
	// ExecTimeout is exec's timeout when the caller names none (default
	// DefaultExecTimeout).
	ExecTimeout time.Duration
	// ProgressInterval is the period of progress notifications (default
	// DefaultProgressInterval).
	ProgressInterval time.Duration
	// Logger receives unexpected failures (never payloads or tokens).
	Logger logr.Logger
	// Budget bounds the synchronous calls (exec, read, write) in flight
	// and the bytes they hold, per tenant and in total (nil: the
	// defaults of package budget).
	Budget *budget.Limiter
	// Hold, when set, keeps a call's budget until the transport has
	// written its result (the gateway ties it to the HTTP request); it
	// reports false when it cannot, and the budget is then given back
	// when the handler returns.
	Hold func(req *mcp.CallToolRequest, release func()) bool
	// Carrier, when set, is the context of the transport's request that
	// carries a call (the gateway's HTTP request), nil when it has none:
	// the call ends when it does, since nothing can take its result then,
	// and a call's end kills what it runs in the sandbox.
	Carrier func(req *mcp.CallToolRequest) context.Context
	// Audit records every call (nil: none).
	Audit *audit.Trail
	// Tracer makes a span of every call (nil: none).
	Tracer trace.TracerProvider
	// Extended serves the extended tool set: the eight with more options,
	// and ExtendedNames (docs/tools.md). Each of its calls is refused
	// for a tenant whose Route is not Extended.
	Extended bool
}

// Instructions tell a model how the tools fit together.
const Instructions = `Playground gives you a persistent Linux sandbox. Start with open_session: it returns your sandbox_id and a handle. ` +
	`Run commands with exec (waits for the end) or job_exec + job_poll (background, for long or large output; job_cancel stops one). ` +
	`Move files with read and write (at most 3 MiB each). Each command runs in a fresh /bin/sh: files and processes persist, a cd does not. ` +
	`close_session when done; your files stay, and the next open_session returns the same sandbox.`

// tracer is the tools' tracer: Tracer's, or one that records nothing.
func (o Options) tracer() trace.Tracer {
	if o.Tracer == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return o.Tracer.Tracer("github.com/playground-dev/playground/mcpgateway")
}

// Register adds the eight tools to s.
func Register(s *mcp.Server, opts Options) {
	if opts.Router == nil {
		panic("tools: a Router is required")
	}
	if opts.ExecTimeout <= 0 {
		opts.ExecTimeout = DefaultExecTimeout
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	if opts.Budget == nil {
		opts.Budget, _ = budget.New(budget.Limits{}) // the defaults are valid
	}
	t := &catalog{opts: opts}
	s.AddReceivingMiddleware(guardCalls(opts.Logger), observeCalls(opts.Audit, opts.tracer()), offerExtended(opts.Extended))
	maxTimeout := int(bounds.MaxTimeout / time.Second)

	add(s, t, &mcp.Tool{
		Name:  "open_session",
		Title: "Open a sandbox session",
		Description: "Open a session on your sandbox and get a handle for exec, job_exec, read and write. " +
			"Your sandbox is persistent: sandbox_id is the same every time, and files and background processes from earlier sessions are still there. " +
			"The handle expires after 15 minutes unused; open another one any time.",
		InputSchema:  inputSchema[OpenSessionInput](nil),
		OutputSchema: outputSchema[OpenSessionOutput](nil),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: false, OpenWorldHint: ptr(false)},
	}, t.openSession)

	add(s, t, &mcp.Tool{
		Name:         "close_session",
		Title:        "Close a sandbox session",
		Description:  "Release a session handle. The sandbox keeps its files and processes; when its last handle closes it is detached until the next open_session.",
		InputSchema:  inputSchema[CloseSessionInput](refineHandle),
		OutputSchema: outputSchema[CloseSessionOutput](nil),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.closeSession)

	addLarge(s, t, &mcp.Tool{
		Name:  "exec",
		Title: "Run a command",
		Description: "Run a shell command in your sandbox and wait for it to end; returns exit_code, stdout and stderr byte for byte " +
			"(text when valid UTF-8, else base64). Each command runs in a fresh /bin/sh: use cwd or chain with && instead of a separate cd. " +
			"A non-zero exit code is a normal result, not a tool error. Output beyond 4 MiB per stream is counted, not returned: " +
			"use job_exec for long-running commands or large output. The structured result holds all the output kept; the text content repeats it " +
			"when it is at most 64 KiB, and shows the first and last 16 KiB of each larger stream.",
		InputSchema: inputSchema[ExecInput](func(p propMap) {
			refineCommand(p, int(opts.ExecTimeout/time.Second), maxTimeout)
		}),
		OutputSchema: outputSchema[ExecOutput](refineEncodings("stdout_encoding", "stderr_encoding")),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, t.exec)

	add(s, t, &mcp.Tool{
		Name:  "job_exec",
		Title: "Start a background job",
		Description: "Start a shell command in the background and return at once with its job_id and a cursor; read its output with job_poll " +
			"and stop it with job_cancel, which kills every process the job started. The job keeps running if you disconnect. " +
			"Give an idempotency_key to make the start safe to retry: the same job_exec with the same key returns the same job.",
		InputSchema: inputSchema[JobExecInput](func(p propMap) {
			refineCommand(p, 0, maxTimeout)
			refineKey(p)
			refineJobExec(p, opts.Extended)
		}),
		OutputSchema: outputSchema[JobExecOutput](nil),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, t.jobExec)

	addLarge(s, t, &mcp.Tool{
		Name:  "job_poll",
		Title: "Read a job's output",
		Description: "Return the job's output after cursor, its state, and next_cursor for the next call. Chunks are byte-exact " +
			"(encoding text or base64). When nothing is new it waits up to wait_seconds. done=true means the job ended and you have all its output; " +
			"poll once more with next_cursor to acknowledge it so the job is recycled. A gap says how much output was evicted before you read it. " +
			"The text content repeats a page's output when it is at most 64 KiB; of a larger page it shows the first and last 16 KiB " +
			"and says how to read the rest as text (poll from the same cursor with max_bytes 65536); the structured chunks always hold the whole page.",
		InputSchema: inputSchema[JobPollInput](func(p propMap) {
			refineJobID(p)
			p["max_bytes"].Minimum = ptr(0.0)
			p["max_bytes"].Maximum = ptr(float64(MaxPollBytes))
			p["wait_seconds"].Minimum = ptr(0.0)
			p["wait_seconds"].Maximum = ptr(MaxPollWait.Seconds())
			p["wait_seconds"].Default = fmt.Appendf(nil, "%d", int(DefaultPollWait/time.Second))
			p["cursor"].MaxLength = ptr(64)
		}),
		OutputSchema: outputSchema[JobPollOutput](func(p propMap) {
			items := p["chunks"].Items
			items.Properties["encoding"].Enum = []any{encodingText, encodingBase64}
			items.Properties["stream"].Enum = []any{"stdout", "stderr"}
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, t.jobPoll)

	add(s, t, &mcp.Tool{
		Name:  "job_cancel",
		Title: "Cancel a job",
		Description: "Cancel a background job: every process it started is killed, and the state is cancelling until that is proven, then killed. " +
			"Poll it afterwards to collect the rest of its output and its result. Cancelling a job that already ended changes nothing.",
		InputSchema:  inputSchema[JobCancelInput](refineJobID),
		OutputSchema: outputSchema[JobCancelOutput](nil),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.jobCancel)

	add(s, t, &mcp.Tool{
		Name:  "read",
		Title: "Read a file",
		Description: "Read a whole file of up to 3 MiB from your sandbox. Valid UTF-8 text comes back as a text block, images as an image block, " +
			"other files as an embedded resource with base64 data; structured output gives path, size, MIME type and sha256. " +
			"Larger files are refused, never truncated: use exec (head, tail, split) for those. " +
			"The path in the result is absolute (directory symlinks resolved), as write gives it.",
		InputSchema: inputSchema[ReadInput](func(p propMap) {
			refinePath(p)
			refineRead(p, opts.Extended)
		}),
		OutputSchema: outputSchema[ReadOutput](func(p propMap) {
			p["content"].Enum = []any{"text", "image", "blob"}
			onlyExtended(p, opts.Extended, extendedReadOutputFields)
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, t.read)

	add(s, t, &mcp.Tool{
		Name:  "write",
		Title: "Write a file",
		Description: "Create or replace a file in your sandbox atomically (readers see the old file or the new one, never a part). " +
			"Give exactly one of text (UTF-8) or base64 (any bytes), at most 3 MiB. The directory must exist (create it with exec: mkdir -p). " +
			"Returns the absolute path, size, MIME type and sha256.",
		InputSchema: inputSchema[WriteInput](func(p propMap) {
			refinePath(p)
			onlyExtended(p, opts.Extended, extendedWriteFields)
			if opts.Extended {
				p["offset"].Minimum = ptr(0.0)
			}
		}),
		OutputSchema: outputSchema[WriteOutput](func(p propMap) { onlyExtended(p, opts.Extended, extendedWriteOutputFields) }),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.write)

	if opts.Extended {
		registerExtended(s, t)
	}
}

type catalog struct {
	opts Options
}

// add registers a typed handler with progress notifications.
func add[In, Out any](s *mcp.Server, c *catalog, tool *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	known.Store(tool.Name, true)
	mcp.AddTool(s, tool, withProgress(tool.Name, c.opts.ProgressInterval, endsWithCarrier(c.opts.Carrier, noted(h))))
}

func (c *catalog) route(ctx context.Context, req *mcp.CallToolRequest) (Route, error) {
	r, err := c.opts.Router.Route(ctx, req)
	if err != nil {
		return Route{}, err
	}
	noteRoute(ctx, r)
	if r.Agent == nil || r.Tenant == "" || r.SandboxID == "" {
		return Route{}, errors.New("unavailable: your sandbox is not ready yet: retry in a few seconds")
	}
	return r, nil
}

func (c *catalog) openSession(ctx context.Context, req *mcp.CallToolRequest, _ OpenSessionInput) (*mcp.CallToolResult, OpenSessionOutput, error) {
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, OpenSessionOutput{}, err
	}
	h, err := r.Agent.Open(ctx, r.Tenant, r.SandboxID)
	if err != nil {
		return nil, OpenSessionOutput{}, c.agentError("open_session", err)
	}
	out := OpenSessionOutput{SandboxID: h.SandboxID, Handle: h.ID, Expires: h.Expires}
	return text(fmt.Sprintf("Session open on sandbox %s.\nhandle: %s\nPass the handle to exec, job_exec, read, write and close_session; it expires at %s if unused (every use renews it).",
		out.SandboxID, out.Handle, out.Expires.UTC().Format(time.RFC3339))), out, nil
}

func (c *catalog) closeSession(ctx context.Context, req *mcp.CallToolRequest, in CloseSessionInput) (*mcp.CallToolResult, CloseSessionOutput, error) {
	if err := checkHandle(in.Handle); err != nil {
		return nil, CloseSessionOutput{}, invalid(err)
	}
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, CloseSessionOutput{}, err
	}
	if err := r.Agent.Close(ctx, r.Tenant, in.Handle); err != nil {
		return nil, CloseSessionOutput{}, c.agentError("close_session", err)
	}
	return text("Session " + in.Handle + " closed. Your sandbox keeps its files and processes; open_session gives a new handle."),
		CloseSessionOutput{Handle: in.Handle, Closed: true}, nil
}

// execRequest validates the common command arguments.
func execRequest(handle, command, shell, cwd, stdin, stdinB64 string, timeoutSeconds int, defaultTimeout time.Duration) (agentapi.ExecRequest, error) {
	if err := checkHandle(handle); err != nil {
		return agentapi.ExecRequest{}, err
	}
	if timeoutSeconds < 0 || time.Duration(timeoutSeconds)*time.Second > bounds.MaxTimeout {
		return agentapi.ExecRequest{}, fmt.Errorf("timeout_seconds %d is out of range: give 1 to %d", timeoutSeconds, int(bounds.MaxTimeout/time.Second))
	}
	timeout := time.Duration(timeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = defaultTimeout
	}
	var in []byte
	switch {
	case stdin != "" && stdinB64 != "":
		return agentapi.ExecRequest{}, errors.New("both stdin and stdin_base64 are given: give one of them")
	case stdin != "":
		in = []byte(stdin)
	case stdinB64 != "":
		var err error
		if in, err = decodeBase64("stdin_base64", stdinB64, MaxFileBytes); err != nil {
			return agentapi.ExecRequest{}, err
		}
	}
	// The agent's own check, before the request travels.
	r := agentapi.ExecRequest{Command: command, Shell: agentapi.Shell(shell), Cwd: cwd, Stdin: in, Timeout: timeout}
	if err := r.Validate(MaxFileBytes); err != nil {
		return agentapi.ExecRequest{}, err
	}
	if r.Shell == "" {
		r.Shell = agentapi.ShellLogin
	}
	return r, nil
}

// execBaseBytes is what an exec reserves at admission besides its stdin:
// its request and the small parts of its result.
const execBaseBytes = 64 << 10

// exec's structured result carries each stream once, in the smaller
// encoding; its text content repeats the output only up to execTextFull
// bytes, and of larger output shows excerpts (renderExec).
func (c *catalog) exec(ctx context.Context, req *mcp.CallToolRequest, in ExecInput) (*mcp.CallToolResult, ExecOutput, error) {
	er, err := execRequest(in.Handle, in.Command, in.Shell, in.Cwd, in.Stdin, in.StdinBase64, in.TimeoutSeconds, c.opts.ExecTimeout)
	if err != nil {
		return nil, ExecOutput{}, invalid(err)
	}
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, ExecOutput{}, err
	}
	// Admitted with its stdin; its output is reserved once the agent says
	// how large it is, before the gateway reads it (see growOutput).
	done, err := c.admit(ctx, req, r.Tenant, "exec", int64(len(er.Stdin))+execBaseBytes)
	if err != nil {
		return nil, ExecOutput{}, err
	}
	defer done()
	grown, reserve := c.growOutput(ctx, req, r.Tenant)
	defer grown()
	res, err := r.Agent.Exec(agentapi.WithOutputReservation(ctx, reserve), r.Tenant, in.Handle, er)
	if err != nil {
		return nil, ExecOutput{}, c.agentError("exec", err)
	}
	out := ExecOutput{
		ExitCode:      res.ExitCode,
		Signal:        res.Signal,
		TimedOut:      res.TimedOut,
		OOMKilled:     res.OOMKilled,
		StdoutDropped: res.StdoutDropped,
		StderrDropped: res.StderrDropped,
		DurationMS:    res.Duration.Milliseconds(),
	}
	out.Stdout, out.StdoutEncoding = encodeBytes(res.Stdout)
	out.Stderr, out.StderrEncoding = encodeBytes(res.Stderr)
	return text(renderExec(res, er.Timeout)), out, nil
}

// The text content of an exec result repeats its output when both streams
// together are at most execTextFull bytes; of a larger stream it shows the
// first and last execTextExcerpt bytes and says where the rest is. A
// result thus never holds megabytes twice.
const (
	execTextFull    = 64 << 10
	execTextExcerpt = 16 << 10
)

func renderExec(res agentapi.ExecResult, timeout time.Duration) string {
	var b strings.Builder
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "timed out after %s: the command and all its processes were killed (exit_code %d)\n", timeout, res.ExitCode)
	case res.Signal != "":
		fmt.Fprintf(&b, "killed by %s (exit_code %d)\n", res.Signal, res.ExitCode)
	default:
		fmt.Fprintf(&b, "exit_code: %d\n", res.ExitCode)
	}
	if res.OOMKilled {
		b.WriteString("the sandbox ran out of memory: the kernel's OOM killer killed a process of this command (use less memory, or ask the operator for a higher memory limit)\n")
	}
	full := len(res.Stdout)+len(res.Stderr) <= execTextFull
	piece := func(name, label string, p []byte) {
		data, enc := encodeBytes(p)
		if enc == encodingBase64 {
			fmt.Fprintf(&b, "--- %s%s (base64: not UTF-8 text, or smaller so) ---\n%s\n", name, label, data)
			return
		}
		fmt.Fprintf(&b, "--- %s%s ---\n%s", name, label, data)
		if !strings.HasSuffix(data, "\n") {
			b.WriteString("\n")
		}
	}
	stream := func(name string, data []byte, dropped int64) {
		if len(data) == 0 && dropped == 0 {
			return
		}
		if full || len(data) <= 2*execTextExcerpt {
			piece(name, "", data)
		} else {
			head := data[:runeCutBack(data, execTextExcerpt)]
			tail := data[runeCutForward(data, len(data)-execTextExcerpt):]
			piece(name, fmt.Sprintf(", first %d of %d bytes", len(head), len(data)), head)
			fmt.Fprintf(&b, "[... %d bytes of %s are not repeated in this text: the structured result's %s holds all %d bytes ...]\n",
				len(data)-len(head)-len(tail), name, name, len(data))
			piece(name, fmt.Sprintf(", last %d bytes", len(tail)), tail)
		}
		if dropped > 0 {
			fmt.Fprintf(&b, "(%d more bytes of %s were not kept: exec keeps 4 MiB per stream; use job_exec to page through large output)\n", dropped, name)
		}
	}
	stream("stdout", res.Stdout, res.StdoutDropped)
	stream("stderr", res.Stderr, res.StderrDropped)
	if len(res.Stdout) == 0 && len(res.Stderr) == 0 && res.StdoutDropped == 0 && res.StderrDropped == 0 {
		b.WriteString("(no output)\n")
	}
	return b.String()
}

// runeCutBack moves a cut at n back to the start of a UTF-8 character, if
// one starts within utf8.UTFMax bytes.
func runeCutBack(b []byte, n int) int {
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return n
}

// runeCutForward moves a cut at n forward to the start of a UTF-8
// character, if one starts within utf8.UTFMax bytes.
func runeCutForward(b []byte, n int) int {
	for i := n; i < len(b) && i < n+utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return n
}

// growOutput returns the reservation of an exec's output in the budget,
// made by the agent client once the agent's answer gives its size: it
// waits for room as long as the caller does (the command has run, its
// result must not be lost) and is held like the call's admission. grown
// gives back what Hold does not keep.
func (c *catalog) growOutput(ctx context.Context, req *mcp.CallToolRequest, tenant string) (grown func(), reserve func(int64) error) {
	var held []func()
	reserve = func(n int64) error {
		release, err := c.opts.Budget.Grow(ctx, tenant, n)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &agentapi.Error{Code: agentapi.CodeTooLarge, Err: err,
				Message: fmt.Sprintf("the command ran, but its output (%d bytes to hold with its encoding) is larger than the gateway's whole budget: ask the operator to raise --budget-bytes-per-tenant; use job_exec for large output", n)}
		}
		if c.opts.Hold == nil || !c.opts.Hold(req, release) {
			held = append(held, release)
		}
		return nil
	}
	return func() {
		for _, release := range held {
			release()
		}
	}, reserve
}

// admit reserves a synchronous call and need bytes of the tenant's budget,
// held until the result is written (Options.Hold) or else until the
// handler returns. Past the budget the call is refused, retryably, before
// it reaches the sandbox.
// The returned done must be called when the handler returns.
//
// An exec reserves its output only when its size is known (growOutput):
// reserving the worst case (8 MiB) at admission would let the budget
// admit few execs although most print little, while reserving the actual
// size keeps the bytes the gateway holds within the budget.
func (c *catalog) admit(ctx context.Context, req *mcp.CallToolRequest, tenant, tool string, need int64) (done func(), err error) {
	release, err := c.opts.Budget.Acquire(ctx, tenant, need)
	var ex *budget.ExhaustedError
	switch {
	case errors.As(err, &ex) && ex.TooLarge:
		return nil, fmt.Errorf("%s: %s: %w", agentapi.CodeTooLarge, tool, err)
	case errors.As(err, &ex):
		return nil, fmt.Errorf("%s: %s refused by the gateway: %w", agentapi.CodeExhausted, tool, err)
	case err != nil:
		return nil, fmt.Errorf("%s was cancelled while it waited for room in the budget; nothing ran", tool)
	}
	if c.opts.Hold != nil && c.opts.Hold(req, release) {
		return func() {}, nil
	}
	// Given back when the handler returns (stdio): the SDK's copies of
	// the result that follow are not accounted.
	return release, nil
}

func (c *catalog) jobExec(ctx context.Context, req *mcp.CallToolRequest, in JobExecInput) (*mcp.CallToolResult, JobExecOutput, error) {
	er, err := execRequest(in.Handle, in.Command, in.Shell, in.Cwd, in.Stdin, in.StdinBase64, in.TimeoutSeconds, 0)
	if err != nil {
		return nil, JobExecOutput{}, invalid(err)
	}
	if err := agentapi.CheckIdempotencyKey(in.IdempotencyKey); err != nil {
		return nil, JobExecOutput{}, invalid(err)
	}
	er.IdempotencyKey = in.IdempotencyKey
	extended := in.TTY || in.StdinOpen || in.Rows != 0 || in.Cols != 0
	if extended {
		if err := jobTerminal(&er, in); err != nil {
			return nil, JobExecOutput{}, invalid(err)
		}
	}
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, JobExecOutput{}, err
	}
	if extended && !r.Extended {
		return nil, JobExecOutput{}, errNotExtended("job_exec's tty and stdin_open")
	}
	info, err := r.Agent.StartJob(ctx, r.Tenant, in.Handle, er)
	if err != nil {
		return nil, JobExecOutput{}, c.agentError("job_exec", err)
	}
	out := JobExecOutput{JobID: info.ID, State: string(info.State), Cursor: ""}
	msg := fmt.Sprintf("Job %s started (state %s). Read its output with job_poll {\"job_id\": %q, \"cursor\": \"\"}; stop it with job_cancel.",
		out.JobID, out.State, out.JobID)
	if in.IdempotencyKey != "" {
		msg += fmt.Sprintf(" It is the job of idempotency_key %q: the same job_exec with that key returns this job, not a new one.", in.IdempotencyKey)
	}
	return text(msg), out, nil
}

func (c *catalog) jobPoll(ctx context.Context, req *mcp.CallToolRequest, in JobPollInput) (*mcp.CallToolResult, JobPollOutput, error) {
	if err := checkJobID(in.JobID); err != nil {
		return nil, JobPollOutput{}, invalid(err)
	}
	if in.MaxBytes < 0 || in.MaxBytes > MaxPollBytes {
		return nil, JobPollOutput{}, invalid(fmt.Errorf("max_bytes %d is out of range: give 1 to %d, or omit it for 1 MiB", in.MaxBytes, MaxPollBytes))
	}
	if in.WaitSeconds < 0 || time.Duration(in.WaitSeconds)*time.Second > MaxPollWait {
		return nil, JobPollOutput{}, invalid(fmt.Errorf("wait_seconds %d is out of range: give 0 to %d", in.WaitSeconds, int(MaxPollWait/time.Second)))
	}
	if len(in.Cursor) > 64 || !utf8.ValidString(in.Cursor) {
		return nil, JobPollOutput{}, invalid(errors.New("cursor is not one Playground issued: pass the next_cursor of your previous job_poll, or an empty cursor"))
	}
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, JobPollOutput{}, err
	}
	res, err := r.Agent.Poll(ctx, agentapi.PollRequest{
		Tenant: r.Tenant, Cursor: in.Cursor, MaxBytes: in.MaxBytes, Wait: time.Duration(in.WaitSeconds) * time.Second,
	}, in.JobID)
	if err != nil {
		return nil, JobPollOutput{}, c.agentError("job_poll", err)
	}
	out := JobPollOutput{
		JobID:         in.JobID,
		State:         string(res.Job.State),
		Chunks:        make([]Chunk, len(res.Chunks)),
		NextCursor:    res.NextCursor,
		DroppedBytes:  res.DroppedBytes,
		DroppedChunks: res.DroppedChunks,
		Done:          res.Done,
		Result:        jobResult(res.Job.Result),
	}
	for i, ch := range res.Chunks {
		out.Chunks[i] = Chunk{Stream: ch.Stream, Seq: ch.Seq, Offset: ch.Offset, Encoding: ch.Encoding, Data: ch.Data}
	}
	if g := res.Gap; g != nil {
		out.Gap = &Gap{FromSeq: g.FromSeq, ToSeq: g.ToSeq, Chunks: g.Chunks, Bytes: g.Bytes}
	}
	return text(renderPoll(out, in.Cursor)), out, nil
}

func jobResult(r *agentapi.JobResult) *JobResult {
	if r == nil {
		return nil
	}
	return &JobResult{ExitCode: r.ExitCode, Signal: r.Signal, Killed: r.Killed, TimedOut: r.TimedOut, OOMKilled: r.OOMKilled, Error: r.Error, DurationMS: r.Duration.Milliseconds()}
}

func describeState(state string, r *JobResult) string {
	if r == nil {
		return state
	}
	s := fmt.Sprintf("%s, exit_code %d", state, r.ExitCode)
	if r.Signal != "" {
		s += ", signal " + r.Signal
	}
	if r.OOMKilled {
		s += ", out of memory (the kernel's OOM killer killed a process of it)"
	}
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s
}

// The text content of a job_poll result repeats the page's output when it
// is at most pollTextFull bytes (so that a poll with that max_bytes is
// always shown whole); of a larger page it shows the first and last
// pollTextExcerpt characters and says how to read the rest. The structured
// chunks always hold the whole page: repeating megabytes in the text would
// double what every layer of MCP encodes, copies and decodes, and no model
// reads 4 MiB of output in one go.
const (
	pollTextFull    = 64 << 10
	pollTextExcerpt = 16 << 10
)

func renderPoll(o JobPollOutput, cursor string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s: %s\n", o.JobID, describeState(o.State, o.Result))
	if o.Gap != nil {
		fmt.Fprintf(&b, "gap: %d bytes in chunks %d to %d were evicted before you read them (the job's output buffer holds 4 MiB)\n",
			o.Gap.Bytes, o.Gap.FromSeq, o.Gap.ToSeq-1)
	}
	size := 0
	for _, ch := range o.Chunks {
		size += outputBytes(ch)
	}
	if size <= pollTextFull {
		renderChunks(&b, o.Chunks)
	} else {
		renderExcerpts(&b, o.Chunks, cursor)
	}
	if len(o.Chunks) == 0 {
		b.WriteString("(no new output)\n")
	}
	if o.Done {
		fmt.Fprintf(&b, "done: this is all of the job's output. Poll once more with cursor %q to acknowledge it.\n", o.NextCursor)
	} else {
		fmt.Fprintf(&b, "next_cursor: %q (pass it as cursor to the next job_poll)\n", o.NextCursor)
	}
	return b.String()
}

// renderChunks writes chunks as text, a header before each change of
// stream and before each base64 chunk, and ends with a newline.
func renderChunks(b *strings.Builder, chunks []Chunk) {
	last := ""
	endsLine := true
	for _, ch := range chunks {
		if ch.Encoding == encodingBase64 {
			if !endsLine {
				b.WriteString("\n")
			}
			fmt.Fprintf(b, "--- %s chunk %d (not valid UTF-8: base64) ---\n%s\n", ch.Stream, ch.Seq, ch.Data)
			last, endsLine = "", true
			continue
		}
		if ch.Stream != last {
			if !endsLine {
				b.WriteString("\n")
			}
			fmt.Fprintf(b, "--- %s ---\n", ch.Stream)
			last = ch.Stream
		}
		b.WriteString(ch.Data)
		if ch.Data != "" {
			endsLine = strings.HasSuffix(ch.Data, "\n")
		}
	}
	if !endsLine {
		b.WriteString("\n")
	}
}

// renderExcerpts writes the first and the last pollTextExcerpt bytes of a
// large page's chunks and, between them, how much was left out and how to
// read it.
func renderExcerpts(b *strings.Builder, chunks []Chunk, cursor string) {
	head, tail, omitted := excerpts(chunks, pollTextExcerpt)
	renderChunks(b, head)
	fmt.Fprintf(b, "[... %d bytes of output are not repeated in this text; the structured result's chunks hold the whole page. "+
		"To read it all as text, poll with cursor %q and max_bytes %d, then continue from each next_cursor ...]\n",
		omitted, cursor, pollTextFull)
	renderChunks(b, tail)
}

// excerpts returns the first and the last n characters of the chunks'
// data, cut where the encoding allows (between characters of text, between
// 4-character groups of base64), and the bytes of output between them. The
// chunks' data must be longer than 2n; they are not modified.
func excerpts(chunks []Chunk, n int) (head, tail []Chunk, omitted int) {
	// The head ends at chunks[hi].Data[ho], the tail starts at
	// chunks[ti].Data[to].
	hi, left := 0, n
	for hi < len(chunks)-1 && len(chunks[hi].Data) <= left {
		left -= len(chunks[hi].Data)
		hi++
	}
	ho := cutForward(chunks[hi], min(left, len(chunks[hi].Data)))
	ti := len(chunks) - 1
	left = n
	for ti > hi && len(chunks[ti].Data) <= left {
		left -= len(chunks[ti].Data)
		ti--
	}
	to := cutBackward(chunks[ti], max(len(chunks[ti].Data)-left, 0))
	if ti == hi {
		to = max(to, ho)
	}

	part := func(ch Chunk, from, to int) Chunk {
		ch.Data = ch.Data[from:to]
		return ch
	}
	head = chunks[:hi:hi]
	if ho > 0 {
		head = append(head, part(chunks[hi], 0, ho))
	}
	if to < len(chunks[ti].Data) {
		tail = append(tail, part(chunks[ti], to, len(chunks[ti].Data)))
	}
	tail = append(tail, chunks[ti+1:]...)
	if ti == hi {
		return head, tail, outputBytes(part(chunks[hi], ho, to))
	}
	omitted = outputBytes(part(chunks[hi], ho, len(chunks[hi].Data))) + outputBytes(part(chunks[ti], 0, to))
	for _, ch := range chunks[hi+1 : ti] {
		omitted += outputBytes(ch)
	}
	return head, tail, omitted
}

// cutForward moves a cut at n in ch's data back to where the encoding
// allows one.
func cutForward(ch Chunk, n int) int {
	if ch.Encoding == encodingBase64 {
		return n - n%4
	}
	for n > 0 && n < len(ch.Data) && !utf8.RuneStart(ch.Data[n]) {
		n--
	}
	return n
}

// cutBackward moves a cut at n in ch's data forward to where the encoding
// allows one.
func cutBackward(ch Chunk, n int) int {
	if ch.Encoding == encodingBase64 {
		return min((n+3)/4*4, len(ch.Data))
	}
	for n < len(ch.Data) && !utf8.RuneStart(ch.Data[n]) {
		n++
	}
	return n
}

// outputBytes is how many bytes of output a piece of a chunk's data, cut
// as cutForward and cutBackward cut, stands for.
func outputBytes(ch Chunk) int {
	if ch.Encoding != encodingBase64 {
		return len(ch.Data)
	}
	pad := len(ch.Data) - len(strings.TrimRight(ch.Data, "="))
	return len(ch.Data)/4*3 - pad
}

func (c *catalog) jobCancel(ctx context.Context, req *mcp.CallToolRequest, in JobCancelInput) (*mcp.CallToolResult, JobCancelOutput, error) {
	if err := checkJobID(in.JobID); err != nil {
		return nil, JobCancelOutput{}, invalid(err)
	}
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, JobCancelOutput{}, err
	}
	info, err := r.Agent.Cancel(ctx, r.Tenant, in.JobID)
	if err != nil {
		return nil, JobCancelOutput{}, c.agentError("job_cancel", err)
	}
	out := JobCancelOutput{JobID: in.JobID, State: string(info.State), Result: jobResult(info.Result)}
	msg := fmt.Sprintf("job %s: %s", in.JobID, describeState(out.State, out.Result))
	if !info.State.Terminal() {
		msg += "\nIts processes are being killed; job_poll shows the rest of its output and the final state."
	}
	return text(msg), out, nil
}

func (c *catalog) read(ctx context.Context, req *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	if err := checkHandle(in.Handle); err != nil {
		return nil, ReadOutput{}, invalid(err)
	}
	if in.Path == "" {
		return nil, ReadOutput{}, invalid(errors.New("path is empty: give a file path, absolute or relative to cwd"))
	}
	ranged := in.Offset != 0 || in.Length != 0
	if ranged || in.Digest {
		if err := checkRange(in); err != nil {
			return nil, ReadOutput{}, invalid(err)
		}
	}
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	if (ranged || in.Digest) && !r.Extended {
		return nil, ReadOutput{}, errNotExtended("read's offset, length and digest")
	}
	if in.Digest {
		return c.digest(ctx, req, r, in)
	}
	// The file, and its base64 in the result.
	done, err := c.admit(ctx, req, r.Tenant, "read", int64(MaxFileBytes+base64.StdEncoding.EncodedLen(MaxFileBytes)))
	if err != nil {
		return nil, ReadOutput{}, err
	}
	defer done()
	var f agentapi.FileContent
	if ranged {
		f, err = r.Agent.ReadRange(ctx, r.Tenant, in.Handle, in.Path, in.Cwd, in.Offset, in.Length)
	} else {
		f, err = r.Agent.Read(ctx, r.Tenant, in.Handle, in.Path, in.Cwd)
	}
	if err != nil {
		return nil, ReadOutput{}, c.agentError("read", err)
	}
	if len(f.Data) > MaxFileBytes {
		// The agent enforces the same limit; never pass on more.
		return nil, ReadOutput{}, fmt.Errorf("too_large: %q is %d bytes, over the 3 MiB read limit; read refuses rather than truncates: use exec (head, tail, split)", in.Path, len(f.Data))
	}
	sum := sha256.Sum256(f.Data)
	// The absolute path, as write answers: the same file for any cwd.
	path := f.Path
	if path == "" {
		path = in.Path
	}
	out := ReadOutput{Path: path, Size: len(f.Data), MIME: f.MIME, SHA256: hex.EncodeToString(sum[:])}
	summary := fmt.Sprintf("%s: %d bytes, %s, sha256 %s", path, out.Size, out.MIME, out.SHA256)
	if ranged {
		out.FileSize, out.Offset, out.EOF = f.FileSize, f.Offset, f.EOF
		summary = rangeSummary(path, out)
		if len(f.Data) == 0 {
			out.Content = "blob"
			return text(summary), out, nil
		}
	}
	res := &mcp.CallToolResult{}
	switch {
	case isImage(f.MIME):
		out.Content = "image"
		res.Content = []mcp.Content{&mcp.ImageContent{Data: f.Data, MIMEType: f.MIME}, &mcp.TextContent{Text: summary}}
	case isText(f.Data):
		out.Content = "text"
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(f.Data)}}
	default:
		out.Content = "blob"
		res.Content = []mcp.Content{
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: resourceURI(r.SandboxID, path), MIMEType: f.MIME, Blob: f.Data}},
			&mcp.TextContent{Text: summary + " (not text: the bytes are in the embedded resource, base64)"},
		}
	}
	return res, out, nil
}

// isImage reports whether a MIME type is an image a client can show; SVG is
// XML text and goes as text.
func isImage(mime string) bool {
	return strings.HasPrefix(mime, "image/") && !strings.HasPrefix(mime, "image/svg")
}

// isText reports whether data goes as a text block: valid UTF-8 without NUL
// bytes (JSON would keep those too, but they mark binary files).
func isText(data []byte) bool {
	return utf8.Valid(data) && !strings.ContainsRune(string(data), 0)
}

func resourceURI(sandboxID, path string) string {
	return (&url.URL{Scheme: "sandbox", Host: sandboxID, Path: path}).String()
}

func (c *catalog) write(ctx context.Context, req *mcp.CallToolRequest, in WriteInput) (*mcp.CallToolResult, WriteOutput, error) {
	data, err := writePayload(in)
	if err != nil {
		return nil, WriteOutput{}, invalid(err)
	}
	r, err := c.route(ctx, req)
	if err != nil {
		return nil, WriteOutput{}, err
	}
	ranged := in.Offset != nil || in.Append
	if ranged && !r.Extended {
		return nil, WriteOutput{}, errNotExtended("write's offset and append")
	}
	done, err := c.admit(ctx, req, r.Tenant, "write", int64(len(data)))
	if err != nil {
		return nil, WriteOutput{}, err
	}
	defer done()
	var f agentapi.FileInfo
	switch {
	case in.Append:
		f, err = r.Agent.Append(ctx, r.Tenant, in.Handle, in.Path, in.Cwd, data)
	case in.Offset != nil:
		f, err = r.Agent.WriteAt(ctx, r.Tenant, in.Handle, in.Path, in.Cwd, *in.Offset, data)
	default:
		f, err = r.Agent.Write(ctx, r.Tenant, in.Handle, in.Path, in.Cwd, data)
	}
	if err != nil {
		return nil, WriteOutput{}, c.agentError("write", err)
	}
	out := WriteOutput{Path: f.Path, Size: f.Size, MIME: f.MIME, SHA256: f.SHA256}
	if ranged {
		out.FileSize = f.FileSize
		return text(fmt.Sprintf("Wrote %d bytes (sha256 %s) into %s, now %d bytes. A ranged write is not atomic: check the whole with read digest.", out.Size, out.SHA256, out.Path, out.FileSize)), out, nil
	}
	return text(fmt.Sprintf("Wrote %s: %d bytes, %s, sha256 %s", out.Path, out.Size, out.MIME, out.SHA256)), out, nil
}

// writePayload validates write's arguments and returns the bytes to write.
func writePayload(in WriteInput) ([]byte, error) {
	if err := checkHandle(in.Handle); err != nil {
		return nil, err
	}
	if in.Path == "" {
		return nil, errors.New("path is empty: give the file to write, absolute or relative to cwd")
	}
	var data []byte
	switch {
	case in.Text != nil && in.Base64 != nil:
		return nil, errors.New("both text and base64 are given: give exactly one (text for UTF-8 content, base64 for any bytes)")
	case in.Text == nil && in.Base64 == nil:
		return nil, errors.New("neither text nor base64 is given: give exactly one (text for UTF-8 content, base64 for any bytes); an empty text writes an empty file")
	case in.Text != nil:
		data = []byte(*in.Text)
	default:
		var err error
		if data, err = decodeBase64("base64", *in.Base64, MaxFileBytes); err != nil {
			return nil, err
		}
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("the content is %d bytes, over the 3 MiB write limit: split it into several files, or write parts and join them with exec (cat a b > c)", len(data))
	}
	switch {
	case in.Offset != nil && in.Append:
		return nil, errors.New("both offset and append are given: append writes at the end, offset at a byte you name; give one")
	case in.Offset != nil && *in.Offset < 0:
		return nil, fmt.Errorf("offset %d is negative: give the byte to write at, from 0", *in.Offset)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// guardCalls wraps every tools/call. It passes "arguments": null on as {}
// (the SDK v1.8.0 would panic applying schema defaults to a nil map, which
// crashes the process), turns any other panic into a tool error instead of a
// crashed gateway, and rewrites the SDK's messages for arguments that do not
// fit a tool's schema (it validates them before the handlers run).
func guardCalls(log logr.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			if a := bytes.TrimSpace(call.Params.Arguments); len(a) == 0 || bytes.Equal(a, []byte("null")) {
				call.Params.Arguments = json.RawMessage("{}")
			}
			defer func() {
				if p := recover(); p != nil {
					id := agentapi.NewErrorID()
					log.Error(nil, "A tool call panicked", "errorID", id, "tool", call.Params.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					res, err = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
						Text: fmt.Sprintf("%s: %s failed unexpectedly in the gateway (internal error %s); retry, and give the operator the error's ID if it persists", agentapi.CodeInternal, call.Params.Name, id),
					}}}, nil
				}
			}()
			res, err = next(ctx, method, req)
			ctr, ok := res.(*mcp.CallToolResult)
			if err != nil || !ok || !ctr.IsError || len(ctr.Content) != 1 {
				return res, err
			}
			if tc, ok := ctr.Content[0].(*mcp.TextContent); ok {
				if msg, changed := clarifyArguments(call.Params.Name, tc.Text); changed {
					tc.Text = msg
				}
			}
			return res, err
		}
	}
}

// text is a result whose content is one text block.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// invalid marks a refused argument.
func invalid(err error) error {
	return fmt.Errorf("%s: %w", agentapi.CodeInvalid, err)
}

// agentError turns an agent's error into the tool error a caller sees. The
// agents' messages are written for tenants (and name nothing of others), so
// they pass through; authentication trouble between gateway and agent, and
// internal failures, are described without internals. Of an internal
// failure the caller gets only an error ID: the agent's, under which the
// agent logged the detail, or, for an internal error that carries detail
// and no ID (the client's own, of an answer it could not read), the
// gateway's own, under which it logs it.
func (c *catalog) agentError(tool string, err error) error {
	var he *agentapi.Error
	// An agent's error first: one that says the agent could not be reached
	// may wrap a dial's timeout, which is context.DeadlineExceeded too.
	if !errors.As(err, &he) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("%s was cancelled before the sandbox answered; if it ran a command, check its effects before retrying", tool)
	}
	if he == nil {
		id := agentapi.NewErrorID()
		c.opts.Logger.Error(err, "Agent call failed", "errorID", id, "tool", tool)
		return fmt.Errorf("%s: the sandbox's node gave an answer the gateway could not read (internal error %s); retry, and give the operator the error's ID if it persists", agentapi.CodeInternal, id)
	}
	switch he.Code {
	case agentapi.CodeUnauth:
		c.opts.Logger.Error(nil, "An agent refused the gateway's token", "tool", tool)
		return fmt.Errorf("%s: the gateway could not authenticate to your sandbox's node; this is a deployment problem (the gateway's agent token): retry later and tell the operator", agentapi.CodeUnavailable)
	case agentapi.CodeInternal, "":
		id, ok := agentapi.InternalErrorID(he.Message)
		if ok {
			c.opts.Logger.Info("Agent reported an internal error", "errorID", id, "tool", tool)
		} else {
			id = agentapi.NewErrorID()
			c.opts.Logger.Error(errors.New(he.Message), "Agent reported an internal error", "errorID", id, "tool", tool, "code", he.Code)
		}
		return fmt.Errorf("%s: %s failed in your sandbox's node (internal error %s); retry, and give the operator the error's ID if it persists", agentapi.CodeInternal, tool, id)
	}
	return fmt.Errorf("%s: %s", he.Code, he.Message)
}
