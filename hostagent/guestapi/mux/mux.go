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

// Package mux carries many connections of the guest protocol over one byte
// stream: the virtio-serial port between the agent and a vm sandbox, which,
// unlike a unix socket, has neither connections nor an end per command.
//
// The agent opens streams (Open); the guest accepts them (Accept) and
// relays each to its init's unix socket, so init and the shepherds serve a
// VM exactly as they serve a container. Every frame is a one-byte type, a
// four-byte big-endian stream id, a four-byte big-endian payload length and
// the payload:
//
//	Open   (agent → guest)  a new stream
//	Data                     bytes of a stream, at most MaxPayload
//	Close                    the sender writes no more on the stream
//	Credit                   four bytes: the receiver consumed that many
//	Reset                    the sender dropped the stream: writes on it fail
//
// A port outlives the agent's connections to it: after an agent restart,
// bytes of the old connection may still be queued either way. So a client
// starts with a Hello, not a frame: a magic that no frame starts with and a
// random nonce, sent again (after a frame's worth of zeros, which complete
// a frame the previous agent cut short) every ResyncInterval until the
// server echoes it.
// The client discards whatever precedes the echo; the server, on a Hello
// with a new nonce, drops every stream of the previous connection, echoes
// the Hello and reads frames from there. A server that loses the frame
// boundaries (a frame cut off by the agent's restart) scans for the next
// Hello instead of failing, so the port is never lost for good.
//
// Each side may have at most Window unacknowledged bytes in flight per
// stream, so a slow reader holds back its own stream only, and neither side
// can make the other buffer more than Window per stream, nor open more than
// MaxStreams streams.
package mux

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Frame types.
const (
	frameOpen   = 1
	frameData   = 2
	frameClose  = 3
	frameCredit = 4
	frameReset  = 5
)

// Bounds of the protocol.
const (
	headerSize = 9
	// MaxPayload bounds a Data frame.
	MaxPayload = 32 << 10
	// Window is how many bytes of a stream may be unacknowledged.
	Window = 256 << 10
	// MaxStreams bounds the streams open at once.
	MaxStreams = 1024
)

// Resynchronisation (Hello).
const (
	// ResyncInterval is how often a client repeats its Hello until the
	// server echoes it.
	ResyncInterval = time.Second
	// maxStale bounds what a client discards before the echo.
	maxStale  = 64 << 20
	nonceSize = 16
	helloSize = len(syncMagic) + nonceSize
)

// syncMagic starts a client's Hello, answerMagic the server's answer; their
// first byte is no frame type. They differ so that a guest that echoes a
// stream's bytes (cat) cannot echo a Hello the client takes for the answer.
var (
	syncMagic   = [16]byte{0xA5, 'p', 'l', 'a', 'y', 'g', 'r', 'o', 'u', 'n', 'd', '-', 's', 'y', 'n', 'c'}
	answerMagic = [16]byte{0xA5, 'p', 'l', 'a', 'y', 'g', 'r', 'o', 'u', 'n', 'd', '-', 'a', 'n', 's', 'r'}
)

// ErrClosed is returned once the session has ended.
var ErrClosed = errors.New("mux: session closed")

// ErrReset ends the streams of a server whose client reconnected.
var ErrReset = errors.New("mux: the agent reconnected")

// errPeerReset ends a stream the peer closed while it still had to read.
var errPeerReset = errors.New("mux: stream reset by peer")

// Session is one end of a multiplexed byte stream.
type Session struct {
	rw     io.ReadWriteCloser
	client bool

	wmu sync.Mutex // one frame at a time on rw
	bw  *bufio.Writer

	mu      sync.Mutex
	streams map[uint32]*Stream
	nextID  uint32
	// maxID is the highest stream id of the connection: frames for a
	// lower id that is no longer open belong to a dropped stream and are
	// ignored.
	maxID  uint32
	err    error // set once, when the session ends
	accept chan *Stream
	done   chan struct{}

	// nonce is the current connection's Hello; epoch counts the server's
	// connections, so that frames of a dropped stream are never written
	// into the next one. Both change with wmu held.
	nonce  [nonceSize]byte
	epoch  atomic.Uint64
	synced chan struct{} // client: closed once the server echoed the Hello
}

