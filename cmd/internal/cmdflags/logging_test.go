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

package cmdflags

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// The log flags: one format per role by default, the --zap-* flags over
// it, and the manager's -v as --zap-log-level.
func TestLogFlags(t *testing.T) {
	for _, tc := range []struct {
		name, encoder string
		args          []string
		manager       bool
		wantJSON      bool
		wantV2        bool
		wantStack     bool
	}{
		{name: "components: JSON at info", encoder: "json", wantJSON: true},
		{name: "dev: console", encoder: "console"},
		{name: "console asked", encoder: "json", args: []string{"--zap-encoder=console"}},
		{name: "JSON asked of dev", encoder: "console", args: []string{"--zap-encoder", "json"}, wantJSON: true},
		{name: "verbosity 2", encoder: "json", args: []string{"--zap-log-level=2"}, wantJSON: true, wantV2: true},
		{name: "manager's -v=2", encoder: "json", args: []string{"-v=2"}, manager: true, wantJSON: true, wantV2: true},
		{name: "manager's -v=0", encoder: "json", args: []string{"-v=0"}, manager: true, wantJSON: true},
		{name: "stack traces asked", encoder: "json", args: []string{"--zap-stacktrace-level=error"}, wantJSON: true, wantStack: true},
		{name: "zap's development defaults", encoder: "json", args: []string{"--zap-devel"}, wantStack: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o := LogFlags(fs, tc.encoder)
			if tc.manager {
				VerbosityFlag(fs)
			}
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			o.DestWriter = &buf
			log := o.Logger()
			log.Info("Hello", "k", "v")
			log.V(2).Info("Detail")
			log.Error(errors.New("boom"), "Failed")

			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			var first map[string]any
			isJSON := json.Unmarshal([]byte(lines[0]), &first) == nil
			if isJSON != tc.wantJSON {
				t.Fatalf("JSON %v, want %v:\n%s", isJSON, tc.wantJSON, buf.String())
			}
			if isJSON && (first["msg"] != "Hello" || first["k"] != "v") {
				t.Fatalf("first line %v", first)
			}
			if got := strings.Contains(buf.String(), "Detail"); got != tc.wantV2 {
				t.Fatalf("V(2) logged %v, want %v:\n%s", got, tc.wantV2, buf.String())
			}
			if got := strings.Contains(buf.String(), "testing.tRunner"); got != tc.wantStack {
				t.Fatalf("a stack trace %v, want %v:\n%s", got, tc.wantStack, buf.String())
			}
		})
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	LogFlags(fs, "json")
	if err := fs.Parse([]string{"--zap-encoder=xml"}); err == nil {
		t.Fatal("--zap-encoder=xml accepted")
	}
}
