//go:build linux

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

package guest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// fileTree is a home and a pile, with the links a tenant could make
// between them and out of them.
func fileTree(t testing.TB) fileRoots {
	t.Helper()
	root := t.TempDir()
	r := fileRoots{home: filepath.Join(root, "home"), pile: filepath.Join(root, "pile")}
	for _, d := range []string{r.home + "/sub", r.pile + "/logs"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{r.home + "/a.txt": "hello", r.pile + "/logs/x.log": "pile\n", root + "/outside": "out"}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"topile":      r.pile,                 // a link to the pile itself
		"tologs":      "../pile/logs",         // relative, into the pile
		"tolog":       r.pile + "/logs/x.log", // a file of the pile
		"tolog2":      r.pile + "/logs/x.log",
		"tonew":       r.pile + "/logs/new", // a missing file of the pile
		"chain":       "tolog",              // a link to a link into it
		"sub/up":      "..",                 // back to home
		"out":         root + "/outside",    // out of home, not the pile
		"loop":        "loop",
		"dangling":    "nowhere/file",
		"sub/pilesub": "../../pile/logs",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(r.home, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(r.home+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFilePaths: the guest's file calls resolve a path as a command in
// cwd would, and refuse what the shell scripts before them refused: a
// write (whole, ranged or appended) into the pile by any way there (its
// path, "..", a link to its directory, a link to one of its files, a
// chain of them, a dangling one), special files (a FIFO is never opened
// to block), directories, missing files and directories.
func TestFilePaths(t *testing.T) {
	r := fileTree(t)
	read := guestapi.FileRequest{Op: filecall.Read, Length: 100, Whole: true}
	write := guestapi.FileRequest{Op: filecall.Write}
	appnd := guestapi.FileRequest{Op: filecall.Append}
	at := guestapi.FileRequest{Op: filecall.WriteAt, Offset: 2}
	digest := guestapi.FileRequest{Op: filecall.Digest}
	for _, tc := range []struct {
		name, cwd string
		req       guestapi.FileRequest
		path      string
		refused   filecall.Refusal
		detail    string
		wantPath  string // the answer's path, relative to home
	}{
		{name: "read relative", req: read, path: "a.txt", wantPath: "a.txt"},
		{name: "read doubled slashes", req: read, path: "sub//..//a.txt", wantPath: "a.txt"},
		{name: "write doubled slashes", req: write, path: "sub//d.txt", wantPath: "sub/d.txt"},
		{name: "read in cwd", cwd: "sub", req: read, path: "../a.txt", wantPath: "a.txt"},
		{name: "read through link dir", req: read, path: "sub/up/a.txt", wantPath: "a.txt"},
		{name: "read a pile file", req: read, path: "tolog", wantPath: "tolog"},
		{name: "read missing", req: read, path: "nope", refused: filecall.NoFile},
		{name: "read dangling", req: read, path: "dangling", refused: filecall.NoFile},
		{name: "read under a file", req: read, path: "a.txt/x", refused: filecall.NoFile},
		{name: "read loop", req: read, path: "loop", refused: filecall.NoFile},
		{name: "read dir", req: read, path: "sub", refused: filecall.NotRegular},
		{name: "read fifo", req: read, path: "fifo", refused: filecall.NotRegular},
		{name: "digest fifo", req: digest, path: "fifo", refused: filecall.NotRegular},
		{name: "read too large", req: guestapi.FileRequest{Op: filecall.Read, Length: 3, Whole: true}, path: "a.txt", refused: filecall.TooLarge, detail: "5"},
		{name: "write new", req: write, path: "sub/new.txt", wantPath: "sub/new.txt"},
		{name: "write through ..", cwd: "sub", req: write, path: "../w.txt", wantPath: "w.txt"},
		{name: "write no dir", req: write, path: "none/f", refused: filecall.NoDir, detail: "none"},
		{name: "write dir", req: write, path: "sub", refused: filecall.IsDir},
		{name: "write pile by path", req: write, path: r.pile + "/logs/x.log", refused: filecall.InPile},
		{name: "write pile by ..", req: write, path: "../pile/logs/y", refused: filecall.InPile},
		{name: "write pile by dir link", req: write, path: "topile/logs/y", refused: filecall.InPile},
		{name: "write pile by relative link", req: write, path: "tologs/y", refused: filecall.InPile},
		{name: "write pile by nested link", req: write, path: "sub/pilesub/y", refused: filecall.InPile},
		{name: "write over a link to the pile", req: write, path: "tolog2", wantPath: "tolog2"},
		{name: "append pile by link", req: appnd, path: "tolog", refused: filecall.InPile},
		{name: "append pile by chain", req: appnd, path: "chain", refused: filecall.InPile},
		{name: "append pile by dangling link", req: appnd, path: "tonew", refused: filecall.InPile},
		{name: "write at pile by link", req: at, path: "tolog", refused: filecall.InPile},
		{name: "append pile by dir link", req: appnd, path: "topile/logs/x.log", refused: filecall.InPile},
		{name: "append fifo", req: appnd, path: "fifo", refused: filecall.NotRegular},
		{name: "append loop", req: appnd, path: "loop", refused: filecall.NotRegular},
		{name: "append dir", req: appnd, path: "sub/", refused: filecall.IsDir},
		{name: "append out of home", req: appnd, path: "out", wantPath: "out"},
		{name: "write at new", req: at, path: "sub/at.bin", wantPath: "sub/at.bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Path = tc.path
			ans, _, err := r.serve(tc.cwd, req, []byte("data"), nil)
			if err != nil {
				t.Fatalf("serve: %v", err)
			}
			if ans.Refused != tc.refused || ans.Detail != tc.detail {
				t.Fatalf("refused %q (%q), want %q (%q)", ans.Refused, ans.Detail, tc.refused, tc.detail)
			}
			if tc.wantPath != "" && ans.Path != r.home+"/"+tc.wantPath {
				t.Errorf("path %q, want %q", ans.Path, r.home+"/"+tc.wantPath)
			}
		})
	}
	if b, _ := os.ReadFile(r.pile + "/logs/x.log"); string(b) != "pile\n" {
		t.Errorf("the pile's file is %q after the calls", b)
	}
	if ents, _ := os.ReadDir(r.pile + "/logs"); len(ents) != 1 {
		t.Errorf("the pile holds %d files after the calls, want 1", len(ents))
	}
}

// TestFileCwd: a cwd that does not exist is refused as a command's is.
func TestFileCwd(t *testing.T) {
	r := fileTree(t)
	_, _, err := r.serve("missing", guestapi.FileRequest{Op: filecall.Read, Path: "a", Length: 1}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist or cannot be entered") {
		t.Fatalf("err %v, want the cwd refused", err)
	}
}

// FuzzFilePath: whatever path and cwd a client gives, no write reaches
// the pile, and nothing outside the tree changes.
func FuzzFilePath(f *testing.F) {
	for _, s := range []string{"a.txt", "../pile/logs/x.log", "topile/logs/z", "tolog", "chain", "tonew", "sub/pilesub/q", "sub/up/../../pile/q", "./././tologs/../logs/x.log"} {
		f.Add(s, "", uint8(0))
		f.Add(s, "sub", uint8(1))
	}
	r := fileTree(f)
	ops := []filecall.Op{filecall.Write, filecall.Append, filecall.WriteAt}
	f.Fuzz(func(t *testing.T, p, cwd string, op uint8) {
		if strings.ContainsAny(cwd, "\x00") || filepath.IsAbs(cwd) || strings.Contains(cwd, "..") {
			return // a cwd is the agent's, checked as a command's
		}
		_, _, _ = r.serve(cwd, guestapi.FileRequest{Op: ops[int(op)%len(ops)], Path: p}, []byte("fuzz"), nil)
		if b, _ := os.ReadFile(r.pile + "/logs/x.log"); string(b) != "pile\n" {
			t.Fatalf("path %q in %q changed the pile's file: %q", p, cwd, b)
		}
		if ents, _ := os.ReadDir(r.pile + "/logs"); len(ents) != 1 {
			t.Fatalf("path %q in %q created a file in the pile", p, cwd)
		}
		if ents, _ := os.ReadDir(r.pile); len(ents) != 1 {
			t.Fatalf("path %q in %q created a file in the pile", p, cwd)
		}
	})
}

// TestAsTenant: a file call runs with the tenant's credentials, not the
// shepherd's: a file only root may read is refused, and a file it writes
// is the tenant's. The shepherd keeps root.
func TestAsTenant(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	uid, gid := tenantUID, tenantGID
	tenantUID, tenantGID = 65534, 65534
	t.Cleanup(func() { tenantUID, tenantGID = uid, gid })
	dir, err := os.MkdirTemp("", "astenant")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := fileRoots{home: dir, pile: "/nonexistent-pile"}
	var readErr, writeErr error
	if err := asTenant("pg-file-test", func() {
		_, _, readErr = r.serve("", guestapi.FileRequest{Op: filecall.Read, Path: "secret", Length: 10, Whole: true}, nil, nil)
		_, _, writeErr = r.serve("", guestapi.FileRequest{Op: filecall.Write, Path: "mine"}, []byte("y"), nil)
	}); err != nil {
		t.Fatal(err)
	}
	if readErr == nil || !strings.Contains(readErr.Error(), "permission denied") {
		t.Errorf("reading root's 0600 file as the tenant: %v, want permission denied", readErr)
	}
	if writeErr != nil {
		t.Fatalf("writing as the tenant: %v", writeErr)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "mine"), &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("the file written is owned by %d:%d (%v), want the tenant's", st.Uid, st.Gid, err)
	}
	if os.Geteuid() != 0 {
		t.Errorf("the process is no longer root")
	}
}
