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
	"io"
	"testing"
	"time"
)

// guestBytes is a port whose guest answers the Hello, then sends data.
type guestBytes struct {
	ready chan []byte // the answer and data, once the nonce is known
	r     io.Reader
}

func (g *guestBytes) Read(p []byte) (int, error) {
	if g.r == nil {
		g.r = bytes.NewReader(<-g.ready)
	}
	return g.r.Read(p)
}

func (g *guestBytes) Write(p []byte) (int, error) { return len(p), nil }
func (g *guestBytes) Close() error                { return nil }

// FuzzClientReadsGuestBytes: whatever a guest sends after answering the
// Hello, the agent's end neither panics nor hangs, and ends the session
// when the port ends.
func FuzzClientReadsGuestBytes(f *testing.F) {
	f.Add(rawFrame(frameData, 1, 5))
	f.Add(append(rawFrame(frameData, 1, 3), rawFrame(frameClose, 1, 0)...))
	f.Add(rawFrame(frameCredit, 1, 4))
	f.Add(rawFrame(frameOpen, 2, 0))
	f.Add(append(append([]byte{}, answerMagic[:]...), 1, 2, 3))
	f.Add([]byte{frameData, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &guestBytes{ready: make(chan []byte, 1)}
		s := Client(g)
		g.ready <- append(append(append([]byte{}, answerMagic[:]...), s.nonce[:]...), data...)
		st, err := s.Open()
		if err == nil {
			go func() { _, _ = io.Copy(io.Discard, st) }()
		}
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the session outlived its port")
		}
	})
}
