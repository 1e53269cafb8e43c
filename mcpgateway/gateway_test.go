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

package mcpgateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// call invokes a tool and fails the test on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// callOK invokes a tool that must succeed and decodes its structured
// output into out.
func callOK(t *testing.T, cs *mcp.ClientSession, name string, args, out any) *mcp.CallToolResult {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, resultText(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

// callErr invokes a tool that must fail and returns its message.
func callErr(t *testing.T, cs *mcp.ClientSession, name string, args any, want ...string) string {
	t.Helper()
	res := call(t, cs, name, args)
	msg := resultText(res)
	if !res.IsError {
		t.Fatalf("%s: succeeded, want a tool error; got %s", name, msg)
	}
	t.Logf("%s: %s", name, msg)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: error %q does not say %q", name, msg, w)
		}
	}
	return msg
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pollAll polls a job to its end and returns its stdout and stderr bytes.
func pollAll(t *testing.T, cs *mcp.ClientSession, jobID, cursor string) (stdout, stderr []byte, final tools.JobPollOutput) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var p tools.JobPollOutput
		callOK(t, cs, "job_poll", map[string]any{"job_id": jobID, "cursor": cursor, "wait_seconds": 2}, &p)
		if p.Gap != nil {
			t.Fatalf("unexpected gap %+v", *p.Gap)
		}
		for _, ch := range p.Chunks {
			var data []byte
			switch ch.Encoding {
			case "text":
				data = []byte(ch.Data)
			case "base64":
				var err error
				if data, err = base64.StdEncoding.DecodeString(ch.Data); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("chunk encoding %q", ch.Encoding)
			}
			if ch.Stream == "stdout" {
				stdout = append(stdout, data...)
			} else {
				stderr = append(stderr, data...)
			}
		}
		cursor = p.NextCursor
		if p.Done {
			// Acknowledge the final page.
			callOK(t, cs, "job_poll", map[string]any{"job_id": jobID, "cursor": cursor, "wait_seconds": 0}, nil)
			return stdout, stderr, p
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not end; state %s", jobID, p.State)
		}
	}
}

