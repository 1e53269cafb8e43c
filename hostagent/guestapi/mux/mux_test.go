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

package mux

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echo serves every accepted stream by copying it back, then closing.
func echo(_ *testing.T, srv *Session) {
	for {
		st, err := srv.Accept()
		if err != nil {
			return
		}
		go func() {
			_, _ = io.Copy(st, st)
			_ = st.CloseWrite()
		}()
	}
}

func TestStreamsRoundTripBeyondTheWindow(t *testing.T) {
	a, b := net.Pipe()
	cli, srv := Client(a), Server(b)
	defer cli.Close()
	defer srv.Close()
	go echo(t, srv)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := cli.Open()
			if err != nil {
				t.Error(err)
				return
			}
			want := make([]byte, 3*Window+123)
			_, _ = rand.Read(want)
			go func() {
				_, _ = st.Write(want)
				_ = st.CloseWrite()
			}()
			got, err := io.ReadAll(st)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, want) {
				t.Errorf("stream %d: got %d bytes back, want %d equal ones", st.id, len(got), len(want))
			}
		}()
	}
	wg.Wait()
	cli.mu.Lock()
	left := len(cli.streams)
	cli.mu.Unlock()
	if left != 0 {
		t.Errorf("%d streams still tracked after both sides closed", left)
	}
}

func TestBrokenTransportEndsStreams(t *testing.T) {
	a, b := net.Pipe()
	cli, srv := Client(a), Server(b)
	defer cli.Close()
	st, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Accept(); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if _, err := st.Read(make([]byte, 1)); err == nil || err == io.EOF {
		t.Fatalf("read on a broken session: %v, want an error other than EOF", err)
	}
	<-cli.Done()
}

// rawHello is what a client sends first.
func rawHello(nonce byte) []byte {
	return append(append([]byte{}, syncMagic[:]...), bytes.Repeat([]byte{nonce}, nonceSize)...)
}

