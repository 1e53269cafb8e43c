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
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
)

// fakeAgent records what reaches the agent; the fuzz target checks that
// only well-formed requests do.
type fakeAgent struct {
	mu    sync.Mutex
	write []byte
	exec  *agentapi.ExecRequest
	calls int
}

func (f *fakeAgent) record(req *agentapi.ExecRequest, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.exec, f.write = req, data
}

func (f *fakeAgent) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.exec, f.write = 0, nil, nil
}

func (f *fakeAgent) Open(context.Context, string, string) (agentapi.Handle, error) {
	f.record(nil, nil)
	return agentapi.Handle{ID: "h_fakefakefakefakefakefakefa", SandboxID: "sbx-fake", Expires: time.Unix(0, 0)}, nil
}

func (f *fakeAgent) Close(context.Context, string, string) error { f.record(nil, nil); return nil }

func (f *fakeAgent) Exec(_ context.Context, _, _ string, req agentapi.ExecRequest) (agentapi.ExecResult, error) {
	f.record(&req, nil)
	return agentapi.ExecResult{Stdout: []byte("out\xff"), Stderr: req.Stdin}, nil
}

func (f *fakeAgent) StartJob(_ context.Context, _, _ string, req agentapi.ExecRequest) (agentapi.JobInfo, error) {
	f.record(&req, nil)
	return agentapi.JobInfo{ID: "job_fakefakefakefakefakefakefa", State: agentapi.JobRunning}, nil
}

func (f *fakeAgent) Poll(_ context.Context, req agentapi.PollRequest, _ string) (agentapi.PollResponse, error) {
	f.record(nil, nil)
	if req.Cursor == "bad" {
		return agentapi.PollResponse{}, &agentapi.Error{Code: agentapi.CodeInvalid, Message: "bad cursor"}
	}
	return agentapi.PollResponse{
		Job:    agentapi.JobInfo{ID: "job_fakefakefakefakefakefakefa", State: agentapi.JobExited, Result: &agentapi.JobResult{}},
		Chunks: []agentapi.Chunk{{Stream: "stdout", Seq: 0, Encoding: "text", Data: "x"}, {Stream: "stderr", Seq: 1, Encoding: "base64", Data: "/w=="}},
		Done:   true, NextCursor: "2.2",
	}, nil
}

func (f *fakeAgent) Cancel(context.Context, string, string) (agentapi.JobInfo, error) {
	f.record(nil, nil)
	return agentapi.JobInfo{ID: "job_fakefakefakefakefakefakefa", State: agentapi.JobCancelling}, nil
}

func (f *fakeAgent) Input(context.Context, string, string, []byte, bool) (agentapi.JobInfo, error) {
	f.record(nil, nil)
	return agentapi.JobInfo{ID: "job_fakefakefakefakefakefakefa", State: agentapi.JobRunning}, nil
}

func (f *fakeAgent) Resize(context.Context, string, string, int, int) (agentapi.JobInfo, error) {
	f.record(nil, nil)
	return agentapi.JobInfo{ID: "job_fakefakefakefakefakefakefa", State: agentapi.JobRunning}, nil
}

func (f *fakeAgent) Screen(context.Context, string, string, int) (agentapi.Screen, error) {
	f.record(nil, nil)
	return agentapi.Screen{Rows: 1, Cols: 1, Lines: []string{""}}, nil
}

func (f *fakeAgent) Activity(context.Context, string, string) (agentapi.Activity, error) {
	f.record(nil, nil)
	return agentapi.Activity{}, nil
}

func (f *fakeAgent) ReadRange(context.Context, string, string, string, string, int64, int) (agentapi.FileContent, error) {
	f.record(nil, nil)
	return agentapi.FileContent{Path: "/f"}, nil
}

func (f *fakeAgent) Digest(context.Context, string, string, string, string) (agentapi.FileDigest, error) {
	f.record(nil, nil)
	return agentapi.FileDigest{Path: "/f"}, nil
}

func (f *fakeAgent) Append(_ context.Context, _, _, _, _ string, data []byte) (agentapi.FileInfo, error) {
	f.record(nil, data)
	return agentapi.FileInfo{Path: "/f", Size: len(data)}, nil
}

func (f *fakeAgent) WriteAt(_ context.Context, _, _, _, _ string, _ int64, data []byte) (agentapi.FileInfo, error) {
	f.record(nil, data)
	return agentapi.FileInfo{Path: "/f", Size: len(data)}, nil
}

func (f *fakeAgent) Read(_ context.Context, _, _, path, _ string) (agentapi.FileContent, error) {
	f.record(nil, nil)
	data := []byte(path)
	if strings.HasSuffix(path, ".bin") {
		data = append(data, 0xff, 0)
	}
	return agentapi.FileContent{Path: path, Data: data, Size: len(data), MIME: hostagent.DetectMIME(path, data)}, nil
}

