package mcpgateway

import (
	"os"
	"path/filepath"
	"testing"
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
		got, err := FileToken(path)()
		if err != nil || got != tc.want {
			t.Fatalf("%q: got %q, %v; want %q", tc.content, got, err, tc.want)
		}
	}
	if err := os.WriteFile(path, []byte(" \n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FileToken(path)(); err == nil {
		t.Fatal("an empty token file gave a token")
	}
}