func TestGateway(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	alice := newTenant(t, ns, "alice", n)
	bob := newTenant(t, ns, "bob", n)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)

	t.Run("tools/list", func(t *testing.T) {
		cs := connect(t, g.url, alice.token, nil)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			if tool.Description == "" {
				t.Errorf("%s has no description", tool.Name)
			}
			in, _ := json.Marshal(tool.InputSchema)
			out, _ := json.Marshal(tool.OutputSchema)
			var schema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			}
			if err := json.Unmarshal(in, &schema); err != nil || schema.Type != "object" {
				t.Errorf("%s: input schema %s", tool.Name, in)
			}
			for prop, s := range schema.Properties {
				if !bytes.Contains(s, []byte(`"description"`)) {
					t.Errorf("%s.%s has no description", tool.Name, prop)
				}
			}
			if tool.OutputSchema == nil || !bytes.Contains(out, []byte(`"properties"`)) {
				t.Errorf("%s: output schema %s", tool.Name, out)
			}
			switch tool.Name {
			case "exec":
				if !slices.Contains(schema.Required, "command") || !slices.Contains(schema.Required, "handle") {
					t.Errorf("exec requires %v", schema.Required)
				}
				if !bytes.Contains(in, []byte(`"enum":["login","clean"]`)) {
					t.Errorf("exec's shell is not an enum: %s", in)
				}
			case "write":
				if slices.Contains(schema.Required, "text") || slices.Contains(schema.Required, "base64") {
					t.Errorf("write requires %v", schema.Required)
				}
			}
		}
		slices.Sort(names)
		want := slices.Clone(tools.Names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Fatalf("tools %v, want exactly %v", names, want)
		}
	})

	t.Run("user story", func(t *testing.T) {
		cs := connect(t, g.url, alice.token, nil)
		var open tools.OpenSessionOutput
		callOK(t, cs, "open_session", map[string]any{}, &open)
		if open.SandboxID != alice.sandboxID || open.Handle == "" {
			t.Fatalf("open_session: %+v, want sandbox %s", open, alice.sandboxID)
		}
		h := open.Handle

		var ex tools.ExecOutput
		callOK(t, cs, "exec", map[string]any{"handle": h, "command": "mkdir -p work && echo hello; echo oops >&2; exit 3"}, &ex)
		if ex.ExitCode != 3 || ex.Stdout != "hello\n" || ex.Stderr != "oops\n" || ex.StdoutEncoding != "text" {
			t.Fatalf("exec: %+v", ex)
		}

		// 3 MiB of random bytes through write and read, byte-identical.
		data := make([]byte, tools.MaxFileBytes)
		_, _ = rand.Read(data)
		var w tools.WriteOutput
		callOK(t, cs, "write", map[string]any{"handle": h, "path": "work/random.bin", "base64": base64.StdEncoding.EncodeToString(data)}, &w)
		if w.Size != len(data) || w.SHA256 != sha(data) || !strings.HasSuffix(w.Path, "/work/random.bin") || !strings.HasPrefix(w.Path, "/") {
			t.Fatalf("write: %+v", w)
		}
		var r tools.ReadOutput
		res := callOK(t, cs, "read", map[string]any{"handle": h, "path": "random.bin", "cwd": "work"}, &r)
		// read answers the absolute path, as write does.
		if r.Content != "blob" || r.Size != len(data) || r.SHA256 != sha(data) || r.Path != w.Path {
			t.Fatalf("read: %+v, want the path %s", r, w.Path)
		}
		var got []byte
		for _, c := range res.Content {
			if er, ok := c.(*mcp.EmbeddedResource); ok {
				got = er.Resource.Blob
				if er.Resource.MIMEType == "" || !strings.HasPrefix(er.Resource.URI, "sandbox://"+alice.sandboxID+"/") {
					t.Errorf("resource %s %s", er.Resource.URI, er.Resource.MIMEType)
				}
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, not the %d written", len(got), len(data))
		}

		// Text comes back as text, images as images.
		callOK(t, cs, "write", map[string]any{"handle": h, "path": "work/notes.txt", "text": "héllo, world\n"}, nil)
		res = callOK(t, cs, "read", map[string]any{"handle": h, "path": "work/notes.txt"}, &r)
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "héllo, world\n" || r.Content != "text" {
			t.Fatalf("read text: %+v %+v", res.Content[0], r)
		}
		png := tinyPNG()
		callOK(t, cs, "write", map[string]any{"handle": h, "path": "work/dot.png", "base64": base64.StdEncoding.EncodeToString(png)}, nil)
		res = callOK(t, cs, "read", map[string]any{"handle": h, "path": "work/dot.png"}, &r)
		if ic, ok := res.Content[0].(*mcp.ImageContent); !ok || !bytes.Equal(ic.Data, png) || ic.MIMEType != "image/png" || r.Content != "image" {
			t.Fatalf("read image: %+v %+v", res.Content[0], r)
		}
		callOK(t, cs, "write", map[string]any{"handle": h, "path": "work/empty.txt", "text": ""}, &w)
		if w.Size != 0 {
			t.Fatalf("empty write: %+v", w)
		}

		// A job, polled to its end: complete output, in order.
		var j tools.JobExecOutput
		callOK(t, cs, "job_exec", map[string]any{"handle": h, "command": "for i in $(seq 1 500); do echo line $i; done; echo err >&2; sleep 0.3; echo end"}, &j)
		if j.State != "running" || j.JobID == "" {
			t.Fatalf("job_exec: %+v", j)
		}
		stdout, stderr, final := pollAll(t, cs, j.JobID, j.Cursor)
		var want strings.Builder
		for i := 1; i <= 500; i++ {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		want.WriteString("end\n")
		if string(stdout) != want.String() || string(stderr) != "err\n" {
			t.Fatalf("job output: %d bytes of stdout (want %d), stderr %q", len(stdout), want.Len(), stderr)
		}
		if final.State != "exited" || final.Result == nil || final.Result.ExitCode != 0 {
			t.Fatalf("job ended %+v %+v", final, final.Result)
		}

		// Closing keeps the sandbox; the next session finds it as it was.
		callOK(t, cs, "close_session", map[string]any{"handle": h}, nil)
		callErr(t, cs, "exec", map[string]any{"handle": h, "command": "true"}, "not_found", "open_session")
		var again tools.OpenSessionOutput
		callOK(t, cs, "open_session", map[string]any{}, &again)
		if again.SandboxID != open.SandboxID || again.Handle == h {
			t.Fatalf("reopened %+v after %+v", again, open)
		}
		callOK(t, cs, "exec", map[string]any{"handle": again.Handle, "command": "sha256sum work/random.bin", "shell": "clean"}, &ex)
		if !strings.HasPrefix(ex.Stdout, sha(data)) {
			t.Fatalf("after reopening: %q", ex.Stdout)
		}
		callOK(t, cs, "close_session", map[string]any{"handle": again.Handle}, nil)
	})

	t.Run("bytes and refusals", func(t *testing.T) {
		cs := connect(t, g.url, alice.token, nil)
		var open tools.OpenSessionOutput
		callOK(t, cs, "open_session", nil, &open)
		h := open.Handle
		defer callOK(t, cs, "close_session", map[string]any{"handle": h}, nil)

		// Output that is not UTF-8 comes back byte for byte.
		raw := []byte{0xff, 0xfe, 'a', 0, 0x80, '\n'}
		var ex tools.ExecOutput
		callOK(t, cs, "exec", map[string]any{"handle": h, "command": `printf '\377\376a\000\200\n'; printf '\351t\351' >&2`}, &ex)
		out, err := base64.StdEncoding.DecodeString(ex.Stdout)
		if ex.StdoutEncoding != "base64" || err != nil || !bytes.Equal(out, raw) {
			t.Fatalf("stdout %q (%s), want %q", ex.Stdout, ex.StdoutEncoding, raw)
		}
		errOut, _ := base64.StdEncoding.DecodeString(ex.Stderr)
		if ex.StderrEncoding != "base64" || !bytes.Equal(errOut, []byte{0xe9, 't', 0xe9}) {
			t.Fatalf("stderr %q (%s)", ex.Stderr, ex.StderrEncoding)
		}
		// ... from jobs too, and stdin takes bytes.
		var j tools.JobExecOutput
		callOK(t, cs, "job_exec", map[string]any{"handle": h, "command": "cat", "stdin_base64": base64.StdEncoding.EncodeToString(raw)}, &j)
		jobOut, _, _ := pollAll(t, cs, j.JobID, j.Cursor)
		if !bytes.Equal(jobOut, raw) {
			t.Fatalf("job stdout %q, want %q", jobOut, raw)
		}

		// 3 MiB + 1 byte: refused both ways, never truncated.
		callOK(t, cs, "exec", map[string]any{"handle": h, "command": fmt.Sprintf("head -c %d /dev/zero > big.bin", tools.MaxFileBytes+1)}, nil)
		callErr(t, cs, "read", map[string]any{"handle": h, "path": "big.bin"}, "too_large", "refuses")
		big := base64.StdEncoding.EncodeToString(make([]byte, tools.MaxFileBytes+1))
		callErr(t, cs, "write", map[string]any{"handle": h, "path": "big2.bin", "base64": big}, "invalid_argument", "3 MiB")
		callErr(t, cs, "write", map[string]any{"handle": h, "path": "big3.txt", "text": strings.Repeat("x", tools.MaxFileBytes+1)}, "3 MiB")

		// Wrong arguments: each a clear tool error.
		callErr(t, cs, "write", map[string]any{"handle": h, "path": "x.txt", "text": "a", "base64": "YQ=="}, "both text and base64")
		callErr(t, cs, "write", map[string]any{"handle": h, "path": "x.txt"}, "neither text nor base64")
		callErr(t, cs, "write", map[string]any{"handle": h, "path": "x.bin", "base64": "not*base64!"}, "not valid base64")
		callErr(t, cs, "write", map[string]any{"handle": h, "text": "a"}, "path")
		callErr(t, cs, "write", map[string]any{"handle": h, "path": "no/such/dir/x.txt", "text": "a"}, "does not exist", "mkdir")
		callErr(t, cs, "read", map[string]any{"handle": h, "path": "no-such-file.txt"}, "not_found", "no such file")
		callErr(t, cs, "read", map[string]any{"handle": h}, "path")
		callErr(t, cs, "exec", map[string]any{"handle": h, "command": "pwd", "cwd": "/no/such/dir"}, "cwd", "/no/such/dir", "does not exist")
		callErr(t, cs, "read", map[string]any{"handle": h, "path": "x", "cwd": "/no/such/dir"}, "cwd", "does not exist")
		callErr(t, cs, "exec", map[string]any{"handle": h, "command": "true", "shell": "zsh"}, "shell")
		callErr(t, cs, "exec", map[string]any{"handle": h, "command": ""}, "command")
		callErr(t, cs, "exec", map[string]any{"handle": agentapi.NewHandle(), "command": "true"}, "not_found", "open_session")
		callErr(t, cs, "job_poll", map[string]any{"job_id": agentapi.NewJobID()}, "not_found")
		callErr(t, cs, "job_poll", map[string]any{"job_id": j.JobID, "cursor": "garbage"}, "cursor")
		// A tampered handle hears what is wrong with it; a bad timeout,
		// its bound in words.
		callErr(t, cs, "exec", map[string]any{"handle": h[:5] + "8" + h[6:], "command": "true"}, "invalid_argument", "handle has '8' at position 6, a character no ID has")
		callErr(t, cs, "exec", map[string]any{"handle": h, "command": "true", "timeout_seconds": -3}, "invalid_argument", "argument timeout_seconds is -3, but it must be at least 0")
		// The pile is append-only: write cannot replace or create a file there.
		callErr(t, cs, "write", map[string]any{"handle": h, "path": "/pile/notes.txt", "text": "a"}, "invalid_argument", "in the pile", "append-only", ">>")
		for _, bad := range []string{"bad id with spaces", ".", "..", "../x", "h_nope", j.JobID + "/.."} {
			callErr(t, cs, "job_cancel", map[string]any{"job_id": bad}, "invalid_argument", "IDs Playground issues are")
			callErr(t, cs, "exec", map[string]any{"handle": bad, "command": "true"}, "invalid_argument", "IDs Playground issues are")
		}

		// A timeout is a result, not an error.
		callOK(t, cs, "exec", map[string]any{"handle": h, "command": "echo started; sleep 30", "timeout_seconds": 1}, &ex)
		if !ex.TimedOut || ex.Stdout != "started\n" {
			t.Fatalf("timed-out exec: %+v", ex)
		}
	})

	t.Run("progress", func(t *testing.T) {
		var mu sync.Mutex
		var notes []*mcp.ProgressNotificationParams
		cs := connect(t, g.url, alice.token, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				notes = append(notes, req.Params)
				mu.Unlock()
			},
		})
		var open tools.OpenSessionOutput
		callOK(t, cs, "open_session", nil, &open)
		params := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": open.Handle, "command": "sleep 1.5; echo done"}}
		params.SetProgressToken("exec-1")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || res.IsError {
			t.Fatalf("exec: %v %s", err, resultText(res))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(notes) < 3 {
			t.Fatalf("%d progress notifications during a 1.5 s exec, want one every 200 ms", len(notes))
		}
		for i, p := range notes {
			if p.ProgressToken != "exec-1" || (i > 0 && p.Progress <= notes[i-1].Progress) || p.Message == "" {
				t.Fatalf("notification %d: %+v", i, p)
			}
		}
		callOK(t, cs, "close_session", map[string]any{"handle": open.Handle}, nil)
	})

	t.Run("a call given up kills its command", func(t *testing.T) {
		cs := connect(t, g.url, alice.token, nil)
		var open tools.OpenSessionOutput
		callOK(t, cs, "open_session", nil, &open)
		count := `n=0; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^sleep 1234' && n=$((n+1)); done; echo $n`
		running := func(want string) func() error {
			return func() error {
				var ex tools.ExecOutput
				callOK(t, cs, "exec", map[string]any{"handle": open.Handle, "command": count}, &ex)
				if ex.Stdout != want+"\n" {
					return fmt.Errorf("%s processes of it, want %s", strings.TrimSpace(ex.Stdout), want)
				}
				return nil
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": open.Handle, "command": "sleep 1234; echo finished", "timeout_seconds": 20}})
			errc <- err
		}()
		waitFor(t, "the command to run", 15*time.Second, running("1"))
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("the call did not give up")
		}
		waitFor(t, "the abandoned command to be killed", 15*time.Second, running("0"))
		callOK(t, cs, "close_session", map[string]any{"handle": open.Handle}, nil)
	})

	t.Run("cross-tenant", func(t *testing.T) {
		a := connect(t, g.url, alice.token, nil)
		b := connect(t, g.url, bob.token, nil)
		var ao, bo tools.OpenSessionOutput
		callOK(t, a, "open_session", nil, &ao)
		callOK(t, b, "open_session", nil, &bo)
		if bo.SandboxID == ao.SandboxID {
			t.Fatal("alice and bob share a sandbox")
		}
		const secret = "alice-secret-7d1f"
		callOK(t, a, "write", map[string]any{"handle": ao.Handle, "path": "secret.txt", "text": secret}, nil)
		var aj tools.JobExecOutput
		callOK(t, a, "job_exec", map[string]any{"handle": ao.Handle, "command": "echo " + secret + "; sleep 60"}, &aj)

		leaks := []string{secret, ao.SandboxID, alice.String(), "alice"}
		matrix := []struct {
			tool string
			args map[string]any
		}{
			{"exec", map[string]any{"handle": ao.Handle, "command": "cat secret.txt"}},
			{"job_exec", map[string]any{"handle": ao.Handle, "command": "cat secret.txt"}},
			{"read", map[string]any{"handle": ao.Handle, "path": "secret.txt"}},
			{"write", map[string]any{"handle": ao.Handle, "path": "secret.txt", "text": "owned"}},
			{"job_poll", map[string]any{"job_id": aj.JobID, "cursor": ""}},
			{"job_cancel", map[string]any{"job_id": aj.JobID}},
			{"close_session", map[string]any{"handle": ao.Handle}},
		}
		for _, m := range matrix {
			msg := callErr(t, b, m.tool, m.args, "not_found")
			for _, l := range leaks {
				if strings.Contains(msg, l) {
					t.Errorf("bob's %s error leaks %q: %s", m.tool, l, msg)
				}
			}
		}
		// Alice's handle, job and file are untouched.
		var r tools.ReadOutput
		res := callOK(t, a, "read", map[string]any{"handle": ao.Handle, "path": "secret.txt"}, &r)
		if resultText(res) != secret {
			t.Fatalf("alice's file now %q", resultText(res))
		}
		// Its output is there, or comes: the job may not have echoed yet
		// on a loaded machine, and a poll that waits answers at its first
		// output.
		var p tools.JobPollOutput
		callOK(t, a, "job_poll", map[string]any{"job_id": aj.JobID, "wait_seconds": 20}, &p)
		if p.State != "running" || len(p.Chunks) == 0 || !strings.Contains(p.Chunks[0].Data, secret) {
			t.Fatalf("alice's job: %+v", p)
		}
		// Bob's own sandbox has no trace of alice's file.
		var ex tools.ExecOutput
		callOK(t, b, "exec", map[string]any{"handle": bo.Handle, "command": "cat secret.txt; id -un; echo $PERSONA"}, &ex)
		if strings.Contains(ex.Stdout+ex.Stderr, secret) {
			t.Fatalf("bob reads alice's secret: %+v", ex)
		}
		var c tools.JobCancelOutput
		callOK(t, a, "job_cancel", map[string]any{"job_id": aj.JobID}, &c)
		if c.State != "cancelling" && c.State != "killed" {
			t.Fatalf("cancel: %+v", c)
		}
		_, _, final := pollAll(t, a, aj.JobID, p.NextCursor)
		if final.State != "killed" || final.Result == nil || !final.Result.Killed {
			t.Fatalf("cancelled job ended %+v", final)
		}
		callOK(t, a, "close_session", map[string]any{"handle": ao.Handle}, nil)
		callOK(t, b, "close_session", map[string]any{"handle": bo.Handle}, nil)
	})

	t.Run("replicas", func(t *testing.T) {
		g1 := startGateway(t, mcpgateway.Options{})
		g2 := startGateway(t, mcpgateway.Options{})
		g1.waitReady(t)
		g2.waitReady(t)
		lb := newBalancer(g1, g2)
		cs, err := connectErr(g1.url, alice.token, lb, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		var open tools.OpenSessionOutput
		callOK(t, cs, "open_session", nil, &open)
		var j tools.JobExecOutput
		callOK(t, cs, "job_exec", map[string]any{"handle": open.Handle, "command": "for i in $(seq 1 40); do echo tick $i; sleep 0.05; done"}, &j)

		var stdout []byte
		cursor := j.Cursor
		for len(stdout) == 0 {
			var p tools.JobPollOutput
			callOK(t, cs, "job_poll", map[string]any{"job_id": j.JobID, "cursor": cursor, "wait_seconds": 1}, &p)
			for _, ch := range p.Chunks {
				stdout = append(stdout, ch.Data...)
			}
			cursor = p.NextCursor
		}
		served := lb.served()
		if served[0] == 0 || served[1] == 0 {
			t.Fatalf("requests per replica %v: the client did not alternate", served)
		}
		// Kill the first replica mid-job; the other carries on.
		lb.kill(0)
		g1.srv.CloseClientConnections()
		g1.srv.Close()
		rest, _, final := pollAll(t, cs, j.JobID, cursor)
		stdout = append(stdout, rest...)
		var want strings.Builder
		for i := 1; i <= 40; i++ {
			fmt.Fprintf(&want, "tick %d\n", i)
		}
		if string(stdout) != want.String() || final.State != "exited" {
			t.Fatalf("output through two replicas:\n%s\nwant\n%s", stdout, want.String())
		}
		callOK(t, cs, "close_session", map[string]any{"handle": open.Handle}, nil)
	})

	t.Run("stdio", func(t *testing.T) { testStdio(t, alice) })
}

// balancer spreads requests over gateway replicas, round robin over the
// live ones, as a Service would.
type balancer struct {
	mu    sync.Mutex
	hosts []string
	dead  []bool
	count []atomic.Int64
	next  int
}

func newBalancer(gs ...*gateway) *balancer {
	b := &balancer{dead: make([]bool, len(gs)), count: make([]atomic.Int64, len(gs))}
	for _, g := range gs {
		u, _ := url.Parse(g.srv.URL)
		b.hosts = append(b.hosts, u.Host)
	}
	return b
}

func (b *balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	i := b.next
	for b.dead[i%len(b.hosts)] {
		i++
	}
	i %= len(b.hosts)
	b.next = i + 1
	b.mu.Unlock()
	b.count[i].Add(1)
	r = r.Clone(r.Context())
	r.URL.Host = b.hosts[i]
	r.Host = b.hosts[i]
	return http.DefaultTransport.RoundTrip(r)
}

func (b *balancer) kill(i int) {
	b.mu.Lock()
	b.dead[i] = true
	b.mu.Unlock()
}

func (b *balancer) served() []int64 {
	out := make([]int64, len(b.count))
	for i := range b.count {
		out[i] = b.count[i].Load()
	}
	return out
}

// tinyPNG is a valid 1x1 PNG.
func tinyPNG() []byte {
	b, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
	return b
}

// TestUnregisteredEndpointRefused: a Sandbox whose status points anywhere
// but where its node's agent registered is not called, so that whoever can
// write a Sandbox's status cannot collect the gateway's agent token.
// TestLeaseNamespace: the gateway trusts the registrations of its lease
// namespace only: the same agent, registered elsewhere, is served by a
// gateway told that namespace and refused by one that is not.
func TestLeaseNamespace(t *testing.T) {
	leases := newNamespace(t)
	n := startNodeIn(t, leases)
	tn := newTenant(t, newNamespace(t), "elsewhere", n)
	told := startGateway(t, mcpgateway.Options{LeaseNamespace: leases})
	told.waitReady(t)
	untold := startGateway(t, mcpgateway.Options{})
	untold.waitReady(t)

	cs := connect(t, told.url, tn.token, nil)
	waitFor(t, "the gateway told the lease namespace to serve", 10*time.Second, func() error {
		if res := call(t, cs, "open_session", map[string]any{}); res.IsError {
			return fmt.Errorf("%w: %s", errNotYet, resultText(res))
		}
		return nil
	})
	other := connect(t, untold.url, tn.token, nil)
	callErr(t, other, "open_session", map[string]any{}, "no current agent registration")
}

func TestUnregisteredEndpointRefused(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	tn := newTenant(t, ns, "steered", n)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)

	// A listener that records whether the gateway ever calls it.
	called := make(chan string, 1)
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- r.Header.Get("Authorization"):
		default:
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer trap.Close()
	var sbx playgroundv1alpha1.Sandbox
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "steered"}, &sbx); err != nil {
		t.Fatal(err)
	}
	sbx.Status.Endpoint = trap.URL
	if err := k8s.Status().Update(context.Background(), &sbx); err != nil {
		t.Fatal(err)
	}

	cs := connect(t, g.url, tn.token, nil)
	waitFor(t, "the gateway to refuse the unregistered endpoint", 10*time.Second, func() error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "open_session", Arguments: map[string]any{}})
		if err != nil {
			return err
		}
		if !res.IsError || !strings.Contains(resultText(res), "no current agent registration") {
			return fmt.Errorf("%w: %s", errNotYet, resultText(res))
		}
		return nil
	})
	select {
	case auth := <-called:
		t.Fatalf("the gateway called an unregistered endpoint (Authorization %q)", auth)
	default:
	}
}

