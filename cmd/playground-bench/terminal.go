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
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// keyDeadline bounds one keystroke's wait for the screen to show it: far
// beyond any sample, so that a lost key fails the run instead of hanging it.
const keyDeadline = 10 * time.Second

// keystrokeToScreen times a key typed into a terminal job until the job's
// screen shows it, through the same path as P1 (the MCP client, the
// gateway, the agent, the sandbox's job holder and its emulator): each
// sample is a job_input of a unique token and Enter to a `cat` on a
// terminal, then job_screen until the token is on the screen. The
// baseline is P1's own call, exec `true` on the same session, one after
// each sample, so that both see the same moments of a noisy machine.
func (b *bench) keystrokeToScreen(ctx context.Context) ([]row, error) {
	restore, err := b.extendedTools(ctx)
	if err != nil {
		return nil, err
	}
	defer restore()
	cs, err := b.extendedSession(ctx)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var open tools.OpenSessionOutput
	if err := call(ctx, cs, "open_session", map[string]any{}, &open); err != nil {
		return nil, err
	}
	defer func() {
		_ = call(context.WithoutCancel(ctx), cs, "close_session", map[string]any{"handle": open.Handle}, nil)
	}()

	// cat on a terminal: the terminal's line discipline echoes each key as
	// it arrives (cat itself answers only at Enter, a second copy of the
	// line), so the sample is the terminal path itself, not a program's
	// own speed. Enter keeps every token on a line of its own; without it
	// the tokens would wrap across rows, and the line would grow to the
	// terminal's 4 KiB bound.
	var job tools.JobExecOutput
	if err := call(ctx, cs, "job_exec", map[string]any{"handle": open.Handle, "command": "exec cat", "shell": "clean", "tty": true, "rows": 24, "cols": 80}, &job); err != nil {
		return nil, err
	}
	defer endTerminalJob(context.WithoutCancel(ctx), cs, job.JobID)

	n := b.sz.keystrokes
	warm := max(n/10, 3)
	var keys, execs, inputs, reads []time.Duration
	var screens []int
	for i := range warm + n {
		k, err := typeAndSee(ctx, cs, job.JobID, fmt.Sprintf("k%06d", i))
		if err != nil {
			return nil, fmt.Errorf("keystroke %d: %w", i, err)
		}
		start := time.Now()
		if err := execOn(ctx, cs, open.Handle, "true"); err != nil {
			return nil, fmt.Errorf("the exec baseline: %w", err)
		}
		e := time.Since(start)
		if i >= warm {
			keys, execs, screens = append(keys, k.total), append(execs, e), append(screens, len(k.reads))
			inputs, reads = append(inputs, k.input), append(reads, k.reads...)
		}
	}
	for _, ds := range [][]time.Duration{keys, execs, inputs, reads} {
		slices.Sort(ds)
	}
	slices.Sort(screens)
	p50, p99 := ratio(pct(keys, .5), pct(execs, .5)), ratio(pct(keys, .99), pct(execs, .99))
	return []row{
		{fmt.Sprintf("terminal keystroke → screen p50 of %d (MCP job_input, then job_screen until it shows; `cat` on a terminal)", n), ms(pct(keys, .5)), "exec `true` (as P1) " + ms(pct(execs, .5)), fmt.Sprintf("%.1f×", p50), "(no goal set)", "—"},
		{"terminal keystroke → screen p99", ms(pct(keys, .99)), "exec `true` (as P1) " + ms(pct(execs, .99)), fmt.Sprintf("%.1f×", p99), "(no goal set)", "—"},
		{"terminal keystroke → screen: job_screen calls until the key showed, p50 / p99 / max; one job_input, one job_screen (p50)",
			fmt.Sprintf("%d / %d / %d; %s, %s", screens[(len(screens)-1)/2], screens[int(float64(len(screens)-1)*.99)], screens[len(screens)-1], ms(pct(inputs, .5)), ms(pct(reads, .5))),
			"", "", "(explains the rows above)", "—"},
	}, nil
}

// keystroke is one sample: the time from the job_input call to the return
// of the first job_screen that showed the key, the job_input call's own
// time, and each job_screen call's.
type keystroke struct {
	total, input time.Duration
	reads        []time.Duration
}

