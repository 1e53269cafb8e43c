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
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
