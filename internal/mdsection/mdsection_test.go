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

package mdsection

import "testing"

func TestReplaceAndGet(t *testing.T) {
	doc := "# Benchmarks\n\ntable\n"
	once := Replace(doc, "soak", "## Soak\n\nfirst\n")
	want := "# Benchmarks\n\ntable\n\n<!-- soak:begin -->\n## Soak\n\nfirst\n<!-- soak:end -->\n"
	if once != want {
		t.Fatalf("appended:\n%q\nwant\n%q", once, want)
	}
	twice := Replace(once, "soak", "## Soak\n\nsecond")
	if got := Get(twice, "soak"); got != "<!-- soak:begin -->\n## Soak\n\nsecond\n<!-- soak:end -->" {
		t.Fatalf("replaced: %q", got)
	}
	if Get(doc, "soak") != "" || Get("<!-- soak:begin --> no end", "soak") != "" {
		t.Fatal("Get found a section that is not there")
	}
	// A file written whole again keeps the section by Get.
	rewritten := "# Benchmarks\n\nnew table\n\n" + Get(twice, "soak") + "\n"
	if Get(rewritten, "soak") != Get(twice, "soak") {
		t.Fatal("the section did not survive a rewrite")
	}
}
