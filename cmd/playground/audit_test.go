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
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playground-dev/playground/internal/audit"
)

// TestAuditVerify: the gateway's audit flags make a file trail that
// `playground audit verify` accepts, and refuses once a record is
// removed; flags it cannot use are refused with what to give.
func TestAuditVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	mk := auditFlags(fs)
	if err := fs.Parse([]string{"--audit-log-path=" + path, "--audit-level=request"}); err != nil {
		t.Fatal(err)
	}
	trail, err := mk("gateway", true)
	if err != nil || trail == nil {
		t.Fatalf("trail %v, %v", trail, err)
	}
	for range 3 {
		trail.Record(recordOf("exec"))
	}
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runAudit([]string{"verify", path}, &out); err != nil || !strings.Contains(out.String(), "ok: 3 records in 1 chains") {
		t.Fatalf("verify: %v, %q", err, out.String())
	}
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	cut := filepath.Join(t.TempDir(), "cut.log")
	if err := os.WriteFile(cut, []byte(lines[0]+lines[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runAudit([]string{"verify", cut}, &out); err == nil || !strings.Contains(err.Error(), "records 2-2 of chain") {
		t.Fatalf("verify of a trail missing a record: %v", err)
	}

	for _, bad := range [][]string{{"--audit-level=everything"}, {"--audit-webhook-url=ftp://x"}} {
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		mk := auditFlags(fs)
		if err := fs.Parse(bad); err != nil {
			t.Fatal(err)
		}
		if _, err := mk("gateway", true); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func recordOf(tool string) audit.Record {
	return audit.Record{Tenant: "team-a/alice", Tool: tool, Command: "true", Outcome: "ok"}
}