// TestCleartextAgentRefused: outside playground-dev the gateway speaks to
// no agent without TLS, even one its node registered: the node's token
// would cross the network in clear. The tenant hears that its node cannot
// be reached, the agent hears nothing.
func TestCleartextAgentRefused(t *testing.T) {
	var reached atomic.Int32
	n := startNodeWith(t, nodeOptions{leaseNS: agentlease.DefaultNamespace, protocol: agentapi.Current.String(), wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached.Add(1)
			h.ServeHTTP(w, r)
		})
	}})
	tn := newTenant(t, newNamespace(t), "clear", n)
	// A gateway that verifies agents (here with the system's roots), as
	// every gateway but playground-dev's.
	g := startGateway(t, mcpgateway.Options{AgentTLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	g.waitReady(t)
	cs := connect(t, g.url, tn.token, nil)
	waitFor(t, "the refusal", 10*time.Second, func() error {
		res := call(t, cs, "open_session", map[string]any{})
		if !res.IsError || !strings.Contains(resultText(res), "cannot reach your sandbox's node") {
			return fmt.Errorf("%w: %s", errNotYet, resultText(res))
		}
		return nil
	})
	if got := reached.Load(); got != 0 {
		t.Fatalf("the cleartext agent received %d requests", got)
	}
}

// TestNotReadySandboxSaysWhy: a tenant whose sandbox waits for what
// waiting does not bring (a FacultyBundle that does not exist, a signing
// key Secret that cannot be used) hears so from open_session, as its
// Sandbox's status says it, not that no such sandbox exists, and not to
// retry in a few seconds. The node's agent has the sandbox's ID and
// endpoint in the status but serves no sandbox under it yet, as while it
// waits.
func TestNotReadySandboxSaysWhy(t *testing.T) {
	ctx := context.Background()
	n := startNode(t)
	ns := newNamespace(t)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition // what the agent and the manager write
		want  string
	}{{
		name: "faculty",
		conds: []metav1.Condition{{Type: playgroundv1alpha1.ProvisionedCondition, Reason: playgroundv1alpha1.ReasonFacultyUnavailable,
			Message: "Not started: waiting does not bring faculty bundles it lists to node " + n.name + ": FacultyBundle tools does not exist in namespace " + ns + ": create it, or remove it from the Tenant's spec.sandbox.faculties"}},
		want: "unavailable: your sandbox is not ready: FacultyUnavailable: Not started: waiting does not bring faculty bundles it lists to node " + n.name + ": FacultyBundle tools does not exist in namespace " + ns,
	}, {
		name: "key",
		conds: []metav1.Condition{
			{Type: playgroundv1alpha1.ProvisionedCondition, Reason: playgroundv1alpha1.ReasonWaitingForSigningKey, Message: "Waiting for the signing key of Secret team-key"},
			{Type: playgroundv1alpha1.SigningKeyDeliveredCondition, Reason: playgroundv1alpha1.ReasonSigningKeyRefused, Message: "Secret team-key does not exist in namespace " + ns + ": create it"},
		},
		want: "unavailable: your sandbox is not ready: SigningKeyRefused: Secret team-key does not exist in namespace " + ns + ": create it",
	}, {
		name: "image",
		conds: []metav1.Condition{{Type: playgroundv1alpha1.ProvisionedCondition, Reason: playgroundv1alpha1.ReasonImagePathEscapes,
			Message: "layer sha256:1 of the image: entry ../../etc/evil leaves the layer"}},
		want: "unavailable: your sandbox is not ready: ImagePathEscapes: layer sha256:1 of the image: entry ../../etc/evil leaves the layer",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTenant(t, ns, "waiting-"+tc.name, nil)
			sbx := &playgroundv1alpha1.Sandbox{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tn.name, Labels: map[string]string{playgroundv1alpha1.TenantLabel: tn.name}},
				Spec: playgroundv1alpha1.SandboxSpec{TenantRef: playgroundv1alpha1.LocalObjectReference{Name: tn.name}, NodeName: n.name,
					SandboxTemplate: playgroundv1alpha1.SandboxTemplate{Faculties: []playgroundv1alpha1.FacultyBundleReference{{Name: "tools"}}}},
			}
			if err := k8s.Create(ctx, sbx); err != nil {
				t.Fatal(err)
			}
			sbx.Status = playgroundv1alpha1.SandboxStatus{Phase: playgroundv1alpha1.SandboxProvisioning, SandboxID: sandboxids.New(), Endpoint: n.endpoint}
			for _, c := range tc.conds {
				c.Status = metav1.ConditionFalse
				apimeta.SetStatusCondition(&sbx.Status.Conditions, c)
			}
			if err := k8s.Status().Update(ctx, sbx); err != nil {
				t.Fatal(err)
			}
			cs := connect(t, g.url, tn.token, nil)
			// The gateway's view sees the Sandbox's creation, then its
			// status (a write of its own): wait for the status.
			waitFor(t, "the gateway to see the sandbox's status", 10*time.Second, func() error {
				if msg := resultText(call(t, cs, "open_session", map[string]any{})); strings.Contains(msg, "not been created yet") || strings.Contains(msg, "has not reported it yet") {
					return fmt.Errorf("%w: %s", errNotYet, msg)
				}
				return nil
			})
			msg := callErr(t, cs, "open_session", map[string]any{})
			if !strings.HasPrefix(msg, tc.want) || !strings.Contains(msg, "retrying does not help until it is fixed") {
				t.Fatalf("open_session answered\n  %s\nwant\n  %s...; retrying does not help until it is fixed...", msg, tc.want)
			}
		})
	}
}

