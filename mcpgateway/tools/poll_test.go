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
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// pageAgent answers every poll with page and records the request.
type pageAgent struct {
	fakeAgent
	page agentapi.PollResponse

	mu  sync.Mutex
	got *agentapi.PollRequest
}

func (p *pageAgent) Poll(_ context.Context, req agentapi.PollRequest, _ string) (agentapi.PollResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = &req
	return p.page, nil
}

type agentRouter struct{ agent Agent }

func (r agentRouter) Route(context.Context, *mcp.CallToolRequest) (Route, error) {
	return Route{Tenant: "ns/test", SandboxID: "sbx-test", Agent: r.agent}, nil
}

// sessionWith serves the tools with agent over an in-memory transport.
func sessionWith(tb testing.TB, agent Agent) *mcp.ClientSession {
	tb.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	Register(server, Options{Router: agentRouter{agent}, ProgressInterval: time.Hour})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return cs
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// outputSchema returns a tool's output schema as a client sees it.
func listedOutputSchema(t *testing.T, cs *mcp.ClientSession, name string) *jsonschema.Resolved {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != name {
			continue
		}
		raw, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// bigPage is a page of over 64 KiB: stdout text with multi-byte characters
// around the cuts, a base64 stderr chunk in the middle, and a distinct
// first and last line.
func bigPage() agentapi.PollResponse {
	var chunks []agentapi.Chunk
	seq := uint64(0)
	add := func(stream, enc, data string) {
		chunks = append(chunks, agentapi.Chunk{Stream: stream, Seq: seq, Encoding: enc, Data: data})
		seq++
	}
	add("stdout", "text", "FIRST LINE <tag> & more\n")
	for range 40 {
		add("stdout", "text", strings.Repeat("héllo wörld ✓ 🙂\n", 2000/19)+"\n")
	}
	add("stderr", "base64", base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\xff\x00binary", 3000))))
	for range 40 {
		add("stdout", "text", strings.Repeat("ünïcödé\n", 250))
	}
	add("stdout", "text", "LAST LINE\n")
	return agentapi.PollResponse{
		Job:        agentapi.JobInfo{ID: "job_bigbigbigbigbigbigbigbigba", State: agentapi.JobRunning},
		Chunks:     chunks,
		NextCursor: "82.0",
	}
}

// TestJobPollLargePage: a page over 64 KiB comes whole and byte-exact in
// the structured chunks, which match the advertised output schema, while
// the text content shows its start and end and says how to read the rest.
func TestJobPollLargePage(t *testing.T) {
	agent := &pageAgent{page: bigPage()}
	cs := sessionWith(t, agent)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "job_poll", Arguments: map[string]any{"job_id": "job_bigbigbigbigbigbigbigbigba", "cursor": "3.0"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("job_poll failed: %s", textOf(res))
	}
	if err := listedOutputSchema(t, cs, "job_poll").Validate(res.StructuredContent); err != nil {
		t.Fatalf("the result does not match the output schema: %v", err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out JobPollOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, ch := range out.Chunks {
		want := agent.page.Chunks[i]
		if ch.Data != want.Data || ch.Encoding != want.Encoding || ch.Stream != want.Stream || ch.Seq != want.Seq {
			t.Fatalf("chunk %d differs from the agent's", i)
		}
		total += outputBytes(ch)
	}
	if len(out.Chunks) != len(agent.page.Chunks) || total <= pollTextFull {
		t.Fatalf("%d chunks, %d bytes: want all %d chunks, over %d bytes", len(out.Chunks), total, len(agent.page.Chunks), pollTextFull)
	}

	text := textOf(res)
	if len(text) > 2*pollTextExcerpt+2048 {
		t.Fatalf("the text content is %d bytes; want the excerpts only", len(text))
	}
	for _, want := range []string{
		"job job_bigbigbigbigbigbigbigbigba: running\n",
		"--- stdout ---\nFIRST LINE <tag> & more\n",
		"LAST LINE\n",
		"bytes of output are not repeated in this text",
		`poll with cursor "3.0" and max_bytes 65536`,
		`next_cursor: "82.0"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text content lacks %q", want)
		}
	}
	if !utf8.ValidString(text) {
		t.Error("the text content is not valid UTF-8: an excerpt cut a character")
	}
}

// TestJobPollSmallPageText: a page of at most 64 KiB is repeated whole in
// the text content, for clients that show a model only that.
func TestJobPollSmallPageText(t *testing.T) {
	page := agentapi.PollResponse{
		Job: agentapi.JobInfo{ID: "job_sssssssssssssssssssssssssa", State: agentapi.JobExited, Result: &agentapi.JobResult{ExitStatus: agentapi.ExitStatus{ExitCode: 2}}},
		Chunks: []agentapi.Chunk{
			{Stream: "stdout", Seq: 0, Encoding: "text", Data: "partial"},
			{Stream: "stderr", Seq: 1, Encoding: "text", Data: "oops\n"},
			{Stream: "stdout", Seq: 2, Encoding: "base64", Data: "/w=="},
			{Stream: "stdout", Seq: 3, Encoding: "text", Data: strings.Repeat("x", pollTextFull-20)},
		},
		Done: true, NextCursor: "4.0",
	}
	cs := sessionWith(t, &pageAgent{page: page})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "job_poll", Arguments: map[string]any{"job_id": "job_sssssssssssssssssssssssssa"}})
	if err != nil || res.IsError {
		t.Fatalf("job_poll: %v %s", err, textOf(res))
	}
	want := "job job_sssssssssssssssssssssssssa: exited, exit_code 2\n" +
		"--- stdout ---\npartial\n" +
		"--- stderr ---\noops\n" +
		"--- stdout chunk 2 (not valid UTF-8: base64) ---\n/w==\n" +
		"--- stdout ---\n" + strings.Repeat("x", pollTextFull-20) + "\n" +
		"done: this is all of the job's output. Poll once more with cursor \"4.0\" to acknowledge it.\n"
	if got := textOf(res); got != want {
		t.Fatalf("text content:\n%.300s\nwant\n%.300s", got, want)
	}
}

// TestJobPollArguments: job_poll treats its arguments as the SDK treats a
// typed tool's: defaults applied, the schema enforced, the messages
// rewritten alike.
func TestJobPollArguments(t *testing.T) {
	agent := &pageAgent{page: agentapi.PollResponse{Job: agentapi.JobInfo{ID: "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", State: agentapi.JobRunning}}}
	cs := sessionWith(t, agent)
	call := func(args any) (string, bool) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "job_poll", Arguments: args})
		if err != nil {
			t.Fatalf("%v: protocol error %v", args, err)
		}
		return textOf(res), res.IsError
	}
	if text, isErr := call(map[string]any{"job_id": "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}); isErr {
		t.Fatalf("job_poll: %s", text)
	}
	if agent.got == nil || agent.got.Wait != DefaultPollWait || agent.got.MaxBytes != 0 || agent.got.Tenant != "ns/test" {
		t.Fatalf("the agent got %+v; want the default wait of %s", agent.got, DefaultPollWait)
	}
	for _, tc := range []struct {
		args any
		want string
	}{
		{map[string]any{}, "invalid_argument: job_poll: missing required argument job_id;"},
		{json.RawMessage(`null`), "invalid_argument: job_poll: missing required argument job_id;"},
		{map[string]any{"job_id": "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "tenant": "x"}, `invalid_argument: job_poll: unknown argument "tenant";`},
		{map[string]any{"job_id": "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "wait_seconds": 31}, "invalid_argument: job_poll: argument wait_seconds is 31, but it must be at most 30 (how long"},
		{map[string]any{"job_id": "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "max_bytes": "many"}, "invalid_argument: job_poll: argument max_bytes must be a whole number"},
		{map[string]any{"job_id": ""}, "invalid_argument: job_poll: argument job_id is invalid: minLength"},
		{json.RawMessage(`[1]`), "invalid_argument: job_poll:"},
	} {
		text, isErr := call(tc.args)
		if !isErr || !strings.HasPrefix(text, tc.want) {
			t.Errorf("%v: got %q (error %v), want %q...", tc.args, text, isErr, tc.want)
		}
	}
}

// TestExcerpts checks the cuts of large pages: the head is a prefix of the
// page and the tail a suffix, each piece decodes, and head, omitted and
// tail add up to the page's bytes.
func TestExcerpts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\n", "é", "✓", "🙂", "\x00"}
	for range 300 {
		var chunks []Chunk
		size := 0
		for size <= 2*1000 || rng.IntN(4) > 0 {
			n := 1 + rng.IntN(900)
			var ch Chunk
			if rng.IntN(4) == 0 {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(rng.IntN(256))
				}
				ch = Chunk{Stream: "stderr", Encoding: encodingBase64, Data: base64.StdEncoding.EncodeToString(b)}
			} else {
				var s strings.Builder
				for s.Len() < n {
					s.WriteString(alphabet[rng.IntN(len(alphabet))])
				}
				ch = Chunk{Stream: "stdout", Encoding: encodingText, Data: s.String()}
			}
			ch.Seq = uint64(len(chunks))
			chunks = append(chunks, ch)
			size += outputBytes(ch)
			if size > 20000 {
				break
			}
		}
		orig := append([]Chunk(nil), chunks...)
		head, tail, omitted := excerpts(chunks, 1000)
		for i := range chunks {
			if chunks[i] != orig[i] {
				t.Fatal("excerpts modified the chunks")
			}
		}
		shown := 0
		for _, ch := range append(append([]Chunk(nil), head...), tail...) {
			if ch.Encoding == encodingText && !utf8.ValidString(ch.Data) {
				t.Fatalf("cut inside a character: %q", ch.Data)
			}
			if ch.Encoding == encodingBase64 {
				if _, err := base64.StdEncoding.DecodeString(ch.Data); err != nil {
					t.Fatalf("base64 cut inside a group: %v", err)
				}
			}
			shown += outputBytes(ch)
		}
		if shown+omitted != size {
			t.Fatalf("head and tail show %d bytes and %d are omitted, of %d", shown, omitted, size)
		}
		headLen, tailLen := 0, 0
		for i, ch := range head {
			headLen += len(ch.Data)
			if ch.Seq != chunks[i].Seq || !strings.HasPrefix(chunks[i].Data, ch.Data) || (i < len(head)-1 && ch.Data != chunks[i].Data) {
				t.Fatalf("head chunk %d is not a prefix of the page", i)
			}
		}
		for i, ch := range tail {
			tailLen += len(ch.Data)
			want := chunks[len(chunks)-len(tail)+i]
			if ch.Seq != want.Seq || !strings.HasSuffix(want.Data, ch.Data) || (i > 0 && ch.Data != want.Data) {
				t.Fatalf("tail chunk %d is not a suffix of the page", i)
			}
		}
		if headLen > 1000 || tailLen > 1000 || headLen < 1000-4 || tailLen < 1000-4 {
			t.Fatalf("excerpts of %d and %d characters; want about 1000", headLen, tailLen)
		}
	}
}
