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

package agentapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// traceContext carries the caller's span to the agent (W3C trace context).
var traceContext = propagation.TraceContext{}

// maxResponseBytes bounds what the client reads of a response: an exec
// answer holds two full 4 MiB output buffers, well within.
const maxResponseBytes = 64 << 20

// Client calls one agent's API. It is safe for concurrent use and keeps its
// connections: calls to one agent share an HTTP/2 connection.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// NewTransport returns a transport that speaks HTTP/2 to agents: over TLS
// when tlsConfig is set, else cleartext h2c. One transport serves every
// agent a gateway talks to.
func NewTransport(tlsConfig *tls.Config) *http.Transport {
	t := &http.Transport{
		Proxy:               nil, // agents are reached directly, never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 5 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 16,
		ForceAttemptHTTP2:   true,
	}
	t.Protocols = new(http.Protocols)
	if tlsConfig != nil {
		t.Protocols.SetHTTP2(true)
	} else {
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t
}

// NewClient returns a client of the agent at endpoint (http:// for h2c,
// https:// for TLS) that presents token and speaks Current. rt may be
// shared between clients; nil means a new cleartext transport.
func NewClient(endpoint, token string, rt http.RoundTripper) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent endpoint %q is not an http(s) URL", endpoint)
	}
	if rt == nil {
		rt = NewTransport(nil)
	}
	return &Client{base: u, token: token, http: &http.Client{Transport: rt}}, nil
}

// do posts body as JSON to path and decodes the answer into out (nil for
// none). Agent errors come back as *Error with their code.
func (c *Client) do(ctx context.Context, path string, body, out any) error {
	resp, err := c.post(ctx, path, body, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(out); err != nil {
		return unreadable(ctx, resp, path, err)
	}
	return nil
}

// answerBody is an answer's body that remembers whether reading it
// failed: the agent's connection broke mid-answer.
type answerBody struct {
	io.ReadCloser
	err error
}

func (b *answerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// unreadable is the error of an answer that could not be read whole or
// decoded. One the agent cut short (it stopped mid-answer: a restart, a
// crash; its connection broke, or the body ended early) is unavailable,
// which its caller may retry, saying that the call may have taken effect;
// a complete answer that does not decode is the client's error.
func unreadable(ctx context.Context, resp *http.Response, path string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("calling the agent: %w", ctx.Err())
	}
	if b, ok := resp.Body.(*answerBody); (ok && b.err != nil) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Code: CodeUnavailable, Err: err,
			Message: "the sandbox's node stopped in the middle of its answer (it may be restarting): retry; what the call did may have happened (a command run, a file written)"}
	}
	return fmt.Errorf("decoding the agent's answer to %s: %w", path, err)
}

// post posts body as JSON to path, asking for accept (default JSON), and
// returns a successful answer for the caller to read and close.
func (c *Client) post(ctx context.Context, path string, body any, accept string) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(path).String(), bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(VersionHeader, Current.String())
	traceContext.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up: the call's outcome is the caller's to
			// judge, not the agent's unavailability.
			return nil, fmt.Errorf("calling the agent: %w", ctx.Err())
		}
		// The agent could not be reached or did not answer, whatever the
		// error wraps: a dial that timed out is context.DeadlineExceeded
		// too (net's timeouts say so), and is no cancellation.
		return nil, &Error{Code: CodeUnavailable, Err: err,
			Message: "the sandbox's node cannot be reached right now: retry shortly"}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e ErrorResponse
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&e); err != nil || e.Code == "" {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("the agent answered %s", resp.Status)}
		}
		return nil, &Error{Code: e.Code, Message: e.Message}
	}
	resp.Body = &answerBody{ReadCloser: resp.Body}
	return resp, nil
}

