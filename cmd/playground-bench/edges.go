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
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sizes of the "hostile edges" rows.
const (
	// The flood's connections at once (each reopened when the gateway
	// closes it): one source's share of unauthenticated connections
	// (httpserve's default), past which the gateway closes the source's
	// oldest, a request in flight or not.
	edgeJunkConns   = 64
	edgeIdleConns   = 5000
	edgeIdleWait    = 30 * time.Second
	edgeRSSGoal     = 128 << 20
	edgeSlowdownMax = 2.0
)

// hostileEdges is the "hostile edges" rows: a source that floods the
// gateway with junk tokens, then one that holds thousands of idle
// unauthenticated connections, each from a child process (this binary
// with --edge-client), while the sample tenant runs exec `true`; its p50
// during each is compared with its p50 alone, measured just before in the
// same run.
func (b *bench) hostileEdges(ctx context.Context) ([]row, error) {
	execTrue := func() error { return b.exec(ctx, b.cs, "true") }
	alone, err := timeN(b.sz.execs/5, execTrue)
	if err != nil {
		return nil, err
	}

	junk := 10000
	if b.opts.quick {
		junk = 2000
	}
	flood, during, err := b.whileEdgeClient(ctx, fmt.Sprintf("junk %s %d %d", b.env.Endpoint, junk, edgeJunkConns), execTrue)
	if err != nil {
		return nil, err
	}
	slowdown := ratio(pct(during, .5), pct(alone, .5))

	runtime.GC()
	base := rssKiB("VmRSS:")
	resetPeakRSS()
	idle, duringIdle, err := b.whileEdgeClient(ctx, fmt.Sprintf("idle %s %d %d", b.env.Endpoint, edgeIdleConns, int(edgeIdleWait/time.Second)), execTrue)
	if err != nil {
		return nil, err
	}
	growth := rssKiB("VmHWM:") - base

	return []row{
		{fmt.Sprintf("hostile edges: %d junk tokens from one source (%d connections; answered %s in %s): the sample tenant's exec `true` p50 meanwhile (%d calls)",
			junk, edgeJunkConns, flood.statuses(), flood.Elapsed, len(during)),
			ms(pct(during, .5)), "alone " + ms(pct(alone, .5)), fmt.Sprintf("%.1f×", slowdown), fmt.Sprintf("≤ %.0f×", edgeSlowdownMax),
			verdict(slowdown <= edgeSlowdownMax && flood.Errors == 0)},
		{fmt.Sprintf("hostile edges: %d idle unauthenticated connections (half silent, half after one junk request): closed as accepted / closed later / open after %s; the sample tenant's exec p50 meanwhile",
			edgeIdleConns, edgeIdleWait),
			fmt.Sprintf("%d / %d / %d; %s", idle.ClosedAtOnce, idle.ClosedLater, idle.Open, ms(pct(duringIdle, .5))), "alone " + ms(pct(alone, .5)),
			fmt.Sprintf("%.1f×", ratio(pct(duringIdle, .5), pct(alone, .5))), "none open", verdict(idle.Open == 0 && idle.Dialed == edgeIdleConns)},
		{"hostile edges: peak RSS growth of the process holding gateway and agent while the idle connections were held",
			mib(growth), "", "", "≤ " + mib(edgeRSSGoal), verdict(growth <= edgeRSSGoal)},
	}, nil
}

// whileEdgeClient runs the child with arg and, until it ends, fn again
// and again; it returns the child's report and fn's latencies.
func (b *bench) whileEdgeClient(ctx context.Context, arg string, fn func() error) (edgeReport, []time.Duration, error) {
	self, err := os.Executable()
	if err != nil {
		return edgeReport{}, nil, err
	}
	cmd := exec.CommandContext(ctx, self, "--edge-client", arg)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return edgeReport{}, nil, err
	}
	if err := cmd.Start(); err != nil {
		return edgeReport{}, nil, err
	}
	outc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(stdout); outc <- b }()
	done := make(chan error, 1)
	var out []byte
	go func() { out = <-outc; done <- cmd.Wait() }()
	var lat []time.Duration
	for {
		select {
		case err := <-done:
			if err != nil {
				return edgeReport{}, nil, fmt.Errorf("the edge client: %w", err)
			}
			var rep edgeReport
			if err := json.Unmarshal(out, &rep); err != nil {
				return edgeReport{}, nil, fmt.Errorf("the edge client's report %q: %w", out, err)
			}
			if rep.Error != "" {
				return edgeReport{}, nil, errors.New(rep.Error)
			}
			if len(lat) == 0 {
				return edgeReport{}, nil, errors.New("no call ended while the edge client ran")
			}
			slices.Sort(lat)
			return rep, lat, nil
		default:
		}
		start := time.Now()
		if err := fn(); err != nil {
			_ = cmd.Process.Kill()
			return edgeReport{}, nil, err
		}
		lat = append(lat, time.Since(start))
	}
}

