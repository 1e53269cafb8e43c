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

// Package mdsection keeps a generated section of a Markdown file between
// two comment lines, so that two generators can share one file: make bench
// writes docs/benchmarks.md whole and keeps the section make soak writes.
package mdsection

import "strings"

func markers(name string) (begin, end string) {
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// Get returns the section named name in doc, its comment lines included,
// or "" when doc has none.
func Get(doc, name string) string {
	begin, end := markers(name)
	i := strings.Index(doc, begin)
	if i < 0 {
		return ""
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return ""
	}
	return doc[i : i+j+len(end)]
}

// Replace returns doc with the section named name holding body: in place
// of the one it has, or appended after a blank line.
func Replace(doc, name, body string) string {
	begin, end := markers(name)
	section := begin + "\n" + strings.TrimRight(body, "\n") + "\n" + end
	if old := Get(doc, name); old != "" {
		return strings.Replace(doc, old, section, 1)
	}
	return strings.TrimRight(doc, "\n") + "\n\n" + section + "\n"
}
