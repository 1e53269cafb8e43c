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
	"net/http"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// TestProtocolVersion: the agent names its protocol version on every
// answer, serves callers of its major version whatever their minor
// (callers that name none are 1.0 gateways), and refuses a caller of
// another major version with a message that says what to do, before the
// call does anything.
func TestProtocolVersion(t *testing.T) {
	n := startNode(t, "", nil, spec("ver", "ns/a"))
	ctx := context.Background()
	for _, v := range []agentapi.Version{agentapi.V1_0, agentapi.Current, {Major: 1, Minor: 99}} {
		h, err := n.client.Speaking(v).Open(ctx, "ns/a", "ver")
		if err != nil {
			t.Fatalf("a %s caller: %v", v, err)
		}
		if err := n.client.Close(ctx, "ns/a", h.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err := n.client.Speaking(agentapi.Version{Major: 2}).Open(ctx, "ns/a", "ver")
	if codeOf(err) != agentapi.CodeInvalid || !strings.Contains(err.Error(), "agent protocol 2.0 is not spoken here") {
		t.Fatalf("a 2.0 caller: %v", err)
	}
	if n.agent.OpenHandles("ver") != 0 {
		t.Fatal("a refused caller opened a handle")
	}

	req, _ := http.NewRequest(http.MethodPost, n.endpoint+"/v1/sandboxes/ver/handles", strings.NewReader(`{"tenant":"ns/a"}`))
	req.Header.Set("Authorization", "Bearer "+gatewayToken) // and no version: a 1.0 gateway
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(agentapi.VersionHeader) != agentapi.Current.String() {
		t.Fatalf("a caller without a version: %s, version %q", resp.Status, resp.Header.Get(agentapi.VersionHeader))
	}
}

// TestProtocolAgreesWithKernel: the limits the protocol states, which the
// gateway checks before a call travels, are the kernel's, and every code
// the kernel gives is one the protocol knows.
func TestProtocolAgreesWithKernel(t *testing.T) {
	if agentapi.MaxCommandBytes != backend.MaxCommandBytes || agentapi.MaxTimeout != hostagent.MaxTimeout ||
		agentapi.MaxPollWait != jobs.DefaultMaxPollWait || agentapi.MaxPollBytes != jobs.DefaultMaxPollBytes {
		t.Fatal("the protocol's limits differ from the kernel's")
	}
	if agentapi.CommandTooLong(7) != backend.CommandTooLong(7) {
		t.Fatal("the protocol and the kernel word a command too long differently")
	}
	for _, c := range []hostagent.Code{hostagent.CodeInvalid, hostagent.CodeNotFound, hostagent.CodeTooLarge, hostagent.CodeExhausted, hostagent.CodeUnavailable, hostagent.CodeInternal, hostagent.CodeUnauth} {
		switch agentapi.Code(c) {
		case agentapi.CodeInvalid, agentapi.CodeNotFound, agentapi.CodeTooLarge, agentapi.CodeExhausted, agentapi.CodeUnavailable, agentapi.CodeInternal, agentapi.CodeUnauth:
		default:
			t.Errorf("the kernel's code %q is not the protocol's", c)
		}
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
