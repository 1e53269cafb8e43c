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

package deps

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The rule TestNoRepeats keeps: no run of repeatRun or more consecutive
// lines of Go code appears in two places under hostagent/, within a file or
// across files. A repeated block is logic that has two homes and drifts;
// it belongs in one function of the package that owns its idea.
//
// Lines are compared trimmed, with blank lines, comment-only lines, the
// file's header (everything before the package clause: the licence) and its
// import declarations left out: an import block is a list, not logic.
// A run counts only if at least repeatSignificant of every repeatRun of its
// lines carry repeatChars or more non-blank characters, so that runs of
// closing braces, `return nil`, `}, nil`, `if err != nil {` and the like,
// which every Go file shares, are not taken for logic.
const (
	repeatRun         = 6
	repeatSignificant = 4
	repeatChars       = 12
)

// generated marks a generated file (https://go.dev/s/generatedcode).
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestNoRepeats reads every Go file under hostagent/, tests included
// (generated files apart), and fails on each run of lines found in two
// places, naming both. A helper two tests need lives once, where both
// reach it (a _test.go file of their package, or a test library such as
// backendtest); code the guest binary and the agent both need lives in a
// leaf package the guest may import (test/deps's rules: regularfile,
// duplex).
func TestNoRepeats(t *testing.T) {
	files := goFiles(t, "hostagent", true)
	for rel, src := range files {
		if generated.Match(src) {
			delete(files, rel)
		}
	}
	for _, r := range repeats(files) {
		t.Errorf("%s repeats %s (%d lines): put the logic in one function of the package that owns it and call it from both", r.b, r.a, r.lines)
	}
}

// TestRepeatsCatch checks repeats on code made up to break the rule, and on
// code that repeats only what the rule leaves out, so that a detector that
// sees nothing fails here rather than pass for ever. The planted repeat is
// found from its second read on, through a differing comment, a blank
// line and another indentation; its first read and error check (three
// significant lines of six) and the two functions of error checks alone
// are too common to count; the headers and imports are left out.
func TestRepeatsCatch(t *testing.T) {
	const header = `/*
Copyright 2026 The Playground Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
*/

`
	const body = `	data, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return Usage{}, fmt.Errorf("reading cpu.stat: %w", err)
	}
	usec, err := parseCount(string(data), "usage_usec ")
	if err != nil {
		return Usage{}, fmt.Errorf("parsing cpu.stat: %w", err)
	}
	memory, _ := readCgroupUint(filepath.Join(dir, "memory.current"))
	// the comment differs: comments are not logic
	peak, _ := readCgroupUint(filepath.Join(dir, "memory.peak"))

	return Usage{CPU: usec, Memory: memory, Peak: peak}, nil
`
	files := map[string][]byte{
		"hostagent/backend/oci/usage.go": []byte(header + `package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func usage(dir string) (Usage, error) {
` + body + `}

func closers(a, b, c io.Closer) error {
	if err := a.Close(); err != nil {
		return err
	}
	if err := b.Close(); err != nil {
		return err
	}
	return nil
}
`),
		"hostagent/backend/vm/usage.go": []byte(header + `package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// qemuUsage reads the usage of QEMU's cgroup.
func qemuUsage(dir string) (Usage, error) {
	  ` + strings.ReplaceAll(body, "comments are not logic", "nor is this") + `}

func shutters(a, b, c io.Closer) error {
	if err := a.Close(); err != nil {
		return err
	}
	if err := b.Close(); err != nil {
		return err
	}
	return nil
}
`),
	}
	got := repeats(files)
	want := []repeat{{
		a:     "hostagent/backend/oci/usage.go:23-32",
		b:     "hostagent/backend/vm/usage.go:24-33",
		lines: 8,
	}}
	if !slices.Equal(got, want) {
		t.Errorf("repeats = %+v, want %+v", got, want)
	}
}

// repeat is a run of lines found in two places: where, and how many lines
// (of code, the ones compared).
type repeat struct {
	a, b  string
	lines int
}

// line is a line of code kept for the comparison: its trimmed text, and
// where it is (1-based).
type line struct {
	text string
	at   int
}

// codeLines returns the lines of src the rule compares: trimmed, with blank
// and comment-only lines, the header and the import declarations left out.
func codeLines(src []byte) []line {
	var out []line
	inPackage, inImport, inComment := false, false, false
	for i, raw := range strings.Split(string(src), "\n") {
		text := strings.TrimSpace(raw)
		if inComment {
			if end := strings.Index(text, "*/"); end >= 0 {
				inComment = false
				text = strings.TrimSpace(text[end+2:])
			} else {
				continue
			}
		}
		if strings.HasPrefix(text, "/*") && !strings.Contains(text, "*/") {
			inComment = true
			continue
		}
		switch {
		case !inPackage:
			inPackage = strings.HasPrefix(text, "package ")
			continue
		case inImport:
			inImport = text != ")"
			continue
		case text == "import (":
			inImport = true
			continue
		case strings.HasPrefix(text, "import "):
			continue
		case text == "", strings.HasPrefix(text, "//"), strings.HasPrefix(text, "/*") && strings.HasSuffix(text, "*/"):
			continue
		}
		out = append(out, line{text: text, at: i + 1})
	}
	return out
}

// significant says whether a line carries enough to be taken for logic.
func significant(text string) bool {
	n := 0
	for _, r := range text {
		if r != ' ' && r != '\t' {
			n++
		}
	}
	return n >= repeatChars
}

// repeats returns the runs of repeatRun or more lines of code found in two
// places of files (path to source), each once, longest first where they
// overlap; a run that overlaps itself (a line pattern repeated in a row
// within one file) is not one.
func repeats(files map[string][]byte) []repeat {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	code := make([][]line, len(paths))
	type place struct{ file, start int }
	windows := map[string][]place{}
	for f, p := range paths {
		code[f] = codeLines(files[p])
		lines := code[f]
		for s := 0; s+repeatRun <= len(lines); s++ {
			texts := make([]string, repeatRun)
			sig := 0
			for k := range repeatRun {
				texts[k] = lines[s+k].text
				if significant(texts[k]) {
					sig++
				}
			}
			if sig < repeatSignificant {
				continue
			}
			key := strings.Join(texts, "\n")
			windows[key] = append(windows[key], place{f, s})
		}
	}
	// A pair of places whose windows match; a run is a chain of pairs,
	// each one line further on both sides.
	type pair struct{ a, b place }
	pairs := map[pair]bool{}
	for _, ps := range windows {
		for i, a := range ps {
			for _, b := range ps[i+1:] {
				if a.file == b.file && b.start < a.start+repeatRun {
					continue
				}
				pairs[pair{a, b}] = true
			}
		}
	}
	var out []repeat
	for p := range pairs {
		prev := pair{place{p.a.file, p.a.start - 1}, place{p.b.file, p.b.start - 1}}
		if pairs[prev] {
			continue // not the start of its run
		}
		n := 1
		for pairs[pair{place{p.a.file, p.a.start + n}, place{p.b.file, p.b.start + n}}] {
			n++
		}
		span := func(pl place) string {
			lines := code[pl.file]
			return fmt.Sprintf("%s:%d-%d", paths[pl.file], lines[pl.start].at, lines[pl.start+n+repeatRun-2].at)
		}
		out = append(out, repeat{a: span(p.a), b: span(p.b), lines: n + repeatRun - 1})
	}
	slices.SortFunc(out, func(x, y repeat) int {
		if c := strings.Compare(x.a, y.a); c != 0 {
			return c
		}
		return strings.Compare(x.b, y.b)
	})
	return out
}
