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

package duplex

import (
	"io"
	"net"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accepting the loopback connection failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestRelayHalfClose relays a caller to a service that answers only once
// the request has ended (as an HTTP/1.0 server reading to EOF does): the
// caller's half-close must reach the service while the answer still comes
// back, and the relay returns once both directions have ended.
func TestRelayHalfClose(t *testing.T) {
	caller, near := pair(t)
	far, service := pair(t)
	// A bound on each read, so that a relay that keeps an end to itself
	// fails the test rather than hang it.
	for _, c := range []net.Conn{caller, service} {
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		Relay(near, far)
	}()

	if _, err := caller.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if err := caller.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(service)
	if err != nil || string(got) != "request" {
		t.Fatalf("the service read %q, %v; want the request, then the end of it", got, err)
	}
	if _, err := service.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	service.Close()
	got, err = io.ReadAll(caller)
	if err != nil || string(got) != "answer" {
		t.Fatalf("the caller read %q, %v; want the answer after its own half-close, then the end", got, err)
	}
	<-relayed
}
