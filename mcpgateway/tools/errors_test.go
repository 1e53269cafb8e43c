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
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// failingAgent answers every exec with err.
type failingAgent struct {
	fakeAgent
	err error
}

func (f *failingAgent) Exec(context.Context, string, string, agentapi.ExecRequest) (agentapi.ExecResult, error) {
	return agentapi.ExecResult{}, f.err
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// execFailing calls exec through the catalog, over MCP, with an agent that
// fails with err; log is the gateway's logger.
func execFailing(t *testing.T, err error, log logr.Logger) *mcp.CallToolResult {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	Register(server, Options{Router: agentRouter{&failingAgent{err: err}}, ProgressInterval: time.Hour, Logger: log})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": agentapi.NewHandle(), "command": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestInternalErrorsGiveAnID: of an internal failure, the tenant gets an
// error ID and no detail: the agent's ID when the agent sent one, else one
// of the gateway's, under which the gateway logs what it was told.
func TestInternalErrorsGiveAnID(t *testing.T) {
	const detail = "open /var/lib/playground/sandboxes/sbx-1/run/init.sock: permission denied"
	agentID := agentapi.NewErrorID()
	idPattern := regexp.MustCompile(`internal error ([a-z2-7]{16})\)`)
	for _, tc := range []struct {
		name   string
		err    error
		wantID string // "" for one of the gateway's, logged with detail
		logged string
	}{
		{"the agent's ID", &agentapi.Error{Code: agentapi.CodeInternal, Message: agentapi.InternalErrorMessage(agentID)}, agentID, ""},
		{"detail without an ID", &agentapi.Error{Code: agentapi.CodeInternal, Message: "starting the command failed: " + detail}, "", detail},
		{"no code", &agentapi.Error{Message: detail}, "", detail},
		{"not an agent's error", errors.New(detail), "", detail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := new(lockedBuffer)
			res := execFailing(t, tc.err, funcr.NewJSON(func(obj string) { fmt.Fprintln(log, obj) }, funcr.Options{}))
			text := textOf(res)
			m := idPattern.FindStringSubmatch(text)
			if !res.IsError || m == nil || !strings.HasPrefix(text, "internal:") || strings.Contains(text, "/var/lib") {
				t.Fatalf("the tenant is told %q: want an internal error with an ID and no detail", text)
			}
			if tc.wantID != "" {
				if m[1] != tc.wantID {
					t.Fatalf("error ID %s, want the agent's %s", m[1], tc.wantID)
				}
				return
			}
			for _, line := range strings.Split(log.String(), "\n") {
				if strings.Contains(line, `"errorID":"`+m[1]+`"`) && strings.Contains(line, tc.logged) {
					return
				}
			}
			t.Fatalf("no log line with error ID %s and the detail:\n%s", m[1], log)
		})
	}
}

// TestUnreachableAgentIsRetryableNotCancelled: an agent that cannot be
// dialled in time (a node's agent pod replaced, its old address gone) is
// "unavailable: retry", though net's dial timeout is
// context.DeadlineExceeded too; only the caller's own end is a
// cancellation of unknown outcome.
func TestUnreachableAgentIsRetryableNotCancelled(t *testing.T) {
	dialTimeout := func() error {
		_, err := (&net.Dialer{Timeout: time.Nanosecond}).Dial("tcp", "192.0.2.1:9443")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a dial past its timeout gave %v, which is not context.DeadlineExceeded: this test's premise is gone", err)
		}
		return err
	}()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"dial timeout", &agentapi.Error{Code: agentapi.CodeUnavailable, Err: dialTimeout, Message: "the sandbox's node cannot be reached right now: retry shortly"}, "unavailable: the sandbox's node cannot be reached right now: retry shortly"},
		{"the caller's deadline", fmt.Errorf("calling the agent: %w", context.DeadlineExceeded), "exec was cancelled before the sandbox answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := execFailing(t, tc.err, logr.Discard())
			if text := textOf(res); !res.IsError || !strings.HasPrefix(text, tc.want) {
				t.Fatalf("the tenant is told %q, want %q…", text, tc.want)
			}
		})
	}
}
