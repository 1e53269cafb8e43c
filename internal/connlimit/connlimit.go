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

// Package connlimit bounds the connections a process accepts, each of
// which holds a file descriptor until it closes: a listener's at once
// (Accept waits past the bound, the rest queue in the kernel), one
// source's at once (an IPv4 address, an IPv6 /64; past it a new one is
// closed as it is accepted), and every listener's together against the
// process's budget (past it a new one is closed as it is accepted). No
// peer, and no tenant through its many listeners, can so take the
// descriptors that the process needs for everything else: its sandboxes'
// pipes and files, its API server's connections, its own dials.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/internal/keyedlimit"
)

// Why a connection was refused, the values of the refused metric's reason.
const (
	// RefusedBudget: the process's budget was spent.
	RefusedBudget = "budget"
	// RefusedPerSource: its source held as many connections as allowed.
	RefusedPerSource = "per_source"
	// RefusedUnauthenticated: it carried no authenticated request and made
	// room for a newer one (package httpserve).
	RefusedUnauthenticated = "unauthenticated"
)

// Budget is a process's budget of accepted connections.
type Budget struct {
	limit atomic.Int64
	used  atomic.Int64
	peak  atomic.Int64

	mu        sync.Mutex
	listeners map[string]*listenerStats
}

type listenerStats struct {
	open    atomic.Int64
	refused sync.Map // reason → *atomic.Uint64
}

var process = NewBudget(DefaultBudget())

// Process is the process's budget: file descriptors are the process's,
// whichever component (agent, gateway) holds them.
func Process() *Budget { return process }

// DefaultBudget is half the process's limit of open files (which Go raises
// to its hard limit at start), and at least 1024: the other half is for
// everything else the process opens.
func DefaultBudget() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1 << 16
	}
	return max(int(rl.Cur/2), 1024)
}

// NewBudget is a budget of limit connections.
func NewBudget(limit int) *Budget {
	b := &Budget{listeners: map[string]*listenerStats{}}
	b.limit.Store(int64(limit))
	return b
}

// SetLimit changes the budget (the components' --connection-budget); the
// connections held are kept.
func (b *Budget) SetLimit(limit int) { b.limit.Store(int64(limit)) }

// Limit is the budget's size.
func (b *Budget) Limit() int { return int(b.limit.Load()) }

// InUse is how many connections hold the budget now.
func (b *Budget) InUse() int { return int(b.used.Load()) }

// take charges one connection of listener name to the budget; false when
// it is spent.
func (b *Budget) take(name string) bool {
	n := b.used.Add(1)
	if n > b.limit.Load() {
		b.used.Add(-1)
		b.Refused(name, RefusedBudget)
		return false
	}
	b.raisePeak(n)
	b.stats(name).open.Add(1)
	return true
}

// raisePeak records n as the peak if it is above it.
func (b *Budget) raisePeak(n int64) {
	for p := b.peak.Load(); n > p; p = b.peak.Load() {
		if b.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (b *Budget) release(name string) {
	b.used.Add(-1)
	b.stats(name).open.Add(-1)
}

// Refused counts a connection of listener name refused for reason.
func (b *Budget) Refused(name, reason string) {
	s := b.stats(name)
	v, _ := s.refused.LoadOrStore(reason, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
}

func (b *Budget) stats(name string) *listenerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.listeners[name]
	if !ok {
		s = &listenerStats{}
		b.listeners[name] = s
	}
	return s
}

// Options bound one listener.
type Options struct {
	// Name is the listener's name in the metrics: a kind of listener
	// ("gateway", "agent", "resolver"), never one per sandbox or tenant.
	Name string
	// Max is how many connections it holds at once: Accept waits past it
	// (0: no bound but the budget's).
	Max int
	// PerSource is how many connections one source (an IPv4 address, an
	// IPv6 /64) holds at once: past it a new one is closed as it is
	// accepted (0: no bound; behind a proxy every client has its source).
	PerSource int
	// Budget is charged a connection for each held (nil: Process()).
	Budget *Budget
}

// Listen bounds ln by o. The connections it returns release what they
// hold when closed; Source names a connection's source.
func Listen(ln net.Listener, o Options) net.Listener {
	if o.Budget == nil {
		o.Budget = Process()
	}
	l := &listener{Listener: ln, opts: o, done: make(chan struct{}), sources: map[string]int{}}
	if o.Max > 0 {
		l.sem = make(chan struct{}, o.Max)
	}
	return l
}

type listener struct {
	net.Listener
	opts Options
	sem  chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	sources map[string]int
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		if l.sem != nil {
			select {
			case l.sem <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.releaseSlot()
			return nil, err
		}
		src := Source(c)
		if !l.takeSource(src) {
			l.opts.Budget.Refused(l.opts.Name, RefusedPerSource)
			_ = c.Close()
			l.releaseSlot()
			continue
		}
		if !l.opts.Budget.take(l.opts.Name) {
			_ = c.Close()
			l.releaseSource(src)
			l.releaseSlot()
			continue
		}
		return &Conn{Conn: c, source: src, release: func() {
			l.opts.Budget.release(l.opts.Name)
			l.releaseSource(src)
			l.releaseSlot()
		}}, nil
	}
}

func (l *listener) releaseSlot() {
	if l.sem != nil {
		<-l.sem
	}
}

func (l *listener) takeSource(src string) bool {
	if l.opts.PerSource <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources[src] >= l.opts.PerSource {
		return false
	}
	l.sources[src]++
	return true
}

func (l *listener) releaseSource(src string) {
	if l.opts.PerSource <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sources[src]--
	if l.sources[src] <= 0 {
		delete(l.sources, src)
	}
}

// Close also ends an Accept waiting for a connection to close, so that a
// full listener shuts down at once.
func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Conn is a connection a bounded listener accepted.
type Conn struct {
	net.Conn
	source  string
	once    sync.Once
	release func()
}

// Close closes the connection and gives back what it held, once.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn is the connection underneath (crypto/tls and net/http look for
// this method).
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Source is the source of c as the bounds count it: its remote IPv4
// address, or its remote IPv6 address's /64.
func Source(c net.Conn) string {
	if cc, ok := c.(*Conn); ok {
		return cc.source
	}
	return keyedlimit.Source(c.RemoteAddr().String())
}
