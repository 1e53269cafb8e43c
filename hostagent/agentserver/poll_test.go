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
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/agentserver/agentservertest"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

// TestPollBinaryAnswer: a poll answered in PollMediaType reads exactly as
// the JSON answer does.
func TestPollBinaryAnswer(t *testing.T) {
	ctx := context.Background()
	pieces := []backendtest.Piece{
		{Stream: backend.Stdout, Data: []byte("hello <world> & \"quotes\"\n")},
		{Stream: backend.Stderr, Data: []byte("\xff\x00\xfe not text\n")},
		{Stream: backend.Stdout, Data: []byte("caf\xc3")}, // a character split over two writes
		{Stream: backend.Stdout, Data: []byte("\xa9\n")},
		{Stream: backend.Stdout, Data: []byte(strings.Repeat("line of output\twith a tab\n", 12000))},
		{Stream: backend.Stderr, Data: []byte("")},
		{Stream: backend.Stderr, Data: []byte("\x00\x01 control bytes are text\n")},
	}
	agent, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{backendtest.New("script", backendtest.Writes(pieces...))}})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Ensure(ctx, spec("bin", "ns/a")); err != nil {
		t.Fatal(err)
	}
	endpoint := agentservertest.Serve(t, agent, gatewayToken)
	c, err := agentapi.NewClient(endpoint, gatewayToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Open(ctx, "ns/a", "bin")
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.StartJob(ctx, "ns/a", h.ID, agentapi.ExecRequest{Command: "script"})
	if err != nil {
		t.Fatal(err)
	}
	req := agentapi.PollRequest{Tenant: "ns/a", MaxBytes: 1 << 20, Wait: 2 * time.Second}
	var bin agentapi.PollResponse
	for deadline := time.Now().Add(10 * time.Second); bin.Job.Result == nil; {
		if bin, err = c.Poll(ctx, req, job.ID); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not end")
		}
	}

	// The same page as JSON, asked for without Accept.
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequest(http.MethodPost, endpoint+"/v1/jobs/"+job.ID+"/poll", bytes.NewReader(body))
	hr.Header.Set("Authorization", "Bearer "+gatewayToken)
	hr.Header.Set(agentapi.VersionHeader, agentapi.Current.String())
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("a poll without Accept was answered %s", ct)
	}
	var js agentapi.PollResponse
	if err := json.NewDecoder(resp.Body).Decode(&js); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bin, js) {
		t.Fatalf("the binary answer reads\n%+.400v\nthe JSON one\n%+.400v", bin, js)
	}
	var stdout, stderr []byte
	encodings := map[string]bool{}
	for _, ch := range bin.Chunks {
		b, err := ch.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		encodings[ch.Encoding] = true
		if ch.Stream == "stdout" {
			stdout = append(stdout, b...)
		} else {
			stderr = append(stderr, b...)
		}
	}
	var wantOut, wantErr []byte
	for _, p := range pieces {
		if p.Stream == backend.Stdout {
			wantOut = append(wantOut, p.Data...)
		} else {
			wantErr = append(wantErr, p.Data...)
		}
	}
	if !bytes.Equal(stdout, wantOut) || !bytes.Equal(stderr, wantErr) || !encodings[agentapi.EncodingText] || !encodings[agentapi.EncodingBase64] {
		t.Fatalf("the page is not the output byte for byte (encodings %v)", encodings)
	}

	// Errors come back coded either way.
	if _, err := c.Poll(ctx, agentapi.PollRequest{Tenant: "ns/a", Cursor: "not-a-cursor"}, job.ID); codeOf(err) != agentapi.CodeInvalid {
		t.Fatalf("a bad cursor: %v", err)
	}
}
