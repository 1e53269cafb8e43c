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

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// toolClient is a tenant's MCP session, for the terminal stories.
type toolClient struct {
	t  *testing.T
	cs *mcp.ClientSession
}

// connectTenant connects an MCP client to the gateway at url with the
// token of tenant ns/name, once the gateway serves it, until the test
// ends.
func connectTenant(t *testing.T, url, ns, name string) toolClient {
	t.Helper()
	g := NewWithT(t)
	var cs *mcp.ClientSession
	g.Eventually(func() (err error) {
		cs, err = mcpConnect(url, tokenOf(g, ns, name))
		return err
	}, settle, 100*time.Millisecond).Should(Succeed())
	t.Cleanup(func() { _ = cs.Close() })
	return toolClient{t: t, cs: cs}
}

// call calls a tool and decodes its structured result into out; it
// returns the result's error text, "" when it succeeded.
func (c toolClient) call(name string, args map[string]any, out any) string {
	c.t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s: %v", name, err)
		}
	}
	return ""
}

func (c toolClient) must(name string, args map[string]any, out any) {
	c.t.Helper()
	if msg := c.call(name, args, out); msg != "" {
		c.t.Fatalf("%s %v: %s", name, args, msg)
	}
}

// screenShows waits until job's screen shows want, following the job's
// output: each new output is a reason to look again.
func (c toolClient) screenShows(job, want string) tools.JobScreenOutput {
	c.t.Helper()
	cursor := ""
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var scr tools.JobScreenOutput
		c.must("job_screen", map[string]any{"job_id": job}, &scr)
		if strings.Contains(strings.Join(scr.Lines, "\n"), want) {
			return scr
		}
		if time.Now().After(deadline) || scr.Result != nil {
			c.t.Fatalf("job %s's screen never showed %q (state %s):\n%s", job, want, scr.State, strings.Join(scr.Lines, "\n"))
		}
		var p tools.JobPollOutput
		c.must("job_poll", map[string]any{"job_id": job, "cursor": cursor, "wait_seconds": 2, "max_bytes": 65536}, &p)
		cursor = p.NextCursor
	}
}

// ended polls job to its end and returns its result and output.
func (c toolClient) ended(job string) (tools.JobPollOutput, string) {
	c.t.Helper()
	cursor, out := "", ""
	for {
		var p tools.JobPollOutput
		c.must("job_poll", map[string]any{"job_id": job, "cursor": cursor, "wait_seconds": 5}, &p)
		for _, ch := range p.Chunks {
			out += ch.Data
		}
		cursor = p.NextCursor
		if p.Done {
			return p, out
		}
	}
}

func extendedTools(tn *playgroundv1alpha1.Tenant) {
	tn.Spec.Sandbox.NodeSelector = pool("term")
	tn.Spec.Tools = playgroundv1alpha1.ToolSetExtended
}

