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

package mcpgateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/internal/budget"
	"github.com/playground-dev/playground/mcpgateway"
)

// hostileCommand writes 4 MiB of \x01 to stdout and 4 MiB to stderr: valid
// UTF-8 that JSON would escape to six bytes each.
const hostileCommand = `head -c 4194304 /dev/zero | tr '\0' '\1'; head -c 4194304 /dev/zero | tr '\0' '\1' >&2`

// TestHostileOutput is the "hostile output" acceptance story: 16 clients of
// one tenant exec the command above at once through the real gateway, the
// real agent and a runc sandbox. Every call is served whole and byte-exact
// or refused with the budget's retryable message; nothing is killed. The
// bytes in flight never exceed the budgets (their own high-water marks),
// and the heap returns to its baseline once the calls are done.
func TestHostileOutput(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	tn := newTenant(t, ns, "hostile", n)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	want := bytes.Repeat([]byte{1}, 4<<20)
	const clients = 16
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		served, refused int
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, err := connectErr(g.url, tn.token, http.DefaultTransport, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			var o struct{ Handle string }
			if err := callE(cs, "open_session", map[string]any{}, &o); err != nil {
				t.Error(err)
				return
			}
			handle := o.Handle
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": handle, "command": hostileCommand}})
			if err != nil {
				t.Errorf("exec: %v", err)
				return
			}
			if res.IsError {
				msg := resultText(res)
				if !strings.HasPrefix(msg, "resource_exhausted: ") || !strings.Contains(msg, "retry in") {
					t.Errorf("exec failed, and not with the budget's retryable refusal: %s", msg)
				}
				mu.Lock()
				refused++
				mu.Unlock()
				return
			}
			out := structured(t, res)
			if out["exit_code"] != 0.0 || out["timed_out"] != false || out["signal"] != nil { //nolint:revive // bool-literal-in-expr: a value of any, which may be absent
				t.Errorf("the command did not exit normally: exit_code %v, signal %v, timed_out %v", out["exit_code"], out["signal"], out["timed_out"])
			}
			for _, s := range []string{"stdout", "stderr"} {
				if out[s+"_encoding"] != "base64" {
					t.Errorf("%s went as %v: want base64, smaller than six-byte escapes", s, out[s+"_encoding"])
					continue
				}
				got, err := base64.StdEncoding.Strict().DecodeString(out[s].(string))
				if err != nil || !bytes.Equal(got, want) || out[s+"_dropped"] != 0.0 {
					t.Errorf("%s is not the 4 MiB written (%d bytes, %v, dropped %v)", s, len(got), err, out[s+"_dropped"])
				}
			}
			if txt := resultText(res); len(txt) > 128<<10 {
				t.Errorf("the text content is %d bytes: a result must not hold the output twice", len(txt))
			}
			mu.Lock()
			served++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d calls served whole, %d refused", served, refused)
	if served == 0 {
		t.Fatal("no call was served")
	}

	// The sandbox and its processes are untouched: nothing was killed.
	cs := connect(t, g.url, tn.token, nil)
	if out := execOK(t, cs, open(t, cs), "echo alive"); out != "alive\n" {
		t.Fatalf("after the storm: %q", out)
	}

	for name, l := range map[string]*budget.Limiter{"gateway": g.gw.Budget(), "agent": n.budget} {
		// A call's budget is given back once its HTTP request has ended,
		// which may be just after the client has read the answer.
		waitFor(t, name+"'s budget to be given back", 30*time.Second, func() error {
			if s := l.Stats(); s.Calls != 0 || s.Bytes != 0 {
				return fmt.Errorf("%d calls, %d bytes still reserved", s.Calls, s.Bytes)
			}
			return nil
		})
		s, lim := l.Stats(), l.Limits()
		t.Logf("%s: peak %d calls, %d MiB reserved (limits %d per tenant, %d MiB per tenant)", name, s.PeakCalls, s.PeakBytes>>20, lim.CallsPerTenant, lim.BytesPerTenant>>20)
		if s.PeakBytes > lim.BytesPerTenant || s.PeakCalls > int64(lim.CallsPerTenant) || s.Calls != 0 || s.Bytes != 0 {
			t.Errorf("%s's budget was exceeded or leaked: %+v", name, s)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapInuse) - int64(base.HeapInuse); grown > 64<<20 {
		t.Errorf("the heap kept %d MiB after the calls ended: something holds their output", grown>>20)
	}
}

// TestBudgetRefusal: a tenant past its budget of synchronous calls is
// refused after the bounded wait, with a retryable error that says when
// to retry, while another tenant is served; the refused call never ran.
func TestBudgetRefusal(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	a := newTenant(t, ns, "busy", n)
	b := newTenant(t, ns, "other", n)
	g := startGateway(t, mcpgateway.Options{Budget: budget.Limits{CallsPerTenant: 1, Calls: 2, Wait: 200 * time.Millisecond}})
	g.waitReady(t)

	csA := connect(t, g.url, a.token, nil)
	handle := open(t, csA)
	// The first call holds the tenant's one slot until the test lets it go.
	execOK(t, csA, handle, "rm -f /tmp/go /tmp/refused-ran")
	// The call above may give its slot back a moment after its answer:
	// the holder is the call admitted after it, and alone in flight.
	admitted := g.gw.Budget().Stats().Admitted
	holding := make(chan error, 1)
	go func() {
		_, err := csA.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": handle, "command": "until [ -e /tmp/go ]; do sleep 0.05; done"}})
		holding <- err
	}()
	waitFor(t, "the first call holds the slot", 30*time.Second, func() error {
		if s := g.gw.Budget().Stats(); s.Calls == 1 && s.Admitted == admitted+1 {
			return nil
		}
		return errNotYet
	})
	csA2 := connect(t, g.url, a.token, nil)
	res, err := csA2.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"handle": open(t, csA2), "command": "touch /tmp/refused-ran"}})
	if err != nil {
		t.Fatal(err)
	}
	msg := resultText(res)
	if !res.IsError || !strings.HasPrefix(msg, "resource_exhausted: exec refused by the gateway: your tenant already runs 1 synchronous calls") || !strings.Contains(msg, "retry in 5 seconds") {
		t.Fatalf("want the retryable refusal, got %v: %s", res.IsError, msg)
	}
	if s := g.gw.Budget().Stats(); s.Refused[budget.ScopeTenant] != 1 {
		t.Fatalf("the refusal was not counted: %+v", s)
	}
	// Another tenant still has room.
	csB := connect(t, g.url, b.token, nil)
	execOK(t, csB, open(t, csB), "true")

	// Let the first call end (a job is not a synchronous call); the
	// refused one never ran.
	callOK(t, csA2, "job_exec", map[string]any{"handle": open(t, csA2), "command": "touch /tmp/go"}, nil)
	if err := <-holding; err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, csA, handle, "ls /tmp/refused-ran 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Fatalf("the refused call ran: %q", out)
	}
}

