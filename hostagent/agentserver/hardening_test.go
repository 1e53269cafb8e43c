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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/agentserver"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

// failing is an in-memory backend whose commands fail to start with err.
func failing(err error) backend.Backend {
	return backendtest.New("script", func(string, backend.ExecRequest, backend.Sink) (int, error) { return 0, err })
}

// logBuffer collects a server's log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveFake serves an agent over be (no containers) with a server whose
// log goes to the returned buffer.
func serveFake(t *testing.T, be backend.Backend, specs ...backend.Spec) (*agentapi.Client, string, *logBuffer) {
	t.Helper()
	agent := newAgent(t, hostagent.Options{Backends: []backend.Backend{be}}, specs...)
	log := new(logBuffer)
	srv := agentserver.NewServer(agent, funcr.NewJSON(func(obj string) { _, _ = log.Write([]byte(obj + "\n")) }, funcr.Options{}), gatewayToken)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, ln, nil, time.Second)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = agent.Close(context.Background())
	})
	endpoint := "http://" + ln.Addr().String()
	c, err := agentapi.NewClient(endpoint, gatewayToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, endpoint, log
}

// TestMalformedIDs: a handle or job ID of any other shape than the agent
// issues (".", "..", a path, bytes) is refused with the very answer an
// unknown one gets, by the client before it sends it and by the server
// before the kernel sees it, and the answer carries none of its bytes.
func TestMalformedIDs(t *testing.T) {
	ctx := context.Background()
	c, endpoint, _ := serveFake(t, backendtest.New("script", backendtest.Writes()), spec("ids", "ns/a"))
	h, err := c.Open(ctx, "ns/a", "ids")
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "x"})
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{".", "..", "../x", "a/b", "h_nope", "job_nope", h.ID + "a", strings.ToUpper(h.ID), job.ID + "/..",
		"h_" + strings.Repeat("x", 26), "<script>\xff\x00", strings.Repeat("h_", 5000)}
	unknownHandle, unknownJob := agentapi.NewHandle(), agentapi.NewJobID()
	handleCalls := map[string]func(string) error{
		"renew": func(id string) error { _, err := c.Renew(ctx, "ns/a", id); return err },
		"close": func(id string) error { return c.Close(ctx, "ns/a", id) },
		"exec": func(id string) error {
			_, err := c.Exec(ctx, "ns/a", id, agentapi.ExecRequest{Command: "x"})
			return err
		},
		"jobs": func(id string) error {
			_, err := c.StartJob(ctx, "ns/a", id, agentapi.ExecRequest{Command: "x"})
			return err
		},
		"read":  func(id string) error { _, err := c.Read(ctx, "ns/a", id, "f", ""); return err },
		"write": func(id string) error { _, err := c.Write(ctx, "ns/a", id, "f", "", []byte("x")); return err },
	}
	jobCalls := map[string]func(string) error{
		"poll":   func(id string) error { _, err := c.Poll(ctx, agentapi.PollRequest{Tenant: "ns/a"}, id); return err },
		"cancel": func(id string) error { _, err := c.Cancel(ctx, "ns/a", id); return err },
	}
	check := func(t *testing.T, what, id string, err error, want string) {
		t.Helper()
		var ae *agentapi.Error
		if !errors.As(err, &ae) || ae.Code != agentapi.CodeNotFound || ae.Message != want {
			t.Errorf("%s %q: %v; want not_found: %s", what, id, err, want)
		}
	}
	for op, call := range handleCalls {
		for _, id := range append(bad, unknownHandle) {
			check(t, op, id, call(id), agentapi.HandleNotFound)
		}
	}
	for op, call := range jobCalls {
		for _, id := range append(bad, unknownJob) {
			check(t, op, id, call(id), agentapi.JobNotFound)
		}
	}

	// Past the client: what any other caller of the API gets. ".." and
	// "." as a path segment never reach a handler (the mux redirects to
	// the cleaned path, where nothing is served).
	raw := func(path string) (int, agentapi.ErrorResponse) {
		req, _ := http.NewRequest(http.MethodPost, endpoint+path, strings.NewReader(`{"tenant":"ns/a"}`))
		req.Header.Set("Authorization", "Bearer "+gatewayToken)
		req.Header.Set(agentapi.VersionHeader, agentapi.Current.String())
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e agentapi.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	for _, id := range bad[2:] {
		for op := range handleCalls {
			if status, e := raw("/v1/handles/" + url.PathEscape(id) + "/" + op); status != http.StatusNotFound || e.Code != agentapi.CodeNotFound || e.Message != agentapi.HandleNotFound {
				t.Errorf("%s %q over HTTP: %d %+v", op, id, status, e)
			}
		}
		for op := range jobCalls {
			if status, e := raw("/v1/jobs/" + url.PathEscape(id) + "/" + op); status != http.StatusNotFound || e.Code != agentapi.CodeNotFound || e.Message != agentapi.JobNotFound {
				t.Errorf("%s %q over HTTP: %d %+v", op, id, status, e)
			}
		}
	}
	for _, id := range []string{".", ".."} {
		if status, _ := raw("/v1/handles/" + id + "/exec"); status < 300 || status >= 400 {
			t.Errorf("exec %q over HTTP: %d, want the mux's redirect", id, status)
		}
	}
	if _, err := c.Renew(ctx, "ns/a", h.ID); err != nil {
		t.Fatalf("the handle itself: %v", err)
	}
}

// TestInternalErrorID: an internal failure reaches the caller as an error
// ID and a generic text; its detail, which may name the node's paths, is
// in the agent's log under that ID.
func TestInternalErrorID(t *testing.T) {
	ctx := context.Background()
	detail := "oci: sandbox sbx-1: connecting to its init: dial unix /var/lib/playground/sandboxes/sbx-1/run/init.sock: connect: connection refused"
	c, _, log := serveFake(t, failing(errors.New(detail)), spec("internal", "ns/a"))
	h, err := c.Open(ctx, "ns/a", "internal")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "true"})
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Code != agentapi.CodeInternal {
		t.Fatalf("exec: %v; want an internal error", err)
	}
	id, ok := agentapi.InternalErrorID(ae.Message)
	if !ok || strings.Contains(ae.Message, "/var/lib") || strings.Contains(ae.Message, "sbx-1") {
		t.Fatalf("the caller is told %q: want an error ID and no detail", ae.Message)
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, `"errorID":"`+id+`"`) && strings.Contains(line, "/var/lib/playground/sandboxes/sbx-1/run/init.sock") {
			return
		}
	}
	t.Fatalf("no log line with error ID %s and the detail:\n%s", id, log)
}
