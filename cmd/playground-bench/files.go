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
	"encoding/base64"
	"fmt"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// fileBytes is the size of the file the file rows move: read's and
// write's whole limit.
const fileBytes = tools.MaxFileBytes

// fileTransfer times a 3 MiB write and read through the agent's file
// calls (which the sandbox's guest serves) beside the same bytes through
// exec `cat` (stdin into a file, a file onto stdout), one after the other
// on the same sandbox: on the agent's API, as the gateway calls it, and
// from the MCP client (whose encoding of 3 MiB of JSON both paths pay).
// The bytes are text, so that both paths carry them the same way through
// MCP (a text block, not base64).
func (b *bench) fileTransfer(ctx context.Context) ([]row, error) {
	raw := make([]byte, fileBytes*3/4)
	_, _ = rand.Read(raw)
	text := base64.StdEncoding.EncodeToString(raw)[:fileBytes]
	n := max(b.sz.execs/20, 10)
	rows, err := b.agentFileTransfer(ctx, []byte(text), n*5)
	if err != nil {
		return nil, err
	}

	write := func() error {
		var out tools.WriteOutput
		if err := call(ctx, b.cs, "write", map[string]any{"handle": b.handle, "path": "bench-file", "text": text}, &out); err != nil {
			return err
		}
		if out.Size != len(text) {
			return fmt.Errorf("write wrote %d bytes of %d", out.Size, len(text))
		}
		return nil
	}
	catWrite := func() error {
		var out tools.ExecOutput
		if err := call(ctx, b.cs, "exec", map[string]any{"handle": b.handle, "command": "cat > bench-cat", "stdin": text}, &out); err != nil {
			return err
		}
		if out.ExitCode != 0 {
			return fmt.Errorf("cat > bench-cat exited %d: %s", out.ExitCode, out.Stderr)
		}
		return nil
	}
	read := func() error {
		var out tools.ReadOutput
		if err := call(ctx, b.cs, "read", map[string]any{"handle": b.handle, "path": "bench-file"}, &out); err != nil {
			return err
		}
		if out.Size != len(text) {
			return fmt.Errorf("read %d bytes of %d", out.Size, len(text))
		}
		return nil
	}
	catRead := func() error {
		var out tools.ExecOutput
		if err := call(ctx, b.cs, "exec", map[string]any{"handle": b.handle, "command": "cat bench-cat"}, &out); err != nil {
			return err
		}
		if out.ExitCode != 0 || len(out.Stdout) != len(text) {
			return fmt.Errorf("cat bench-cat: exit %d, %d bytes of %d", out.ExitCode, len(out.Stdout), len(text))
		}
		return nil
	}
	for _, p := range []struct {
		what       string
		ours, base func() error
	}{{"write", write, catWrite}, {"read", read, catRead}} {
		ours, err := timeN(n, p.ours)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.what, err)
		}
		base, err := timeN(n, p.base)
		if err != nil {
			return nil, fmt.Errorf("exec cat: %w", err)
		}
		r := ratio(pct(ours, .5), pct(base, .5))
		rows = append(rows, row{
			fmt.Sprintf("3 MiB %s p50 of %d (MCP %s → gateway → agent → guest)", p.what, n, p.what), ms(pct(ours, .5)),
			"the same bytes through MCP exec `cat` " + ms(pct(base, .5)), fmt.Sprintf("%.2f×", r), "(for reference)", "—",
		})
	}
	return rows, nil
}

// agentFileTransfer is fileTransfer's rows on the agent's API: n writes
// and reads of data against exec `cat` of the same bytes.
func (b *bench) agentFileTransfer(ctx context.Context, data []byte, n int) ([]row, error) {
	c, err := agentapi.NewClient(b.env.AgentEndpoint, b.env.AgentToken, nil)
	if err != nil {
		return nil, err
	}
	tenant := b.env.Tenant.Namespace + "/" + b.env.Tenant.Name
	h, err := c.Open(ctx, tenant, b.sandboxID)
	if err != nil {
		return nil, fmt.Errorf("opening the sandbox on the agent: %w", err)
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx), tenant, h.ID) }()
	cat := func(command string, stdin []byte, want int) error {
		res, err := c.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: command, Stdin: stdin})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 || len(res.Stdout) != want {
			return fmt.Errorf("%s: exit %d, %d bytes out of %d", command, res.ExitCode, len(res.Stdout), want)
		}
		return nil
	}
	var rows []row
	for _, p := range []struct {
		what       string
		ours, base func() error
	}{
		{"write", func() error {
			info, err := c.Write(ctx, tenant, h.ID, "bench-agent", "", data)
			if err == nil && info.Size != len(data) {
				err = fmt.Errorf("write wrote %d bytes of %d", info.Size, len(data))
			}
			return err
		}, func() error { return cat("cat > bench-agent-cat", data, 0) }},
		{"read", func() error {
			f, err := c.Read(ctx, tenant, h.ID, "bench-agent", "")
			if err == nil && len(f.Data) != len(data) {
				err = fmt.Errorf("read %d bytes of %d", len(f.Data), len(data))
			}
			return err
		}, func() error { return cat("cat bench-agent-cat", nil, len(data)) }},
	} {
		ours, err := timeN(n, p.ours)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.what, err)
		}
		base, err := timeN(n, p.base)
		if err != nil {
			return nil, fmt.Errorf("exec cat: %w", err)
		}
		r := ratio(pct(ours, .5), pct(base, .5))
		rows = append(rows, row{
			fmt.Sprintf("3 MiB %s p50 of %d (agent API %s → guest)", p.what, n, p.what), ms(pct(ours, .5)),
			"the same bytes through exec `cat` " + ms(pct(base, .5)), fmt.Sprintf("%.2f×", r), "< 1× (faster)", verdict(r < 1),
		})
	}
	return rows, nil
}