// TestIdleConnections: 200 connections held open without a request do not
// stop a normal client, even when they fill the gateway's connection
// bound: the header timeout closes them, and the client is served.
func TestIdleConnections(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	tn := newTenant(t, ns, "patient", n)
	limits := mcpgateway.DefaultHTTPLimits()
	limits.ReadHeaderTimeout = 2 * time.Second
	limits.MaxConns = 200
	g := startGateway(t, mcpgateway.Options{HTTP: limits})
	g.waitReady(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.gw.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	url := "http://" + ln.Addr().String() + "/mcp"

	// 200 idle connections: half send nothing, half start a request and
	// stall in its headers.
	var conns []net.Conn
	for i := range 200 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if i%2 == 1 {
			if _, err := fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		conns = append(conns, c)
	}
	// A normal client, on a connection of its own, is served.
	cs := connect(t, url, tn.token, nil)
	if out := execOK(t, cs, open(t, cs), "echo served"); out != "served\n" {
		t.Fatalf("exec: %q", out)
	}
	// Every idle connection was closed by the server, none by this test.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		b, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("idle connection %d is still open after a minute", i)
		}
		_ = b
	}
}

// TestUnauthenticatedFlood: 2,000 idle unauthenticated connections, from
// one source and then from 50 loopback addresses, held for longer than a
// client takes to authenticate, do not keep a client with a valid token
// from being served: the oldest of them are closed for it (they were the
// new client's bar when the pool of unauthenticated connections was
// global and refused the newest), and one source keeps at most its share.
func TestUnauthenticatedFlood(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	tn := newTenant(t, ns, "flooded", n)
	limits := mcpgateway.DefaultHTTPLimits()
	// Held well past the test: only the bounds can make room.
	limits.UnauthenticatedTimeout = 10 * time.Minute
	limits.ReadHeaderTimeout = 10 * time.Minute
	g := startGateway(t, mcpgateway.Options{HTTP: limits})
	g.waitReady(t)
	// serve serves the gateway on a listener of its own until the round
	// ends, so that no round sees another's connections.
	serve := func(t *testing.T) *net.TCPAddr {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- g.gw.Serve(ctx, ln) }()
		t.Cleanup(func() { cancel(); <-served })
		return ln.Addr().(*net.TCPAddr)
	}

	flood := func(addr *net.TCPAddr, sources, each int) []net.Conn {
		var conns []net.Conn
		for s := range sources {
			d := net.Dialer{}
			if sources > 1 {
				d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(s+1))}
			}
			for range each {
				c, err := d.Dial("tcp", addr.String())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				conns = append(conns, c)
			}
		}
		return conns
	}
	// open counts the connections of conns the gateway has not closed.
	open := func(conns []net.Conn) int {
		n := 0
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				n++
			}
		}
		return n
	}
	for _, round := range []struct {
		name           string
		sources, each  int
		wantOpenAtMost int
	}{
		{"one source", 1, 2000, limits.MaxUnauthenticatedPerSource},
		{"50 sources", 50, 40, limits.MaxUnauthenticated},
	} {
		t.Run(round.name, func(t *testing.T) {
			addr := serve(t)
			conns := flood(addr, round.sources, round.each)
			cs := connect(t, "http://"+addr.String()+"/mcp", tn.token, nil)
			if out := execOK(t, cs, openServed(t, cs), "echo served"); out != "served\n" {
				t.Fatalf("exec: %q", out)
			}
			if held := open(conns); held > round.wantOpenAtMost {
				t.Fatalf("%d of the flood's connections are held, want at most %d", held, round.wantOpenAtMost)
			}
		})
	}
}

