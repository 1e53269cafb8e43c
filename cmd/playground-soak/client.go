//go:build linux

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

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/mcpclient"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// callTimeout bounds one call of a client: far above any answer's time
// when nothing is down (a poll waits at most wait_seconds).
const callTimeout = 2 * time.Minute

// goodClient is a well-behaved tenant's MCP client: exec, write and read,
// jobs polled to their end across every fault, cancels with a proof. Every
// answer is checked; every failure must be retryable.
type goodClient struct {
	s     *soak
	name  string
	token string
	rng   *rand.Rand
	http  *http.Transport

	cs     *mcp.ClientSession
	handle string
	// gen is the agent generation the handle was opened under: an agent
	// that ended since takes the handle with it (documented).
	gen     uint64
	madeDir bool
	// files holds the content of each file last written with success; a
	// file whose write failed is unknown until written again.
	files  map[string][]byte
	seqs   []*seqJob
	cancel *cancelJob
	// pending is a job_exec whose answer was lost, sent again at each
	// step with its idempotency key until answered.
	pending *pendingStart
	n       int
	// lastOK is when a call last succeeded; lastFailure the kind of the
	// last failure (a tool's code, or "transport").
	lastOK      time.Time
	lastFailure string
}

func newGoodClient(s *soak, name, token string, seed int64) *goodClient {
	return &goodClient{s: s, name: name, token: token, rng: rand.New(rand.NewSource(seed)),
		http:  &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		files: map[string][]byte{}, lastOK: time.Now()}
}

