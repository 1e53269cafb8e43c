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
	"container/list"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/playground-dev/playground/internal/connlimit"
)

// Limits harden a server against idle, slow and greedy connections. Every
// Playground server streams: a long exec or poll answers when it ends, and
// MCP progress notifications trickle out in between. So no deadline covers
// a whole request or response (http.Server's ReadTimeout and WriteTimeout
// would cut them, and ReadTimeout, left armed while a handler runs, cancels
// the request's context once it passes). Instead each phase that a peer
// controls has its own bound:
//
//   - headers must arrive within ReadHeaderTimeout;
//   - a request body must arrive within BodyTimeout of the headers (the
//     deadline is lifted once the body is read, so the response may take
//     as long as its work does);
//   - every write of the response must complete within WriteTimeout: a
//     peer that stops reading is cut off, one that reads is never;
//   - a connection without a request in flight is closed after
//     IdleTimeout;
//   - an HTTP/2 connection carries at most MaxConcurrentStreams requests at
//     once, and the server holds at most MaxConns connections (further
//     ones wait in the kernel's accept queue until one closes), at most
//     MaxConnsPerSource of them from one source (an IPv4 address, an IPv6
//     /64; past it a new one is closed as it is accepted), each charged
//     to the process's connection budget (package connlimit);
//   - a connection that has carried no authenticated request (the
//     handler calls MarkAuthenticated) is closed UnauthenticatedTimeout
//     after it was accepted, whatever it sends, and at most
//     MaxUnauthenticated such connections are held at once,
//     MaxUnauthenticatedPerSource from one source: past either, the oldest
//     of them (of all, or of that source) is closed for the new one. Junk
//     tokens and idle sockets so hold neither memory nor room in MaxConns
//     for long, and never keep a new client from sending its token.
type Limits struct {
	// Name names the server's listener in the connection metrics
	// ("gateway", "agent").
	Name                        string
	ReadHeaderTimeout           time.Duration
	BodyTimeout                 time.Duration
	WriteTimeout                time.Duration
	IdleTimeout                 time.Duration
	MaxHeaderBytes              int
	MaxConcurrentStreams        int
	MaxConns                    int
	MaxConnsPerSource           int
	UnauthenticatedTimeout      time.Duration
	MaxUnauthenticated          int
	MaxUnauthenticatedPerSource int
}

// DefaultLimits suit a server on a cluster network.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout:    10 * time.Second,
		BodyTimeout:          60 * time.Second,
		WriteTimeout:         60 * time.Second,
		IdleTimeout:          2 * time.Minute,
		MaxHeaderBytes:       64 << 10,
		MaxConcurrentStreams: 100,
		MaxConns:             4096,
		// A source is one client, or a few behind a NAT: a proxy in front
		// of the server is every client's source, and needs this raised
		// (or 0) while it bounds its own clients.
		MaxConnsPerSource: 256,
		// Room for a burst of clients connecting at once, each of which
		// authenticates in its first request.
		UnauthenticatedTimeout:      10 * time.Second,
		MaxUnauthenticated:          512,
		MaxUnauthenticatedPerSource: 64,
	}
}

// Validate refuses limits that leave a phase unbounded.
func (l Limits) Validate() error {
	if l.ReadHeaderTimeout <= 0 || l.BodyTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0 || l.UnauthenticatedTimeout <= 0 {
		return errors.New("every HTTP timeout must be positive: a zero one would let a peer hold a connection for ever")
	}
	if l.MaxHeaderBytes <= 0 || l.MaxConcurrentStreams <= 0 || l.MaxConns <= 0 || l.MaxUnauthenticated <= 0 {
		return errors.New("the HTTP header size, stream and connection bounds must be positive")
	}
	if l.MaxConnsPerSource < 0 || l.MaxUnauthenticatedPerSource < 0 {
		return errors.New("the HTTP bounds per source must be positive, or 0 for none")
	}
	return nil
}

// Server returns an http.Server for h within the limits (Serve applies
// MaxConns to its listener).
func (l Limits) Server(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           l.Handler(h),
		ConnContext:       withConn,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: l.MaxConcurrentStreams,
			// An idle HTTP/2 connection is pinged, so a dead peer's is
			// closed even when its TCP connection lingers.
			SendPingTimeout:  l.IdleTimeout / 2,
			PingTimeout:      l.ReadHeaderTimeout,
			WriteByteTimeout: l.WriteTimeout,
		},
		ErrorLog: errorLog,
	}
}

// Handler applies the body and write deadlines to each request of h.
func (l Limits) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			if err := rc.SetReadDeadline(time.Now().Add(l.BodyTimeout)); err == nil {
				body := &deadlineBody{ReadCloser: r.Body, rc: rc}
				r.Body = body
				// The body may be read on after the handler returns (a
				// reverse proxy's transport copies it in a goroutine of
				// its own); the response writer is then not to be
				// touched: net/http's HTTP/2 one crashes.
				defer body.end()
			}
		}
		h.ServeHTTP(&progressWriter{ResponseWriter: w, rc: rc, timeout: l.WriteTimeout}, r)
	})
}

// deadlineBody lifts the read deadline once the body is read, closed or
// broken: from then on the connection only waits for the response.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
	mu sync.Mutex
	// done: the deadline was lifted, or the handler returned.
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.lift()
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	b.lift()
	return b.ReadCloser.Close()
}

func (b *deadlineBody) lift() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// end is called when the handler returns: a lift that has not happened
// will not (the request is over, and its deadlines with it), and one in
// progress completes first.
func (b *deadlineBody) end() {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
}

// writeSlice bounds one write under one deadline, so that a deadline
// measures progress rather than the size of a response.
const writeSlice = 256 << 10

