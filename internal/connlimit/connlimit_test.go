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

package connlimit

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// accepting accepts on a listener bounded by o until the test ends and
// keeps what it accepts open; it returns the address and the accepted
// connections as they come.
func accepting(t *testing.T, o Options) (string, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bl := Listen(ln, o)
	got := make(chan net.Conn, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := bl.Accept()
			if err != nil {
				return
			}
			got <- c
		}
	}()
	t.Cleanup(func() {
		bl.Close()
		<-done
		close(got)
		for c := range got {
			c.Close()
		}
	})
	return ln.Addr().String(), got
}

func dialFrom(t *testing.T, addr string, from byte) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 3, from)}}
	c, err := d.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer says whether the server closed c (within a short wait).
func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || (err != nil && strings.Contains(err.Error(), "reset"))
}

// TestPerSource: a source holds at most PerSource connections at once;
// its next is closed as it is accepted, another source's is not, and a
// closed connection makes room again.
func TestPerSource(t *testing.T) {
	b := NewBudget(100)
	addr, got := accepting(t, Options{Name: "test", PerSource: 2, Budget: b})
	a1, a2 := dialFrom(t, addr, 1), dialFrom(t, addr, 1)
	first := <-got
	<-got
	a3 := dialFrom(t, addr, 1)
	other := dialFrom(t, addr, 2)
	<-got // the other source's
	if !closedByPeer(a3) {
		t.Fatal("a source's third connection was kept, past its bound of 2")
	}
	for _, c := range []net.Conn{a1, a2, other} {
		if closedByPeer(c) {
			t.Fatal("a connection within the bounds was closed")
		}
	}
	first.Close()
	a4 := dialFrom(t, addr, 1)
	<-got
	if closedByPeer(a4) {
		t.Fatal("a source that closed a connection cannot open another")
	}
	if n := refused(b, "test", RefusedPerSource); n != 1 {
		t.Fatalf("per_source refusals counted: %d, want 1", n)
	}
}

// TestBudget: past the budget a new connection is closed as it is
// accepted, on whichever listener; the budget's use never passes it.
func TestBudget(t *testing.T) {
	b := NewBudget(3)
	addr1, got1 := accepting(t, Options{Name: "one", Budget: b})
	addr2, got2 := accepting(t, Options{Name: "two", Budget: b})
	var kept []net.Conn
	for i := range 3 {
		addr, got := addr1, got1
		if i == 2 {
			addr, got = addr2, got2
		}
		kept = append(kept, dialFrom(t, addr, byte(10+i)))
		<-got
	}
	over := dialFrom(t, addr2, 20)
	if !closedByPeer(over) {
		t.Fatal("a connection past the process's budget was kept")
	}
	if n := refused(b, "two", RefusedBudget); n != 1 {
		t.Fatalf("budget refusals counted: %d, want 1", n)
	}
	if b.InUse() != 3 || b.peak.Load() != 3 {
		t.Fatalf("in use %d, peak %d; want 3 and 3", b.InUse(), b.peak.Load())
	}
	for _, c := range kept {
		if closedByPeer(c) {
			t.Fatal("a connection within the budget was closed")
		}
	}
}

// TestMaxWaits: past Max, Accept waits (the connection queues in the
// kernel, holding no descriptor of the process) and takes it once one
// closes.
func TestMaxWaits(t *testing.T) {
	addr, got := accepting(t, Options{Name: "test", Max: 1, Budget: NewBudget(10)})
	dialFrom(t, addr, 1)
	first := <-got
	dialFrom(t, addr, 1)
	select {
	case <-got:
		t.Fatal("a connection past Max was accepted")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued connection was not accepted once the first closed")
	}
}

// refused is b's count of name's refusals for reason.
func refused(b *Budget, name, reason string) uint64 {
	v, ok := b.stats(name).refused.Load(reason)
	if !ok {
		return 0
	}
	return v.(*atomic.Uint64).Load()
}