// TestTerminals: the extended tool set through the gateway, with a real
// MCP client: a REPL answers what is typed into its terminal, a resize
// reaches the program, top's screen reads as text and a key ends it, a
// pipe job echoes what is written and ends with its input; a terminal job
// survives its agent's restart with its screen, and takes input after
// it. Another tenant can neither see nor touch the job, and a tenant of
// the standard set is served the eight tools exactly.
func TestTerminals(t *testing.T) {
	g := NewWithT(t)
	startManager(t)
	n := &node{name: "term-1", labels: pool("term")}
	startNode(t, n)
	url := startGateway(t)
	ns := newNamespace(t)
	applyTenant(t, ns, "alice", extendedTools)
	applyTenant(t, ns, "bob", extendedTools)
	applyTenant(t, ns, "carol", inPool("term"))
	for _, name := range []string{"alice", "bob", "carol"} {
		waitReady(t, ns, name)
	}
	alice, bob, carol := connectTenant(t, url, ns, "alice"), connectTenant(t, url, ns, "bob"), connectTenant(t, url, ns, "carol")

	listed := func(c toolClient) (names []string, jobExec string) {
		res, err := c.cs.ListTools(context.Background(), nil)
		g.Expect(err).NotTo(HaveOccurred())
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			if tool.Name == "job_exec" {
				b, _ := json.Marshal(tool.InputSchema)
				jobExec = string(b)
			}
		}
		slices.Sort(names)
		return names, jobExec
	}
	names, schema := listed(carol)
	want := slices.Sorted(slices.Values(tools.Names))
	g.Expect(names).To(Equal(want), "a tenant of the standard set is served the eight tools")
	g.Expect(schema).NotTo(ContainSubstring(`"tty"`), "the standard job_exec has no terminal")
	names, schema = listed(alice)
	g.Expect(names).To(Equal(slices.Sorted(slices.Values(append(slices.Clone(tools.Names), tools.ExtendedNames...)))))
	g.Expect(schema).To(ContainSubstring(`"tty"`))

	var open tools.OpenSessionOutput
	alice.must("open_session", map[string]any{}, &open)
	h := open.Handle
	start := func(c toolClient, handle string, args map[string]any) string {
		args["handle"] = handle
		var out tools.JobExecOutput
		c.must("job_exec", args, &out)
		return out.JobID
	}

	t.Run("python REPL", func(t *testing.T) {
		g, alice := NewWithT(t), toolClient{t: t, cs: alice.cs}
		py := start(alice, h, map[string]any{"command": "python3 -q", "tty": true})
		alice.screenShows(py, ">>>")
		alice.must("job_input", map[string]any{"job_id": py, "text": "print(6*7)\r"}, nil)
		scr := alice.screenShows(py, "42")
		at := slices.IndexFunc(scr.Lines, func(l string) bool { return strings.TrimSpace(l) == "42" })
		g.Expect(at).To(BeNumerically(">", 0))
		g.Expect(scr.Lines[at-1]).To(HavePrefix(">>> print(6*7)"), "42 is under the prompt")
		alice.must("job_input", map[string]any{"job_id": py, "end_input": true}, nil)
		p, _ := alice.ended(py)
		g.Expect(p.Result.ExitCode).To(Equal(0))
	})

	t.Run("top", func(t *testing.T) {
		g, alice := NewWithT(t), toolClient{t: t, cs: alice.cs}
		top := start(alice, h, map[string]any{"command": "top", "tty": true})
		scr := alice.screenShows(top, "load average")
		g.Expect(scr.Lines[0]).To(HavePrefix("top - "), "top's first line, as text")
		alice.must("job_input", map[string]any{"job_id": top, "text": "q"}, nil)
		p, _ := alice.ended(top)
		g.Expect(p.State).To(Equal("exited"))
		g.Expect(p.Result.ExitCode).To(Equal(0))
	})

	t.Run("pipe", func(t *testing.T) {
		g, alice := NewWithT(t), toolClient{t: t, cs: alice.cs}
		cat := start(alice, h, map[string]any{"command": "cat", "stdin_open": true})
		alice.must("job_input", map[string]any{"job_id": cat, "text": "hello\n"}, nil)
		alice.must("job_input", map[string]any{"job_id": cat, "base64": "d29ybGQK", "end_input": true}, nil)
		p, out := alice.ended(cat)
		g.Expect(out).To(Equal("hello\nworld\n"))
		g.Expect(p.Result.ExitCode).To(Equal(0))
		msg := alice.call("job_input", map[string]any{"job_id": cat, "text": "late"}, nil)
		g.Expect(msg).To(ContainSubstring("invalid_argument"), "input to a job that ended")
	})

	// A shell on a terminal, resized, then across an agent restart.
	sh := start(alice, h, map[string]any{"command": "sh", "tty": true, "rows": 24, "cols": 80})
	alice.must("job_resize", map[string]any{"job_id": sh, "rows": 40, "cols": 120}, nil)
	alice.must("job_input", map[string]any{"job_id": sh, "text": "echo cols=$(tput cols)\r"}, nil)
	// Its next prompt under the answer: the shell waits, the screen holds.
	before := alice.screenShows(sh, "cols=120\n$")
	g.Expect(before.Rows).To(Equal(40))

	t.Run("another tenant", func(t *testing.T) {
		g, bob := NewWithT(t), toolClient{t: t, cs: bob.cs}
		var bobOpen tools.OpenSessionOutput
		bob.must("open_session", map[string]any{}, &bobOpen)
		mine := start(bob, bobOpen.Handle, map[string]any{"command": "sleep 600", "stdin_open": true})
		var list tools.JobListOutput
		bob.must("job_list", map[string]any{}, &list)
		g.Expect(list.Jobs).To(HaveLen(1))
		g.Expect(list.Jobs[0].JobID).To(Equal(mine))
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"job_screen", map[string]any{"job_id": sh}},
			{"job_resize", map[string]any{"job_id": sh, "rows": 10, "cols": 10}},
			{"job_input", map[string]any{"job_id": sh, "text": "echo pwned\r"}},
		} {
			g.Expect(bob.call(call.tool, call.args, nil)).To(ContainSubstring("not_found"), "%s of another tenant's job", call.tool)
		}
		bob.must("job_cancel", map[string]any{"job_id": mine}, nil)
	})

	t.Run("standard tenant", func(t *testing.T) {
		g, carol := NewWithT(t), toolClient{t: t, cs: carol.cs}
		var carolOpen tools.OpenSessionOutput
		carol.must("open_session", map[string]any{}, &carolOpen)
		msg := carol.call("job_exec", map[string]any{"handle": carolOpen.Handle, "command": "sh", "tty": true}, nil)
		g.Expect(msg).NotTo(BeEmpty(), "a terminal for a tenant of the standard set")
		// A tool of the extended set says which setting serves it, not
		// "unknown tool".
		g.Expect(carol.call("job_screen", map[string]any{"job_id": "job-1"}, nil)).To(ContainSubstring("spec.tools: extended"))
	})

	t.Run("256 MiB in ranges", func(t *testing.T) {
		g, alice := NewWithT(t), toolClient{t: t, cs: alice.cs}
		const size, chunk, workers = 256 << 20, 3 << 20, 4
		data := make([]byte, size)
		_, _ = rand.Read(data)
		sum := sha256.Sum256(data)
		// Workers move chunks at their offsets concurrently, as a client
		// in a hurry does; the tenant's budget in the gateway refuses
		// what does not fit (resource_exhausted), and they retry.
		parallel := func(do func(off int) string) {
			offsets := make(chan int)
			errs := make(chan string, workers)
			for range workers {
				go func() {
					for off := range offsets {
						for {
							msg := do(off)
							if msg == "" {
								break
							}
							if !strings.Contains(msg, "resource_exhausted") {
								errs <- msg
								return
							}
							time.Sleep(20 * time.Millisecond)
						}
					}
					errs <- ""
				}()
			}
			for off := 0; off < size; off += chunk {
				offsets <- off
			}
			close(offsets)
			for range workers {
				g.Expect(<-errs).To(BeEmpty())
			}
		}
		parallel(func(off int) string {
			end := min(off+chunk, size)
			return alice.call("write", map[string]any{"handle": h, "path": "big.bin", "offset": off,
				"base64": base64.StdEncoding.EncodeToString(data[off:end])}, nil)
		})
		var d tools.ReadOutput
		alice.must("read", map[string]any{"handle": h, "path": "big.bin", "digest": true}, &d)
		g.Expect(d.FileSize).To(Equal(int64(size)))
		g.Expect(d.SHA256).To(Equal(hex.EncodeToString(sum[:])), "the whole file's digest")

		back := make([]byte, size)
		parallel(func(off int) string {
			res, err := alice.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"handle": h, "path": "big.bin", "offset": off, "length": chunk}})
			if err != nil {
				return err.Error()
			}
			if res.IsError {
				return res.Content[0].(*mcp.TextContent).Text
			}
			for _, ct := range res.Content {
				if r, ok := ct.(*mcp.EmbeddedResource); ok {
					copy(back[off:], r.Resource.Blob)
				}
			}
			return ""
		})
		g.Expect(sha256.Sum256(back)).To(Equal(sum), "the file read back in ranges")
	})

	// The agent restarts on the same state directory and endpoint.
	n.agent.Stop(t)
	startNode(t, n)
	var list tools.JobListOutput
	g.Eventually(func() string { return alice.call("job_list", map[string]any{}, &list) }, settle, 200*time.Millisecond).Should(BeEmpty())
	i := slices.IndexFunc(list.Jobs, func(j tools.JobListed) bool { return j.JobID == sh })
	g.Expect(i).NotTo(Equal(-1), "the terminal job is listed after the restart: %+v", list.Jobs)
	g.Expect(list.Jobs[i].State).To(Equal("running"))
	g.Expect(list.Jobs[i].TTY).To(BeTrue())
	var after tools.JobScreenOutput
	alice.must("job_screen", map[string]any{"job_id": sh}, &after)
	g.Expect(after.Lines).To(Equal(before.Lines), "the screen is intact across the restart")
	alice.must("job_input", map[string]any{"job_id": sh, "text": fmt.Sprintf("echo %s\r", "after-$((40+2))")}, nil)
	alice.screenShows(sh, "after-42")
	alice.must("job_input", map[string]any{"job_id": sh, "text": "exit 3\r"}, nil)
	p, _ := alice.ended(sh)
	g.Expect(p.Result.ExitCode).To(Equal(3))
}
