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
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatewayFor serves a Forwarder for tenant "ns/t" in front of a worker at
// url, with a clock the test moves.
func gatewayFor(t *testing.T, url string, now *time.Time) *httptest.Server {
	t.Helper()
	keys, _ := StaticKeys(newKey(t))
	f, err := New(Options{
		Keys: keys, SessionMaxAge: time.Hour, Now: func() time.Time { return *now },
		Resolve: func(context.Context, string) (*Destination, error) {
			return &Destination{Mapping: "ns/m", UID: "uid", Kind: KindService, Timeout: time.Minute,
				Endpoints: []Endpoint{{Key: url, URL: url, Transport: http.DefaultTransport}}, Bearer: "internal"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.Serve(w, r, "ns/t") }))
	t.Cleanup(srv.Close)
	return srv
}

func send(t *testing.T, method, url, session, body string, header http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for k, v := range header {
		req.Header[k] = v
	}
	if session != "" {
		req.Header.Set(SessionHeader, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// Only the allowed headers cross, either way.
func TestHeadersForwarded(t *testing.T) {
	var got http.Header
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "worker=1")
		w.Header().Set("X-Worker-Internal", "secret")
		w.Header().Set("Www-Authenticate", "Bearer")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	defer worker.Close()
	now := time.Now()
	g := gatewayFor(t, worker.URL+"/mcp", &now)
	resp := send(t, http.MethodPost, g.URL, "", initialize, http.Header{
		"Authorization": {"Bearer public-token"}, "Cookie": {"c=1"}, "X-Forwarded-For": {"1.2.3.4"},
		"Last-Event-Id": {"ev-1"}, "Idempotency-Key": {"k"},
	})
	defer resp.Body.Close()
	for _, k := range []string{"Set-Cookie", "X-Worker-Internal", "Www-Authenticate"} {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("the client got %s: %s", k, v)
		}
	}
	if got.Get("Authorization") != "Bearer internal" {
		t.Errorf("the worker got Authorization %q", got.Get("Authorization"))
	}
	for k := range got {
		switch k {
		case "Authorization", "Content-Type", "Accept", "Mcp-Protocol-Version", "Last-Event-Id", "Accept-Encoding", "Content-Length", "User-Agent":
		default:
			t.Errorf("the worker got header %s: %v", k, got[k])
		}
	}
	if got.Get("Last-Event-Id") != "ev-1" || got.Get("Mcp-Protocol-Version") != "2025-06-18" {
		t.Errorf("the worker lacks MCP's headers: %v", got)
	}
}

// A GET stream of a session carries the worker's own messages as they
// come; a session the worker ended is ended for the client with 404; a
// session past its lifetime is refused.
func TestSessionStreamsAndEnds(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "w", Version: "v0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "first"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return nil, struct{}{}, nil
	})
	worker := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer worker.Close()
	now := time.Now()
	g := gatewayFor(t, worker.URL+"/mcp", &now)

	resp := send(t, http.MethodPost, g.URL, "", initialize, nil)
	resp.Body.Close()
	public := resp.Header.Get(SessionHeader)
	if resp.StatusCode != http.StatusOK || public == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, public)
	}
	var upstream string
	for ss := range server.Sessions() {
		upstream = ss.ID()
	}
	if upstream == "" || upstream == public {
		t.Fatalf("worker session %q, public %q", upstream, public)
	}
	resp = send(t, http.MethodPost, g.URL, public, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s", resp.Status)
	}

	stream := send(t, http.MethodGet, g.URL, public, "", nil)
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || !strings.HasPrefix(stream.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET stream: %s %s", stream.Status, stream.Header.Get("Content-Type"))
	}
	lines := make(chan string)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(lines)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// A change of the catalog is announced on the stream, while it is open.
	mcp.AddTool(server, &mcp.Tool{Name: "second"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return nil, struct{}{}, nil
	})
	deadline := time.After(20 * time.Second)
	for seen := false; !seen; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended before the notification")
			}
			seen = strings.Contains(l, "notifications/tools/list_changed")
		case <-deadline:
			t.Fatal("the notification did not come through the stream")
		}
	}

	// The worker ends the session: the client's ends with 404.
	for ss := range server.Sessions() {
		_ = ss.Close()
	}
	resp = send(t, http.MethodPost, g.URL, public, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a session the worker ended: %s", resp.Status)
	}
	stream.Body.Close()
	for range lines { // until the reader has seen the stream end
	}
	wg.Wait()

	// A new session, past its lifetime.
	resp = send(t, http.MethodPost, g.URL, "", initialize, nil)
	resp.Body.Close()
	fresh := resp.Header.Get(SessionHeader)
	now = now.Add(time.Hour + time.Minute)
	resp = send(t, http.MethodPost, g.URL, fresh, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, nil)
	defer resp.Body.Close()
	body := make([]byte, 1024)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body[:n]), "initialize a new session") {
		t.Errorf("a session past its lifetime: %s %s", resp.Status, body[:n])
	}
}

// Past the timeout: a request gets its JSON-RPC error, as an event of the
// stream the worker had begun or as the answer; a notification gets 504;
// the worker got each request once.
func TestTimeoutAnswers(t *testing.T) {
	var hits sync.Map
	block := make(chan struct{})
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		var n atomic.Int32
		c, _ := hits.LoadOrStore(r.URL.Query().Get("case"), &n)
		c.(*atomic.Int32).Add(1)
		if r.URL.Query().Get("case") == "stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: mess"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer worker.Close()
	defer close(block) // first: the worker's handlers end
	keys, _ := StaticKeys(newKey(t))
	var which string
	f, _ := New(Options{Keys: keys, Resolve: func(context.Context, string) (*Destination, error) {
		u := worker.URL + "/mcp?case=" + which
		return &Destination{Mapping: "ns/m", UID: "u", Kind: KindService, Timeout: 300 * time.Millisecond,
			Endpoints: []Endpoint{{Key: u, URL: u, Transport: http.DefaultTransport}}}, nil
	}})
	g := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.Serve(w, r, "ns/t") }))
	defer g.Close()

	for _, c := range []struct {
		which, body string
		status      int
		want        []string
	}{
		{"stream", `{"jsonrpc":"2.0","id":"s1","method":"tools/call"}`, http.StatusOK,
			[]string{"notifications/progress", "event: mess\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"error\":{\"code\":-32002", "outcome is unknown", "not retried"}},
		{"json", `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, http.StatusOK,
			[]string{`{"jsonrpc":"2.0","id":7,"error":{"code":-32002`, "outcome is unknown"}},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, http.StatusGatewayTimeout,
			[]string{`"id":null`, "outcome is unknown"}},
	} {
		which = c.which
		resp := send(t, http.MethodPost, g.URL, "", c.body, nil)
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: %s %s", c.which, resp.Status, b.String())
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: %q does not say %q", c.which, b.String(), w)
			}
		}
		if n, _ := hits.Load(c.which); n == nil || n.(*atomic.Int32).Load() != 1 {
			t.Errorf("%s: the worker got the request %v times, want 1", c.which, n)
		}
	}
}
