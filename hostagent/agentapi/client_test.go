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
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestClientTellsUnreachableFromGivenUp: an agent that cannot be dialled in
// time is unavailable (retry), though the dial's timeout is
// context.DeadlineExceeded too; a call whose own context ends is the
// caller's cancellation, not the agent's unavailability.
func TestClientTellsUnreachableFromGivenUp(t *testing.T) {
	blackhole := &http.Transport{DialContext: (&net.Dialer{Timeout: time.Nanosecond}).DialContext}
	c, err := NewClient("http://192.0.2.1:9443", "token", blackhole)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Open(context.Background(), "t", "sbx-1")
	if CodeOf(err) != CodeUnavailable {
		t.Errorf("a dial past its timeout gave %v (code %q), want unavailable", err, CodeOf(err))
	}

	// An agent that never answers (the body read, so that the server sees
	// the client go).
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer hang.Close()
	c, err = NewClient(hang.URL, "token", http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Open(ctx, "t", "sbx-1")
	var agentErr *Error
	if errors.As(err, &agentErr) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call whose context ended gave %v (an agent error: %v), want the context's error alone", err, agentErr != nil)
	}
}

// TestAnswerCutShortIsUnavailable: an agent that stops in the middle of
// its answer (killed while it streams an exec's output: a restart, a
// crash) is unavailable, which a caller may retry, and the message says
// that the call may have taken effect; a complete answer that does not
// decode stays the client's error. Found by make soak: an agent SIGTERM
// during an exec was answered as an internal error.
func TestAnswerCutShortIsUnavailable(t *testing.T) {
	var cut bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(VersionHeader, Current.String())
		if !cut {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{not json\n")
			return
		}
		w.Header().Set("Content-Type", ExecMediaType)
		h, _ := json.Marshal(ExecHeader{StdoutSize: 1 << 20})
		_, _ = w.Write(append(h, '\n'))
		_, _ = w.Write(make([]byte, 64<<10))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection breaks mid-answer
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	c, err := NewClient(srv.URL, "token", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	handle := NewHandle()

	_, err = c.Exec(ctx, "t", handle, ExecRequest{Command: "true"})
	var e *Error
	if err == nil || errors.As(err, &e) {
		t.Fatalf("a complete answer that does not decode: %v, want the client's error, not an agent's code", err)
	}

	cut = true
	_, err = c.Exec(ctx, "t", handle, ExecRequest{Command: "true"})
	if !errors.As(err, &e) || e.Code != CodeUnavailable {
		t.Fatalf("an answer cut short: %v, want %s", err, CodeUnavailable)
	}
	if !strings.Contains(e.Message, "may have happened") {
		t.Errorf("message %q does not say that the call may have taken effect", e.Message)
	}
}