// Open opens a session handle on the tenant's sandbox.
func (c *Client) Open(ctx context.Context, tenant, sandboxID string) (Handle, error) {
	var h Handle
	err := c.do(ctx, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/handles", TenantRequest{Tenant: tenant}, &h)
	return h, err
}

// Activity lists the tenant's open handles and jobs in its sandbox.
func (c *Client) Activity(ctx context.Context, tenant, sandboxID string) (Activity, error) {
	var act Activity
	err := c.do(ctx, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/activity", TenantRequest{Tenant: tenant}, &act)
	return act, err
}

// SetEgressCredentials replaces the credentials the node's egress broker
// adds to the sandbox's requests (the manager's call).
func (c *Client) SetEgressCredentials(ctx context.Context, tenant, sandboxID string, creds []EgressCredential) error {
	return c.do(ctx, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/egress-credentials", EgressCredentialsRequest{Tenant: tenant, Credentials: creds}, nil)
}

// SetSigningKey makes req.Key a Sandbox's signing key (the manager's call).
func (c *Client) SetSigningKey(ctx context.Context, req SigningKeyRequest) (SigningKeyResult, error) {
	var res SigningKeyResult
	err := c.do(ctx, "/v1/signing-keys", req, &res)
	return res, err
}

// SetImageCredentials replaces the registry credentials of a Sandbox's
// image pulls (the manager's call).
func (c *Client) SetImageCredentials(ctx context.Context, req ImageCredentialsRequest) error {
	return c.do(ctx, "/v1/image-credentials", req, nil)
}

// Piles lists the piles the node retains of Sandboxes that are gone, in
// namespace ("": every namespace).
func (c *Client) Piles(ctx context.Context, namespace string) (Piles, error) {
	var res Piles
	err := c.do(ctx, "/v1/piles", PilesRequest{Namespace: namespace}, &res)
	return res, err
}

// RemovePile removes the pile the node retains of Sandbox namespace/name.
func (c *Client) RemovePile(ctx context.Context, namespace, name string) (RemovedPile, error) {
	var res RemovedPile
	err := c.do(ctx, "/v1/piles/delete", RemovePileRequest{Namespace: namespace, Name: name}, &res)
	return res, err
}

// Renew extends a handle's lease.
func (c *Client) Renew(ctx context.Context, tenant, handle string) (Handle, error) {
	var h Handle
	if !ValidHandle(handle) {
		return h, errHandleNotFound()
	}
	err := c.do(ctx, "/v1/handles/"+handle+"/renew", TenantRequest{Tenant: tenant}, &h)
	return h, err
}

// Close releases a handle.
func (c *Client) Close(ctx context.Context, tenant, handle string) error {
	if !ValidHandle(handle) {
		return errHandleNotFound()
	}
	return c.do(ctx, "/v1/handles/"+handle+"/close", TenantRequest{Tenant: tenant}, nil)
}

// Exec runs a command to its end. It asks for the binary answer
// (ExecMediaType), so the output arrives as raw bytes in one buffer.
func (c *Client) Exec(ctx context.Context, tenant, handle string, req ExecRequest) (ExecResult, error) {
	if !ValidHandle(handle) {
		return ExecResult{}, errHandleNotFound()
	}
	path := "/v1/handles/" + handle + "/exec"
	req.Tenant = tenant
	resp, err := c.post(ctx, path, req, ExecMediaType)
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxResponseBytes)
	var res ExecResult
	reserve, _ := ctx.Value(reserveKey{}).(func(int64) error)
	if reserve == nil {
		reserve = func(int64) error { return nil }
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, ExecMediaType) {
		err = fmt.Errorf("the answer is %q, not the %s asked for", ct, ExecMediaType)
	} else {
		res, err = readBinaryExec(body, reserve)
	}
	if err != nil {
		return ExecResult{}, unreadable(ctx, resp, path, err)
	}
	return res, nil
}

type reserveKey struct{}

// WithOutputReservation returns a context under which Exec calls reserve,
// once the agent's answer says how large the output is and before reading
// it, the bytes the output takes here and in its encoding for the caller
// (both streams, their raw bytes plus their base64, which bounds either
// encoding). reserve may wait; its error abandons the answer.
func WithOutputReservation(ctx context.Context, reserve func(bytes int64) error) context.Context {
	return context.WithValue(ctx, reserveKey{}, reserve)
}

// outputWeight is what WithOutputReservation reserves for n bytes of a
// stream.
func outputWeight(n int) int64 { return int64(n) + int64(base64.StdEncoding.EncodedLen(n)) }

// maxExecHeader bounds the first line of a binary exec answer.
const maxExecHeader = 64 << 10

// execReaders are the readers of binary exec answers, each with room for
// the largest header: 64 KiB a call was a tenth of what a gateway
// allocated per exec of `true`, and its collection as much of its CPU.
var execReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, maxExecHeader) }}

