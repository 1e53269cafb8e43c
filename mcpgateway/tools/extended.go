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

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
)

// The extended tool set (Options.Extended): terminals, input to running
// jobs, the tenant's jobs listed, files in ranges. A Tenant chooses it
// (spec.tools: extended); the eight tools of the standard set keep
// exactly their schemas there.

// Defaults of a terminal job's size.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// refineJobExec bounds job_exec's extended options, or, in the standard
// set, removes them from its schema: the standard job_exec is the eight's.
func refineJobExec(p propMap, extended bool) {
	if !extended {
		for _, f := range extendedJobExecFields {
			delete(p, f)
		}
		return
	}
	// No schema defaults: the SDK would apply them to every job_exec,
	// terminal or not.
	refineSize(p)
}

// jobTerminal sets er's terminal and input from job_exec's extended
// options.
func jobTerminal(er *agentapi.ExecRequest, in JobExecInput) error {
	if !in.TTY && (in.Rows != 0 || in.Cols != 0) {
		return errors.New("rows and cols size a terminal: give tty true too, or leave them out")
	}
	er.Input = in.StdinOpen
	if !in.TTY {
		return nil
	}
	size := agentapi.TTYSize{Rows: in.Rows, Cols: in.Cols}
	if size.Rows == 0 {
		size.Rows = DefaultRows
	}
	if size.Cols == 0 {
		size.Cols = DefaultCols
	}
	if err := agentapi.CheckTTY(size); err != nil {
		return err
	}
	er.TTY = &size
	return nil
}

// errNotExtended refuses a tenant of the standard set what only the
// extended one serves (a session that began before its Tenant changed).
func errNotExtended(what string) error {
	return fmt.Errorf("%s: the extended tool set serves %s, and your tenant's is now the standard one: ask the operator to set spec.tools: extended on your Tenant, then start a new session", agentapi.CodeForbidden, what)
}

// offerExtended answers, in the standard set, a call of a tool of the
// extended one with a tool error that names the setting which serves it,
// where the protocol would answer only "unknown tool". (It is the
// innermost middleware: the call is audited and observed as any other.)
func offerExtended(extended bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if extended || !ok || call.Params == nil || !slices.Contains(ExtendedNames, call.Params.Name) {
				return next(ctx, method, req)
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
				"%s: %s is a tool of the extended tool set, and your tenant is served the standard one (the eight tools of tools/list): ask the operator to set spec.tools: extended on your Tenant, then start a new session",
				agentapi.CodeForbidden, call.Params.Name)}}}, nil
		}
	}
}

// JobInputInput is input for a running job.
type JobInputInput struct {
	JobID    string  `json:"job_id" jsonschema:"the job_id that job_exec returned"`
	Text     *string `json:"text,omitempty" jsonschema:"UTF-8 text to type or write; on a terminal a newline is \\r (Enter), and control keys are their characters (\\u0003 is Ctrl-C)"`
	Base64   *string `json:"base64,omitempty" jsonschema:"bytes to write, as base64 (escape sequences, binary input); give text or base64, not both"`
	EndInput bool    `json:"end_input,omitempty" jsonschema:"after the bytes, end the job's input: its pipe is closed; on a terminal Ctrl-D is typed (end of file for a program reading a line)"`
}

// JobInputOutput confirms the input.
type JobInputOutput struct {
	JobID string `json:"job_id" jsonschema:"the job"`
	State string `json:"state" jsonschema:"the job's state"`
	Bytes int    `json:"bytes" jsonschema:"the bytes queued for the job's input; it reads them when it will"`
	Ended bool   `json:"ended,omitempty" jsonschema:"true when the input was ended"`
}

// JobResizeInput is a terminal's new size.
type JobResizeInput struct {
	JobID string `json:"job_id" jsonschema:"a terminal job's job_id"`
	Rows  int    `json:"rows" jsonschema:"the terminal's rows"`
	Cols  int    `json:"cols" jsonschema:"the terminal's columns"`
}

// JobResizeOutput confirms the resize.
type JobResizeOutput struct {
	JobID string `json:"job_id" jsonschema:"the job"`
	State string `json:"state" jsonschema:"the job's state"`
	Rows  int    `json:"rows" jsonschema:"the terminal's rows now"`
	Cols  int    `json:"cols" jsonschema:"the terminal's columns now"`
}

