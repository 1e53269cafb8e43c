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

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/playground-dev/playground/internal/mcpclient"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// The hostile tenants' commands.
const (
	// A shell's failed fork ends it; perl's loop goes on taking every PID
	// its children free.
	forkBomb = `perl -e 'while (1) { my $p = fork(); if (defined $p && $p == 0) { sleep 3600; exit } }'`
	// Memory until the OOM killer comes.
	memoryHog = `perl -e 'my @a; while (1) { push @a, "x" x 1048576 }'`
	// Output without end that nobody reads: the ring evicts.
	floodJob = `yes 'flood flood flood flood flood flood flood flood flood flood flood'`
	// 4 MiB of output in one exec, through the budgets.
	floodExec = `head -c 4194304 /dev/zero | tr '\0' x`
	// The writable layer to ENOSPC; the file stays until the next round.
	fillDisk = `rm -f fill; dd if=/dev/zero of=fill bs=1M 2>/dev/null; echo $?`
	heldJob  = `sleep 1000000`
)

// hostile drives a hostile tenant's attack through the gateway, as its
// own MCP client would, across faults and its own deletion and
// re-creation; it counts what it sees. Its failures are its own: only the
// held jobs' bounds are invariants.
type hostile struct {
	s    *soak
	k    kind
	name string

	mu sync.Mutex
	// gen counts the tenant's re-creations: what it started before one is
	// gone with its sandbox.
	gen int
}

func (h *hostile) recreated() {
	h.mu.Lock()
	h.gen++
	h.mu.Unlock()
}

func (h *hostile) generation() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// session is one incarnation of the tenant, as its client sees it.
type session struct {
	cs        *mcp.ClientSession
	handle    string
	sandboxID string
	gen       int
	held      []string // the held jobs' IDs
	started   bool     // the incarnation's long job runs
}

func (h *hostile) run(ctx context.Context) {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	var sess *session
	defer func() {
		if sess != nil {
			sess.cs.Close()
		}
	}()
	for ctx.Err() == nil {
		if sess == nil || sess.gen != h.generation() {
			if sess != nil {
				sess.cs.Close()
			}
			var err error
			if sess, err = h.connect(ctx, tr); err != nil {
				sess = nil
				sleep(ctx, time.Second)
				continue
			}
		}
		if err := h.round(ctx, sess); err != nil {
			var te *mcpclient.ToolError
			if !errors.As(err, &te) {
				// A transport failure (a restart, its deletion): connect
				// again; a tool's failure keeps the session unless its
				// handle is gone.
				sess.cs.Close()
				sess = nil
			} else if te.Code == "not_found" {
				sess.handle = ""
			}
		}
		sleep(ctx, h.pause())
	}
}

func (h *hostile) pause() time.Duration {
	switch h.k {
	case egressNet:
		return 3 * time.Second
	case memHog:
		return 4 * time.Second
	}
	return 8 * time.Second
}

// connect waits for the tenant to be Ready and opens a session.
func (h *hostile) connect(ctx context.Context, tr http.RoundTripper) (*session, error) {
	if h.s.recreating("Tenant " + h.name) {
		return nil, fmt.Errorf("tenant %s is being created again", h.name)
	}
	gen := h.generation()
	token, id, err := h.s.sys.waitTenant(ctx, h.name, 10*time.Second)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cs, err := mcpclient.Connect(cctx, h.s.sys.endpoint, token, tr, "playground-soak-hostile")
	if err != nil {
		return nil, err
	}
	return &session{cs: cs, sandboxID: id, gen: gen}, nil
}

// call makes one call of the hostile client.
func (h *hostile) call(ctx context.Context, sess *session, tool string, args, out any) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := mcpclient.Call(cctx, sess.cs, tool, args, out)
	if err != nil {
		h.s.led.count(fmt.Sprintf("%s: %s failed (%s)", h.name, tool, failureKind(err)))
	}
	return err
}

func failureKind(err error) string {
	var te *mcpclient.ToolError
	if errors.As(err, &te) {
		return te.Code
	}
	return "transport"
}