// readBinaryExec reads an ExecMediaType answer: both streams land in one
// buffer of their exact size, read once.
func readBinaryExec(r io.Reader, reserve func(int64) error) (ExecResult, error) {
	br := execReaders.Get().(*bufio.Reader)
	br.Reset(io.LimitReader(r, maxResponseBytes))
	defer func() {
		br.Reset(nil) // keeps nothing of this answer's
		execReaders.Put(br)
	}()
	line, err := br.ReadSlice('\n')
	if err != nil {
		return ExecResult{}, fmt.Errorf("reading the header: %w", err)
	}
	var h ExecHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return ExecResult{}, fmt.Errorf("the header: %w", err)
	}
	if h.StdoutSize < 0 || h.StderrSize < 0 || h.StdoutSize > maxResponseBytes/2 || h.StderrSize > maxResponseBytes/2 {
		return ExecResult{}, fmt.Errorf("the header claims %d and %d bytes of output, more than an answer holds", h.StdoutSize, h.StderrSize)
	}
	if err := reserve(outputWeight(h.StdoutSize) + outputWeight(h.StderrSize)); err != nil {
		return ExecResult{}, err
	}
	data := make([]byte, h.StdoutSize+h.StderrSize)
	if _, err := io.ReadFull(br, data); err != nil {
		return ExecResult{}, fmt.Errorf("reading %d bytes of output: %w", len(data), err)
	}
	if n, _ := br.Read(make([]byte, 1)); n > 0 {
		return ExecResult{}, errors.New("bytes after the output")
	}
	// Empty output is nil, as the JSON answer decodes it.
	var stdout, stderr []byte
	if h.StdoutSize > 0 {
		stdout = data[:h.StdoutSize:h.StdoutSize]
	}
	if h.StderrSize > 0 {
		stderr = data[h.StdoutSize:]
	}
	return ExecResult{Stdout: stdout, Stderr: stderr, ExecOutputSizes: h.ExecOutputSizes, ExitStatus: h.ExitStatus}, nil
}

// StartJob starts a background job.
func (c *Client) StartJob(ctx context.Context, tenant, handle string, req ExecRequest) (JobInfo, error) {
	var info JobInfo
	if !ValidHandle(handle) {
		return info, errHandleNotFound()
	}
	req.Tenant = tenant
	err := c.do(ctx, "/v1/handles/"+handle+"/jobs", req, &info)
	return info, err
}

// Poll returns a page of a job's output. It asks for the binary answer
// (PollMediaType), whose output is raw bytes rather than escaped JSON.
func (c *Client) Poll(ctx context.Context, req PollRequest, jobID string) (PollResponse, error) {
	if !ValidJobID(jobID) {
		return PollResponse{}, errJobNotFound()
	}
	path := "/v1/jobs/" + jobID + "/poll"
	resp, err := c.post(ctx, path, req, PollMediaType)
	if err != nil {
		return PollResponse{}, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxResponseBytes)
	var res PollResponse
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, PollMediaType) {
		err = fmt.Errorf("the answer is %q, not the %s asked for", ct, PollMediaType)
	} else {
		res, err = readBinaryPoll(body)
	}
	if err != nil {
		return PollResponse{}, unreadable(ctx, resp, path, err)
	}
	return res, nil
}