// Client starts the agent's end over rw; it reads rw until rw fails or
// Close is called. Open waits until the server has answered its Hello.
func Client(rw io.ReadWriteCloser) *Session {
	s := newSession(rw, true)
	_, _ = rand.Read(s.nonce[:])
	s.synced = make(chan struct{})
	go s.readLoop()
	// Repeats the Hello until synced or ended; owned by the session.
	go s.hello()
	return s
}

// Server starts the guest's end over rw, which should outlive the agent's
// connections (a read that finds no agent waits rather than failing).
func Server(rw io.ReadWriteCloser) *Session {
	s := newSession(rw, false)
	go s.readLoop()
	return s
}

// Synced is closed once the server answered the client's Hello.
func (s *Session) Synced() <-chan struct{} { return s.synced }

func (s *Session) hello() {
	t := time.NewTicker(ResyncInterval)
	defer t.Stop()
	// A repeated Hello follows a frame's worth of zeros: if the previous
	// client cut a frame short, the server takes the start of them for
	// the rest of it (and the first Hello with it), then the next zeros
	// for frames of no type, and scans on to the Hello.
	var filler []byte
	for {
		s.wmu.Lock()
		// Checked with wmu held: once synced, Open writes frames, and a
		// Hello after them would make the server drop their streams.
		select {
		case <-s.synced:
			s.wmu.Unlock()
			return
		default:
		}
		err := s.writeRaw(filler, syncMagic[:], s.nonce[:])
		s.wmu.Unlock()
		filler = make([]byte, headerSize+MaxPayload)
		if err != nil {
			return
		}
		select {
		case <-s.synced:
			return
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

func newSession(rw io.ReadWriteCloser, client bool) *Session {
	s := &Session{
		rw:      rw,
		client:  client,
		bw:      bufio.NewWriterSize(rw, headerSize+MaxPayload),
		streams: make(map[uint32]*Stream),
		accept:  make(chan *Stream, MaxStreams),
		done:    make(chan struct{}),
	}
	return s
}

// Done is closed when the session has ended; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended, nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session and every stream.
func (s *Session) Close() error {
	s.fail(ErrClosed)
	return nil
}

// Open starts a stream (agent side).
func (s *Session) Open() (*Stream, error) {
	if !s.client {
		return nil, errors.New("mux: only the client opens streams")
	}
	select {
	case <-s.synced:
	case <-s.done:
		return nil, s.Err()
	}
	// Ids go on the wire in the order they are given (the server refuses
	// an id at or below the highest it has seen), so wmu is held across.
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	if len(s.streams) >= MaxStreams {
		s.mu.Unlock()
		return nil, fmt.Errorf("mux: %d streams open", MaxStreams)
	}
	s.nextID++
	s.maxID = s.nextID
	st := newStream(s, s.nextID)
	s.streams[st.id] = st
	s.mu.Unlock()
	var h [headerSize]byte
	h[0] = frameOpen
	binary.BigEndian.PutUint32(h[1:5], st.id)
	if err := s.writeRaw(h[:]); err != nil {
		return nil, err
	}
	return st, nil
}

// Accept waits for the next stream the agent opens (guest side).
func (s *Session) Accept() (*Stream, error) {
	select {
	case st := <-s.accept:
		return st, nil
	case <-s.done:
		return nil, s.Err()
	}
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	streams := s.streams
	s.streams = map[uint32]*Stream{}
	s.mu.Unlock()
	close(s.done)
	_ = s.rw.Close()
	for _, st := range streams {
		st.broken(err)
	}
}

// writeFrame writes a frame of st, unless st belongs to a connection the
// server has since dropped.
func (st *Stream) writeFrame(t byte, payload []byte) error {
	s := st.s
	var h [headerSize]byte
	h[0] = t
	binary.BigEndian.PutUint32(h[1:5], st.id)
	binary.BigEndian.PutUint32(h[5:9], uint32(len(payload)))
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if st.epoch != s.epoch.Load() {
		return ErrReset
	}
	return s.writeRaw(h[:], payload)
}

// writeRaw writes and flushes; wmu is held.
func (s *Session) writeRaw(parts ...[]byte) error {
	if err := s.Err(); err != nil {
		return err
	}
	var err error
	for _, p := range parts {
		if err == nil {
			_, err = s.bw.Write(p)
		}
	}
	if err == nil {
		err = s.bw.Flush()
	}
	if err != nil {
		s.fail(fmt.Errorf("mux: writing: %w", err))
		return s.Err()
	}
	return nil
}

func (s *Session) readLoop() {
	br := bufio.NewReaderSize(s.rw, headerSize+MaxPayload)
	var h [headerSize]byte
	buf := make([]byte, MaxPayload)
	// Both ends start by looking for a Hello: the client for the echo of
	// its own, the server for any.
	scanning := true
	stale := 0
	magic := syncMagic[:]
	if s.client {
		magic = answerMagic[:]
	}
	for {
		if scanning {
			b, err := br.Peek(helloSize)
			if err != nil {
				s.fail(fmt.Errorf("mux: reading: %w", err))
				return
			}
			if !bytes.Equal(b[:len(magic)], magic) || (s.client && !bytes.Equal(b[len(magic):], s.nonce[:])) {
				_, _ = br.Discard(1)
				stale++
				if s.client && stale > maxStale {
					s.fail(errors.New("mux: no answer to the Hello"))
					return
				}
				continue
			}
			s.helloFrom(b[len(syncMagic):])
			_, _ = br.Discard(helloSize)
			scanning = false
			continue
		}
		if b, err := br.Peek(1); err == nil && b[0] == syncMagic[0] {
			b, err := br.Peek(helloSize)
			if err == nil && bytes.Equal(b[:len(magic)], magic) {
				if !s.client || bytes.Equal(b[len(syncMagic):], s.nonce[:]) {
					// A repeated Hello (ours, or the server's answer
					// to it), or a new client's.
					s.helloFrom(b[len(syncMagic):])
					_, _ = br.Discard(helloSize)
					continue
				}
			}
			if err == nil {
				err = fmt.Errorf("mux: a Hello that is not ours")
			}
			if s.protocolError(err) {
				return
			}
			scanning = true
			continue
		}
		if _, err := io.ReadFull(br, h[:]); err != nil {
			s.fail(fmt.Errorf("mux: reading: %w", err))
			return
		}
		t, id, n := h[0], binary.BigEndian.Uint32(h[1:5]), binary.BigEndian.Uint32(h[5:9])
		if n > MaxPayload {
			if s.protocolError(fmt.Errorf("mux: frame of %d bytes", n)) {
				return
			}
			scanning = true
			continue
		}
		payload := buf[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			s.fail(fmt.Errorf("mux: reading: %w", err))
			return
		}
		if err := s.handle(t, id, payload); err != nil {
			if s.protocolError(err) {
				return
			}
			scanning = true
		}
	}
}

// protocolError ends a client's session (the guest is broken or hostile);
// a server drops the connection's streams and waits for the next Hello.
// It reports whether the session ended.
func (s *Session) protocolError(err error) bool {
	if s.client {
		s.fail(err)
		return true
	}
	s.wmu.Lock()
	s.epoch.Add(1)
	s.wmu.Unlock()
	s.dropStreams(err)
	return false
}

// helloFrom handles a Hello's nonce: for a client, the echo of its own;
// for a server, a client's, which it echoes, after dropping the previous
// client's streams when the nonce is new.
func (s *Session) helloFrom(nonce []byte) {
	if s.client {
		select {
		case <-s.synced:
		default:
			close(s.synced)
		}
		return
	}
	s.wmu.Lock()
	if bytes.Equal(nonce, s.nonce[:]) && s.epoch.Load()%2 == 1 {
		s.wmu.Unlock()
		return
	}
	// Odd epochs are synced connections, even ones are between two.
	s.epoch.Add(2 - s.epoch.Load()%2)
	copy(s.nonce[:], nonce)
	_ = s.writeRaw(answerMagic[:], s.nonce[:])
	s.wmu.Unlock()
	s.dropStreams(ErrReset)
}

func (s *Session) dropStreams(err error) {
	s.mu.Lock()
	streams := s.streams
	s.streams = make(map[uint32]*Stream)
	s.maxID = 0
	s.mu.Unlock()
	for _, st := range streams {
		st.broken(err)
	}
}

func (s *Session) handle(t byte, id uint32, payload []byte) error {
	s.mu.Lock()
	st := s.streams[id]
	if t == frameOpen {
		if s.client || id <= s.maxID {
			s.mu.Unlock()
			return fmt.Errorf("mux: unexpected Open of stream %d", id)
		}
		if len(s.streams) >= MaxStreams {
			s.mu.Unlock()
			return fmt.Errorf("mux: more than %d streams", MaxStreams)
		}
		st = newStream(s, id)
		s.streams[id] = st
		s.maxID = id
		s.mu.Unlock()
		select {
		case s.accept <- st:
			return nil
		default:
			// Streams of dropped connections not yet accepted.
			return errors.New("mux: too many streams waiting to be accepted")
		}
	}
	known := id != 0 && id <= s.maxID
	s.mu.Unlock()
	if st == nil {
		// Late frames of a stream closed or reset here are dropped; the
		// peer stops once it has our Close or Reset.
		if known {
			return nil
		}
		return fmt.Errorf("mux: frame %d for unknown stream %d", t, id)
	}
	switch t {
	case frameData:
		return st.received(payload)
	case frameClose:
		st.remoteClosed()
		return nil
	case frameReset:
		st.broken(errPeerReset)
		s.forget(st)
		return nil
	case frameCredit:
		if len(payload) != 4 {
			return errors.New("mux: bad Credit frame")
		}
		return st.credited(binary.BigEndian.Uint32(payload))
	}
	return fmt.Errorf("mux: unknown frame type %d", t)
}

func (s *Session) forget(st *Stream) {
	s.mu.Lock()
	if s.streams[st.id] == st {
		delete(s.streams, st.id)
	}
	s.mu.Unlock()
}

// Stream is one connection within a session.
type Stream struct {
	s     *Session
	id    uint32
	epoch uint64 // the session's epoch when the stream was opened

	mu        sync.Mutex
	cond      *sync.Cond
	buf       []byte // received, not yet read; at most Window
	credit    int    // bytes we may still send
	remoteEOF bool   // the peer sent Close
	localEOF  bool   // we sent Close
	closed    bool   // Close was called: reads fail, received data is dropped
	err       error  // the session broke

	// Deadlines, as net.Conn's: a Read or a Write waiting past its own
	// fails with os.ErrDeadlineExceeded; the timers wake the waiters.
	readDeadline, writeDeadline time.Time
	readTimer, writeTimer       *time.Timer
}

func newStream(s *Session, id uint32) *Stream {
	st := &Stream{s: s, id: id, epoch: s.epoch.Load(), credit: Window}
	st.cond = sync.NewCond(&st.mu)
	return st
}

// Read reads the stream's bytes; io.EOF after the peer's Close.
func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	for len(st.buf) == 0 && !st.remoteEOF && st.err == nil && !st.closed && !passed(st.readDeadline) {
		st.cond.Wait()
	}
	switch {
	case st.closed:
		st.mu.Unlock()
		return 0, ErrClosed
	case len(st.buf) == 0 && !st.remoteEOF && st.err == nil:
		st.mu.Unlock()
		return 0, os.ErrDeadlineExceeded
	case len(st.buf) > 0:
	case st.err != nil:
		err := st.err
		st.mu.Unlock()
		return 0, err
	default:
		st.mu.Unlock()
		return 0, io.EOF
	}
	n := copy(p, st.buf)
	st.buf = st.buf[n:]
	if len(st.buf) == 0 {
		st.buf = nil
	}
	st.mu.Unlock()
	st.grant(n)
	return n, nil
}

func (st *Stream) grant(n int) {
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], uint32(n))
	_ = st.writeFrame(frameCredit, c[:])
}