// edgeReport is what the --edge-client child prints.
type edgeReport struct {
	// junk: answers by status, connection errors, the flood's time.
	Status  map[int]int `json:",omitempty"`
	Errors  int
	Elapsed time.Duration
	// idle: connections dialled, closed by the gateway within a second
	// (refused as accepted), closed later, still open at the end.
	Dialed, ClosedAtOnce, ClosedLater, Open int
	Error                                   string `json:",omitempty"`
}

func (r edgeReport) statuses() string {
	var parts []string
	for _, code := range []int{http.StatusUnauthorized, http.StatusTooManyRequests} {
		parts = append(parts, fmt.Sprintf("%d × %d", r.Status[code], code))
	}
	for code, n := range r.Status {
		if code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
			parts = append(parts, fmt.Sprintf("%d × %d", n, code))
		}
	}
	if r.Errors > 0 {
		parts = append(parts, fmt.Sprintf("%d connection errors", r.Errors))
	}
	return strings.Join(parts, ", ")
}

// edgeClients is the child: "junk ENDPOINT N CONNS" sends N requests with
// made-up tokens over CONNS connections at once; "idle ENDPOINT N SECONDS"
// holds N connections (every other one after a request with a made-up
// token) and reports how the gateway closed them within SECONDS.
func edgeClients(arg string) {
	var mode, endpoint string
	var n, m int
	rep := edgeReport{}
	if _, err := fmt.Sscan(arg, &mode, &endpoint, &n, &m); err != nil {
		rep.Error = "--edge-client: " + err.Error()
	} else if mode == "junk" {
		rep = junkFlood(endpoint, n, m)
	} else {
		rep = idleHold(endpoint, n, time.Duration(m)*time.Second)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "--edge-client:", err)
		os.Exit(1)
	}
}

// junkToken is a token of a credential's shape that is nobody's.
func junkToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "pgt_" + hex.EncodeToString(b)
}

const edgeInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"edge","version":"0"}}}`

func junkFlood(endpoint string, n, conns int) edgeReport {
	rep := edgeReport{Status: map[int]int{}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}, Timeout: 30 * time.Second}
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, endpoint, strings.NewReader(edgeInitialize))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+junkToken())
				resp, err := client.Do(req)
				mu.Lock()
				if err != nil {
					rep.Errors++
				} else {
					rep.Status[resp.StatusCode]++
				}
				mu.Unlock()
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	rep.Elapsed = time.Since(start).Round(time.Millisecond)
	return rep
}

func idleHold(endpoint string, n int, wait time.Duration) edgeReport {
	rep := edgeReport{}
	u, err := url.Parse(endpoint)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	type result struct{ closedAfter time.Duration }
	results := make(chan result, n)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(context.Background(), "tcp", u.Host)
		if err != nil {
			rep.Error = fmt.Sprintf("dialling connection %d: %v", i, err)
			return rep
		}
		rep.Dialed++
		conns = append(conns, c)
		dialed := time.Now()
		if i%2 == 1 {
			_, _ = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
				u.Path, u.Host, junkToken(), len(edgeInitialize), edgeInitialize)
		}
		go func() {
			_ = c.SetReadDeadline(dialed.Add(wait))
			_, err := io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				results <- result{-1}
				return
			}
			results <- result{time.Since(dialed)}
		}()
	}
	for range n {
		r := <-results
		switch {
		case r.closedAfter < 0:
			rep.Open++
		case r.closedAfter < time.Second:
			rep.ClosedAtOnce++
		default:
			rep.ClosedLater++
		}
	}
	return rep
}
