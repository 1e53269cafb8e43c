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

package mcpgateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/agentserver/agentservertest"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// BenchmarkJobPollPage measures how fast a client reads a job's output
// through job_poll: one page of pageBytes per iteration, through the whole
// path a page takes (the agent's API over HTTP/2 on loopback, the tool, the
// Streamable HTTP transport with the gateway's options, the go-sdk client).
// The job's output is made by an in-memory backend, so the figure is the
// transport's alone. Each iteration re-reads the same page (the job has
// ended and its output is all in the ring), decodes it and checks its size.
//
//	go test ./mcpgateway -run XXX -bench JobPollPage -benchtime 20x
func BenchmarkJobPollPage(b *testing.B) {
	for _, tc := range []struct {
		name string
		line string
		page int
	}{
		// yes-like text: the common case.
		{"text-4MiB", "line of ordinary build output, 0123456789 abcdefghij\n", 4 << 20},
		// NUL bytes are valid UTF-8 that JSON escapes six-fold; 4 MiB of them
		// is over the client's SSE event limit (16 MiB), so the page is 1 MiB.
		{"nul-1MiB", "\x00", 1 << 20},
	} {
		// sse is the gateway's transport; json (StreamableHTTPOptions.
		// JSONResponse) is for comparison only: it would lose the progress
		// notifications of long calls in stateless mode.
		for _, framing := range []string{"sse", "json"} {
			b.Run(tc.name+"/"+framing, func(b *testing.B) {
				data := bytes.Repeat([]byte(tc.line), tc.page/len(tc.line)+1)[:tc.page]
				cs, jobID := pollBenchSetup(b, data, framing == "json")
				ctx := context.Background()
				args := map[string]any{"job_id": jobID, "cursor": "", "max_bytes": tc.page, "wait_seconds": 0}
				b.SetBytes(int64(tc.page))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_poll", Arguments: args})
					if err != nil {
						b.Fatal(err)
					}
					if res.IsError {
						b.Fatalf("job_poll failed: %v", res.Content)
					}
					if got := pageBytes(b, res); got != tc.page {
						b.Fatalf("got %d bytes, want %d", got, tc.page)
					}
				}
			})
		}
	}
}

// BenchmarkExecHostile measures one exec whose command writes 4 MiB of
// \x01 to stdout and to stderr, through the whole path of its result (the
// agent's API over HTTP/2 on loopback, the tool, the Streamable HTTP
// transport with the gateway's options, the go-sdk client), the output
// made by an in-memory backend. Each iteration decodes both streams and
// checks them.
//
//	go test ./mcpgateway -run XXX -bench ExecHostile -benchtime 10x -cpuprofile cpu.out -memprofile mem.out
func BenchmarkExecHostile(b *testing.B) {
	data := bytes.Repeat([]byte{1}, 4<<20)
	ctx := context.Background()
	cs := benchSession(b, producer(data, true), false)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_session", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		b.Fatal(err, res)
	}
	handle := res.StructuredContent.(map[string]any)["handle"].(string)
	b.SetBytes(int64(2 * len(data)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": handle, "command": "produce"}})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("exec failed: %v", res.Content)
		}
		out := res.StructuredContent.(map[string]any)
		for _, s := range []string{"stdout", "stderr"} {
			got := []byte(out[s].(string))
			if out[s+"_encoding"] == "base64" {
				if got, err = base64.StdEncoding.DecodeString(out[s].(string)); err != nil {
					b.Fatal(err)
				}
			}
			if !bytes.Equal(got, data) {
				b.Fatalf("%s: %d bytes back", s, len(got))
			}
		}
	}
}

// BenchmarkExecEmpty measures an exec whose command writes nothing and
// exits 0, as P1's exec of `true`, through the whole path of a call (the
// go-sdk client, the Streamable HTTP transport with the gateway's
// options, the tool, the agent's API over HTTP/2 on loopback, the
// kernel), the command run by an in-memory backend: what the gateway and
// the agent themselves cost a call, in time and allocations.
//
//	go test ./mcpgateway -run XXX -bench ExecEmpty -benchtime 2000x -cpuprofile cpu.out -memprofile mem.out
func BenchmarkExecEmpty(b *testing.B) {
	ctx := context.Background()
	cs := benchSession(b, producer(nil, false), false)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_session", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		b.Fatal(err, res)
	}
	handle := res.StructuredContent.(map[string]any)["handle"].(string)
	args := map[string]any{"handle": handle, "command": "produce"}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError || res.StructuredContent.(map[string]any)["exit_code"] != float64(0) {
			b.Fatalf("exec failed: %v", res.Content)
		}
	}
}