// Write sends p, waiting for the peer to consume earlier bytes when the
// window is full.
func (st *Stream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		st.mu.Lock()
		for st.credit == 0 && st.err == nil && !st.localEOF && !passed(st.writeDeadline) {
			st.cond.Wait()
		}
		if st.credit == 0 && st.err == nil && !st.localEOF {
			st.mu.Unlock()
			return written, os.ErrDeadlineExceeded
		}
		if st.err != nil || st.localEOF {
			err := st.err
			st.mu.Unlock()
			if err == nil {
				err = ErrClosed
			}
			return written, err
		}
		n := min(len(p), st.credit, MaxPayload)
		st.credit -= n
		st.mu.Unlock()
		if err := st.writeFrame(frameData, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// SetDeadline sets both deadlines, as net.Conn's: a zero time means none.
func (st *Stream) SetDeadline(t time.Time) error {
	_ = st.SetReadDeadline(t)
	return st.SetWriteDeadline(t)
}

// SetReadDeadline bounds Reads waiting for bytes, now and later.
func (st *Stream) SetReadDeadline(t time.Time) error {
	st.setDeadline(&st.readDeadline, &st.readTimer, t)
	return nil
}

// SetWriteDeadline bounds Writes waiting for the peer's credit. A frame
// already going out on the session is not interrupted: the session's
// transport has no deadline of its own.
func (st *Stream) SetWriteDeadline(t time.Time) error {
	st.setDeadline(&st.writeDeadline, &st.writeTimer, t)
	return nil
}

func (st *Stream) setDeadline(d *time.Time, timer **time.Timer, t time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	*d = t
	if *timer != nil {
		(*timer).Stop()
		*timer = nil
	}
	if t.IsZero() {
		return
	}
	// Wakes the waiters once t has passed, to see it.
	*timer = time.AfterFunc(time.Until(t), func() {
		st.mu.Lock()
		st.cond.Broadcast()
		st.mu.Unlock()
	})
	st.cond.Broadcast()
}

// passed says whether deadline d is set and past.
func passed(d time.Time) bool { return !d.IsZero() && !time.Now().Before(d) }

// Addr is the address of both ends of a stream: the stream's id.
type Addr uint32

// Network is "mux".
func (Addr) Network() string  { return "mux" }
func (a Addr) String() string { return fmt.Sprintf("stream %d", uint32(a)) }

// LocalAddr and RemoteAddr make a Stream a net.Conn.
func (st *Stream) LocalAddr() net.Addr { return Addr(st.id) }

// RemoteAddr is the stream's Addr, as LocalAddr: both ends name it alike.
func (st *Stream) RemoteAddr() net.Addr { return Addr(st.id) }

// CloseWrite tells the peer that no more bytes follow.
func (st *Stream) CloseWrite() error {
	st.mu.Lock()
	if st.localEOF || st.err != nil {
		st.mu.Unlock()
		return nil //nolint:nilerr // a broken stream sends nothing more: there is nothing left to close
	}
	st.localEOF = true
	done := st.remoteEOF
	st.cond.Broadcast()
	st.mu.Unlock()
	err := st.writeFrame(frameClose, nil)
	if done {
		st.s.forget(st)
	}
	return err
}

// Close ends both directions. If the peer may still write, it gets a
// Reset, which fails its writes; bytes already on their way are dropped.
func (st *Stream) Close() error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	st.buf = nil
	reset := !st.remoteEOF && st.err == nil
	if reset {
		st.localEOF = true
		st.err = ErrClosed
	}
	st.cond.Broadcast()
	st.mu.Unlock()
	if !reset {
		return st.CloseWrite()
	}
	st.s.forget(st)
	return st.writeFrame(frameReset, nil)
}

func (st *Stream) received(p []byte) error {
	st.mu.Lock()
	if st.remoteEOF {
		st.mu.Unlock()
		return fmt.Errorf("mux: Data after Close on stream %d", st.id)
	}
	if len(st.buf)+len(p) > Window {
		st.mu.Unlock()
		return fmt.Errorf("mux: stream %d overran its window", st.id)
	}
	st.buf = append(st.buf, p...)
	st.cond.Broadcast()
	st.mu.Unlock()
	return nil
}

func (st *Stream) remoteClosed() {
	st.mu.Lock()
	st.remoteEOF = true
	done := st.localEOF
	st.cond.Broadcast()
	st.mu.Unlock()
	if done {
		st.s.forget(st)
	}
}

func (st *Stream) credited(n uint32) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.credit+int(n) > Window {
		return fmt.Errorf("mux: stream %d credited beyond its window", st.id)
	}
	st.credit += int(n)
	st.cond.Broadcast()
	return nil
}

func (st *Stream) broken(err error) {
	st.mu.Lock()
	st.err = err
	st.cond.Broadcast()
	st.mu.Unlock()
}
