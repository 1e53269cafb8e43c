//go:build linux

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

package snigate

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// hello is the ClientHello a TLS client sends for serverName.
func hello(t *testing.T, serverName string) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		c := tls.Client(client, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.HandshakeContext(ctx)
	}()
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := server.Read(buf)
		b.Write(buf[:n])
		if err != nil || (b.Len() >= 5 && b.Len() >= 5+int(b.Bytes()[3])<<8+int(b.Bytes()[4])) {
			return b.Bytes()
		}
	}
}

// TestServerName: the gate reads the server name a ClientHello carries,
// lower case, and refuses one that carries none, or is not TLS.
func TestServerName(t *testing.T) {
	got, err := serverName(bytes.NewReader(hello(t, "API.Example.test")))
	if err != nil || got != "api.example.test" {
		t.Errorf("serverName = %q, %v; want api.example.test", got, err)
	}
	if _, err := serverName(bytes.NewReader(hello(t, ""))); err == nil || !strings.Contains(err.Error(), "names no server") {
		t.Errorf("a ClientHello without a server name: %v; want a refusal", err)
	}
	if _, err := serverName(strings.NewReader("GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n")); err == nil {
		t.Error("plain HTTP was read as a ClientHello")
	}
	// What it reads is bounded: a stream of junk stops at maxHello.
	if _, err := serverName(io.LimitReader(zeros{}, maxHello)); err == nil {
		t.Error("zeros were read as a ClientHello")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
