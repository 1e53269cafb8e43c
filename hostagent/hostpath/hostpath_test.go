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

package hostpath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck holds which prefixes an agent's configuration may grant.
func TestCheck(t *testing.T) {
	tmp := t.TempDir()
	state := filepath.Join(tmp, "state")
	mkdir(t, state)
	toProc, toState := filepath.Join(tmp, "to-proc"), filepath.Join(tmp, "to-state")
	symlink(t, "/proc/self", toProc)
	symlink(t, state, toState)

	for _, c := range []struct{ prefix, want string }{
		{"", "not an absolute path"},
		{"opt/tools", "not an absolute path"},
		{"/", "the whole node"},
		{"//", "the whole node"},
		{"/proc", "lies under /proc"},
		{"/proc/1/root", "lies under /proc"},
		{"/proc/1/root/etc", "lies under /proc"},
		{"/sys", "lies under /sys"},
		{"/sys/fs/cgroup", "lies under /sys"},
		{"/dev", "lies under /dev"},
		{"/dev/shm/", "lies under /dev"},
		{"/opt/../proc", `a ".." element`},
		{"/opt/tools/..", `a ".." element`},
		{"/opt/./tools", `a "." element`},
		{state, "lies under the agent's own directory " + state},
		{state + "/faculties", "lies under the agent's own directory " + state},
		{state + "/sandboxes/sbx-x/rootfs", "lies under the agent's own directory " + state},
		{tmp, "holds the agent's own directory " + state},
		{toProc, "leads to /proc/"},
		{toState, "leads to " + state},
		{filepath.Join(toState, "faculties"), "leads to " + state + "/faculties"},
	} {
		got, err := Check(c.prefix, state)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%q) = %q, %v; want an error saying %q", c.prefix, got, err, c.want)
		}
	}

	for prefix, want := range map[string]string{
		"/opt/playground/faculties":  "/opt/playground/faculties",
		"/opt/playground/faculties/": "/opt/playground/faculties",
		"//opt//tools":               "/opt/tools",
		"/procedures":                "/procedures",
		"/device-tools":              "/device-tools",
		state + "-tools":             state + "-tools",
		filepath.Join(tmp, "tools"):  filepath.Join(tmp, "tools"),
	} {
		if got, err := Check(prefix, state); err != nil || got != want {
			t.Errorf("Check(%q) = %q, %v; want %q", prefix, got, err, want)
		}
	}

	if _, err := New([]string{"/opt/tools", "/proc"}, state); err == nil {
		t.Error("New granted /proc beside another prefix")
	}
	g, err := New([]string{"/opt/tools/", "/opt/tools", "/srv/a"}, state)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.Prefixes(), ","); got != "/opt/tools,/srv/a" {
		t.Errorf("prefixes %s", got)
	}
}

// TestRead: a path is read beneath a granted prefix only; whatever else
// it names is refused before anything is read, with a message that says
// which setting grants it; links never lead a read out of the prefix.
func TestRead(t *testing.T) {
	const secret = "outside the granted prefix: never read"
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside")
	mkdir(t, outside)
	write(t, filepath.Join(outside, "secret"), secret)
	granted := filepath.Join(tmp, "granted")
	tools := filepath.Join(granted, "tools")
	mkdir(t, tools)
	write(t, filepath.Join(tools, "hello"), "#!/bin/sh\necho hello\n")
	symlink(t, "/etc", filepath.Join(granted, "etc"))
	symlink(t, outside, filepath.Join(granted, "abs-outside"))
	symlink(t, "../outside", filepath.Join(granted, "rel-outside"))
	symlink(t, "tools", filepath.Join(granted, "alias"))
	symlink(t, "../../outside/secret", filepath.Join(tools, "secret"))

	g, err := New([]string{granted})
	if err != nil {
		t.Fatal(err)
	}

	files, err := g.Read(tools)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Name] = string(f.Data)
		if f.Name == "secret" && f.Mode&fs.ModeSymlink == 0 {
			t.Errorf("the link to a file outside was followed: %v", f.Mode)
		}
	}
	if got["hello"] != "#!/bin/sh\necho hello\n" || got["secret"] != "../../outside/secret" || len(got) != 2 {
		t.Errorf("read %q", got)
	}
	// A link that stays beneath the prefix leads to the same tree.
	if alias, err := g.Read(filepath.Join(granted, "alias")); err != nil || len(alias) != 2 {
		t.Errorf("through a link beneath the prefix: %v, %v", alias, err)
	}
	if _, err := g.Read(tools + "/"); err != nil {
		t.Errorf("with a trailing slash: %v", err)
	}

	for _, c := range []struct {
		path, want string
		notGranted bool
	}{
		{"/etc", "hostPath /etc is not under any prefix this node's agent allows (" + Setting + ": " + granted + "); ask the cluster admin", true},
		{"/proc/1/root/etc", "hostPath /proc/1/root/etc is not under any prefix", true},
		{"/proc/1/root" + tools, "is not under any prefix", true},
		{outside, "is not under any prefix", true},
		{granted + "-other", "is not under any prefix", true},
		{granted + "/../outside", `a ".." element`, false},
		{"relative/tools", "not an absolute path", false},
		{filepath.Join(granted, "etc"), "path escapes from parent", false},
		{filepath.Join(granted, "etc", "ssh"), "path escapes from parent", false},
		{filepath.Join(granted, "abs-outside"), "path escapes from parent", false},
		{filepath.Join(granted, "rel-outside"), "path escapes from parent", false},
		{filepath.Join(granted, "missing"), "no such file", false},
	} {
		files, err := g.Read(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrNotGranted) != c.notGranted {
			t.Errorf("Read(%s) = %d files, %v; want an error saying %q (not granted: %v)", c.path, len(files), err, c.want, c.notGranted)
		}
	}

	var none Grants
	if _, err := none.Read(tools); !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "allows no host path prefix ("+Setting+")") {
		t.Errorf("with no grant: %v", err)
	}
}

// The narrowest grant that holds a path is the root it is read through,
// so a link beneath it may not lead into a wider grant.
func TestReadBeneathTheNarrowestPrefix(t *testing.T) {
	wide := t.TempDir()
	narrow := filepath.Join(wide, "narrow")
	mkdir(t, filepath.Join(narrow, "tools"))
	mkdir(t, filepath.Join(wide, "other"))
	symlink(t, "../other", filepath.Join(narrow, "up"))
	g, err := New([]string{wide, narrow})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Read(filepath.Join(narrow, "tools")); err != nil {
		t.Error(err)
	}
	if _, err := g.Read(filepath.Join(narrow, "up")); err == nil || !strings.Contains(err.Error(), "path escapes from parent") {
		t.Errorf("a link out of the narrower prefix: %v", err)
	}
	if _, err := g.Read(filepath.Join(wide, "other")); err != nil {
		t.Error(err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}
