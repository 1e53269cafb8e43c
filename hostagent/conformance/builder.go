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

package conformance

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testBuilder checks backend.Builder, on backends that implement it: the
// build sees its source read-only at /src and writes /out, which comes back
// to the host; its exit status and the tail of its output are reported; it
// is killed at its timeout and when its context ends; it reaches no
// network, none of the node's files and no other sandbox; and nothing of
// it is left once Build returns.
func testBuilder(t *testing.T, n *node) {
	bl := n.be.Capabilities().Builder
	if bl == nil {
		t.Skipf("the %s backend has no Builder in its Capabilities", n.be.Name())
	}
	probe, _ := probeBinary(t)
	src := HostDir(t, map[string]string{"data/input.txt": "source input\n"})
	if err := copyFile(probe, filepath.Join(src, "probe"), 0o755); err != nil {
		t.Fatal(err)
	}
	left := func(t *testing.T, id string) {
		t.Helper()
		if n.h.Leftovers == nil {
			t.Log("the harness has no Leftovers: not checking what the builder left")
			return
		}
		if got := n.h.Leftovers(t, n.stateDir, id); len(got) > 0 {
			t.Errorf("builder %s left %q", id, got)
		}
	}
	build := func(t *testing.T, id string, timeout time.Duration, cmd ...string) (backend.BuildResult, string) {
		t.Helper()
		out := HostDir(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), patience+timeout)
		defer cancel()
		res, err := bl.Build(ctx, backend.BuildRequest{ID: id, Source: src, Out: out, Command: cmd, Timeout: timeout})
		if err != nil {
			t.Fatalf("build %q: %v", cmd, err)
		}
		left(t, id)
		return res, out
	}
	ok0 := func(t *testing.T, res backend.BuildResult) {
		t.Helper()
		if res.Exit.ExitCode != 0 || res.Exit.Killed {
			t.Fatalf("the build ended %+v; log %q", res.Exit, res.Log)
		}
	}

	t.Run("source read-only at /src, cwd /out", func(t *testing.T) {
		n.known(t)
		res, _ := build(t, "build-src", 0, "sh", "-c", `cat /src/data/input.txt; pwd; if touch /src/new 2>/dev/null; then echo writable; else echo read-only; fi`)
		ok0(t, res)
		if want := "source input\n/out\nread-only\n"; string(res.Log) != want {
			t.Fatalf("log %q, want %q", res.Log, want)
		}
	})

	t.Run("output comes back", func(t *testing.T) {
		n.known(t)
		res, out := build(t, "build-out", 0, "sh", "-c",
			`mkdir -p bin && printf '#!/bin/sh\necho built\n' > bin/tool && chmod 755 bin/tool && printf '%s\n' "$0" "$1" > args`,
			"it's $HOME", "a b; c")
		ok0(t, res)
		for name, want := range map[string]string{"bin/tool": "#!/bin/sh\necho built\n", "args": "it's $HOME\na b; c\n"} {
			if got, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(got) != want {
				t.Errorf("%s: %q, %v; want %q", name, got, err, want)
			}
		}
		fi, err := os.Stat(filepath.Join(out, "bin/tool"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("the executable came back with mode %v", fi.Mode())
		}
		if uid := ownerOf(fi); uid != os.Geteuid() {
			t.Errorf("the output is owned by uid %d, not the agent's %d", uid, os.Geteuid())
		}
	})

	t.Run("links stay in /out", func(t *testing.T) {
		n.known(t)
		secret := HostDir(t, map[string]string{"secret": "host secret\n"})
		res, out := build(t, "build-links", 0, "sh", "-c",
			`ln -s `+secret+`/secret abs && ln -s ../../../../etc/passwd rel && ln -s / root && echo kept > f && ln f hard`)
		ok0(t, res)
		if got, err := os.ReadFile(filepath.Join(out, "hard")); err != nil || string(got) != "kept\n" {
			t.Errorf("a hard link in /out: %q, %v", got, err)
		}
		err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeSymlink != 0 {
				target, _ := os.Readlink(p)
				t.Errorf("a symbolic link came back: %s -> %s", p, target)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("failure: exit code and log tail", func(t *testing.T) {
		n.known(t)
		res, _ := build(t, "build-fail", 0, "sh", "-c", "echo before; echo oops >&2; exit 3")
		if res.Exit.ExitCode != 3 || res.Exit.Killed {
			t.Fatalf("exit %+v, want code 3", res.Exit)
		}
		if !bytes.Contains(res.Log, []byte("before\n")) || !bytes.Contains(res.Log, []byte("oops\n")) {
			t.Fatalf("log %q lacks the output of both streams", res.Log)
		}
		res, _ = build(t, "build-long", 0, "sh", "-c", `head -c 100000 /dev/zero | tr '\0' x; echo; echo END`)
		ok0(t, res)
		if len(res.Log) > backend.MaxBuildLog || !bytes.HasSuffix(res.Log, []byte("x\nEND\n")) {
			t.Fatalf("a long log: %d bytes ending %q, want at most %d ending with its last line", len(res.Log), res.Log[max(0, len(res.Log)-16):], backend.MaxBuildLog)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		n.known(t)
		start := time.Now()
		res, _ := build(t, "build-slow", time.Second, "sleep", "1000")
		if !res.Exit.Killed {
			t.Fatalf("a build past its timeout ended %+v, want killed", res.Exit)
		}
		if d := time.Since(start); d > patience {
			t.Fatalf("killed after %v", d)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		n.known(t)
		out := HostDir(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := bl.Build(ctx, backend.BuildRequest{ID: "build-cancel", Source: src, Out: out, Command: []string{"sleep", "1000"}, Timeout: time.Hour})
			done <- err
		}()
		if n.h.Leftovers != nil {
			// Cancel once the builder exists, mid-build.
			eventually(t, "the builder", func() error {
				if len(n.h.Leftovers(t, n.stateDir, "build-cancel")) == 0 {
					return errors.New("not made yet")
				}
				return nil
			})
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a cancelled build: %v, want context.Canceled", err)
			}
		case <-time.After(patience):
			t.Fatal("Build did not return after its context was cancelled")
		}
		left(t, "build-cancel")
	})

	t.Run("no network", func(t *testing.T) {
		n.known(t)
		addr, accepted := listenOnNode(t)
		cmd := "cat /proc/net/dev"
		if addr != "" {
			cmd = "/src/probe connect " + addr + "; " + cmd
		}
		res, _ := build(t, "build-net", 0, "sh", "-c", cmd)
		ok0(t, res)
		lines := strings.Split(strings.TrimSpace(string(res.Log)), "\n")
		if addr != "" {
			if !strings.HasPrefix(lines[0], "refused") || accepted.Load() > 0 {
				t.Errorf("the build connected to %s on the node: %q", addr, lines[0])
			}
			lines = lines[1:]
		}
		for _, line := range lines {
			if name, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) != "lo" {
				t.Errorf("the build has the network interface %q", strings.TrimSpace(name))
			}
		}
	})

	t.Run("node files and other sandboxes", func(t *testing.T) {
		n.known(t)
		tenant := n.open(t, n.spec("build-neighbour"))
		const marker = "sleep 7654325"
		tenant.sh(t, "echo secret-of-tenant > ~/marker")
		startNamed(t, tenant.shell(t), marker)
		secret := HostDir(t, map[string]string{"secret": "host secret\n"})
		res, _ := build(t, "build-iso", 0, "sh", "-c",
			`for p in `+secret+` `+n.stateDir+` `+n.be.PileDir(tenant.id)+`; do [ -e "$p" ] && echo "visible $p"; done
grep -rls secret-of-tenant /home /tmp /workspace /pile /out 2>/dev/null
for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done 2>/dev/null | grep -c '^`+marker+` $'
true`)
		ok0(t, res)
		if got := string(res.Log); got != "0\n" {
			t.Fatalf("the build sees the node or another sandbox: %q", got)
		}
		if _, err := bl.Build(context.Background(), backend.BuildRequest{ID: tenant.id, Source: src, Out: HostDir(t, nil), Command: []string{"true"}}); err == nil {
			t.Fatal("a build ran as a tenant's sandbox")
		}
		if got := running(tenant.shell(t), marker); got != 1 {
			t.Fatalf("a build named after a tenant's sandbox touched it: %d processes %q", got, marker)
		}
		if got := tenant.sh(t, "cat ~/marker"); got != "secret-of-tenant\n" {
			t.Fatalf("the tenant's file after that build: %q", got)
		}
	})

	t.Run("faculty from a build", func(t *testing.T) {
		n.known(t)
		// What the agent does with a build: stage its output, install it.
		res, out := build(t, "build-tool", 0, "sh", "-c", `printf '#!/bin/sh\necho built tool\n' > tool && chmod 755 tool`)
		ok0(t, res)
		sp := n.spec("built-faculty")
		sp.Faculties = []backend.Faculty{{Name: "tools", Fingerprint: "fp", Dir: out, Binaries: []string{"tool"}}}
		s := n.open(t, sp)
		if got := s.sh(t, "tool; ls -l "+guestapi.FacultiesDir+"/tools/tool | cut -c1-10"); got != "built tool\n-rwxr-xr-x\n" {
			t.Fatalf("the built tool in a sandbox: %q", got)
		}
	})
}

// listenOnNode listens on a non-loopback IPv4 address of this machine and
// counts the connections it accepts; "" when the machine has none.
func listenOnNode(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var accepted atomic.Int64
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ipn.IP.String(), "0"))
		if err != nil {
			continue
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		return l.Addr().String(), &accepted
	}
	t.Log("no non-loopback IPv4 address on this machine: checking interfaces only")
	return "", &accepted
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// ownerOf is the uid that owns a file, or -1 where the system does not say.
func ownerOf(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