// progressWriter arms the write deadline for the time of each write or
// flush only, and disarms it after: an HTTP/2 stream whose deadline passes
// is reset even when nothing is being written, and a long call may write
// nothing for minutes.
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (p *progressWriter) arm() bool {
	return p.rc.SetWriteDeadline(time.Now().Add(p.timeout)) == nil
}

func (p *progressWriter) disarm() { _ = p.rc.SetWriteDeadline(time.Time{}) }

func (p *progressWriter) Write(b []byte) (int, error) {
	if !p.arm() {
		return p.ResponseWriter.Write(b)
	}
	defer p.disarm()
	written := 0
	for len(b) > 0 {
		n, err := p.ResponseWriter.Write(b[:min(len(b), writeSlice)])
		written += n
		if err != nil {
			return written, err
		}
		b = b[n:]
		if len(b) > 0 {
			p.arm()
		}
	}
	return written, nil
}

func (p *progressWriter) FlushError() error {
	if p.arm() {
		defer p.disarm()
	}
	return p.rc.Flush()
}

func (p *progressWriter) Flush() { _ = p.FlushError() }

// Unwrap lets http.ResponseController reach the server's writer.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Listen bounds ln: MaxConns connections at once (Accept waits past it),
// MaxConnsPerSource from one source and the process's connection budget
// (past them a new connection is closed as it is accepted; package
// connlimit), and MaxUnauthenticated connections that have carried no
// authenticated request, MaxUnauthenticatedPerSource of them from one
// source: past either, the oldest such connection (of all, or of that
// source) is closed to make room for the new one. A client that connects
// to send its token is so never turned away by idle connections others
// hold, and a source that opens many only closes its own. Accept returns
// once the listener is closed.
func (l Limits) Listen(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return ln
	}
	name := l.Name
	if name == "" {
		name = "http"
	}
	return &limitListener{Listener: connlimit.Listen(ln, connlimit.Options{Name: name, Max: l.MaxConns, PerSource: l.MaxConnsPerSource}),
		name: name, unauthTimeout: l.UnauthenticatedTimeout, unauthMax: l.MaxUnauthenticated, unauthPerSource: l.MaxUnauthenticatedPerSource,
		pending: list.New(), bySource: map[string]*list.List{}}
}

type limitListener struct {
	net.Listener
	name string

	unauthTimeout   time.Duration
	unauthMax       int
	unauthPerSource int

	// pending holds the connections that have carried no authenticated
	// request, oldest first, and bySource the same by source.
	mu       sync.Mutex
	pending  *list.List
	bySource map[string]*list.List
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l, source: connlimit.Source(c)}
	if l.unauthMax <= 0 {
		return lc, nil
	}
	var evict []*limitConn
	l.mu.Lock()
	src := l.bySource[lc.source]
	if src == nil {
		src = list.New()
		l.bySource[lc.source] = src
	}
	if l.unauthPerSource > 0 && src.Len() >= l.unauthPerSource {
		evict = append(evict, l.settleLocked(src.Front().Value.(*limitConn)))
	}
	if l.pending.Len() >= l.unauthMax {
		evict = append(evict, l.settleLocked(l.pending.Front().Value.(*limitConn)))
	}
	if l.bySource[lc.source] == nil { // emptied by the eviction
		l.bySource[lc.source] = src
	}
	lc.elem, lc.srcElem = l.pending.PushBack(lc), src.PushBack(lc)
	l.mu.Unlock()
	for _, old := range evict {
		if old == nil {
			continue
		}
		connlimit.Process().Refused(l.name, connlimit.RefusedUnauthenticated)
		_ = old.Conn.Close() // the server sees it fail, and closes old
	}
	if l.unauthTimeout > 0 {
		lc.timer = time.AfterFunc(l.unauthTimeout, func() {
			if lc.isPending() {
				_ = lc.Conn.Close() // the server sees it fail, and closes lc
			}
		})
	}
	return lc, nil
}

// settleLocked takes c out of the unauthenticated connections, if it is
// among them, and returns it then (nil otherwise); l.mu is held.
func (l *limitListener) settleLocked(c *limitConn) *limitConn {
	if c.elem == nil {
		return nil
	}
	l.pending.Remove(c.elem)
	if src := l.bySource[c.source]; src != nil {
		src.Remove(c.srcElem)
		if src.Len() == 0 {
			delete(l.bySource, c.source)
		}
	}
	c.elem, c.srcElem = nil, nil
	if c.timer != nil {
		c.timer.Stop()
	}
	return c
}

// Unauthenticated is how many connections have carried no authenticated
// request now.
func (l *limitListener) Unauthenticated() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending.Len()
}

type limitConn struct {
	net.Conn
	l      *limitListener
	source string

	// elem and srcElem are its places among the listener's
	// unauthenticated connections (nil: not among them); timer closes it
	// if it stays there too long. Guarded by l.mu.
	elem, srcElem *list.Element
	timer         *time.Timer
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.settle()
	return err
}

// NetConn is the connection underneath.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// settle takes the connection out of the unauthenticated ones, once.
func (c *limitConn) settle() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.settleLocked(c)
}

func (c *limitConn) isPending() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.elem != nil
}

type connKey struct{}

// withConn is a server's ConnContext: each request's context carries its
// connection, for MarkAuthenticated.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if lc := limitConnOf(c); lc != nil {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// limitConnOf finds the limitConn under c (a TLS connection wraps it).
func limitConnOf(c net.Conn) *limitConn {
	for c != nil {
		switch v := c.(type) {
		case *limitConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// MarkAuthenticated records that the request of ctx proved a caller's
// identity: its connection is no longer bound by UnauthenticatedTimeout
// and MaxUnauthenticated. The authentication of each component calls it.
func MarkAuthenticated(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*limitConn); ok {
		c.settle()
	}
}
