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
	"io"
	"net"
	"sync"
	"testing"
)

// echo serves every accepted stream by copying it back, then closing.
func echo(t *testing.T, srv *Session) {
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
	for i := 0; i < 8; i++ {
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

func TestOverrunIsAProtocolError(t *testing.T) {
	a, b := net.Pipe()
	srv := Server(b)
	defer srv.Close()
	// A raw peer that ignores credit.
	frame := func(typ byte, id uint32, n int) []byte {
		h := []byte{typ, 0, 0, 0, byte(id), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
		return append(h, make([]byte, n)...)
	}
	go func() {
		_, _ = a.Write(frame(frameOpen, 1, 0))
		for i := 0; i <= Window/MaxPayload; i++ {
			if _, err := a.Write(frame(frameData, 1, MaxPayload)); err != nil {
				return
			}
		}
	}()
	go func() { _, _ = io.Copy(io.Discard, a) }()
	<-srv.Done()
	if srv.Err() == nil {
		t.Fatal("session survived an overrun")
	}
}