// pageBytes reads a job_poll result's structured content as the go-sdk
// client hands it over (decoded into maps), decodes its chunks and returns
// the number of output bytes in them.
func pageBytes(tb testing.TB, res *mcp.CallToolResult) int {
	out, ok := res.StructuredContent.(map[string]any)
	if !ok {
		tb.Fatalf("structured content is %T", res.StructuredContent)
	}
	chunks, _ := out["chunks"].([]any)
	n := 0
	for _, c := range chunks {
		c, _ := c.(map[string]any)
		data, _ := c["data"].(string)
		if c["encoding"] == "base64" {
			d, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				tb.Fatal(err)
			}
			n += len(d)
		} else {
			n += len(data)
		}
	}
	return n
}

// benchSession serves the sandbox catalog, with an agent on be over its
// API, to one tenant whose sandbox is provisioned, and returns a connected
// client.
func benchSession(b *testing.B, be backend.Backend, jsonResponse bool) *mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	agent, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}})
	if err != nil {
		b.Fatal(err)
	}
	const tenant, sandbox, token = "bench/alice", "sbx-bench", "bench-agent-token"
	if err := agent.Ensure(ctx, backend.Spec{ID: sandbox, Tenant: tenant}); err != nil {
		b.Fatal(err)
	}
	ac, err := agentapi.NewClient(agentservertest.Serve(b, agent, token), token, nil)
	if err != nil {
		b.Fatal(err)
	}
	server := newServer(staticRouter{tools.Route{Tenant: tenant, SandboxID: sandbox, Agent: ac}}, tools.Options{})
	so := streamableOptions(Options{})
	so.JSONResponse = jsonResponse
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, so))
	b.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// pollBenchSetup serves the sandbox catalog with an agent whose only
// sandbox runs a job that writes data and ends, and returns a connected
// client and the job.
func pollBenchSetup(b *testing.B, data []byte, jsonResponse bool) (*mcp.ClientSession, string) {
	b.Helper()
	ctx := context.Background()
	cs := benchSession(b, producer(data, false), jsonResponse)

	call := func(name string, args map[string]any, out any) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("%s: %v", name, res.Content)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, out); err != nil {
			b.Fatal(err)
		}
	}
	var sess tools.OpenSessionOutput
	call("open_session", nil, &sess)
	var job tools.JobExecOutput
	call("job_exec", map[string]any{"handle": sess.Handle, "command": "produce"}, &job)
	// Wait for the job to end, without acknowledging its output.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var page tools.JobPollOutput
		call("job_poll", map[string]any{"job_id": job.JobID, "cursor": "", "max_bytes": 1, "wait_seconds": 1}, &page)
		if page.Result != nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the job did not end")
		}
	}
	return cs, job.JobID
}

type staticRouter struct{ r tools.Route }

func (s staticRouter) Route(context.Context, *mcp.CallToolRequest) (tools.Route, error) {
	return s.r, nil
}

// producer is a backend whose every command (produce …) writes out to
// stdout (and, with both, to stderr too), in pieces as a pipe would
// deliver them, and exits 0.
func producer(out []byte, both bool) backend.Backend {
	return backendtest.New("mem", func(_ string, req backend.ExecRequest, sink backend.Sink) (int, error) {
		if !strings.HasPrefix(req.Command, "produce") {
			return 0, fmt.Errorf("%w: the producer runs only produce", backend.ErrInvalidRequest)
		}
		const piece = 64 << 10
		for p := out; len(p) > 0; {
			n := min(piece, len(p))
			sink.Write(backend.Stdout, p[:n])
			if both {
				sink.Write(backend.Stderr, p[:n])
			}
			p = p[n:]
		}
		return 0, nil
	})
}