// readBinaryPoll reads a PollMediaType answer and encodes its chunks as
// the JSON answer carries them.
func readBinaryPoll(r io.Reader) (PollResponse, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return PollResponse{}, fmt.Errorf("reading the header: %w", err)
	}
	var h PollHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return PollResponse{}, fmt.Errorf("the header: %w", err)
	}
	total := 0
	for _, c := range h.Chunks {
		if c.Size < 0 || c.Size > maxResponseBytes-total {
			return PollResponse{}, fmt.Errorf("chunk %d claims %d bytes, more than an answer holds", c.Seq, c.Size)
		}
		total += c.Size
	}
	data := make([]byte, total)
	if _, err := io.ReadFull(br, data); err != nil {
		return PollResponse{}, fmt.Errorf("reading %d bytes of chunks: %w", total, err)
	}
	if n, _ := br.Read(make([]byte, 1)); n > 0 {
		return PollResponse{}, errors.New("bytes after the last chunk")
	}
	res := PollResponse{
		Job:           h.Job,
		Chunks:        make([]Chunk, len(h.Chunks)),
		NextCursor:    h.NextCursor,
		Gap:           h.Gap,
		DroppedBytes:  h.DroppedBytes,
		DroppedChunks: h.DroppedChunks,
		Done:          h.Done,
	}
	for i, c := range h.Chunks {
		res.Chunks[i] = EncodeChunk(c.Stream, c.Seq, c.Offset, data[:c.Size])
		data = data[c.Size:]
	}
	return res, nil
}

// Cancel cancels a job.
func (c *Client) Cancel(ctx context.Context, tenant, jobID string) (JobInfo, error) {
	var info JobInfo
	if !ValidJobID(jobID) {
		return info, errJobNotFound()
	}
	err := c.do(ctx, "/v1/jobs/"+jobID+"/cancel", TenantRequest{Tenant: tenant}, &info)
	return info, err
}

// Input writes data to a job's input, then, with end, ends it.
func (c *Client) Input(ctx context.Context, tenant, jobID string, data []byte, end bool) (JobInfo, error) {
	var info JobInfo
	if !ValidJobID(jobID) {
		return info, errJobNotFound()
	}
	err := c.do(ctx, "/v1/jobs/"+jobID+"/input", InputRequest{Tenant: tenant, Data: data, End: end}, &info)
	return info, err
}

// Resize sets a terminal job's size.
func (c *Client) Resize(ctx context.Context, tenant, jobID string, rows, cols int) (JobInfo, error) {
	var info JobInfo
	if !ValidJobID(jobID) {
		return info, errJobNotFound()
	}
	err := c.do(ctx, "/v1/jobs/"+jobID+"/resize", ResizeRequest{Tenant: tenant, Rows: rows, Cols: cols}, &info)
	return info, err
}

// Screen reads a terminal job's screen, with up to scrollback lines that
// scrolled off its top.
func (c *Client) Screen(ctx context.Context, tenant, jobID string, scrollback int) (Screen, error) {
	var s Screen
	if !ValidJobID(jobID) {
		return s, errJobNotFound()
	}
	err := c.do(ctx, "/v1/jobs/"+jobID+"/screen", ScreenRequest{Tenant: tenant, Scrollback: scrollback}, &s)
	return s, err
}

// Read reads a whole file of at most MaxFileBytes; a larger one is
// refused (CodeTooLarge), never truncated: read it with ReadRange.
func (c *Client) Read(ctx context.Context, tenant, handle, path, cwd string) (FileContent, error) {
	return c.read(ctx, handle, ReadRequest{Tenant: tenant, Path: path, Cwd: cwd})
}

// ReadRange reads up to length bytes (0: up to MaxFileBytes) of a file of
// any size from offset. The answer says where the bytes start, the
// file's size, and whether they reach its end (EOF); an offset at or past
// the end reads no bytes, with EOF. A client reads a large file range by
// range, each from where the last ended, until EOF, then compares the
// bytes with Digest.
func (c *Client) ReadRange(ctx context.Context, tenant, handle, path, cwd string, offset int64, length int) (FileContent, error) {
	return c.read(ctx, handle, ReadRequest{Tenant: tenant, Path: path, Cwd: cwd, Offset: &offset, Length: length})
}

