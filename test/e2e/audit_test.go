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
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/rbactest"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// TestAuditTrail: through the gateway, with a real MCP client, each tool
// call is one record of the audit file, with its tenant, identity,
// session, tool, what it named, outcome and error code, duration, sizes,
// node and sandbox; never a write's content; the file verifies, and does
// not once a record is altered.
func TestAuditTrail(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	n := &node{name: "audit-1", labels: pool("audit")}
	startNode(t, n)
	path := filepath.Join(t.TempDir(), "audit.log")
	sink, err := audit.File(audit.FileOptions{Path: path})
	g.Expect(err).NotTo(HaveOccurred())
	trail := audit.New(audit.LevelRequestResult, "gateway", sink)
	cfg, err := rbactest.Grant(ctx, k8sClient, cp.Config, "gateway", rbactest.ServiceAccountUser("gateway"), rbactest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	url := serveGateway(t, mcpgateway.Options{Config: cfg, Audit: trail})
	ns := newNamespace(t)
	applyTenant(t, ns, "alice", inPool("audit"))
	_, sbx := waitReady(t, ns, "alice")
	c := connectTenant(t, url, ns, "alice")

	const secret = "do-not-record-this-content"
	var open tools.OpenSessionOutput
	c.must("open_session", map[string]any{}, &open)
	c.must("exec", map[string]any{"handle": open.Handle, "command": "echo hi; exit 3"}, nil)
	c.must("write", map[string]any{"handle": open.Handle, "path": "/workspace/a.txt", "base64": base64.StdEncoding.EncodeToString([]byte(secret))}, nil)
	c.must("read", map[string]any{"handle": open.Handle, "path": "/workspace/a.txt"}, nil)
	g.Expect(c.call("job_poll", map[string]any{"job_id": "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, nil)).To(HavePrefix("not_found"))
	c.must("close_session", map[string]any{"handle": open.Handle}, nil)
	g.Expect(trail.Close()).To(Succeed())

	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).NotTo(ContainSubstring(secret))
	g.Expect(string(data)).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(secret))))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var recs []audit.Record
	for _, l := range lines {
		var r audit.Record
		g.Expect(json.Unmarshal([]byte(l), &r)).To(Succeed())
		recs = append(recs, r)
	}
	var toolsCalled []string
	for _, r := range recs {
		toolsCalled = append(toolsCalled, r.Tool)
		g.Expect(r.Tenant).To(Equal(ns+"/alice"), "%+v", r)
		g.Expect(r.Identity).To(Equal("token of tenant "+ns+"/alice"), "%+v", r)
		g.Expect(r.Node).To(Equal(n.name), "%+v", r)
		g.Expect(r.Sandbox).To(Equal(sbx.Status.SandboxID), "%+v", r)
		g.Expect(r.Component).To(Equal("gateway"))
	}
	g.Expect(toolsCalled).To(Equal([]string{"open_session", "exec", "write", "read", "job_poll", "close_session"}), "one record per call")
	// A stateless gateway has no MCP sessions: the sandbox session is the
	// handle.
	for _, r := range []audit.Record{recs[1], recs[2], recs[3], recs[5]} {
		g.Expect(r.Handle).To(Equal(open.Handle), "%+v", r)
	}
	exec := recs[1]
	g.Expect(exec.Command).To(Equal("echo hi; exit 3"))
	g.Expect(exec.Outcome).To(Equal("ok"))
	g.Expect(exec.ExitCode).To(HaveValue(Equal(3)))
	g.Expect(exec.BytesIn).To(BeNumerically(">", 0))
	g.Expect(exec.BytesOut).To(BeNumerically(">", 0))
	g.Expect(recs[2].Path).To(Equal("/workspace/a.txt"))
	g.Expect(recs[4].Outcome).To(Equal("error"))
	g.Expect(recs[4].Code).To(Equal("not_found"))

	rep, err := audit.Verify(strings.NewReader(string(data)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Records).To(Equal(6))
	_, err = audit.Verify(strings.NewReader(strings.Replace(string(data), `"echo hi; exit 3"`, `"echo hello"`, 1)))
	g.Expect(err).To(MatchError(ContainSubstring("was altered")))
}