func (f *fakeAgent) Write(_ context.Context, _, _, path, _ string, data []byte) (agentapi.FileInfo, error) {
	f.record(nil, data)
	return agentapi.FileInfo{Path: "/home/" + path, Size: len(data), MIME: hostagent.DetectMIME(path, data)}, nil
}

type fakeRouter struct{ agent *fakeAgent }

func (r fakeRouter) Route(context.Context, *mcp.CallToolRequest) (Route, error) {
	return Route{Tenant: "ns/fuzz", SandboxID: "sbx-fake", Agent: r.agent}, nil
}

// session serves the tools over an in-memory transport.
func session(tb testing.TB) (*mcp.ClientSession, *fakeAgent) {
	tb.Helper()
	agent := &fakeAgent{}
	server := mcp.NewServer(&mcp.Implementation{Name: "fuzz", Version: "v0"}, nil)
	Register(server, Options{Router: fakeRouter{agent}, ProgressInterval: time.Hour})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return cs, agent
}

// errorCodes are the prefixes of every tool error message.
var errorCodes = []string{"invalid_argument:", "not_found:", "too_large:", "resource_exhausted:", "unavailable:", "internal:", "unauthenticated:"}

// FuzzToolArguments sends arbitrary arguments to every tool: none may cause
// a protocol error or a panic, every refusal must be a coded tool error, and
// what reaches the agent must be well-formed (a write's bytes exactly the
// decoded payload, within the limit).
func FuzzToolArguments(f *testing.F) {
	seeds := map[string][]string{
		"open_session":  {`{}`, `null`, `{"tenant":"other/ns"}`},
		"close_session": {`{"handle":"h_abcabcabcabcabcabcabcabcaa"}`, `{"handle":""}`, `{"handle":"../../etc"}`},
		"exec": {`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"ls"}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"x","shell":"clean","cwd":"/tmp","timeout_seconds":5}`,
			`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"x","stdin":"a","stdin_base64":"YQ=="}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"x","stdin_base64":"_-8"}`,
			`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"x","timeout_seconds":-1}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"x","timeout_seconds":1e30}`},
		"job_exec":   {`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"sleep 1"}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","command":"x","timeout_seconds":86401}`},
		"job_poll":   {`{"job_id":"job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}`, `{"job_id":"job_aaaaaaaaaaaaaaaaaaaaaaaaaa","cursor":"bad","max_bytes":99999999}`, `{"job_id":"job_aaaaaaaaaaaaaaaaaaaaaaaaaa","wait_seconds":31}`},
		"job_cancel": {`{"job_id":"job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}`, `{"job_id":"a b"}`},
		"read":       {`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f.txt"}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"img.png"}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"x.bin","cwd":"d"}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":""}`},
		"write": {`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","text":"hi"}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","base64":"aGk="}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","base64":"aGk"}`,
			`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","base64":"aG\nk="}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","text":"a","base64":"YQ=="}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f"}`,
			`{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","base64":"!!"}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","text":null}`, `{"handle":"h_aaaaaaaaaaaaaaaaaaaaaaaaaa","path":"f","text":""}`},
	}
	for i, name := range Names {
		for _, s := range seeds[name] {
			f.Add(uint8(i), []byte(s))
		}
		f.Add(uint8(i), []byte(`[1,2]`))
		f.Add(uint8(i), []byte(`"x"`))
	}
	cs, agent := session(f)
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		if !json.Valid(args) {
			return
		}
		name := Names[int(which)%len(Names)]
		agent.reset()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s %s: protocol error %v", name, args, err)
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if res.IsError {
			ok := false
			for _, c := range errorCodes {
				ok = ok || strings.HasPrefix(text, c)
			}
			if !ok {
				t.Fatalf("%s %s: tool error without a code: %q", name, args, text)
			}
			if name == "write" || name == "exec" || name == "job_exec" {
				if agent.calls != 0 {
					t.Fatalf("%s %s: refused, yet the agent was called", name, args)
				}
			}
			return
		}
		var in map[string]any
		_ = json.Unmarshal(args, &in)
		switch name {
		case "write":
			var want []byte
			if s, ok := in["text"].(string); ok {
				want = []byte(s)
			} else {
				want = decodeAny(t, in["base64"].(string))
			}
			if !bytes.Equal(agent.write, want) || len(agent.write) > MaxFileBytes {
				t.Fatalf("write %s: the agent got %q, want %q", args, agent.write, want)
			}
		case "exec", "job_exec":
			req := agent.exec
			if req == nil || req.Command != in["command"] || (req.Shell != "login" && req.Shell != "clean") ||
				req.Timeout < 0 || req.Timeout > bounds.MaxTimeout || len(req.Stdin) > MaxFileBytes {
				t.Fatalf("%s %s: the agent got %+v", name, args, req)
			}
			if name == "exec" && req.Timeout == 0 {
				t.Fatalf("exec %s without a timeout", args)
			}
		}
	})
}