func rawFrame(typ byte, id uint32, n int) []byte {
	h := []byte{typ, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return append(h, make([]byte, n)...)
}

func TestOverrunDropsTheConnectionNotThePort(t *testing.T) {
	a, b := net.Pipe()
	srv := Server(b)
	defer srv.Close()
	// A raw client that ignores credit.
	go func() {
		_, _ = a.Write(rawHello(1))
		_, _ = a.Write(rawFrame(frameOpen, 1, 0))
		for i := 0; i <= Window/MaxPayload; i++ {
			if _, err := a.Write(rawFrame(frameData, 1, MaxPayload)); err != nil {
				return
			}
		}
		// A new connection after the overrun.
		_, _ = a.Write(rawHello(2))
	}()
	echoes := make(chan []byte, 2)
	go func() {
		buf := make([]byte, 1<<16)
		var got []byte
		for {
			n, err := a.Read(buf)
			got = append(got, buf[:n]...)
			for {
				i := bytes.Index(got, answerMagic[:])
				if i < 0 || len(got) < i+helloSize {
					break
				}
				echoes <- got[i : i+helloSize]
				got = got[i+helloSize:]
			}
			if err != nil {
				return
			}
		}
	}()
	st, err := srv.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if got := <-echoes; !bytes.Equal(got[len(answerMagic):], rawHello(1)[len(syncMagic):]) {
		t.Fatalf("first echo %x", got)
	}
	if _, err := io.ReadAll(st); err == nil {
		t.Fatal("the overrun stream ended cleanly")
	}
	if got := <-echoes; !bytes.Equal(got[len(answerMagic):], rawHello(2)[len(syncMagic):]) {
		t.Fatalf("second echo %x", got)
	}
	select {
	case <-srv.Done():
		t.Fatalf("the server ended: %v", srv.Err())
	default:
	}
}

// port is the agent's end of a virtio-serial port: it outlives the agent's
// connections; what a closed connection had not read is lost with it.
type port struct {
	conn   net.Conn
	chunks chan []byte
}

func newPort(c net.Conn) *port {
	p := &port{conn: c, chunks: make(chan []byte)}
	// Ends when c is closed.
	go func() {
		defer close(p.chunks)
		for {
			buf := make([]byte, 4096)
			n, err := c.Read(buf)
			if n > 0 {
				p.chunks <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *port) connect() *portConn { return &portConn{p: p, closed: make(chan struct{})} }

type portConn struct {
	p      *port
	rest   []byte
	once   sync.Once
	closed chan struct{}
}

func (c *portConn) Read(b []byte) (int, error) {
	if len(c.rest) == 0 {
		select {
		case chunk, ok := <-c.p.chunks:
			if !ok {
				return 0, io.EOF
			}
			c.rest = chunk
		case <-c.closed:
			return 0, io.EOF
		}
	}
	n := copy(b, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

func (c *portConn) Write(b []byte) (int, error) { return c.p.conn.Write(b) }

func (c *portConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// TestReconnectAfterACutFrame is an agent restart: the old agent leaves a
// stream open and a frame cut short on the port; a new agent's streams work.
func TestReconnectAfterACutFrame(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	srv := Server(b)
	defer srv.Close()
	go echo(t, srv)
	p := newPort(a)

	old := Client(p.connect())
	st, err := old.Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("left behind")); err != nil {
		t.Fatal(err)
	}
	// The server echoes, but nobody reads it any more; and half a frame.
	if _, err := a.Write(rawFrame(frameData, st.id, 1000)[:20]); err != nil {
		t.Fatal(err)
	}
	old.Close()

	cli := Client(p.connect())
	defer cli.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		st, err := cli.Open()
		if err != nil {
			t.Error(err)
			return
		}
		go func() {
			_, _ = st.Write([]byte("hello again"))
			_ = st.CloseWrite()
		}()
		got, err := io.ReadAll(st)
		if err != nil || string(got) != "hello again" {
			t.Errorf("after reconnecting: %q, %v", got, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no round trip after reconnecting")
	}
}

// TestCloseResetsAWritingPeer: an agent that stops reading a stream (a
// cancelled command) does not leave the guest's writer blocked on a full
// window, and neither end keeps the stream.
func TestCloseResetsAWritingPeer(t *testing.T) {
	a, b := net.Pipe()
	cli, srv := Client(a), Server(b)
	defer cli.Close()
	defer srv.Close()
	wrote := make(chan error, 1)
	go func() {
		st, err := srv.Accept()
		if err != nil {
			wrote <- err
			return
		}
		chunk := make([]byte, MaxPayload)
		for {
			if _, err := st.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
	}()
	st, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 3*Window)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the writer ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the guest's writer is still blocked after the agent closed the stream")
	}
	// A new stream still works after the dropped one's late frames.
	go echo(t, srv)
	st2, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = st2.Write([]byte("next"))
		_ = st2.CloseWrite()
	}()
	if got, err := io.ReadAll(st2); err != nil || string(got) != "next" {
		t.Fatalf("next stream: %q, %v", got, err)
	}
	// The server forgets its end just after its Close reached us.
	for _, s := range []*Session{cli, srv} {
		deadline := time.Now().Add(time.Second)
		for {
			s.mu.Lock()
			n := len(s.streams)
			s.mu.Unlock()
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%d streams still tracked", n)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// A stream is a net.Conn: the agent's exec code bounds a command's start
// and its kill by deadlines, on a VM's streams as on unix sockets.
var _ net.Conn = (*Stream)(nil)

func TestDeadlinesEndWaitingReadsAndWrites(t *testing.T) {
	a, b := net.Pipe()
	cli, srv := Client(a), Server(b)
	defer cli.Close()
	defer srv.Close()
	st, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := srv.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// Nobody writes: a Read waits until its deadline, then fails with
	// the error net.Conn's callers test for.
	_ = st.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	// Nobody reads: a Write fills the window, then fails at its deadline
	// having written exactly the window.
	_ = st.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := st.Write(make([]byte, 2*Window))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != Window {
		t.Fatalf("write past the deadline: %d bytes, %v; want %d, os.ErrDeadlineExceeded", n, err, Window)
	}
	// Deadlines cleared, the stream works again: the peer reads what was
	// written and answers.
	_ = st.SetDeadline(time.Time{})
	go func() {
		_, _ = io.CopyN(io.Discard, peer, Window)
		_, _ = peer.Write([]byte("k"))
	}()
	one := make([]byte, 1)
	if _, err := io.ReadFull(st, one); err != nil || one[0] != 'k' {
		t.Fatalf("after clearing the deadlines: %q, %v", one, err)
	}
}
