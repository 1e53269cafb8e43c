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

package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serve runs h within l on loopback until the test ends.
func serve(t *testing.T, l Limits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(h, nil)
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = Serve(ctx, srv, l.Listen(ln), time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

func short() Limits {
	l := DefaultLimits()
	l.ReadHeaderTimeout = 300 * time.Millisecond
	l.BodyTimeout = 300 * time.Millisecond
	l.WriteTimeout = 300 * time.Millisecond
	return l
}

// TestLongResponseNotCut: a handler that reads its body, then works for
// longer than every timeout before answering, is answered, on HTTP/1.1 and
// on HTTP/2, and its context is not cancelled: streaming calls are never
// cut by a deadline of their own.
func TestLongResponseNotCut(t *testing.T) {
	addr := serve(t, short(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(time.Second): // past the body, write and header timeouts
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "done %s", body)
	}))
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{Protocols: new(http.Protocols)}
		if h2 {
			tr.Protocols.SetUnencryptedHTTP2(true)
		} else {
			tr.Protocols.SetHTTP1(true)
		}
		resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+"/", "text/plain", strings.NewReader("work"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "done work" || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
			t.Fatalf("HTTP/%d: %d %q", resp.ProtoMajor, resp.StatusCode, b)
		}
	}
}

// TestSlowBody: a body that stops arriving fails the handler's read after
// the body timeout.
func TestSlowBody(t *testing.T) {
	got := make(chan error, 1)
	addr := serve(t, short(), http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- err
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b")
	var ne net.Error
	if err := <-got; err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("reading a stalled body: %v, want a timeout", err)
	}
}

// TestStalledReader: a client that stops reading is cut off: the
// handler's write fails after the write timeout instead of blocking.
func TestStalledReader(t *testing.T) {
	got := make(chan error, 1)
	addr := serve(t, short(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil { // the status line, then nothing more is read
		t.Fatal(err)
	}
	if err := <-got; err == nil {
		t.Fatal("1 GiB was written to a client that reads nothing")
	}
}

// TestMaxConns: past MaxConns a connection waits to be accepted until one
// closes; the idle one is closed by the header timeout.
func TestMaxConns(t *testing.T) {
	l := short()
	l.MaxConns = 1
	addr := serve(t, l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	resp, err := (&http.Client{Transport: &http.Transport{}}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("%q", b)
	}
	// The idle connection is the one that was closed.
	_ = idle.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the idle connection: %v, want it closed by the server", err)
	}
}

// TestStreamBound: the server tells each HTTP/2 connection how many
// requests it may have in flight, MaxConcurrentStreams.
func TestStreamBound(t *testing.T) {
	l := short()
	l.MaxConcurrentStreams = 3
	addr := serve(t, l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("the server's first frame is %v, not SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 3 {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (%v), want 3", v, ok)
	}
}

// TestUnauthenticatedConnections: connections that carry no authenticated
// request are few and short-lived, whatever they send: past
// MaxUnauthenticated the oldest of them is closed for a new one, and each
// is closed UnauthenticatedTimeout after it was accepted, even one that
// keeps sending requests (with a bad credential, here). One that
// authenticated stays, past the timeout, for its next request.
func TestUnauthenticatedConnections(t *testing.T) {
	l := DefaultLimits()
	l.UnauthenticatedTimeout = 3 * time.Second
	l.MaxUnauthenticated = 10
	l.MaxUnauthenticatedPerSource = 0
	addr := serve(t, l, authenticating())
	start := time.Now()
	good, goodR := dial(t, addr, nil)
	if code, err := request(good, goodR, "good"); err != nil || code != http.StatusOK {
		t.Fatalf("authenticated request: %d, %v", code, err)
	}
	// 50 idle ones: the 40 oldest are closed for the newer, as they come.
	var idle []net.Conn
	for range 50 {
		c, _ := dial(t, addr, nil)
		idle = append(idle, c)
	}
	bad, badR := dial(t, addr, nil)
	if code, err := request(bad, badR, "bad"); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("a bad credential: %d, %v", code, err)
	}
	closedAfter := make(chan time.Duration, len(idle))
	for i, c := range idle {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("idle connection %d got bytes", i)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("idle connection %d still open after 20 s", i)
			}
			closedAfter <- time.Since(start)
		}()
	}
	early := 0
	for range idle {
		if <-closedAfter < l.UnauthenticatedTimeout/2 {
			early++
		}
	}
	// The bad connection took the place of the eleventh newest.
	if early != 41 {
		t.Errorf("%d idle connections were closed at once, want the 41 oldest", early)
	}
	served := 0
	for {
		if _, err := request(bad, badR, "bad"); err != nil {
			break // closed by the server
		}
		served++
		if time.Since(start) > 20*time.Second {
			t.Fatal("a connection sending bad credentials is still served after 20 s")
		}
	}
	if time.Since(start) < l.UnauthenticatedTimeout {
		t.Errorf("the connection with bad credentials was closed after %s, before its timeout", time.Since(start))
	}
	// Past the timeout, the authenticated connection serves again.
	if code, err := request(good, goodR, "good"); err != nil || code != http.StatusOK {
		t.Fatalf("the authenticated connection after the timeout: %d, %v", code, err)
	}
}

