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

package mcpgateway

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
)

// TestFileTokenFirstLine: the gateway presents the first token of a file
// that, during a rotation, holds the new token above the old one (agents
// accept both), and refuses to present an empty one.
func TestFileTokenFirstLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	for _, tc := range []struct{ content, want string }{
		{"only-token\n", "only-token"},
		{"\n  new-token  \nold-token\n", "new-token"},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := FileToken(path, logr.Discard())()
		if err != nil || got != tc.want {
			t.Fatalf("%q: got %q, %v; want %q", tc.content, got, err, tc.want)
		}
	}
	if err := os.WriteFile(path, []byte(" \n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FileToken(path, logr.Discard())(); err == nil {
		t.Fatal("an empty token file gave a token")
	}
}
