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

package mcpgateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/mcpgateway"
)

const authFailures = "playground_gateway_auth_failures_total"

var authReasons = []string{mcpgateway.AuthMissing, mcpgateway.AuthMalformed, mcpgateway.AuthUnknownToken,
	mcpgateway.AuthSuspended, mcpgateway.AuthWrongCatalog, mcpgateway.AuthNotReady, mcpgateway.AuthThrottled}

// TestAuthFailureMetrics: every refusal of the MCP endpoint counts once,
// under its reason, on the metrics endpoint the gateway command serves; an
// admitted request counts none; and neither tokens nor tenants appear in
// the metrics.
func TestAuthFailureMetrics(t *testing.T) {
	ctx := context.Background()
	metricsURL := serveMetrics(t)
	ns := newNamespace(t)
	ok := newTenant(t, ns, "metrics-admitted", nil)
	suspended := newTenant(t, ns, "metrics-suspended", nil)
	workers := newTenant(t, ns, "metrics-workers", nil)
	g := startGateway(t, mcpgateway.Options{Catalog: mcpgateway.CatalogSandbox})
	g.waitReady(t)
	setSuspended(t, ns, suspended.name, true)
	var tn playgroundv1alpha1.Tenant
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: workers.name}, &tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.Catalog = playgroundv1alpha1.CatalogWorkers
	if err := k8s.Update(ctx, &tn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the suspension to be seen", 10*time.Second, wantStatus(g.url, t, suspended.token, http.StatusForbidden))
	waitFor(t, "the catalog to be seen", 10*time.Second, wantStatus(g.url, t, workers.token, http.StatusForbidden))

	// A gateway that cannot reach its API server never trusts its view.
	blind := startGateway(t, mcpgateway.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, Logger: logr.Discard()})
	// A gateway that lets a source fail once.
	tight := startGateway(t, mcpgateway.Options{FailedAuthPerSecond: 0.001, FailedAuthBurst: 1, FailedAuthDelay: time.Millisecond})
	tight.waitReady(t)

	for _, c := range []struct {
		name, url, authorization string
		status                   int
		reason                   string // "" for an admitted request
	}{
		{"no header", g.url, "", http.StatusUnauthorized, mcpgateway.AuthMissing},
		{"not a bearer token", g.url, "Basic " + ok.token, http.StatusUnauthorized, mcpgateway.AuthMalformed},
		{"unknown token", g.url, "Bearer " + newToken(), http.StatusUnauthorized, mcpgateway.AuthUnknownToken},
		{"suspended tenant", g.url, "Bearer " + suspended.token, http.StatusForbidden, mcpgateway.AuthSuspended},
		{"workers tenant", g.url, "Bearer " + workers.token, http.StatusForbidden, mcpgateway.AuthWrongCatalog},
		{"view not current", blind.url, "Bearer " + ok.token, http.StatusServiceUnavailable, mcpgateway.AuthNotReady},
		{"a source's first junk token", tight.url, "Bearer " + newToken(), http.StatusUnauthorized, mcpgateway.AuthUnknownToken},
		{"a source's junk past its bound", tight.url, "Bearer " + newToken(), http.StatusTooManyRequests, mcpgateway.AuthThrottled},
		{"admitted", g.url, "Bearer " + ok.token, http.StatusOK, ""},
	} {
		before := scrapeAuthFailures(t, metricsURL)
		if got := initialize(t, c.url, c.authorization); got != c.status {
			t.Fatalf("%s: status %d, want %d", c.name, got, c.status)
		}
		after := scrapeAuthFailures(t, metricsURL)
		for _, r := range authReasons {
			want := before[r]
			if r == c.reason {
				want++
			}
			if after[r] != want {
				t.Errorf("%s: %s{reason=%q} went from %v to %v, want %v", c.name, authFailures, r, before[r], after[r], want)
			}
		}
	}

	body := get(t, metricsURL)
	for _, secret := range []string{ok.token, suspended.token, workers.token, ok.name, suspended.name, workers.name, ns + "/"} {
		if strings.Contains(body, secret) {
			t.Errorf("the metrics show %q", secret)
		}
	}
}

// serveMetrics serves the gateway's metrics endpoint, as `playground
// gateway --metrics-bind-address` does, and returns its URL.
func serveMetrics(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mcpgateway.ServeMetrics(ctx, ln, logr.Discard()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics endpoint: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + "/metrics"
}

// initialize posts an MCP initialize with the Authorization header (none
// when empty) and returns the status.
func initialize(t *testing.T, url, authorization string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

// scrapeAuthFailures reads the auth failures by reason from the endpoint;
// every reason must be there, zero or not.
func scrapeAuthFailures(t *testing.T, url string) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(get(t, url)))
	if err != nil {
		t.Fatal(err)
	}
	f := fams[authFailures]
	if f == nil || f.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("no counter %s in the metrics", authFailures)
	}
	got := map[string]float64{}
	for _, m := range f.Metric {
		if len(m.Label) != 1 || m.Label[0].GetName() != "reason" {
			t.Fatalf("%s has labels %v: only reason is allowed", authFailures, m.Label)
		}
		got[m.Label[0].GetValue()] = m.Counter.GetValue()
	}
	for _, r := range authReasons {
		if _, ok := got[r]; !ok {
			t.Fatalf("%s{reason=%q} is missing: %v", authFailures, r, got)
		}
	}
	if len(got) != len(authReasons) {
		t.Fatalf("%s has reasons %v, want exactly %v", authFailures, got, authReasons)
	}
	return got
}