// TestNewestUnauthenticatedServed: idle connections held by one source,
// or by many, never keep a new client from authenticating: past the
// bounds the oldest idle ones go, those of the source over its share
// first, and the connections one source holds are bounded whatever they
// do.
func TestNewestUnauthenticatedServed(t *testing.T) {
	l := DefaultLimits()
	l.UnauthenticatedTimeout = 10 * time.Minute // only the bounds make room
	l.ReadHeaderTimeout = 10 * time.Minute
	l.MaxUnauthenticated = 100
	l.MaxUnauthenticatedPerSource = 20
	l.MaxConnsPerSource = 30
	addr := serve(t, l, authenticating())
	from := func(i int) *net.TCPAddr { return &net.TCPAddr{IP: net.IPv4(127, 0, 2, byte(i))} }
	heldOf := func(conns []net.Conn) int {
		n := 0
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				n++
			}
		}
		return n
	}
	served := func(src *net.TCPAddr) {
		t.Helper()
		c, r := dial(t, addr, src)
		if code, err := request(c, r, "good"); err != nil || code != http.StatusOK {
			t.Fatalf("a client with a good token from %v: %d, %v", src, code, err)
		}
	}

	// One source, 500 idle: it holds its 20, and a client of its own
	// address, and of another, is served.
	var one []net.Conn
	for range 500 {
		c, _ := dial(t, addr, from(1))
		one = append(one, c)
	}
	served(from(1))
	served(from(2))
	if held := heldOf(one); held != l.MaxUnauthenticatedPerSource-1 {
		t.Fatalf("one source holds %d idle connections, want %d (its share, less the one closed for its own client)", held, l.MaxUnauthenticatedPerSource-1)
	}
	// Ten sources, 20 idle each, fill the pool: a new client is served.
	var many []net.Conn
	for i := range 10 {
		for range 20 {
			c, _ := dial(t, addr, from(10+i))
			many = append(many, c)
		}
	}
	served(from(3))
	if held := heldOf(append(one, many...)); held > l.MaxUnauthenticated {
		t.Fatalf("%d idle connections are held, want at most %d", held, l.MaxUnauthenticated)
	}
	// Authenticated connections count against their source's bound: its
	// 31st is closed as it is accepted.
	for range l.MaxConnsPerSource {
		served(from(4))
	}
	c, r := dial(t, addr, from(4))
	if _, err := request(c, r, "good"); err == nil {
		t.Fatalf("the %dth connection of one source was served", l.MaxConnsPerSource+1)
	}
}

// authenticating serves "ok" to a request with the token "good", and 401
// to any other.
func authenticating() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		MarkAuthenticated(r.Context())
		fmt.Fprint(w, "ok")
	})
}

// request sends a GET with token on c and reads its answer from r.
func request(c net.Conn, r *bufio.Reader, token string) (int, error) {
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// dial connects to addr, from local when given, until the test ends.
func dial(t *testing.T, addr string, local *net.TCPAddr) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{}
	if local != nil {
		d.LocalAddr = local
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestBodyReadAfterTheHandler: a body read on after its handler returned
// (a reverse proxy's transport copies the request body in a goroutine of
// its own, which may outlive the handler when the upstream answers
// first) fails as a read of a finished request does, and touches no
// deadline of the finished stream: setting one there crashed the whole
// process (a nil pointer in net/http's HTTP/2 response writer), on HTTP/2
// and HTTP/1.1 alike.
func TestBodyReadAfterTheHandler(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		read := make(chan error, 1)
		addr := serve(t, DefaultLimits(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := r.Body
			returned := make(chan struct{})
			go func() {
				<-returned
				_, err := io.ReadAll(body)
				read <- err
			}()
			w.WriteHeader(http.StatusAccepted)
			close(returned)
		}))
		tr := &http.Transport{Protocols: new(http.Protocols)}
		if h2 {
			tr.Protocols.SetUnencryptedHTTP2(true)
		} else {
			tr.Protocols.SetHTTP1(true)
		}
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte("the first part of a body"))
			time.Sleep(100 * time.Millisecond)
			_ = pw.CloseWithError(errors.New("the client gave up"))
		}()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", pr)
		if err != nil {
			t.Fatal(err)
		}
		// The client's own error (its body broke) is not what is tested:
		// the handler ran and returned either way.
		if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
			resp.Body.Close()
		}
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			t.Fatalf("HTTP/2 %v: the late read did not end", h2)
		}
		tr.CloseIdleConnections()
	}
}
