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
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// outputAgent answers every exec with res.
type outputAgent struct {
	fakeAgent
	res agentapi.ExecResult
}

func (o *outputAgent) Exec(context.Context, string, string, agentapi.ExecRequest) (agentapi.ExecResult, error) {
	return o.res, nil
}

// decodeStream returns a stream's bytes from its encoded form.
func decodeStream(t *testing.T, data, enc string) []byte {
	t.Helper()
	switch enc {
	case encodingText:
		return []byte(data)
	case encodingBase64:
		b, err := base64.StdEncoding.Strict().DecodeString(data)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("unknown encoding %q", enc)
	return nil
}

// TestExecHostileOutput: 4 MiB of \x01 on each stream (valid UTF-8, six
// bytes each as JSON text) come back byte-exact as base64, the smaller
// encoding, in a result that matches the output schema; the text content
// holds excerpts only, so the result does not carry the output twice.
func TestExecHostileOutput(t *testing.T) {
	stdout := bytes.Repeat([]byte{1}, 4<<20)
	stderr := append(bytes.Repeat([]byte("é"), 40<<10), 'x')
	agent := &outputAgent{res: agentapi.ExecResult{Stdout: stdout, Stderr: stderr, ExitStatus: agentapi.ExitStatus{ExitCode: 3, Duration: time.Second}}}
	cs := sessionWith(t, agent)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": "h_bbbbbbbbbbbbbbbbbbbbbbbbba", "command": "hostile"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("exec failed: %s", textOf(res))
	}
	if err := listedOutputSchema(t, cs, "exec").Validate(res.StructuredContent); err != nil {
		t.Fatalf("the result does not match the output schema: %v", err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out ExecOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.StdoutEncoding != encodingBase64 || out.StderrEncoding != encodingText || out.ExitCode != 3 || out.DurationMS != 1000 {
		t.Fatalf("encodings %s/%s, exit %d: want base64 for control bytes, text for text", out.StdoutEncoding, out.StderrEncoding, out.ExitCode)
	}
	if !bytes.Equal(decodeStream(t, out.Stdout, out.StdoutEncoding), stdout) || !bytes.Equal(decodeStream(t, out.Stderr, out.StderrEncoding), stderr) {
		t.Fatal("the output is not byte-exact")
	}
	text := textOf(res)
	if len(text) > 4*execTextExcerpt*4/3+4096 {
		t.Fatalf("the text content is %d bytes: want excerpts only", len(text))
	}
	for _, want := range []string{"exit_code: 3\n", "the structured result's stdout holds all 4194304 bytes", "the structured result's stderr holds all"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text content lacks %q", want)
		}
	}
	if !utf8.ValidString(text) {
		t.Error("an excerpt cut a character")
	}
}