// round does one round of the tenant's attack.
func (h *hostile) round(ctx context.Context, sess *session) error {
	if sess.handle == "" {
		var open tools.OpenSessionOutput
		if err := h.call(ctx, sess, "open_session", map[string]any{}, &open); err != nil {
			return err
		}
		sess.handle = open.Handle
		if open.SandboxID != sess.sandboxID {
			sess.sandboxID, sess.started, sess.held = open.SandboxID, false, nil
		}
	}
	switch h.k {
	case pidsBomb:
		if !sess.started {
			if err := h.startJob(ctx, sess, forkBomb); err != nil {
				return err
			}
			sess.started = true
			h.s.led.count(h.name + ": fork bombs started")
			return nil
		}
		var out tools.ExecOutput
		err := h.call(ctx, sess, "exec", map[string]any{"handle": sess.handle, "command": "true"}, &out)
		if err == nil {
			h.s.led.count(h.name + ": exec served while the bomb runs")
		}
		return err
	case memHog:
		id, err := h.jobID(ctx, sess, memoryHog)
		if err != nil {
			return err
		}
		res, err := h.waitJob(ctx, sess, id, time.Minute)
		if err != nil {
			return err
		}
		if res != nil && res.OOMKilled {
			h.s.led.count(h.name + ": jobs ended by the OOM killer (result oom_killed)")
		} else {
			h.s.led.count(fmt.Sprintf("%s: jobs ended otherwise (%+v)", h.name, res))
		}
		return nil
	case flood:
		if !sess.started {
			if err := h.startJob(ctx, sess, floodJob); err != nil {
				return err
			}
			sess.started = true
			h.s.led.count(h.name + ": unread flood jobs started")
		}
		var out tools.ExecOutput
		if err := h.call(ctx, sess, "exec", map[string]any{"handle": sess.handle, "command": floodExec}, &out); err != nil {
			return err
		}
		h.s.led.count(h.name + ": 4 MiB execs served")
		return nil
	case diskFill:
		var out tools.ExecOutput
		if err := h.call(ctx, sess, "exec", map[string]any{"handle": sess.handle, "command": fillDisk}, &out); err != nil {
			return err
		}
		if strings.TrimSpace(out.Stdout) != "0" {
			h.s.led.count(h.name + ": disk filled to ENOSPC")
		} else {
			h.s.led.count(h.name + ": disk fill ended without ENOSPC")
		}
		return nil
	case heldJobs:
		return h.held(ctx, sess)
	case egressNet:
		var out tools.ExecOutput
		if err := h.call(ctx, sess, "exec", map[string]any{"handle": sess.handle, "command": "true"}, &out); err != nil {
			return err
		}
		h.s.led.count(h.name + ": exec served")
		h.s.recordEgress(ctx, sess.sandboxID)
		return nil
	}
	return nil
}

// held keeps the tenant's active-job bound (8) full of jobs that never end
// and checks, each round, that they still run and that a ninth is refused:
// across every restart of the agent, which adopts them.
func (h *hostile) held(ctx context.Context, sess *session) error {
	for len(sess.held) < 8 {
		id, err := h.jobID(ctx, sess, heldJob)
		if err != nil {
			return err
		}
		sess.held = append(sess.held, id)
	}
	for _, id := range sess.held {
		var page tools.JobPollOutput
		err := h.call(ctx, sess, "job_poll", map[string]any{"job_id": id, "wait_seconds": 0}, &page)
		if err != nil {
			var te *mcpclient.ToolError
			if errors.As(err, &te) && te.Code == "not_found" && sess.gen == h.generation() {
				h.s.led.violatef(invBounds, "%s: held job %s is gone (%s)", h.name, id, te.Text)
				sess.held = nil
			}
			return err
		}
		if page.State != "running" && sess.gen == h.generation() {
			h.s.led.violatef(invBounds, "%s: held job %s ended: %s, result %+v", h.name, id, page.State, page.Result)
			sess.held = nil
			return nil
		}
	}
	var out tools.JobExecOutput
	err := h.call(ctx, sess, "job_exec", map[string]any{"handle": sess.handle, "command": heldJob}, &out)
	var te *mcpclient.ToolError
	switch {
	case err == nil:
		h.s.led.violatef(invBounds, "%s: a ninth job was admitted beside its eight running ones (job %s)", h.name, out.JobID)
		_ = h.call(ctx, sess, "job_cancel", map[string]any{"job_id": out.JobID}, nil)
	case errors.As(err, &te) && te.Code == "resource_exhausted":
		h.s.led.count(h.name + ": a ninth job refused (resource_exhausted) beside 8 running")
		return nil
	}
	return err
}

// startJob starts a job nobody reads.
func (h *hostile) startJob(ctx context.Context, sess *session, command string) error {
	_, err := h.jobID(ctx, sess, command)
	return err
}

func (h *hostile) jobID(ctx context.Context, sess *session, command string) (string, error) {
	var out tools.JobExecOutput
	if err := h.call(ctx, sess, "job_exec", map[string]any{"handle": sess.handle, "command": command}, &out); err != nil {
		return "", err
	}
	return out.JobID, nil
}

// waitJob polls a job to its end (its output discarded) and acknowledges
// it; nil result when it did not end within bound.
func (h *hostile) waitJob(ctx context.Context, sess *session, id string, bound time.Duration) (*tools.JobResult, error) {
	cursor := ""
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		var page tools.JobPollOutput
		if err := h.call(ctx, sess, "job_poll", map[string]any{"job_id": id, "cursor": cursor, "wait_seconds": 5, "max_bytes": 65536}, &page); err != nil {
			return nil, err
		}
		cursor = page.NextCursor
		if page.Done {
			_ = h.call(ctx, sess, "job_poll", map[string]any{"job_id": id, "cursor": cursor, "wait_seconds": 0}, nil)
			return page.Result, nil
		}
	}
	_ = h.call(ctx, sess, "job_cancel", map[string]any{"job_id": id}, nil)
	return nil, nil
}