// JobScreenInput asks for a terminal job's screen.
type JobScreenInput struct {
	JobID      string `json:"job_id" jsonschema:"a terminal job's job_id"`
	Scrollback int    `json:"scrollback,omitempty" jsonschema:"also return up to this many of the latest lines that scrolled off the top (default 0)"`
}

// JobScreenOutput is a terminal job's screen as text.
type JobScreenOutput struct {
	JobID           string     `json:"job_id" jsonschema:"the job"`
	State           string     `json:"state" jsonschema:"the job's state: a job that ended shows its last screen"`
	Rows            int        `json:"rows" jsonschema:"the screen's rows"`
	Cols            int        `json:"cols" jsonschema:"the screen's columns"`
	Lines           []string   `json:"lines" jsonschema:"the screen's rows as text, top to bottom, trailing blanks cut"`
	CursorRow       int        `json:"cursor_row" jsonschema:"the cursor's row, from 0"`
	CursorCol       int        `json:"cursor_col" jsonschema:"the cursor's column, from 0"`
	CursorHidden    bool       `json:"cursor_hidden,omitempty" jsonschema:"true when the program hid the cursor"`
	AltScreen       bool       `json:"alt_screen,omitempty" jsonschema:"true while a full-screen program has the alternate screen"`
	Title           string     `json:"title,omitempty" jsonschema:"the title the program set, if any"`
	Scrollback      []string   `json:"scrollback,omitempty" jsonschema:"the latest lines that scrolled off the top, oldest first, as many as asked"`
	ScrollbackLines int        `json:"scrollback_lines" jsonschema:"how many lines of scrollback the terminal keeps now"`
	Result          *JobResult `json:"result,omitempty" jsonschema:"how the job ended, once it is terminal"`
}

// JobListInput takes nothing: the tenant comes from the credential.
type JobListInput struct{}

// JobListOutput is the tenant's jobs.
type JobListOutput struct {
	Jobs []JobListed `json:"jobs" jsonschema:"your jobs that you can still poll or cancel, oldest first: running ones, and ended ones not yet acknowledged or expired"`
}

// JobListed is a job in a listing.
type JobListed struct {
	JobID     string     `json:"job_id" jsonschema:"the job's ID"`
	Command   string     `json:"command,omitempty" jsonschema:"the job's command, its first 200 bytes"`
	State     string     `json:"state" jsonschema:"running, cancelling, exited, killed, timed_out or failed"`
	StartedAt time.Time  `json:"started_at" jsonschema:"when it started"`
	EndedAt   *time.Time `json:"ended_at,omitempty" jsonschema:"when it ended"`
	TTY       bool       `json:"tty,omitempty" jsonschema:"true for a terminal job: job_screen reads its screen"`
	Rows      int        `json:"rows,omitempty" jsonschema:"a terminal job's rows"`
	Cols      int        `json:"cols,omitempty" jsonschema:"a terminal job's columns"`
	Input     bool       `json:"input,omitempty" jsonschema:"true when job_input writes to its input"`
	Result    *JobResult `json:"result,omitempty" jsonschema:"how the job ended, once it is terminal"`
}

// screenReserve is what a job_screen call reserves of the tenant's budget:
// a screen's text, with its scrollback when asked (the holder bounds
// both, see guestapi.Screen), twice (structured and text content).
func screenReserve(scrollback int) int64 {
	n := int64(2 * bounds.MaxTTYRows * bounds.MaxTTYCols * 4)
	if scrollback > 0 {
		n += 2 << 20
	}
	return n
}

