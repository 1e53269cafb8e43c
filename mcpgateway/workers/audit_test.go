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

package workers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/internal/audit"
)

// memorySink keeps the records it is given.
type memorySink struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (s *memorySink) Put(r audit.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
}

func (s *memorySink) Close() error { return nil }

func (s *memorySink) take() []audit.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := s.recs
	s.recs = nil
	return recs
}

// TestToolCallsAudited: a tenant's calls of its worker's tools are in the
// audit trail, as the sandbox tools' are (a worker in the sandbox runs
// commands there): each tools/call, of one message or of a batch, with
// the tenant and how the forwarding ended; the rest of the protocol
// (initialize, tools/list) is not a call.
func TestToolCallsAudited(t *testing.T) {
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"fail"`) {
			http.Error(w, "the worker broke", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
	}))
	defer worker.Close()
	sink := &memorySink{}
	keys, _ := StaticKeys(newKey(t))
	f, err := New(Options{
		Keys: keys, Audit: audit.New(audit.LevelRequestResult, "gateway", sink),
		Resolve: func(context.Context, string) (*Destination, error) {
			return &Destination{Mapping: "ns/m", UID: "uid", Kind: KindSandbox, Timeout: time.Minute,
				Endpoints: []Endpoint{{Key: "w", URL: worker.URL, Transport: http.DefaultTransport}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	g := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.Serve(w, r, "ns/t") }))
	defer g.Close()
	post := func(body string) {
		t.Helper()
		resp := send(t, http.MethodPost, g.URL, "", body, nil)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	post(initialize)
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if recs := sink.take(); len(recs) != 0 {
		t.Fatalf("initialize and tools/list were recorded as calls: %+v", recs)
	}
	post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run","arguments":{"command":"make test"}}}`)
	post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","arguments":{}}}`)
	post(`[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a","arguments":{}}},` +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}},{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"b"}}]`)
	recs := sink.take()
	var got []string
	for _, r := range recs {
		if r.Tenant != "ns/t" || r.Identity != "token of tenant ns/t" || r.Component != "gateway" || r.Chain == "" {
			t.Errorf("record %+v: want tenant ns/t, its token, the gateway's chain", r)
		}
		got = append(got, r.Tool+" "+r.Outcome+" "+r.Code)
	}
	want := []string{"run ok ", "fail error worker_status_500", "a ok ", "b ok "}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	if recs[0].BytesIn != int64(len(`{"command":"make test"}`)) {
		t.Errorf("the call's arguments are recorded as %d bytes", recs[0].BytesIn)
	}
}
