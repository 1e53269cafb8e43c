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

// Package agentapitest serves an agent's API on loopback for tests, as a
// node's agent does, and stops it with the test.
package agentapitest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// Serve serves agent's API with token until the test ends, then closes the
// agent, and returns the API's endpoint.
func Serve(tb testing.TB, agent *hostagent.Agent, token string) string {
	tb.Helper()
	endpoint, _ := ServeAPI(tb, agent, token)
	return endpoint
}

// ServeAPI is Serve that also returns the API server, for its budget;
// configure, if given, changes the server before it serves.
func ServeAPI(tb testing.TB, agent *hostagent.Agent, token string, configure ...func(*agentapi.Server)) (string, *agentapi.Server) {
	tb.Helper()
	srv := agentapi.NewServer(agent, nil, token)
	for _, c := range configure {
		c(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, ln, nil, 5*time.Second)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		_ = agent.Close(context.Background())
	})
	return "http://" + ln.Addr().String(), srv
}
