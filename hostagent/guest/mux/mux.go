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
//
// Each side may have at most Window unacknowledged bytes in flight per
// stream, so a slow reader holds back its own stream only, and neither side
// can make the other buffer more than Window per stream, nor open more than
// MaxStreams streams.
package mux

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Frame types.
const (
	frameOpen   = 1
	frameData   = 2
	frameClose  = 3
	frameCredit = 4
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

// ErrClosed is returned once the session has ended.
var ErrClosed = errors.New("mux: session closed")

// Session is one end of a multiplexed byte stream.
type Session struct {
	rw     io.ReadWriteCloser
	client bool

	wmu sync.Mutex // one frame at a time on rw
	bw  *bufio.Writer

	mu      sync.Mutex
	streams map[uint32]*Stream
	nextID  uint32
	err     error // set once, when the session ends
	accept  chan *Stream
	done    chan struct{}
}

// Client starts the agent's end over rw; it reads rw until rw fails or
// Close is called.
func Client(rw io.ReadWriteCloser) *Session { return newSession(rw, true) }

// Server starts the guest's end over rw.
func Server(rw io.ReadWriteCloser) *Session { return newSession(rw, false) }

func newSession(rw io.ReadWriteCloser, client bool) *Session {
	s := &Session{
		rw:      rw,
		client:  client,
		bw:      bufio.NewWriterSize(rw, headerSize+MaxPayload),
		streams: make(map[uint32]*Stream),
		accept:  make(chan *Stream, MaxStreams),
		done:    make(chan struct{}),
	}
	// The reader lives as long as the session: Close ends it by closing rw.
	go s.readLoop()
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
	st := newStream(s, s.nextID)
	s.streams[st.id] = st
	s.mu.Unlock()
	if err := s.writeFrame(frameOpen, st.id, nil); err != nil {
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

func (s *Session) writeFrame(t byte, id uint32, payload []byte) error {
	var h [headerSize]byte
	h[0] = t
	binary.BigEndian.PutUint32(h[1:5], id)
	binary.BigEndian.PutUint32(h[5:9], uint32(len(payload)))
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.Err(); err != nil {
		return err
	}
	_, err := s.bw.Write(h[:])
	if err == nil {
		_, err = s.bw.Write(payload)
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
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			s.fail(fmt.Errorf("mux: reading: %w", err))
			return
		}
		t, id, n := h[0], binary.BigEndian.Uint32(h[1:5]), binary.BigEndian.Uint32(h[5:9])
		if n > MaxPayload {
			s.fail(fmt.Errorf("mux: frame of %d bytes", n))
			return
		}
		payload := buf[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			s.fail(fmt.Errorf("mux: reading: %w", err))
			return
		}
		if err := s.handle(t, id, payload); err != nil {
			s.fail(err)
			return
		}
	}
}

func (s *Session) handle(t byte, id uint32, payload []byte) error {
	s.mu.Lock()
	st := s.streams[id]
	if t == frameOpen {
		if s.client || st != nil || id == 0 {
			s.mu.Unlock()
			return fmt.Errorf("mux: unexpected Open of stream %d", id)
		}
		if len(s.streams) >= MaxStreams {
			s.mu.Unlock()
			return fmt.Errorf("mux: more than %d streams", MaxStreams)
		}
		st = newStream(s, id)
		s.streams[id] = st
		s.mu.Unlock()
		s.accept <- st // cannot block: at most MaxStreams are open
		return nil
	}
	s.mu.Unlock()
	if st == nil {
		// A stream both sides closed; late Credit for it is harmless,
		// anything else is a protocol error.
		if t == frameCredit {
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
	s  *Session
	id uint32

	mu        sync.Mutex
	cond      *sync.Cond
	buf       []byte // received, not yet read; at most Window
	credit    int    // bytes we may still send
	remoteEOF bool   // the peer sent Close
	localEOF  bool   // we sent Close
	closed    bool   // Close was called: reads fail, received data is dropped
	err       error  // the session broke
}

func newStream(s *Session, id uint32) *Stream {
	st := &Stream{s: s, id: id, credit: Window}
	st.cond = sync.NewCond(&st.mu)
	return st
}

// Read reads the stream's bytes; io.EOF after the peer's Close.
func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	for len(st.buf) == 0 && !st.remoteEOF && st.err == nil && !st.closed {
		st.cond.Wait()
	}
	switch {
	case st.closed:
		st.mu.Unlock()
		return 0, ErrClosed
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
	_ = st.s.writeFrame(frameCredit, st.id, c[:])
}

// Write sends p, waiting for the peer to consume earlier bytes when the
// window is full.
func (st *Stream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		st.mu.Lock()
		for st.credit == 0 && st.err == nil && !st.localEOF {
			st.cond.Wait()
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
		if err := st.s.writeFrame(frameData, st.id, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// CloseWrite tells the peer that no more bytes follow.
func (st *Stream) CloseWrite() error {
	st.mu.Lock()
	if st.localEOF || st.err != nil {
		st.mu.Unlock()
		return nil
	}
	st.localEOF = true
	done := st.remoteEOF
	st.cond.Broadcast()
	st.mu.Unlock()
	err := st.s.writeFrame(frameClose, st.id, nil)
	if done {
		st.s.forget(st)
	}
	return err
}

// Close ends both directions: later bytes from the peer are dropped (and
// credited back, so it is never stuck on a full window).
func (st *Stream) Close() error {
	st.mu.Lock()
	st.closed = true
	st.buf = nil
	st.cond.Broadcast()
	st.mu.Unlock()
	return st.CloseWrite()
}

func (st *Stream) received(p []byte) error {
	st.mu.Lock()
	if st.remoteEOF {
		st.mu.Unlock()
		return fmt.Errorf("mux: Data after Close on stream %d", st.id)
	}
	if st.closed {
		st.mu.Unlock()
		st.grant(len(p))
		return nil
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
