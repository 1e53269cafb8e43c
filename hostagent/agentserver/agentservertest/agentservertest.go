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

// Package agentservertest serves an agent's API on loopback for tests, as a
// node's agent does, and stops it with the test.
package agentservertest

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentserver"
	"github.com/playground-dev/playground/internal/httpserve"
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
func ServeAPI(tb testing.TB, agent *hostagent.Agent, token string, configure ...func(*agentserver.Server)) (string, *agentserver.Server) {
	tb.Helper()
	return ServeWrapped(tb, agent, token, nil, configure...)
}

// ServeWrapped is ServeAPI with the API's handler wrapped by wrap (nil:
// none), for a test to see the requests an agent receives.
func ServeWrapped(tb testing.TB, agent *hostagent.Agent, token string, wrap func(http.Handler) http.Handler, configure ...func(*agentserver.Server)) (string, *agentserver.Server) {
	tb.Helper()
	return ServeWrappedTLS(tb, agent, token, nil, wrap, configure...)
}

// ServeWrappedTLS is ServeWrapped over TLS with tlsConfig (nil: cleartext
// HTTP/2), returning an https:// endpoint then.
func ServeWrappedTLS(tb testing.TB, agent *hostagent.Agent, token string, tlsConfig *tls.Config, wrap func(http.Handler) http.Handler, configure ...func(*agentserver.Server)) (string, *agentserver.Server) {
	tb.Helper()
	srv := agentserver.NewServer(agent, logr.Discard(), token)
	for _, c := range configure {
		c(srv)
	}
	serve := func(ctx context.Context, ln net.Listener) error { return srv.Serve(ctx, ln, tlsConfig, 5*time.Second) }
	if wrap != nil {
		hs := srv.HTTPServer(tlsConfig)
		hs.Handler = wrap(hs.Handler)
		serve = func(ctx context.Context, ln net.Listener) error { return httpserve.Serve(ctx, hs, ln, 5*time.Second) }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = serve(ctx, ln)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		_ = agent.Close(context.Background())
	})
	scheme := "http://"
	if tlsConfig != nil {
		scheme = "https://"
	}
	return scheme + ln.Addr().String(), srv
}