// decodeAny decodes base64 in any of the variants write accepts, with the
// standard library alone.
func decodeAny(t *testing.T, s string) []byte {
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune(" \t\r\n", r) {
			return -1
		}
		return r
	}, s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b
		}
	}
	t.Fatalf("write accepted %q, which is no base64", s)
	return nil
}

// FuzzDecodeBase64 checks that every variant of base64 write accepts
// decodes to the bytes encoded, and that any text decodes within the limit
// or is refused.
func FuzzDecodeBase64(f *testing.F) {
	f.Add([]byte("hello"), uint8(0), "aGVsbG8=")
	f.Add([]byte{0xff, 0xfe, 0}, uint8(3), "__4A")
	f.Add([]byte{}, uint8(1), "")
	f.Fuzz(func(t *testing.T, data []byte, variant uint8, text string) {
		encs := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
		enc := encs[int(variant)%len(encs)].EncodeToString(data)
		if variant&4 != 0 {
			// MIME-style line breaks.
			var b strings.Builder
			for i := 0; i < len(enc); i += 76 {
				b.WriteString(enc[i:min(i+76, len(enc))])
				b.WriteString("\r\n")
			}
			enc = b.String()
		}
		got, err := decodeBase64("base64", enc, MaxFileBytes)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%q (variant %d) decoded to %q, %v; want %q", enc, variant, got, err, data)
		}
		if b, err := decodeBase64("base64", text, 64); err == nil && len(b) > 64 {
			t.Fatalf("%q decoded to %d bytes, over the limit", text, len(b))
		}
	})
}

func TestClarifyArguments(t *testing.T) {
	for in, want := range map[string]string{
		`validating "arguments": validating root: validating /properties/timeout_seconds: minimum: -3/1 is less than 0.000000`:            "invalid_argument: read: argument timeout_seconds is -3, but it must be at least 0 (the seconds after which",
		`validating "arguments": validating root: validating /properties/timeout_seconds: maximum: 100000/1 is greater than 86400.000000`: "invalid_argument: read: argument timeout_seconds is 100000, but it must be at most 86400 (",
		`validating "arguments": validating root: validating /properties/max_bytes: minimum: -1/2 is less than 0.000000`:                  "invalid_argument: read: argument max_bytes is -0.500, but it must be at least 0 (",
		`validating "arguments": validating root: validating /properties/timeout_seconds: type: 1.5 has type "number", want "integer"`:    "invalid_argument: read: argument timeout_seconds must be a whole number (",
		`validating "arguments": validating root: required: missing properties: ["path"]`:                                                 "invalid_argument: read: missing required argument path;",
		`validating "arguments": validating root: unexpected additional properties ["tenant"]`:                                            `invalid_argument: read: unknown argument "tenant";`,
		`validating "arguments": validating root: validating /properties/shell: enum: x does not equal any of:`:                           "invalid_argument: read: argument shell is invalid: enum",
	} {
		got, ok := clarifyArguments("read", in)
		if !ok || !strings.HasPrefix(got, want) {
			t.Errorf("%s\n  became %s\n  want   %s...", in, got, want)
		}
	}
}

// TestIDFlaws: a refused handle or job ID is told what is wrong with it,
// never quoted whole.
func TestIDFlaws(t *testing.T) {
	good := agentapi.NewHandle()
	for _, tc := range []struct{ id, want string }{
		{"x" + good[1:], "handle does not start with h_ (IDs Playground issues are h_ and 26 characters of a to z and 2 to 7)"},
		{good[:10] + "8" + good[11:], "handle has '8' at position 11, a character no ID has (IDs Playground issues are h_ and 26"},
		{good[:10] + "Q" + good[11:], "handle has 'Q' at position 11"},
		{good[:10] + "\xff" + good[11:], "handle has byte 0xff at position 11"},
		{good[:len(good)-1], "handle has 25 characters after h_, not 26"},
		{good + "a", "handle has 27 characters after h_, not 26"},
	} {
		err := checkHandle(tc.id)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), tc.id[2:]) {
			t.Errorf("%q: %v, want %q... without the ID", tc.id, err, tc.want)
		}
	}
	if err := checkHandle(good); err != nil {
		t.Errorf("%s refused: %v", good, err)
	}
	if err := checkJobID("job_" + strings.Repeat("a", 25) + "1"); err == nil || !strings.Contains(err.Error(), "job_id has '1' at position 30") {
		t.Errorf("job ID: %v", err)
	}
}
