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

package hostagent

import (
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
)

// TestKeyDigestNamesTheWholeRequest: a job's idempotency key is given to
// its whole request, so the same key with any field changed (or in
// another sandbox) is another request, refused, not the job back.
func TestKeyDigestNamesTheWholeRequest(t *testing.T) {
	base := agentapi.ExecRequest{Command: "make", Shell: backend.ShellLogin, Cwd: "src", Stdin: []byte("in"), Timeout: time.Minute, IdempotencyKey: "k"}
	want := requestDigest(base, "sbx-1")
	same := base
	same.IdempotencyKey = "another key"
	if requestDigest(same, "sbx-1") != want {
		t.Fatal("the key itself changes the request's digest")
	}
	for name, change := range map[string]func(*agentapi.ExecRequest){
		"command": func(r *agentapi.ExecRequest) { r.Command = "make test" },
		"shell":   func(r *agentapi.ExecRequest) { r.Shell = backend.ShellClean },
		"cwd":     func(r *agentapi.ExecRequest) { r.Cwd = "src/" },
		"stdin":   func(r *agentapi.ExecRequest) { r.Stdin = []byte("in2") },
		"timeout": func(r *agentapi.ExecRequest) { r.Timeout = time.Hour },
		"input":   func(r *agentapi.ExecRequest) { r.Input = true },
		"tty":     func(r *agentapi.ExecRequest) { r.TTY = &agentapi.TTYSize{Rows: 24, Cols: 80} },
		// Field bounds: the command's end moved into cwd.
		"split": func(r *agentapi.ExecRequest) { r.Command, r.Cwd = "mak", "esrc" },
	} {
		r := base
		change(&r)
		if requestDigest(r, "sbx-1") == want {
			t.Errorf("a request with another %s has the same digest", name)
		}
	}
	if requestDigest(base, "sbx-2") == want {
		t.Error("the same request in another sandbox has the same digest")
	}
}

// TestExecTakesNoKey: a key on a synchronous exec is refused, clearly,
// rather than ignored (a retried exec runs again).
func TestExecTakesNoKey(t *testing.T) {
	x := &Execs{maxStdin: 1 << 20}
	_, err := x.Exec(t.Context(), "ns/a", "h_x", agentapi.ExecRequest{Command: "true", IdempotencyKey: "k"})
	if CodeOf(err) != agentapi.CodeInvalid {
		t.Fatalf("exec with a key: %v, want invalid_argument", err)
	}
	_, err = x.StartJob(t.Context(), "ns/a", "h_x", agentapi.ExecRequest{Command: "true", IdempotencyKey: "no spaces please"})
	if CodeOf(err) != agentapi.CodeInvalid {
		t.Fatalf("job with a bad key: %v, want invalid_argument", err)
	}
}
