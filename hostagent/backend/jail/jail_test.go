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

package jail

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

const testID = "sbx-00000000000000000001"

type node struct {
	t     *testing.T
	fake  *fakeBSD
	b     *Backend
	state string
	base  string
	guest string         // the guest binary; empty: none
	owned map[string]int // chown calls, by path
}

// newNode is a backend over a fresh state directory, a fake FreeBSD, a
// base tree holding what the jails mount and copy, and a guest binary
// (a stand-in file: the fake plays its reaper).
func newNode(t *testing.T) *node {
	t.Helper()
	g := filepath.Join(t.TempDir(), "playground-sandbox")
	if err := os.WriteFile(g, []byte("#!/bin/sh\n# stands in for playground-sandbox built for FreeBSD\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return newNodeWith(t, g)
}

func newNodeWith(t *testing.T, guestBinary string) *node {
	t.Helper()
	n := &node{t: t, fake: newFake(t), state: t.TempDir(), base: t.TempDir(), guest: guestBinary}
	for _, d := range []string{"bin", "lib", "libexec", "sbin", "usr", "etc"} {
		if err := os.MkdirAll(filepath.Join(n.base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(n.base, "etc", "login.conf"), []byte("default:\\\n\t:path=/bin:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.b = n.over()
	return n
}

// over is another backend over the same node: an agent restarted.
func (n *node) over() *Backend {
	b, err := New(Options{StateDir: n.state, BaseDir: n.base, GuestBinary: n.guest, Runner: n.fake, StopTimeout: time.Second})
	if err != nil {
		n.t.Fatal(err)
	}
	n.owned = map[string]int{}
	var mu sync.Mutex
	b.chown = func(p string, uid, gid int) error {
		if uid != guestapi.TenantUID || gid != guestapi.TenantGID {
			n.t.Errorf("chown %s to %d:%d, not the sandbox user's", p, uid, gid)
		}
		mu.Lock()
		n.owned[p]++
		mu.Unlock()
		return nil
	}
	b.rename = n.fake.rename
	return b
}

func spec() backend.Spec {
	return backend.Spec{ID: testID, Tenant: "team/alice", Persona: "it's alice",
		Resources: backend.Resources{CPUMillis: 1500, MemoryBytes: 512 << 20, PIDs: 200},
		LoginEnv:  []backend.EnvVar{{Name: "GREETING", Value: "hello"}}, LoginScript: "export FROM_SCRIPT=yes"}
}

func (n *node) up() {
	n.t.Helper()
	ctx := context.Background()
	if err := n.b.Provision(ctx, spec()); err != nil {
		n.t.Fatal(err)
	}
	if err := n.b.Start(ctx, testID); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) root() string { return filepath.Join(n.state, "jails", testID, "root") }

// TestProvisionAndStartIssueTheManualsCommands pins every command and
// parameter of a sandbox's first start, in order.
func TestProvisionAndStartIssueTheManualsCommands(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	if err := n.b.Provision(ctx, spec()); err != nil {
		t.Fatal(err)
	}
	root, layer, pile, etc := n.root(), filepath.Join(n.state, "jails", testID, "layer"), n.b.PileDir(testID), filepath.Join(n.root(), "etc")
	want := []string{
		"pwd_mkdb -d " + etc + " -p " + etc + "/master.passwd",
		"chflags sappnd " + pile + "/self.pile",
	}
	if got := n.fake.take(); !slices.Equal(got, want) {
		t.Fatalf("Provision ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := n.b.Start(ctx, testID); err != nil {
		t.Fatal(err)
	}
	name := "playground_" + testID
	want = []string{
		"jls --libxo=json -d -j " + name + " -n jid name path dying",
		"umount " + root + "/dev",
		"umount " + root + "/pile",
		"umount " + root + "/tmp",
		"umount " + root + "/workspace",
		"umount " + root + "/home/sandbox",
		"umount " + root + "/.playground/bin",
		"umount " + root + "/usr",
		"umount " + root + "/sbin",
		"umount " + root + "/libexec",
		"umount " + root + "/lib",
		"umount " + root + "/bin",
		"pwd_mkdb -d " + etc + " -p " + etc + "/master.passwd",
		"rctl -r jail:" + name + ":",
		"rctl -a jail:" + name + ":memoryuse:deny=536870912",
		"rctl -a jail:" + name + ":maxproc:deny=200",
		"rctl -a jail:" + name + ":pcpu:deny=150",
		"mount_nullfs -o ro " + n.base + "/bin " + root + "/bin",
		"mount_nullfs -o ro " + n.base + "/lib " + root + "/lib",
		"mount_nullfs -o ro " + n.base + "/libexec " + root + "/libexec",
		"mount_nullfs -o ro " + n.base + "/sbin " + root + "/sbin",
		"mount_nullfs -o ro " + n.base + "/usr " + root + "/usr",
		"mount_nullfs -o ro " + n.b.guestDir + " " + root + "/.playground/bin",
		"mount_nullfs " + layer + "/home " + root + "/home/sandbox",
		"mount_nullfs " + layer + "/workspace " + root + "/workspace",
		"mount_nullfs " + layer + "/tmp " + root + "/tmp",
		"mount_nullfs " + pile + " " + root + "/pile",
		"jail -c name=" + name + " path=" + root + " host.hostname=" + testID + " persist vnet=new enforce_statfs=2 children.max=0 securelevel=3 devfs_ruleset=4 mount.devfs" +
			" allow.set_hostname=false allow.sysvipc=false allow.raw_sockets=false allow.chflags=false allow.mount=false allow.quotas=false allow.socket_af=false allow.mlock=false allow.reserved_ports=false",
		"jexec " + name + " /sbin/ifconfig lo0 inet 127.0.0.1/8 up",
	}
	if got := n.fake.take(); !slices.Equal(got, want) {
		t.Fatalf("Start ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	j := n.fake.jails[name]
	if j == nil || j.removed || !j.loopback || j.path != root {
		t.Fatalf("the fake's jail after Start: %+v", j)
	}
	if m := n.fake.mounts[root+"/dev"]; m.fstype != "devfs" {
		t.Errorf("no devfs on the jail's /dev: %+v", m)
	}
	if !n.fake.flagged(pile+"/self.pile", "sappnd") {
		t.Error("the pile file is not sappnd")
	}
	for _, p := range []string{layer + "/home", layer + "/workspace", layer + "/tmp", pile + "/self.pile"} {
		if n.owned[p] == 0 {
			t.Errorf("%s was not given to the sandbox user", p)
		}
	}
	if st, err := os.Stat(layer + "/tmp"); err != nil || st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("the layer's tmp is %v, %v; want sticky 1777", st.Mode(), err)
	}
	if st, err := os.Stat(pile); err != nil || st.Mode().Perm() != 0o755 || n.owned[pile] != 0 {
		t.Errorf("the pile directory must stay root's 0755 (the tenant creates no file there): %v, %v", st.Mode(), err)
	}
	if l, err := os.Readlink(root + "/var/tmp"); err != nil || l != "/tmp" {
		t.Errorf("/var/tmp is %q, %v; want a link to /tmp", l, err)
	}
	passwd, _ := os.ReadFile(etc + "/master.passwd")
	if !strings.Contains(string(passwd), "\nsandbox:*:1000:1000::0:0:Playground sandbox:/home/sandbox:/bin/sh\n") {
		t.Errorf("master.passwd has no sandbox user:\n%s", passwd)
	}
	profile, _ := os.ReadFile(etc + "/profile")
	if !strings.Contains(string(profile), `export PERSONA='it'\''s alice'`) || !strings.Contains(string(profile), "export GREETING='hello'") {
		t.Errorf("the login profile:\n%s", profile)
	}
	if lc, err := os.ReadFile(etc + "/login.conf"); err != nil || !strings.Contains(string(lc), "default:") {
		t.Errorf("the base's login.conf is not copied: %v", err)
	}
	if st, err := os.Stat(n.b.guestDir + "/playground-sandbox"); err != nil || st.Mode().Perm() != 0o555 || !strings.HasPrefix(n.b.guestDir, n.state+"/bin/") {
		t.Errorf("the guest binary is not installed in the state directory: %v", err)
	}

	// Started again: a running jail is left as it is.
	if err := n.b.Start(ctx, testID); err != nil {
		t.Fatal(err)
	}
	if got := n.fake.take(); len(got) != 1 || !strings.HasPrefix(got[0], "jls ") {
		t.Errorf("a second Start ran %q; want jls only", got)
	}
}

// TestStartWithoutRacctSaysHow: rctl refused (kern.racct.enable=0) is an
// error that names the tunable, and no jail runs unbounded.
func TestStartWithoutRacctSaysHow(t *testing.T) {
	n := newNode(t)
	n.fake.racctOff = true
	ctx := context.Background()
	if err := n.b.Provision(ctx, spec()); err != nil {
		t.Fatal(err)
	}
	err := n.b.Start(ctx, testID)
	if err == nil || !strings.Contains(err.Error(), "kern.racct.enable=1 in /boot/loader.conf") {
		t.Fatalf("Start without racct: %v", err)
	}
	if len(n.fake.jails) != 0 || len(n.fake.mounts) != 0 {
		t.Errorf("a jail (%v) or mounts (%v) exist without limits", n.fake.jails, n.fake.mounts)
	}
}

// TestStartRefusesAForeignJail: a jail of the sandbox's name over another
// path is neither reused nor removed, and the error says what to do.
func TestStartRefusesAForeignJail(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	if err := n.b.Provision(ctx, spec()); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	n.fake.jails["playground_"+testID] = &fakeJail{jid: 7, path: other}
	err := n.b.Start(ctx, testID)
	if err == nil || !strings.Contains(err.Error(), "runs over "+other) || !strings.Contains(err.Error(), "jail -R 7") {
		t.Fatalf("Start over a foreign jail of the same name: %v", err)
	}
	if err := n.b.Stop(ctx, testID); err == nil || n.fake.jails["playground_"+testID].removed {
		t.Fatalf("Stop removed a jail that is not the sandbox's (err %v)", err)
	}
}

func TestProvisionRefuses(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	for what, s := range map[string]backend.Spec{
		"egress":      {ID: testID, Egress: []backend.EgressRule{{CIDR: "10.0.0.0/8"}}},
		"gvisor":      {ID: testID, Isolation: backend.IsolationGVisor},
		"faculties":   {ID: testID, Faculties: []backend.Faculty{{Name: "tools"}}},
		"a dotted ID": {ID: "a.b"},
		"a path ID":   {ID: "../x"},
		"a login variable that is no shell identifier": {ID: testID, LoginEnv: []backend.EnvVar{{Name: "A B", Value: "x"}}},
		"a NUL in the login script":                    {ID: testID, LoginScript: "echo\x00"},
	} {
		if err := n.b.Provision(ctx, s); err == nil {
			t.Errorf("Provision with %s succeeded", what)
		}
	}
	if got := n.fake.take(); len(got) != 0 {
		t.Errorf("refused specs ran %q", got)
	}
}

type sink struct {
	mu             sync.Mutex
	stdout, stderr strings.Builder
}

func (s *sink) Write(st backend.Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == backend.Stdout {
		s.stdout.Write(p)
	} else {
		s.stderr.Write(p)
	}
}

func (n *node) exec(req backend.ExecRequest) (backend.ExitStatus, *sink, error) {
	n.t.Helper()
	s := &sink{}
	p, err := n.b.Exec(context.Background(), testID, req, s)
	if err != nil {
		return backend.ExitStatus{}, s, err
	}
	st, err := p.Wait(context.Background())
	return st, s, err
}

// TestExec: the jexec command line of both shell modes, output, exit
// code, stdin and cwd. The fake runs the shell on this machine in the
// directory the jail's path resolves to: it stands in for jexec's
// jail_attach and chroot (the conformance suite runs the real thing).
func TestExec(t *testing.T) {
	n := newNode(t)
	n.up()
	n.fake.take()
	name := "playground_" + testID

	st, s, err := n.exec(backend.ExecRequest{Command: `echo out; echo err >&2; echo "$PERSONA/$GREETING/$FROM_SCRIPT/$HOME"; cat; exit 3`, Stdin: []byte("in\n")})
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 3 || st.Killed || s.stdout.String() != "out\nit's alice/hello/yes//home/sandbox\nin\n" || s.stderr.String() != "err\n" {
		t.Fatalf("login exec: %+v stdout %q stderr %q", st, s.stdout.String(), s.stderr.String())
	}
	calls := n.fake.take()
	wantCheck := "jexec -U sandbox " + name + " /bin/test -d /home/sandbox -a -x /home/sandbox"
	wantRun := "jexec " + name + " /.playground/bin/playground-sandbox reap -uid 1000 -gid 1000 -- /usr/bin/env -i PATH=" + guestapi.DefaultPath + " HOME=/home/sandbox USER=sandbox LOGNAME=sandbox SHELL=/bin/sh" +
		` /bin/sh -c cd -- "$1" || exit 126; shift; exec "$@" sh /home/sandbox /bin/sh -l -c echo out;`
	if len(calls) != 3 || calls[0] != "jls --libxo=json -d -j "+name+" -n jid name path dying" || calls[1] != wantCheck || !strings.HasPrefix(calls[2], wantRun) {
		t.Fatalf("exec ran\n%s\nwant jls, then\n%s\n%s...", strings.Join(calls, "\n"), wantCheck, wantRun)
	}

	// Clean: no profile, the fixed environment; a relative cwd is under home.
	if err := os.MkdirAll(filepath.Join(n.state, "jails", testID, "layer", "home", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	st, s, err = n.exec(backend.ExecRequest{Command: `echo "[$PERSONA]" "$(basename "$PWD")"; env | sort | tr '\n' ' '`, Shell: backend.ShellClean, Cwd: "sub"})
	if err != nil || st.ExitCode != 0 {
		t.Fatal(st, err)
	}
	if got := s.stdout.String(); !strings.HasPrefix(got, "[] sub\n") || strings.Contains(got, "USER=") {
		t.Errorf("clean exec printed %q", got)
	}
	if calls := n.fake.take(); !strings.Contains(calls[len(calls)-1], " /bin/sh -c echo") || strings.Contains(calls[len(calls)-1], " -l ") {
		t.Errorf("a clean shell is not sh -c: %q", calls[len(calls)-1])
	}

	if _, _, err := n.exec(backend.ExecRequest{Command: "true", Cwd: "/nowhere"}); !errors.Is(err, backend.ErrInvalidRequest) || !strings.Contains(err.Error(), "/nowhere") {
		t.Errorf("a missing cwd: %v", err)
	}
	if _, _, err := n.exec(backend.ExecRequest{Command: strings.Repeat("x", bounds.MaxCommandBytes+1)}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("an overlong command: %v", err)
	}
	if err := n.b.Stop(context.Background(), testID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.exec(backend.ExecRequest{Command: "true"}); !errors.Is(err, backend.ErrNotRunning) {
		t.Errorf("exec in a stopped jail: %v", err)
	}
	if _, err := n.b.Exec(context.Background(), "sbx-00000000000000000009", backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("exec in an unknown sandbox: %v", err)
	}
}

// TestCancelledJob: with the guest binary, Capabilities claims the proof;
// Kill sends the reaper SIGTERM, and its exit status decides: proven
// (ReapProvedExit) is a nil error and a SIGKILLed status, anything else
// is ErrProofLost. The fake plays the reaper's protocol; the kill itself
// (PROC_REAP_KILL until PROC_REAP_STATUS counts none) runs on FreeBSD
// only, in the conformance suite's kill and jobs groups.
func TestCancelledJob(t *testing.T) {
	n := newNode(t)
	if c := n.b.Capabilities(); !c.ProvesCleanup || !c.AppendOnlyPile {
		t.Fatalf("Capabilities with the reaper: %+v", c)
	}
	n.up()
	start := func() backend.Process {
		t.Helper()
		p, err := n.b.Exec(context.Background(), testID, backend.ExecRequest{Command: "sleep 30 & sleep 30"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := start()
	if err := p.Kill(ctx); err != nil {
		t.Fatalf("Kill with a proving reaper: %v", err)
	}
	if st, err := p.Wait(ctx); err != nil || !st.Killed || st.Signal != "SIGKILL" || st.ExitCode != -1 {
		t.Errorf("a cancelled job: %+v, %v", st, err)
	}
	if err := p.Kill(ctx); err != nil {
		t.Errorf("killing it again: %v", err)
	}

	n.fake.reaperLoses = true
	p = start()
	if err := p.Kill(ctx); !errors.Is(err, backend.ErrProofLost) {
		t.Fatalf("Kill when the reaper reports survivors: %v", err)
	}
	n.fake.reaperLoses = false

	// A command that ended by itself is not killed again.
	p, err := n.b.Exec(context.Background(), testID, backend.ExecRequest{Command: "exit 4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx); err != nil || st.ExitCode != 4 || st.Killed {
		t.Fatalf("exit 4 under the reaper: %+v, %v", st, err)
	}
	if err := p.Kill(ctx); err != nil {
		t.Errorf("Kill after the end: %v", err)
	}
}

// TestNoGuestBinaryNoProof: without the guest binary, commands run under
// jexec -U as the sandbox user, Capabilities does not claim the proof,
// and Kill ends the shell and says the proof is lost.
func TestNoGuestBinaryNoProof(t *testing.T) {
	n := newNodeWith(t, "")
	if n.b.Capabilities().ProvesCleanup {
		t.Fatal("the jail backend claims ProvesCleanup without a reaper")
	}
	n.up()
	p, err := n.b.Exec(context.Background(), testID, backend.ExecRequest{Command: "exec sleep 30"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls := n.fake.take(); !strings.HasPrefix(calls[len(calls)-1], "jexec -U sandbox playground_"+testID+" /usr/bin/env -i ") {
		t.Errorf("without the reaper, exec ran %q", calls[len(calls)-1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Kill(ctx); !errors.Is(err, backend.ErrProofLost) || !errors.Is(err, ErrNoReaper) {
		t.Fatalf("Kill: %v", err)
	}
	st, _ := p.Wait(ctx)
	if !st.Killed || st.Signal != "SIGKILL" || st.ExitCode != -1 {
		t.Errorf("a killed shell: %+v", st)
	}
	if _, err := New(Options{StateDir: t.TempDir(), GuestBinary: "/nonexistent/playground-sandbox", Runner: n.fake}); err == nil {
		t.Error("New accepted a guest binary that does not exist")
	}
}

// TestStopRemovesTheJailAndWaits: jail -R, then jls until the dying jail
// is gone, then the mounts; a jail dying for ever is an error that says
// what to look at.
func TestStopRemovesTheJailAndWaits(t *testing.T) {
	n := newNode(t)
	n.up()
	n.fake.dyingPolls = 3
	n.fake.take()
	if err := n.b.Stop(context.Background(), testID); err != nil {
		t.Fatal(err)
	}
	calls := n.fake.take()
	name := "playground_" + testID
	if calls[1] != "jail -R "+name {
		t.Fatalf("Stop ran %q; want jls, then jail -R", calls)
	}
	polls := 0
	for _, c := range calls {
		if strings.HasPrefix(c, "jls ") {
			polls++
		}
	}
	if polls != 1+4 {
		t.Errorf("Stop listed the jail %d times; want 1, then until it is gone (3 dying, 1 gone)", polls)
	}
	if len(n.fake.mounts) != 0 {
		t.Errorf("Stop left mounts: %v", n.fake.mounts)
	}
	if err := n.b.Stop(context.Background(), testID); err != nil {
		t.Errorf("stopping a stopped sandbox: %v", err)
	}

	n.up()
	n.fake.dyingPolls = -1
	err := n.b.Stop(context.Background(), testID)
	if err == nil || !strings.Contains(err.Error(), "still listed (dying)") {
		t.Fatalf("Stop of a jail that stays dying: %v", err)
	}
	if n.fake.mounts[n.root()+"/home/sandbox"].src == "" {
		t.Error("Stop unmounted a jail that may still hold processes")
	}
}

// TestReattach: an agent started again keeps a running jail as it is,
// and starts a jail that is gone (a reboot) over the files it left.
func TestReattach(t *testing.T) {
	n := newNode(t)
	n.up()
	marker := filepath.Join(n.state, "jails", testID, "layer", "workspace", "kept")
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.fake.take()

	b := n.over()
	if err := b.Reattach(context.Background(), spec()); err != nil {
		t.Fatal(err)
	}
	if calls := n.fake.take(); len(calls) != 1 || !strings.HasPrefix(calls[0], "jls ") {
		t.Errorf("reattaching a running jail ran %q; want jls only", calls)
	}

	// A reboot: no jail, no mount, no rule.
	n.fake.jails, n.fake.mounts, n.fake.rules = map[string]*fakeJail{}, map[string]fakeMount{}, nil
	b = n.over()
	if err := b.Reattach(context.Background(), spec()); err != nil {
		t.Fatal(err)
	}
	calls := n.fake.take()
	if !slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "jail -c name=playground_"+testID+" ") }) ||
		!slices.Contains(calls, "rctl -a jail:playground_"+testID+":maxproc:deny=200") {
		t.Errorf("reattaching after a reboot ran\n%s", strings.Join(calls, "\n"))
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the workspace lost its files: %v", err)
	}
	st, s, err := n.exec(backend.ExecRequest{Command: "cat /dev/null; ls", Cwd: "/workspace", Shell: backend.ShellClean})
	if err != nil || st.ExitCode != 0 || s.stdout.String() != "kept\n" {
		t.Errorf("the reattached workspace lists %q (%+v, %v)", s.stdout.String(), st, err)
	}
}

// TestDestroy: both reclaim policies. The jail, its rules, mounts and
// files go; the pile stays, still sappnd, with keepPile, and otherwise
// loses its flags (chflags -R nosappnd,noschg) before it is removed.
func TestDestroy(t *testing.T) {
	for _, keepPile := range []bool{true, false} {
		t.Run(map[bool]string{true: "keepPile", false: "deletePile"}[keepPile], func(t *testing.T) {
			n := newNode(t)
			n.up()
			pile := n.b.PileDir(testID)
			n.fake.take()
			if err := n.b.Destroy(context.Background(), testID, keepPile); err != nil {
				t.Fatal(err)
			}
			calls := n.fake.take()
			name := "playground_" + testID
			if !slices.Contains(calls, "jail -R "+name) || !slices.Contains(calls, "rctl -r jail:"+name+":") {
				t.Errorf("Destroy ran\n%s", strings.Join(calls, "\n"))
			}
			if len(n.fake.jails) != 0 || len(n.fake.mounts) != 0 || len(n.fake.rules) != 0 {
				t.Errorf("left: jails %v, mounts %v, rules %v", n.fake.jails, n.fake.mounts, n.fake.rules)
			}
			if _, err := os.Stat(filepath.Join(n.state, "jails", testID)); !os.IsNotExist(err) {
				t.Errorf("the sandbox directory is left: %v", err)
			}
			_, err := os.Stat(pile + "/self.pile")
			clearedFlags := slices.Contains(calls, "chflags -R nosappnd,noschg "+pile)
			if keepPile {
				if err != nil || !n.fake.flagged(pile+"/self.pile", "sappnd") || clearedFlags {
					t.Errorf("the kept pile: %v, sappnd %v, flags cleared %v", err, n.fake.flagged(pile+"/self.pile", "sappnd"), clearedFlags)
				}
			} else if !os.IsNotExist(err) || !clearedFlags || n.fake.flagged(pile+"/self.pile", "sappnd") {
				t.Errorf("the deleted pile: %v, flags cleared %v", err, clearedFlags)
			}
			if err := n.b.Destroy(context.Background(), testID, keepPile); err != nil {
				t.Errorf("destroying again: %v", err)
			}
			if _, err := n.b.Exec(context.Background(), testID, backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("exec after Destroy: %v", err)
			}
		})
	}
}

// TestParseJls reads jls --libxo=json -n as jls.c prints it: -n's values
// are strings, booleans are JSON booleans.
func TestParseJls(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want jailInfo
		err  bool
	}{
		{`{"__version": "2", "jail-information": {"jail": [{"jid":"4","name":"playground_x","path":"/j/x","dying":false}]}}`, jailInfo{JID: "4", Path: "/j/x"}, false},
		{`{"__version": "2", "jail-information": {"jail": [{"jid":4,"name":"playground_x","path":"/j/x","dying":true}]}}`, jailInfo{JID: "4", Path: "/j/x", Dying: true}, false},
		{`{"__version": "2", "jail-information": {"jail": [{"jid":"5","name":"other","path":"/j/o","dying":false}]}}`, jailInfo{}, true},
		{`{"__version": "2", "jail-information": {"jail": [`, jailInfo{}, true},
	} {
		got, err := parseJls([]byte(tc.out), "playground_x")
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseJls(%s) = %+v, %v; want %+v (error %v)", tc.out, got, err, tc.want, tc.err)
		}
	}
}

// TestStartFailureUnwindsMounts: a mount refused half-way (the base tree
// lacks a directory) leaves no mount and no jail behind.
func TestStartFailureUnwindsMounts(t *testing.T) {
	n := newNode(t)
	if err := os.Remove(filepath.Join(n.base, "usr")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.b.Provision(ctx, spec()); err != nil {
		t.Fatal(err)
	}
	err := n.b.Start(ctx, testID)
	if err == nil || !strings.Contains(err.Error(), "mounting "+n.root()+"/usr") {
		t.Fatalf("Start without the base's usr: %v", err)
	}
	if len(n.fake.mounts) != 0 || len(n.fake.jails) != 0 {
		t.Errorf("left: mounts %v, jails %v", n.fake.mounts, n.fake.jails)
	}
}

// TestZFSStorage: with a ZFS parent, each sandbox gets a dataset for its
// layer and one for its pile, bounded in bytes (refquota) and in the
// sandbox user's files (userobjquota), created once; Destroy destroys the
// layer's, and the pile's unless the pile is kept.
func TestZFSStorage(t *testing.T) {
	for _, keepPile := range []bool{true, false} {
		n := newNode(t)
		b, err := New(Options{StateDir: n.state, BaseDir: n.base, GuestBinary: n.guest, Runner: n.fake, ZFSParent: "zroot/playground",
			DefaultStorage: backend.Storage{PileInodes: 500}})
		if err != nil {
			t.Fatal(err)
		}
		b.chown = func(string, int, int) error { return nil }
		ctx := context.Background()
		sp := spec()
		sp.Storage.LayerBytes = 1 << 30
		if err := b.Provision(ctx, sp); err != nil {
			t.Fatal(err)
		}
		layer, pile := filepath.Join(n.state, "jails", testID, "layer"), b.PileDir(testID)
		want := []string{
			"zfs list -H -o name zroot/playground/" + testID,
			"zfs create -p -o mountpoint=" + layer + " -o refquota=1073741824 -o userobjquota@1000=262144 zroot/playground/" + testID,
			"zfs list -H -o name zroot/playground/" + testID + "-pile",
			"zfs create -p -o mountpoint=" + pile + " -o refquota=536870912 -o userobjquota@1000=500 zroot/playground/" + testID + "-pile",
		}
		if got := n.fake.take(); len(got) < 4 || !slices.Equal(got[:4], want) {
			t.Fatalf("Provision with ZFS ran\n%s\nwant first\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		sp.Storage.LayerBytes = 2 << 30
		if err := b.Provision(ctx, sp); err != nil {
			t.Fatal(err)
		}
		if st, err := b.Storage(testID); err != nil || st != (backend.Storage{LayerBytes: 1 << 30, LayerInodes: 262144, PileBytes: 512 << 20, PileInodes: 500}) {
			t.Errorf("Storage after a second provision asking for more: %+v, %v; want the first's limits", st, err)
		}
		for _, c := range n.fake.take() {
			if strings.HasPrefix(c, "zfs create") {
				t.Errorf("provisioning again created a dataset: %s", c)
			}
		}
		if err := b.Start(ctx, testID); err != nil {
			t.Fatal(err)
		}
		if err := b.Destroy(ctx, testID, keepPile); err != nil {
			t.Fatal(err)
		}
		_, layerLeft := n.fake.datasets["zroot/playground/"+testID]
		_, pileLeft := n.fake.datasets["zroot/playground/"+testID+"-pile"]
		if layerLeft || pileLeft != keepPile {
			t.Errorf("keepPile %v: the layer's dataset left %v, the pile's %v", keepPile, layerLeft, pileLeft)
		}
		if len(n.fake.mounts) != map[bool]int{true: 1, false: 0}[keepPile] {
			t.Errorf("keepPile %v: mounts left %v", keepPile, n.fake.mounts)
		}
	}
	if _, err := New(Options{StateDir: t.TempDir(), ZFSParent: "/zroot/x"}); err == nil {
		t.Error("New accepted a ZFS parent that is a path")
	}
	n := newNode(t)
	n.up()
	if _, err := n.b.Storage(testID); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Storage without ZFS: %v; want ErrNotFound (no limits)", err)
	}
}
