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
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/playground-dev/playground/internal/mdsection"
)

var update = flag.Bool("update", false, "rewrite docs/benchmarks.md's explanations from notes.go, keeping its table")

// TestReportExplanations: the explanations under the table in
// docs/benchmarks.md are the ones make bench writes (notes.go), so that
// editing one without the other fails here rather than leaving the
// document saying what the benchmark no longer does.
func TestReportExplanations(t *testing.T) {
	const path = "../../docs/benchmarks.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// make soak's section follows the explanations, as make bench keeps it.
	soak := mdsection.Get(string(doc), "soak")
	text := strings.TrimRight(strings.Replace(string(doc), soak, "", 1), "\n") + "\n"
	i := strings.Index(text, notes)
	if *update {
		start := strings.Index(text, "\n## How each figure is measured")
		if start < 0 {
			t.Fatalf("%s has no explanations to replace", path)
		}
		body := text[:start] + notes + analysis
		if soak != "" {
			body = strings.TrimRight(body, "\n") + "\n\n" + soak + "\n"
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if i < 0 || text[i:] != notes+analysis {
		t.Fatalf("%s's explanations differ from notes.go: run make bench, or go test ./cmd/playground-bench -run TestReportExplanations -update", path)
	}
}

// TestWritesPerTenant: the P5 row counts every stored write, the small
// ones too (summed as "other"), and no review, which stores nothing.
func TestWritesPerTenant(t *testing.T) {
	before := map[string]float64{"tenants": 10, "leases": 5, "subjectaccessreviews": 0}
	after := map[string]float64{"tenants": 210, "tenants/status": 200, "leases": 10, "events": 3, "subjectaccessreviews": 900, "tokenreviews": 100}
	got, total := perTenant(before, after, 100)
	if want := "tenants 2.0, tenants/status 2.0, other 0.08"; got != want {
		t.Errorf("perTenant: %q, want %q", got, want)
	}
	if total < 4.079 || total > 4.081 {
		t.Errorf("total %.3f, want 4.08 (the small writes counted, the reviews not)", total)
	}
}
