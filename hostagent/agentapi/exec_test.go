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
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/bounds"
)

// TestExecRequestValidate: the one check of a command, which the gateway
// makes before the request travels and the agent where it enters,
// refuses each bad request with the code and the words that say what to
// do, and lets the longest good one through.
func TestExecRequestValidate(t *testing.T) {
	const maxStdin = 16
	ok := ExecRequest{Command: strings.Repeat("x", bounds.MaxCommandBytes), Shell: ShellClean, Stdin: make([]byte, maxStdin),
		Timeout: bounds.MaxTimeout, TTY: &TTYSize{Rows: bounds.MaxTTYRows, Cols: bounds.MaxTTYCols, Scrollback: bounds.MaxScrollback}}
	if err := ok.Validate(maxStdin); err != nil {
		t.Fatalf("a request at every bound: %v", err)
	}
	if err := (ExecRequest{Command: "true"}).Validate(maxStdin); err != nil {
		t.Fatalf("a request with the default shell: %v", err)
	}
	with := func(f func(*ExecRequest)) ExecRequest {
		r := ExecRequest{Command: "true"}
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  ExecRequest
		code Code
		says string
	}{
		{"an unknown shell", with(func(r *ExecRequest) { r.Shell = "bash" }), CodeInvalid, `shell "bash" is not known: use login`},
		{"an empty command", with(func(r *ExecRequest) { r.Command = "" }), CodeInvalid, "command is empty"},
		{"a command one byte too long", with(func(r *ExecRequest) { r.Command = strings.Repeat("x", bounds.MaxCommandBytes+1) }), CodeTooLarge, bounds.CommandTooLong(bounds.MaxCommandBytes + 1)},
		{"stdin one byte too long", with(func(r *ExecRequest) { r.Stdin = make([]byte, maxStdin+1) }), CodeTooLarge, "write it to a file with write"},
		{"a negative timeout", with(func(r *ExecRequest) { r.Timeout = -time.Second }), CodeInvalid, "timeout -1s is out of range"},
		{"a timeout past the bound", with(func(r *ExecRequest) { r.Timeout = bounds.MaxTimeout + time.Second }), CodeInvalid, "out of range (0 to 24h0m0s)"},
		{"a terminal too tall", with(func(r *ExecRequest) { r.TTY = &TTYSize{Rows: bounds.MaxTTYRows + 1, Cols: 80} }), CodeInvalid, "rows 201 is out of range: give 1 to 200"},
		{"a terminal of no columns", with(func(r *ExecRequest) { r.TTY = &TTYSize{Rows: 24} }), CodeInvalid, "cols 0 is out of range"},
		{"a scrollback past the bound", with(func(r *ExecRequest) { r.TTY = &TTYSize{Rows: 24, Cols: 80, Scrollback: bounds.MaxScrollback + 1} }), CodeInvalid, "scrollback 10001 is out of range"},
	} {
		err := tc.req.Validate(maxStdin)
		if CodeOf(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (%s), want %s saying %q", tc.name, err, CodeOf(err), tc.code, tc.says)
		}
	}
}

// TestExecHeaderIsTheResult: the first line of a binary exec answer says
// what the JSON answer says, but the output, given by its sizes.
func TestExecHeaderIsTheResult(t *testing.T) {
	res := ExecResult{Stdout: []byte("out"), Stderr: []byte("er"), ExecOutputSizes: ExecOutputSizes{StdoutDropped: 1, StderrDropped: 2},
		ExitStatus: ExitStatus{ExitCode: 3, Signal: "SIGKILL", Killed: true, TimedOut: true, OOMKilled: true, Duration: time.Second}}
	var whole, head map[string]any
	b, _ := json.Marshal(res)
	h, _ := json.Marshal(res.Header())
	if err := json.Unmarshal(b, &whole); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(h, &head); err != nil {
		t.Fatal(err)
	}
	if head["stdout_size"] != float64(3) || head["stderr_size"] != float64(2) {
		t.Errorf("the header's sizes: %s", h)
	}
	delete(whole, "stdout")
	delete(whole, "stderr")
	delete(head, "stdout_size")
	delete(head, "stderr_size")
	wb, _ := json.Marshal(whole)
	hb, _ := json.Marshal(head)
	if !bytes.Equal(wb, hb) {
		t.Errorf("the header says %s, the JSON answer %s", hb, wb)
	}
}
