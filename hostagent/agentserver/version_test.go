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

package agentserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// TestProtocolVersion: the agent names its protocol version on every
// answer, serves a caller of its major version (the client sends
// agentapi.Current), and refuses a caller of another major version, one
// that names no version or one it cannot read, with a message that says
// what to do, before the call does anything.
func TestProtocolVersion(t *testing.T) {
	n := startNode(t, "", nil, spec("ver", "ns/a"))
	ctx := context.Background()
	h, err := n.client.Open(ctx, "ns/a", "ver")
	if err != nil {
		t.Fatalf("a %s caller: %v", agentapi.Current, err)
	}
	if err := n.client.Close(ctx, "ns/a", h.ID); err != nil {
		t.Fatal(err)
	}

	open := func(version string, set bool) (*http.Response, agentapi.ErrorResponse) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, n.endpoint+"/v1/sandboxes/ver/handles", strings.NewReader(`{"tenant":"ns/a"}`))
		req.Header.Set("Authorization", "Bearer "+gatewayToken)
		if set {
			req.Header.Set(agentapi.VersionHeader, version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e agentapi.ErrorResponse
		if resp.StatusCode != http.StatusOK {
			_ = json.NewDecoder(resp.Body).Decode(&e)
		}
		return resp, e
	}
	if resp, _ := open("1.99", true); resp.StatusCode != http.StatusOK || resp.Header.Get(agentapi.VersionHeader) != agentapi.Current.String() {
		t.Fatalf("a 1.99 caller: %s, version %q", resp.Status, resp.Header.Get(agentapi.VersionHeader))
	}
	for _, tc := range []struct {
		version string
		set     bool
		says    string
	}{
		{"2.0", true, "agent protocol 2.0 is not spoken here (this side speaks 1.x; the other side is newer)"},
		{"0.9", true, "agent protocol 0.9 is not spoken here (this side speaks 1.x; this side is newer)"},
		{"", false, "the peer names no agent protocol version"},
		{"one", true, `agent protocol version "one" is not MAJOR.MINOR`},
	} {
		resp, e := open(tc.version, tc.set)
		if resp.StatusCode != http.StatusBadRequest || e.Code != agentapi.CodeInvalid || !strings.Contains(e.Message, tc.says) ||
			resp.Header.Get(agentapi.VersionHeader) != agentapi.Current.String() {
			t.Errorf("a caller of version %q: %s %+v, version %q; want 400 %q", tc.version, resp.Status, e, resp.Header.Get(agentapi.VersionHeader), tc.says)
		}
	}
	if got := n.agent.Sessions().OpenHandles("ver"); got != 1 {
		t.Fatalf("%d handles open, want the 1.99 caller's only: a refused caller opened one", got)
	}
}

// TestProtocolAgreesWithKernel: a request body holds a payload of
// MaxFileBytes as base64, and every job state the kernel gives is one the
// protocol knows. (The limits are package bounds's, one definition for
// the gateway, the kernel and the guest.)
func TestProtocolAgreesWithKernel(t *testing.T) {
	if base64.StdEncoding.EncodedLen(bounds.MaxFileBytes)+64<<10 > agentapi.MaxRequestBytes {
		t.Fatal("a request body cannot hold a payload of MaxFileBytes as base64")
	}
	for _, s := range []jobs.State{jobs.StateRunning, jobs.StateCancelling, jobs.StateExited, jobs.StateKilled, jobs.StateTimedOut, jobs.StateFailed} {
		switch agentapi.JobState(s) {
		case agentapi.JobRunning, agentapi.JobCancelling, agentapi.JobExited, agentapi.JobKilled, agentapi.JobTimedOut, agentapi.JobFailed:
		default:
			t.Errorf("the kernel's job state %q is not the protocol's", s)
		}
		if agentapi.JobState(s).Terminal() != s.Terminal() {
			t.Errorf("job state %q: terminal differs", s)
		}
	}
}
