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

package registrytest

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// System is the entries of a minimal system image made of this machine's
// files: each of binaries (found on PATH) at usr/bin/<name>, with the
// shared libraries `ldd` names for it, /bin/sh a link to the first binary
// (a shell), and etc/os-release holding osRelease. Merged, /bin, /lib and
// /lib64 are links into /usr (a usrmerge system); else the files are in
// /bin, /lib and /lib64 and there is no /usr. The test skips when a binary
// or ldd is missing.
func System(t testing.TB, osRelease string, merged bool, binaries ...string) []Entry {
	t.Helper()
	files := map[string]string{} // name in the image → file on the node
	prefix := ""
	if merged {
		prefix = "usr/"
	}
	for i, b := range binaries {
		p, err := exec.LookPath(b)
		if err != nil {
			t.Skipf("%s is not on this machine: %v", b, err)
		}
		files[prefix+"bin/"+b] = p
		if i == 0 {
			files["sh"] = ""
		}
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			// A static binary: ldd says "not a dynamic executable".
			continue
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			f := strings.Fields(line)
			var lib string
			switch {
			case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
				lib = f[2]
			case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
				lib = f[0]
			default:
				continue
			}
			// The loader's path is fixed in the binary: keep it, under /usr
			// on a merged system.
			rel := strings.TrimPrefix(lib, "/")
			rel = strings.TrimPrefix(rel, "usr/")
			files[prefix+rel] = lib
		}
	}
	delete(files, "sh")
	dirs := map[string]bool{"etc/": true}
	var entries []Entry
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)
	for _, d := range dirNames {
		entries = append(entries, Dir(d))
	}
	for _, n := range names {
		body, err := os.ReadFile(files[n])
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, File(n, string(body), 0o755))
	}
	if merged {
		for _, l := range []string{"bin", "lib", "lib64"} {
			entries = append(entries, Symlink(l, "usr/"+l))
		}
	}
	entries = append(entries,
		Symlink(prefix+"bin/sh", filepath.Base(binaries[0])),
		File("etc/os-release", osRelease, 0o644))
	return entries
}

// SetuidRootCopy adds to a system's entries a copy of its file from, named
// to, owned by root with the setuid bit: what an image's author would put
// in to gain privilege in the sandbox.
func SetuidRootCopy(t testing.TB, entries []Entry, from, to string) []Entry {
	t.Helper()
	for _, e := range entries {
		if e.Name == from {
			e.Name, e.Mode, e.Uid, e.Gid = to, 0o4755, 0, 0
			return append(entries, e)
		}
	}
	t.Fatalf("the system has no %s to copy", from)
	return nil
}

// PushMergedSystem pushes, as system/merged:1, a usrmerge system of dash
// and cat whose os-release is osRelease, with a setuid-root copy of its
// shell (usr/bin/rootsh) and an environment of its own (PATH=/usr/bin,
// IMAGE_GREETING=hello from the image), and returns its reference by
// digest.
func (r *Registry) PushMergedSystem(t testing.TB, osRelease string) string {
	t.Helper()
	merged := SetuidRootCopy(t, System(t, osRelease, true, "dash", "cat"), "usr/bin/dash", "usr/bin/rootsh")
	return r.Push(t, "system/merged", "1", Image(t,
		[]string{"PATH=/usr/bin", "IMAGE_GREETING=hello from the image"},
		Layer(t, Tar(t, merged...))), nil)
}

// NodeSecret writes a file of the node's ("the node's secret\n"), in a
// directory of its own that anyone may search, removed when the test
// ends, and returns its path: what an image's link must never reach.
func NodeSecret(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pg-node-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("the node's secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return secret
}