// callE is callOK for goroutines: it returns what went wrong.
func callE(cs *mcp.ClientSession, name string, args, out any) error {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", name, resultText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// open opens a session and returns its handle.
func open(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	var o struct{ Handle string }
	callOK(t, cs, "open_session", map[string]any{}, &o)
	return o.Handle
}

// openServed opens a session once the gateway's view has the tenant's
// sandbox as provisioned (its informers follow the API server by a few
// milliseconds to seconds); any other refusal fails the test.
func openServed(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	var handle string
	waitFor(t, "the gateway to see the sandbox provisioned", 30*time.Second, func() error {
		res := call(t, cs, "open_session", map[string]any{})
		if res.IsError {
			if msg := resultText(res); strings.Contains(msg, "your sandbox is not ready") || strings.Contains(msg, "not been created yet") || strings.Contains(msg, "no current agent registration") {
				return fmt.Errorf("%w: %s", errNotYet, msg)
			}
			t.Fatalf("open_session: %s", resultText(res))
		}
		var o struct{ Handle string }
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		handle = o.Handle
		return nil
	})
	return handle
}

// execOK runs a command that must succeed and returns its stdout.
func execOK(t *testing.T, cs *mcp.ClientSession, handle, command string) string {
	t.Helper()
	var out struct {
		ExitCode       int    `json:"exit_code"`
		Stdout         string `json:"stdout"`
		StdoutEncoding string `json:"stdout_encoding"`
	}
	callOK(t, cs, "exec", map[string]any{"handle": handle, "command": command}, &out)
	if out.ExitCode != 0 {
		t.Fatalf("%q exited %d", command, out.ExitCode)
	}
	if out.StdoutEncoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(out.Stdout)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return out.Stdout
}

// structured returns a result's structured content as a client decodes it.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Errorf("structured content is %T", res.StructuredContent)
		return map[string]any{}
	}
	return m
}

// TestLongestCommand: the gateway, the agent and the guest in the sandbox
// accept the same longest command, which runs, and refuse one byte more
// with the same clear message.
func TestLongestCommand(t *testing.T) {
	n := startNode(t)
	ns := newNamespace(t)
	tn := newTenant(t, ns, "verbose", n)
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)
	cs := connect(t, g.url, tn.token, nil)
	handle := open(t, cs)
	longest := "echo ok #" + strings.Repeat("x", bounds.MaxCommandBytes-len("echo ok #"))
	if out := execOK(t, cs, handle, longest); out != "ok\n" {
		t.Fatalf("the longest command: %q", out)
	}
	want := fmt.Sprintf("command is %d bytes, over the %d-byte limit", bounds.MaxCommandBytes+1, bounds.MaxCommandBytes)
	callErr(t, cs, "exec", map[string]any{"handle": handle, "command": longest + "x"}, "invalid_argument: "+want, "write the script to a file")
	// The agent, asked directly, says the same.
	_, err := n.agent.Execs().Exec(context.Background(), tn.String(), handle, agentapi.ExecRequest{Command: longest + "x"})
	if hostagent.CodeOf(err) != agentapi.CodeTooLarge || !strings.Contains(err.Error(), want) {
		t.Fatalf("the agent: %v", err)
	}
}

// TestStatefulSessionBound: a stateful gateway keeps at most
// MaxSessionsPerTenant sessions of a tenant: one more initialize is
// refused with 429 and what to do, another tenant is unaffected, and
// closing a session makes room.
func TestStatefulSessionBound(t *testing.T) {
	ns := newNamespace(t)
	a := newTenant(t, ns, "chatty", nil)
	b := newTenant(t, ns, "quiet", nil)
	g := startGateway(t, mcpgateway.Options{Stateful: true, MaxSessionsPerTenant: 2})
	g.waitReady(t)
	first := connect(t, g.url, a.token, nil)
	connect(t, g.url, a.token, nil)
	_, err := connectErr(g.url, a.token, http.DefaultTransport, nil)
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("a third session: %v, want 429", err)
	}
	connect(t, g.url, b.token, nil)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "room for a new session", 30*time.Second, func() error {
		cs, err := connectErr(g.url, a.token, http.DefaultTransport, nil)
		if err != nil {
			return err
		}
		return cs.Close()
	})
}