func (c *Client) read(ctx context.Context, handle string, req ReadRequest) (FileContent, error) {
	var f FileContent
	if !ValidHandle(handle) {
		return f, errHandleNotFound()
	}
	if err := req.Validate(); err != nil {
		return f, err
	}
	path := "/v1/handles/" + handle + "/read"
	resp, err := c.post(ctx, path, req, ReadMediaType)
	if err != nil {
		return f, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxResponseBytes)
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, ReadMediaType) {
		f, err = readBinaryRead(body)
	} else {
		err = json.NewDecoder(body).Decode(&f)
	}
	if err != nil {
		return FileContent{}, unreadable(ctx, resp, path, err)
	}
	return f, nil
}

// readBinaryRead reads a ReadMediaType answer: the header, then the
// bytes it counts, into one buffer of their exact size.
func readBinaryRead(r io.Reader) (FileContent, error) {
	br := bufio.NewReaderSize(r, maxExecHeader)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return FileContent{}, fmt.Errorf("reading the header: %w", err)
	}
	var f FileContent
	if err := json.Unmarshal(line, &f); err != nil {
		return FileContent{}, fmt.Errorf("the header: %w", err)
	}
	if f.Size < 0 || f.Size > maxResponseBytes {
		return FileContent{}, fmt.Errorf("the header claims %d bytes, more than an answer holds", f.Size)
	}
	f.Data = make([]byte, f.Size)
	if _, err := io.ReadFull(br, f.Data); err != nil {
		return FileContent{}, fmt.Errorf("reading %d bytes of the file: %w", f.Size, err)
	}
	if n, _ := br.Read(make([]byte, 1)); n > 0 {
		return FileContent{}, errors.New("bytes after the file's")
	}
	return f, nil
}

// Digest returns the size and sha256 of a whole file of any size, without
// its content.
func (c *Client) Digest(ctx context.Context, tenant, handle, path, cwd string) (FileDigest, error) {
	var d FileDigest
	if !ValidHandle(handle) {
		return d, errHandleNotFound()
	}
	err := c.do(ctx, "/v1/handles/"+handle+"/read", ReadRequest{Tenant: tenant, Path: path, Cwd: cwd, Digest: true}, &d)
	return d, err
}

// Write replaces a file atomically.
func (c *Client) Write(ctx context.Context, tenant, handle, path, cwd string, data []byte) (FileInfo, error) {
	return c.write(ctx, handle, WriteRequest{Tenant: tenant, Path: path, Cwd: cwd, Data: data})
}

// Append appends data, at most MaxFileBytes, to a file, creating it if it
// is missing; the answer's sha256 is of data, its file_size the file's
// new size. It is not atomic: a failed call may have written part of
// data. A client uploads a large file range by range, then compares
// Digest with its own.
func (c *Client) Append(ctx context.Context, tenant, handle, path, cwd string, data []byte) (FileInfo, error) {
	return c.write(ctx, handle, WriteRequest{Tenant: tenant, Path: path, Cwd: cwd, Data: data, Append: true})
}

// WriteAt writes data, at most MaxFileBytes, into a file at offset,
// creating it if it is missing and never truncating it; a range past the
// end leaves zero bytes before it. Not atomic, as Append; ranges may be
// written in any order, or again after a failure.
func (c *Client) WriteAt(ctx context.Context, tenant, handle, path, cwd string, offset int64, data []byte) (FileInfo, error) {
	return c.write(ctx, handle, WriteRequest{Tenant: tenant, Path: path, Cwd: cwd, Data: data, Offset: &offset})
}

func (c *Client) write(ctx context.Context, handle string, req WriteRequest) (FileInfo, error) {
	var f FileInfo
	if !ValidHandle(handle) {
		return f, errHandleNotFound()
	}
	if err := req.Validate(); err != nil {
		return f, err
	}
	err := c.do(ctx, "/v1/handles/"+handle+"/write", req, &f)
	return f, err
}
