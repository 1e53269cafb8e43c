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
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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
//     ones wait in the kernel's accept queue until one closes);
//   - a connection that has carried no authenticated request (the
//     handler calls MarkAuthenticated) is closed UnauthenticatedTimeout
//     after it was accepted, whatever it sends, and at most
//     MaxUnauthenticated such connections are held at once: past it, a
//     new connection is closed as it is accepted. Junk tokens and idle
//     sockets so hold neither memory nor room in MaxConns for long.
type Limits struct {
	ReadHeaderTimeout      time.Duration
	BodyTimeout            time.Duration
	WriteTimeout           time.Duration
	IdleTimeout            time.Duration
	MaxHeaderBytes         int
	MaxConcurrentStreams   int
	MaxConns               int
	UnauthenticatedTimeout time.Duration
	MaxUnauthenticated     int
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
		// Room for a burst of clients connecting at once, each of which
		// authenticates in its first request.
		UnauthenticatedTimeout: 10 * time.Second,
		MaxUnauthenticated:     512,
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

// Listen bounds ln to MaxConns connections at once, and to
// MaxUnauthenticated connections that have carried no authenticated
// request: Accept waits while MaxConns are open, closes a connection past
// MaxUnauthenticated at once, and returns once the listener is closed.
func (l Limits) Listen(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, l.MaxConns), done: make(chan struct{}),
		unauthTimeout: l.UnauthenticatedTimeout, unauthMax: int64(l.MaxUnauthenticated)}
}

type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once

	unauthTimeout time.Duration
	unauthMax     int64
	unauth        atomic.Int64 // connections accepted and not yet authenticated
	refused       atomic.Uint64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.sem
			return nil, err
		}
		lc := &limitConn{Conn: c, release: func() { <-l.sem }}
		if l.unauthMax <= 0 {
			return lc, nil
		}
		if l.unauth.Add(1) > l.unauthMax {
			l.unauth.Add(-1)
			l.refused.Add(1)
			_ = c.Close()
			<-l.sem
			continue
		}
		lc.unauth = &l.unauth
		lc.pending.Store(true)
		if l.unauthTimeout > 0 {
			lc.timer = time.AfterFunc(l.unauthTimeout, func() {
				if lc.pending.Load() {
					_ = lc.Conn.Close() // the server sees it fail, and closes lc
				}
			})
		}
		return lc, nil
	}
}

// Refused counts the connections closed as they were accepted, past
// MaxUnauthenticated.
func (l *limitListener) Refused() uint64 { return l.refused.Load() }

// Close also ends an Accept waiting for a connection to close, so that a
// full server shuts down at once.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()

	// unauth counts the listener's unauthenticated connections; pending
	// is true while this one is among them.
	unauth  *atomic.Int64
	pending atomic.Bool
	timer   *time.Timer
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.settle()
	c.once.Do(c.release)
	return err
}

// settle takes the connection out of the unauthenticated ones, once.
func (c *limitConn) settle() {
	if c.pending.CompareAndSwap(true, false) {
		c.unauth.Add(-1)
		if c.timer != nil {
			c.timer.Stop()
		}
	}
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
