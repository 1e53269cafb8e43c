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

// Package duplex relays two connections into each other, for the guest
// binary (a shepherd relaying the agent to a sandbox's service) and the
// agent (the egress gate relaying a sandbox to its destination) alike. It
// imports nothing of this module.
package duplex

import (
	"io"
	"net"
)

// Relay copies what a reads to b and what b reads to a, and returns once
// both directions have ended. When one side's reads end (its peer closed
// or half-closed), the other side's write half is closed where it can be
// (CloseWrite, as a TCP or Unix connection has), so that the end reaches
// it while the other direction goes on. An error ends its direction as
// an end of file does, and is not reported: a relay ends when its two
// ends are done, however that came. The caller closes a and b.
func Relay(a, b net.Conn) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	<-done
}