// typeAndSee types token and Enter into terminal job id and reads its
// screen until the token shows.
func typeAndSee(ctx context.Context, cs *mcp.ClientSession, id, token string) (keystroke, error) {
	start := time.Now()
	deadline := start.Add(keyDeadline)
	if err := call(ctx, cs, "job_input", map[string]any{"job_id": id, "text": token + "\r"}, nil); err != nil {
		return keystroke{}, err
	}
	k := keystroke{input: time.Since(start)}
	// A tight loop, without a pause between reads: how soon a screen shows
	// the key is the quantity measured, and a pause would add to it. Each
	// read is a round trip through the gateway and the agent, which paces
	// the loop; keyDeadline bounds it.
	for {
		t0 := time.Now()
		var scr tools.JobScreenOutput
		if err := call(ctx, cs, "job_screen", map[string]any{"job_id": id}, &scr); err != nil {
			return keystroke{}, err
		}
		now := time.Now()
		k.reads = append(k.reads, now.Sub(t0))
		if slices.ContainsFunc(scr.Lines, func(l string) bool { return strings.Contains(l, token) }) {
			k.total = now.Sub(start)
			return k, nil
		}
		if scr.Result != nil {
			return keystroke{}, fmt.Errorf("the terminal job ended (%s) before its screen showed %q", scr.State, token)
		}
		if now.After(deadline) {
			return keystroke{}, fmt.Errorf("the screen did not show %q within %s of typing it (%d reads); it shows:\n%s", token, keyDeadline, len(k.reads), strings.Join(scr.Lines, "\n"))
		}
	}
}

// execOn runs command with exec on handle, as P1 does, and fails unless
// it exits 0.
func execOn(ctx context.Context, cs *mcp.ClientSession, handle, command string) error {
	var res tools.ExecOutput
	if err := call(ctx, cs, "exec", map[string]any{"handle": handle, "command": command}, &res); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%q exited %d", command, res.ExitCode)
	}
	return nil
}

// endTerminalJob ends a terminal job: Ctrl-D ends cat; the job is then
// polled to its end and its last page acknowledged, so that it is
// recycled. A job still running after that is cancelled.
func endTerminalJob(ctx context.Context, cs *mcp.ClientSession, id string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := call(ctx, cs, "job_input", map[string]any{"job_id": id, "end_input": true}, nil); err == nil {
		cursor := ""
		for ctx.Err() == nil {
			var page tools.JobPollOutput
			if err := call(ctx, cs, "job_poll", map[string]any{"job_id": id, "cursor": cursor, "max_bytes": 4 << 20, "wait_seconds": 5}, &page); err != nil {
				break
			}
			cursor = page.NextCursor
			if page.Done {
				_ = call(ctx, cs, "job_poll", map[string]any{"job_id": id, "cursor": cursor}, nil)
				return
			}
		}
	}
	_ = call(ctx, cs, "job_cancel", map[string]any{"job_id": id}, nil)
}

// extendedTools gives the sample tenant the extended tool set (terminals
// are served there only) and returns what puts its set back.
func (b *bench) extendedTools(ctx context.Context) (func(), error) {
	c, key := b.env.Client, client.ObjectKeyFromObject(b.env.Tenant)
	var tn playgroundv1alpha1.Tenant
	if err := c.Get(ctx, key, &tn); err != nil {
		return nil, fmt.Errorf("reading the sample tenant %s: %w", key, err)
	}
	was := tn.Spec.Tools
	if err := setTools(ctx, c, &tn, playgroundv1alpha1.ToolSetExtended); err != nil {
		return nil, err
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		var tn playgroundv1alpha1.Tenant
		if err := c.Get(ctx, key, &tn); err == nil {
			_ = setTools(ctx, c, &tn, was)
		}
	}, nil
}

// setTools patches tenant tn's tool set to set.
func setTools(ctx context.Context, c client.Client, tn *playgroundv1alpha1.Tenant, set playgroundv1alpha1.ToolSet) error {
	base := tn.DeepCopy()
	tn.Spec.Tools = set
	if err := c.Patch(ctx, tn, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("setting the tool set of tenant %s to %q: %w", client.ObjectKeyFromObject(tn), set, err)
	}
	return nil
}

// extendedSession opens a session of the sample tenant once the gateway
// serves it the extended set: the gateway chooses a session's set when it
// begins, from its view of the Tenant, which follows the patch shortly.
func (b *bench) extendedSession(ctx context.Context) (*mcp.ClientSession, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		cs, err := b.connect(ctx, b.env.Token)
		if err != nil {
			return nil, err
		}
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			cs.Close()
			return nil, fmt.Errorf("listing the tools: %w", err)
		}
		if slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == "job_screen" }) {
			return cs, nil
		}
		cs.Close()
		if time.Now().After(deadline) {
			return nil, errors.New("the gateway still serves the standard tool set a minute after the sample tenant's spec.tools became extended")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