// TestCallEndsWithItsRequest: a client of an MCP protocol before
// 2026-07-28, for which the SDK does not end a call with the HTTP request
// that carries it, leaves in the middle of a long call: the call ends and
// kills what it runs in the sandbox, on a stateless gateway and on a
// stateful one. (The attack: a read with digest of a 1 TB sparse file,
// whose sha256sum ran on after its client left; any long call is the
// same, and a command is the one every tenant has.)
func TestCallEndsWithItsRequest(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	ivy := newTenant(t, ns, "ivy", n)
	for i, stateful := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateful=%v", stateful), func(t *testing.T) {
			g := startGateway(t, mcpgateway.Options{Stateful: stateful})
			g.waitReady(t)
			cs := connect(t, g.url, ivy.token, nil)
			var open tools.OpenSessionOutput
			callOK(t, cs, "open_session", nil, &open)
			cmd := fmt.Sprintf("sleep %d", 4321+i)
			count := `n=0; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^` + cmd + `' && n=$((n+1)); done; echo $n`
			running := func(want string) func() error {
				return func() error {
					var ex tools.ExecOutput
					callOK(t, cs, "exec", map[string]any{"handle": open.Handle, "command": count}, &ex)
					if ex.Stdout != want+"\n" {
						return fmt.Errorf("%s processes of it, want %s", strings.TrimSpace(ex.Stdout), want)
					}
					return nil
				}
			}
			sid := ""
			if stateful {
				resp, body := post(t, g.url, ivy.token, "", initializeBody)
				if sid = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != http.StatusOK || sid == "" {
					t.Fatalf("initialize: %s %q, session %q", resp.Status, body, sid)
				}
				if resp, _ := post(t, g.url, ivy.token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
					t.Fatalf("initialized: %s", resp.Status)
				}
			}
			// The call, as a client of protocol 2025-06-18 sends it; the
			// client then goes (its request's context ends).
			args, _ := json.Marshal(map[string]any{"handle": open.Handle, "command": cmd + "; echo finished", "timeout_seconds": 120})
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":` + string(args) + `}}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			req.Header.Set("Authorization", "Bearer "+ivy.token)
			if sid != "" {
				req.Header.Set("Mcp-Session-Id", sid)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body) // until the client goes
					resp.Body.Close()
				}
			}()
			waitFor(t, "the command to run", 15*time.Second, running("1"))
			cancel()
			<-done
			waitFor(t, "the command of the call whose client left to be killed", 15*time.Second, running("0"))
		})
	}
}