// run works until ctx ends or drain is closed; then it only finishes its
// jobs (polls them to their end, completes its cancel) and returns.
func (c *goodClient) run(ctx context.Context, drain <-chan struct{}) {
	defer c.dropSession()
	defer c.givenUp()
	draining := false
	for ctx.Err() == nil {
		if !draining {
			select {
			case <-drain:
				draining = true
			default:
			}
		}
		if draining && len(c.seqs) == 0 && c.cancel == nil && c.pending == nil {
			return
		}
		if c.ensureSession(ctx) {
			c.step(ctx, draining)
		}
		sleep(ctx, time.Duration(50+c.rng.Intn(200))*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// ensureSession connects and opens a session if needed; false when that
// failed (and was classified).
func (c *goodClient) ensureSession(ctx context.Context) bool {
	if c.cs == nil {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		cs, err := mcpclient.Connect(cctx, c.s.sys.endpoint, c.token, c.http, "playground-soak")
		cancel()
		c.s.led.call("initialize")
		if err != nil {
			_ = c.failed(ctx, "initialize", start, err)
			return false
		}
		c.succeeded()
		c.cs = cs
	}
	if c.handle == "" {
		gen := c.s.sys.agentGen.Load()
		var open tools.OpenSessionOutput
		if _, ok := c.do(ctx, "open_session", map[string]any{}, &open); !ok {
			return false
		}
		c.handle, c.gen = open.Handle, gen
	}
	if !c.madeDir {
		var out tools.ExecOutput
		if _, ok := c.do(ctx, "exec", map[string]any{"handle": c.handle, "command": "mkdir -p soak"}, &out); !ok {
			return false
		}
		if out.ExitCode != 0 {
			c.s.led.violatef(invAnswer, "%s: mkdir -p soak exited %d: %s", c.name, out.ExitCode, out.Stderr)
			return false
		}
		c.madeDir = true
	}
	return true
}

func (c *goodClient) dropSession() {
	if c.cs != nil {
		c.cs.Close()
		c.cs = nil
	}
	c.http.CloseIdleConnections()
}

func (c *goodClient) step(ctx context.Context, draining bool) {
	for _, j := range c.seqs {
		c.pollSeq(ctx, j)
	}
	c.seqs = deleteDone(c.seqs)
	if c.cancel != nil {
		c.advanceCancel(ctx)
	}
	if c.cs == nil || c.handle == "" {
		return
	}
	if c.pending != nil {
		if time.Now().After(c.pending.next) {
			c.startJob(ctx, c.pending)
		}
		return
	}
	if draining {
		return
	}
	switch r := c.rng.Intn(100); {
	case r < 10 && len(c.seqs) < 2:
		c.startSeq(ctx)
	case r < 14 && c.cancel == nil:
		c.startCancel(ctx)
	case r < 60:
		c.exec(ctx)
	default:
		c.writeRead(ctx)
	}
}

// outcome is how a call ended, for its caller.
type outcome int

const (
	served  outcome = iota
	retry           // a retryable failure: try again
	refused         // not retryable: a violation, recorded
)

// do makes one call and classifies its outcome: true when it succeeded.
// A failure that is not retryable is a violation; a transport failure
// drops the session (the next step reconnects, as a client does).
func (c *goodClient) do(ctx context.Context, tool string, args, out any) (*mcp.CallToolResult, bool) {
	res, o := c.try(ctx, tool, args, out)
	return res, o == served
}

// try is do, saying how the call failed.
func (c *goodClient) try(ctx context.Context, tool string, args, out any) (*mcp.CallToolResult, outcome) {
	if c.cs == nil {
		return nil, retry // an earlier call of this step lost the session
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	res, err := mcpclient.CallResult(cctx, c.cs, tool, args, out)
	cancel()
	c.s.led.call(tool)
	if err == nil {
		c.succeeded()
		return res, served
	}
	return nil, c.failed(ctx, tool, start, err)
}

// succeeded records a call that succeeded, and how long the client had
// gone without one: longer than the bound is a violation.
func (c *goodClient) succeeded() {
	now := time.Now()
	gap := now.Sub(c.lastOK)
	c.lastOK = now
	why := c.name + ", no failure before it"
	if c.lastFailure != "" {
		why = c.name + ", its last failure " + c.lastFailure
	}
	c.s.led.succeeded(gap, why)
	if gap > c.s.opts.serveBound {
		c.s.led.violatef(invServed, "%s went unserved for %s (until %s)", c.name, gap.Round(time.Second), time.Since(c.s.led.start).Round(time.Second))
	}
}

// failed classifies a failed call that started at start.
func (c *goodClient) failed(ctx context.Context, tool string, start time.Time, err error) outcome {
	if ctx.Err() != nil {
		return retry // the soak is ending
	}
	l := c.s.led
	var te *mcpclient.ToolError
	c.lastFailure = "transport"
	if errors.As(err, &te) {
		c.lastFailure = te.Code
		switch {
		case te.Code == "unavailable" || te.Code == "resource_exhausted":
			l.retried(te.Code)
			if c.s.opts.verbose {
				l.logf("%s %s: %s", c.name, tool, te.Text)
			}
			return retry
		case te.Code == "not_found" && strings.Contains(te.Text, agentapi.HandleNotFound) && c.s.sys.agentGen.Load() != c.gen:
			l.retried("session handle gone with the agent that ended (open_session again)")
			c.handle = ""
			return retry
		}
		l.violatef(invRetryable, "%s %s: %s", c.name, tool, te.Text)
		if te.Code == "not_found" && strings.Contains(te.Text, agentapi.HandleNotFound) {
			c.handle = ""
		}
		return refused
	}
	c.dropSession()
	if strings.Contains(err.Error(), http.StatusText(http.StatusServiceUnavailable)) {
		// The gateway fails closed while its view of the cluster is not
		// current (docs/tools.md: 503 with Retry-After).
		l.retried("503: the gateway's view of the cluster not current")
		return retry
	}
	if errors.Is(err, context.DeadlineExceeded) && !c.s.win.covers(start, time.Now()) {
		l.violatef(invRetryable, "%s %s: no answer within %s, and no component was down", c.name, tool, callTimeout)
		return refused
	}
	if c.s.win.covers(start, time.Now()) {
		l.retried("transport error while a component restarted")
		if c.s.opts.verbose {
			l.logf("%s %s: %v", c.name, tool, err)
		}
		return retry
	}
	l.violatef(invRetryable, "%s %s: %v (no component was down)", c.name, tool, err)
	return refused
}

// exec runs a command whose answer is known and checks it.
func (c *goodClient) exec(ctx context.Context) {
	c.n++
	a, b := c.rng.Intn(1_000_000), c.rng.Intn(1000)
	nonce := fmt.Sprintf("%s-%d", c.name, c.n)
	cmd := fmt.Sprintf("printf 'soak %%s %%d\\n' %s $((%d * %d))", nonce, a, b)
	want := fmt.Sprintf("soak %s %d\n", nonce, a*b)
	var out tools.ExecOutput
	if _, ok := c.do(ctx, "exec", map[string]any{"handle": c.handle, "command": cmd}, &out); !ok {
		return
	}
	got, err := decodeStream(out.Stdout, out.StdoutEncoding)
	if err != nil || string(got) != want || out.ExitCode != 0 || out.Stderr != "" || out.TimedOut {
		c.s.led.violatef(invAnswer, "%s exec %q: exit %d, stdout %q (want %q), stderr %q", c.name, cmd, out.ExitCode, got, want, out.Stderr)
	}
}

// writeRead writes a file of random content, text or binary, and reads
// it back: the sizes and digests the tools give and the bytes must agree.
func (c *goodClient) writeRead(ctx context.Context) {
	binary := c.rng.Intn(2) == 0
	ext := "txt"
	if binary {
		ext = "bin"
	}
	path := fmt.Sprintf("soak/f%d.%s", c.rng.Intn(8), ext)
	size := c.rng.Intn(64 << 10)
	if c.rng.Intn(10) == 0 {
		size = c.rng.Intn(1 << 20)
	}
	data := randomContent(c.rng, size, binary)
	args := map[string]any{"handle": c.handle, "path": path}
	if binary {
		args["base64"] = base64.StdEncoding.EncodeToString(data)
	} else {
		args["text"] = string(data)
	}
	sum := sha256.Sum256(data)
	var w tools.WriteOutput
	if _, ok := c.do(ctx, "write", args, &w); !ok {
		// It may or may not have replaced the file: unknown until the
		// next write that succeeds.
		delete(c.files, path)
		return
	}
	if w.Size != len(data) || w.SHA256 != hex.EncodeToString(sum[:]) {
		c.s.led.violatef(invAnswer, "%s write %s: size %d sha256 %s, want %d %x", c.name, path, w.Size, w.SHA256, len(data), sum)
		delete(c.files, path)
		return
	}
	c.files[path] = data

	// Read back one of the known files: the one written, or another.
	for p, want := range c.files {
		if c.rng.Intn(2) == 0 {
			path, data = p, want
			break
		}
	}
	var r tools.ReadOutput
	res, ok := c.do(ctx, "read", map[string]any{"handle": c.handle, "path": path}, &r)
	if !ok {
		return
	}
	got := readContent(res)
	sum = sha256.Sum256(data)
	if r.Size != len(data) || r.SHA256 != hex.EncodeToString(sum[:]) || !bytes.Equal(got, data) {
		c.s.led.violatef(invAnswer, "%s read %s: size %d sha256 %s (%d bytes in the content, %s), want %d bytes %x",
			c.name, path, r.Size, r.SHA256, len(got), r.Content, len(data), sum)
	}
}

// randomContent is size bytes: random ones, or valid UTF-8 text of
// printable ASCII, newlines and a few multi-byte characters.
func randomContent(rng *rand.Rand, size int, binary bool) []byte {
	b := make([]byte, 0, size)
	if binary {
		b = b[:size]
		rng.Read(b)
		return b
	}
	for len(b) < size {
		switch r := rng.Intn(40); {
		case r == 0:
			b = append(b, '\n')
		case r == 1 && size-len(b) >= 2:
			b = append(b, "é"...)
		case r == 2 && size-len(b) >= 3:
			b = append(b, "€"...)
		default:
			b = append(b, byte(' '+rng.Intn(95)))
		}
	}
	return b
}

// readContent is the file's bytes from a read's content blocks.
func readContent(res *mcp.CallToolResult) []byte {
	if res == nil || len(res.Content) == 0 {
		return nil
	}
	switch c := res.Content[0].(type) {
	case *mcp.TextContent:
		return []byte(c.Text)
	case *mcp.ImageContent:
		return c.Data
	case *mcp.EmbeddedResource:
		if c.Resource != nil {
			return c.Resource.Blob
		}
	}
	return nil
}

func decodeStream(data, encoding string) ([]byte, error) {
	if encoding == "base64" {
		return base64.StdEncoding.DecodeString(data)
	}
	return []byte(data), nil
}