func registerExtended(s *mcp.Server, t *catalog) {
	add(s, t, &mcp.Tool{
		Name:  "job_input",
		Title: "Type or write to a job",
		Description: "Write input to a running job: keys to a terminal job (tty), bytes to a job started with stdin_open. " +
			"The bytes are queued and the call returns at once; read the effect with job_screen (terminal) or job_poll. " +
			"At most 64 KiB a call, and 256 KiB the job has not read yet. end_input ends the input (Ctrl-D on a terminal).",
		InputSchema: inputSchema[JobInputInput](func(p propMap) {
			refineJobID(p)
			p["base64"].MaxLength = ptr(base64.StdEncoding.EncodedLen(bounds.MaxInputBytes))
		}),
		OutputSchema: outputSchema[JobInputOutput](nil),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, t.jobInput)

	add(s, t, &mcp.Tool{
		Name:         "job_resize",
		Title:        "Resize a job's terminal",
		Description:  "Change the size of a terminal job's terminal; the program gets SIGWINCH and redraws. job_screen shows the new size.",
		InputSchema:  inputSchema[JobResizeInput](func(p propMap) { refineJobID(p); refineSize(p) }),
		OutputSchema: outputSchema[JobResizeOutput](nil),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.jobResize)

	add(s, t, &mcp.Tool{
		Name:  "job_screen",
		Title: "Read a job's terminal screen",
		Description: "Return what a terminal job's screen shows now, as text (one string per row), with the cursor's position: " +
			"what top, vi, a REPL or a progress bar show, without escape sequences. The raw output stays available through job_poll. " +
			"A job that ended shows its last screen until it is recycled.",
		InputSchema: inputSchema[JobScreenInput](func(p propMap) {
			refineJobID(p)
			p["scrollback"].Minimum, p["scrollback"].Maximum = ptr(0.0), ptr(float64(bounds.MaxScrollback))
		}),
		OutputSchema: outputSchema[JobScreenOutput](nil),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, t.jobScreen)

	add(s, t, &mcp.Tool{
		Name:  "job_list",
		Title: "List your jobs",
		Description: "List your jobs in your sandbox with their state: those running and those ended that you have not acknowledged yet. " +
			"Jobs outlive sessions, disconnects and restarts: a new session finds them here, reads their output (job_poll) or screen (job_screen) and types on (job_input).",
		InputSchema:  inputSchema[JobListInput](nil),
		OutputSchema: outputSchema[JobListOutput](nil),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, t.jobList)
}

func refineSize(p propMap) {
	p["rows"].Minimum, p["rows"].Maximum = ptr(1.0), ptr(float64(bounds.MaxTTYRows))
	p["cols"].Minimum, p["cols"].Maximum = ptr(1.0), ptr(float64(bounds.MaxTTYCols))
}

// routeExtended routes a call of the extended set.
func (c *catalog) routeExtended(ctx context.Context, req *mcp.CallToolRequest, tool string) (Route, error) {
	r, err := c.route(ctx, req)
	if err != nil {
		return r, err
	}
	if !r.Extended {
		return r, errNotExtended(tool)
	}
	return r, nil
}

func (c *catalog) jobInput(ctx context.Context, req *mcp.CallToolRequest, in JobInputInput) (*mcp.CallToolResult, JobInputOutput, error) {
	if err := checkJobID(in.JobID); err != nil {
		return nil, JobInputOutput{}, invalid(err)
	}
	var data []byte
	switch {
	case in.Text != nil && in.Base64 != nil:
		return nil, JobInputOutput{}, invalid(errors.New("both text and base64 are given: give one of them"))
	case in.Text != nil:
		data = []byte(*in.Text)
	case in.Base64 != nil:
		var err error
		if data, err = decodeBase64("base64", *in.Base64, bounds.MaxInputBytes); err != nil {
			return nil, JobInputOutput{}, invalid(err)
		}
	case !in.EndInput:
		return nil, JobInputOutput{}, invalid(errors.New("nothing to write: give text or base64, or end_input true"))
	}
	if len(data) > bounds.MaxInputBytes {
		return nil, JobInputOutput{}, fmt.Errorf("%s: the input is %d bytes, over the %d-byte bound of one call: send it in parts", agentapi.CodeTooLarge, len(data), bounds.MaxInputBytes)
	}
	r, err := c.routeExtended(ctx, req, "job_input")
	if err != nil {
		return nil, JobInputOutput{}, err
	}
	done, err := c.admit(ctx, req, r.Tenant, "job_input", int64(len(data))+execBaseBytes)
	if err != nil {
		return nil, JobInputOutput{}, err
	}
	defer done()
	info, err := r.Agent.Input(ctx, r.Tenant, in.JobID, data, in.EndInput)
	if err != nil {
		return nil, JobInputOutput{}, c.agentError("job_input", err)
	}
	out := JobInputOutput{JobID: in.JobID, State: string(info.State), Bytes: len(data), Ended: in.EndInput}
	msg := fmt.Sprintf("job %s: %d bytes queued for its input", in.JobID, len(data))
	if in.EndInput {
		msg += ", then its input ended"
	}
	if info.TTY != nil {
		msg += "; job_screen shows what the terminal shows"
	}
	return text(msg + "."), out, nil
}

func (c *catalog) jobResize(ctx context.Context, req *mcp.CallToolRequest, in JobResizeInput) (*mcp.CallToolResult, JobResizeOutput, error) {
	if err := checkJobID(in.JobID); err != nil {
		return nil, JobResizeOutput{}, invalid(err)
	}
	if err := agentapi.CheckTTY(agentapi.TTYSize{Rows: in.Rows, Cols: in.Cols}); err != nil {
		return nil, JobResizeOutput{}, invalid(err)
	}
	r, err := c.routeExtended(ctx, req, "job_resize")
	if err != nil {
		return nil, JobResizeOutput{}, err
	}
	info, err := r.Agent.Resize(ctx, r.Tenant, in.JobID, in.Rows, in.Cols)
	if err != nil {
		return nil, JobResizeOutput{}, c.agentError("job_resize", err)
	}
	out := JobResizeOutput{JobID: in.JobID, State: string(info.State), Rows: in.Rows, Cols: in.Cols}
	return text(fmt.Sprintf("job %s: its terminal is %d rows by %d columns now.", in.JobID, in.Rows, in.Cols)), out, nil
}

func (c *catalog) jobScreen(ctx context.Context, req *mcp.CallToolRequest, in JobScreenInput) (*mcp.CallToolResult, JobScreenOutput, error) {
	if err := checkJobID(in.JobID); err != nil {
		return nil, JobScreenOutput{}, invalid(err)
	}
	if in.Scrollback < 0 || in.Scrollback > bounds.MaxScrollback {
		return nil, JobScreenOutput{}, invalid(fmt.Errorf("scrollback %d is out of range: give 0 to %d lines", in.Scrollback, bounds.MaxScrollback))
	}
	r, err := c.routeExtended(ctx, req, "job_screen")
	if err != nil {
		return nil, JobScreenOutput{}, err
	}
	done, err := c.admit(ctx, req, r.Tenant, "job_screen", screenReserve(in.Scrollback))
	if err != nil {
		return nil, JobScreenOutput{}, err
	}
	defer done()
	scr, err := r.Agent.Screen(ctx, r.Tenant, in.JobID, in.Scrollback)
	if err != nil {
		return nil, JobScreenOutput{}, c.agentError("job_screen", err)
	}
	out := JobScreenOutput{
		JobID: in.JobID, State: string(scr.Job.State),
		Rows: scr.Rows, Cols: scr.Cols, Lines: scr.Lines,
		CursorRow: scr.CursorRow, CursorCol: scr.CursorCol, CursorHidden: scr.CursorHidden,
		AltScreen: scr.AltScreen, Title: scr.Title,
		Scrollback: scr.Scrollback, ScrollbackLines: scr.ScrollbackLines,
		Result: jobResult(scr.Job.Result),
	}
	if out.Lines == nil {
		out.Lines = []string{}
	}
	return text(renderScreen(out)), out, nil
}

// renderScreen is a screen as a model reads it: a line about the job and
// the cursor, the scrollback asked for, and the screen's rows between
// rules, trailing empty rows left out.
func renderScreen(o JobScreenOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s: %s; screen %dx%d, cursor at row %d column %d", o.JobID, describeState(o.State, o.Result), o.Rows, o.Cols, o.CursorRow, o.CursorCol)
	if o.AltScreen {
		b.WriteString(" (full-screen program)")
	}
	if o.Title != "" {
		fmt.Fprintf(&b, ", title %q", o.Title)
	}
	b.WriteString("\n")
	if len(o.Scrollback) > 0 {
		fmt.Fprintf(&b, "--- scrollback, last %d of %d lines ---\n", len(o.Scrollback), o.ScrollbackLines)
		for _, l := range o.Scrollback {
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	last := len(o.Lines)
	for last > 0 && o.Lines[last-1] == "" && last-1 > o.CursorRow {
		last--
	}
	b.WriteString("--- screen ---\n")
	for _, l := range o.Lines[:last] {
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("---\n")
	return b.String()
}

func (c *catalog) jobList(ctx context.Context, req *mcp.CallToolRequest, _ JobListInput) (*mcp.CallToolResult, JobListOutput, error) {
	r, err := c.routeExtended(ctx, req, "job_list")
	if err != nil {
		return nil, JobListOutput{}, err
	}
	act, err := r.Agent.Activity(ctx, r.Tenant, r.SandboxID)
	if err != nil {
		return nil, JobListOutput{}, c.agentError("job_list", err)
	}
	out := JobListOutput{Jobs: make([]JobListed, 0, len(act.Jobs))}
	var b strings.Builder
	if len(act.Jobs) == 0 {
		b.WriteString("You have no jobs: job_exec starts one.\n")
	}
	for _, j := range act.Jobs {
		l := JobListed{JobID: j.ID, Command: j.Command, State: string(j.State), StartedAt: j.StartedAt, Input: j.Input, Result: jobResult(j.Result)}
		if !j.EndedAt.IsZero() {
			t := j.EndedAt
			l.EndedAt = &t
		}
		kind := "job"
		if j.TTY != nil {
			l.TTY, l.Rows, l.Cols = true, j.TTY.Rows, j.TTY.Cols
			kind = fmt.Sprintf("terminal %dx%d", l.Rows, l.Cols)
		} else if j.Input {
			kind = "job with open input"
		}
		out.Jobs = append(out.Jobs, l)
		fmt.Fprintf(&b, "%s (%s, started %s): %s: %s\n", j.ID, kind, j.StartedAt.UTC().Format(time.RFC3339), describeState(l.State, l.Result), j.Command)
	}
	return text(b.String()), out, nil
}

// onlyExtended removes fields from a schema's properties but in the
// extended set.
func onlyExtended(p propMap, extended bool, fields []string) {
	if extended {
		return
	}
	for _, f := range fields {
		delete(p, f)
	}
}

// refineRead bounds read's extended inputs, or removes them.
func refineRead(p propMap, extended bool) {
	onlyExtended(p, extended, extendedReadFields)
	if extended {
		p["offset"].Minimum = ptr(0.0)
		p["length"].Minimum, p["length"].Maximum = ptr(0.0), ptr(float64(MaxFileBytes))
	}
}

// checkRange refuses a read's range or digest that the agent would.
func checkRange(in ReadInput) error {
	switch {
	case in.Digest && (in.Offset != 0 || in.Length != 0):
		return errors.New("digest reads the whole file: give no offset or length with it")
	case in.Offset < 0:
		return fmt.Errorf("offset %d is negative: give the first byte to read, from 0", in.Offset)
	case in.Length < 0 || in.Length > MaxFileBytes:
		return fmt.Errorf("length %d is out of range: give 1 to %d bytes (3 MiB), or leave it out for 3 MiB", in.Length, MaxFileBytes)
	}
	return nil
}

// rangeSummary says what a ranged read returned.
func rangeSummary(path string, o ReadOutput) string {
	s := fmt.Sprintf("%s: bytes %d to %d of %d (%d bytes, sha256 %s)", path, o.Offset, o.Offset+int64(o.Size), o.FileSize, o.Size, o.SHA256)
	if o.EOF {
		return s + "; the end of the file"
	}
	return s + fmt.Sprintf("; read on at offset %d", o.Offset+int64(o.Size))
}

// digest answers a read with digest: the whole file's size and sha256.
func (c *catalog) digest(ctx context.Context, req *mcp.CallToolRequest, r Route, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	done, err := c.admit(ctx, req, r.Tenant, "read", execBaseBytes)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	defer done()
	d, err := r.Agent.Digest(ctx, r.Tenant, in.Handle, in.Path, in.Cwd)
	if err != nil {
		return nil, ReadOutput{}, c.agentError("read", err)
	}
	out := ReadOutput{Path: d.Path, FileSize: d.FileSize, SHA256: d.SHA256, Content: "blob", EOF: true, MIME: "application/octet-stream"}
	return text(fmt.Sprintf("%s: %d bytes, sha256 %s (the whole file; no content returned)", d.Path, d.FileSize, d.SHA256)), out, nil
}
