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

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGatewayMetricsEndpoint: `playground gateway --metrics-bind-address`
// serves Prometheus metrics, among them the gateway's refusals; and the
// endpoint stops with the gateway. The gateway's API server is
// unreachable: metrics need none.
func TestGatewayMetricsEndpoint(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "agent-token")
	if err := os.WriteFile(tokenFile, []byte("agent-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// freeAddr's ports are free when picked, but another test package may
	// take one before the gateway binds it: then start again on others.
	var (
		listen, metricsAddr, metricsURL string
		before                          float64
		cancel                          context.CancelFunc
		done                            chan error
	)
	for attempt := 1; ; attempt++ {
		listen, metricsAddr = freeAddr(t), freeAddr(t)
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		done = make(chan error, 1)
		go func() {
			done <- runGateway(ctx, []string{"--kubeconfig", kubeconfig, "--agent-token-file", tokenFile, "--agent-cleartext",
				"--listen", listen, "--metrics-bind-address", metricsAddr})
		}()
		metricsURL = "http://" + metricsAddr + "/metrics"
		up, err := waitMetrics(metricsURL, done)
		if err == nil {
			before = up
			break
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 5 {
			t.Fatal(err)
		}
	}
	resp, err := http.Post("http://"+listen+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without a token: %s, want 401", resp.Status)
	}
	after, err := missingTokenRefusals(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Fatalf(`auth failures{reason="missing"} went from %v to %v, want one more`, before, after)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the gateway stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not stop")
	}
	if _, err := net.DialTimeout("tcp", metricsAddr, time.Second); err == nil {
		t.Fatal("the metrics endpoint outlived the gateway")
	}
}

var missingRE = regexp.MustCompile(`(?m)^playground_gateway_auth_failures_total\{reason="missing"\} (\S+)$`)

// missingTokenRefusals scrapes the count of requests refused for want of
// a token.
func missingTokenRefusals(url string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	m := missingRE.FindSubmatch(body)
	if m == nil {
		return 0, fmt.Errorf("no playground_gateway_auth_failures_total{reason=\"missing\"} in:\n%s", body)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// freeAddr returns a loopback address with a port free right now.
// waitMetrics waits for the metrics endpoint to serve the refusal count,
// or for the gateway to stop.
func waitMetrics(url string, done <-chan error) (float64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := missingTokenRefusals(url)
		if err == nil {
			return v, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the metrics endpoint did not come up: %w", err)
		}
		select {
		case err := <-done:
			return 0, fmt.Errorf("the gateway stopped: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
