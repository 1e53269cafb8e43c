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
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/mcpclient"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// auditSinkDown times exec `true`, as P1, through a second gateway of the
// same process whose audit trail goes only to a webhook that takes
// connections and never answers, one sample beside one through make
// dev's gateway (whose trail is a file), so that both see the same
// moments of a noisy machine; and counts the records the dead webhook's
// sink dropped.
func (b *bench) auditSinkDown(ctx context.Context) ([]row, error) {
	var lc net.ListenConfig
	dead, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer dead.Close()
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	// A queue of 64 rather than 4096, so that the run fills it.
	sink := audit.Webhook(audit.WebhookOptions{URL: "http://" + dead.Addr().String() + "/audit", Client: &http.Client{Timeout: time.Minute}, Queue: 64})
	trail := audit.New(audit.LevelRequestResult, "gateway", sink)
	gw, err := mcpgateway.New(mcpgateway.Options{Config: b.env.Config, AgentToken: mcpgateway.StaticToken(b.env.AgentToken), AgentCleartext: true, Audit: trail})
	if err != nil {
		return nil, err
	}
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- gw.Run(gctx, ln) }()
	defer func() { stop(); <-done }()
	for gw.Ready() != nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	cs, err := mcpclient.Connect(ctx, "http://"+ln.Addr().String()+"/mcp", b.env.Token, transport, "playground-bench")
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var open tools.OpenSessionOutput
	if err := call(ctx, cs, "open_session", map[string]any{}, &open); err != nil {
		return nil, err
	}
	before := droppedRecords()
	n := b.sz.execs
	var down, file []time.Duration
	for i := range max(n/10, 3) + n {
		start := time.Now()
		if err := execOn(ctx, cs, open.Handle, "true"); err != nil {
			return nil, err
		}
		d := time.Since(start)
		start = time.Now()
		if err := b.exec(ctx, b.cs, "true"); err != nil {
			return nil, err
		}
		if i >= max(n/10, 3) {
			down, file = append(down, d), append(file, time.Since(start))
		}
	}
	dropped := droppedRecords() - before
	slices.Sort(down)
	slices.Sort(file)
	p50 := ratio(pct(down, .5), pct(file, .5))
	return []row{
		{fmt.Sprintf("exec `true` p50 of %d with the audit trail's only sink a webhook that never answers", n), ms(pct(down, .5)), "audit to a file (make dev's gateway) " + ms(pct(file, .5)), fmt.Sprintf("%.2f×", p50), "≤ 1.1×", verdict(p50 <= 1.1)},
		{"audit records the dead webhook's sink dropped (its queue, of 64 here, full), counted", fmt.Sprintf("%.0f of %d", dropped, n+max(n/10, 3)+1), "", "", "(explains the row above)", "—"},
	}, nil
}

// droppedRecords is what the webhook sinks of this process dropped.
func droppedRecords() float64 {
	var m dto.Metric
	if err := audit.RecordsTotal.WithLabelValues("webhook", "dropped").Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
