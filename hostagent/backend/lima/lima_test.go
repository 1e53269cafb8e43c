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

package lima

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "limactl":
		os.Exit(fakeLimactl(os.Args[1:]))
	case fakeGuestArgv0:
		fakeGuest()
		os.Exit(1)
	}
	code := m.Run()
	if fakeRoot != "" {
		os.RemoveAll(fakeRoot)
	}
	os.Exit(code)
}

var (
	fakeOnce sync.Once
	fakeRoot string // holds bin/limactl, a copy of this test binary
	fakeErr  error
)

// fakeUser is who runs limactl in the tests: the real one refuses root,
// so a test run as root runs it as nobody.
func fakeUser() *RunAs {
	if os.Geteuid() != 0 {
		return nil
	}
	return &RunAs{UID: 65534, GID: 65534, Home: "/nonexistent"}
}

// installFake puts the fake limactl in a directory every user can read
// and returns that directory.
func installFake(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		fakeRoot, fakeErr = os.MkdirTemp("", "lima-fake-")
		if fakeErr != nil {
			return
		}
		if fakeErr = os.Chmod(fakeRoot, 0o755); fakeErr != nil {
			return
		}
		bin := filepath.Join(fakeRoot, "bin")
		if fakeErr = os.Mkdir(bin, 0o755); fakeErr != nil {
			return
		}
		self, err := os.Executable()
		if err != nil {
			fakeErr = err
			return
		}
		fakeErr = copyFile(self, filepath.Join(bin, "limactl"), 0o755)
	})
	if fakeErr != nil {
		t.Fatalf("installing the fake limactl: %v", fakeErr)
	}
	return filepath.Join(fakeRoot, "bin")
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fixture is a backend over the fake, in a state directory of its own.
type fixture struct {
	be    *Backend
	opts  Options
	home  string
	calls int // calls recorded before the step under test
}

// newFixture builds a backend that finds the fake limactl first on PATH.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	bin := installFake(t)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	state, err := os.MkdirTemp(fakeRoot, "state-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	guestBin := filepath.Join(state, "playground-sandbox-src")
	if err := os.WriteFile(guestBin, []byte("#!/bin/sh\n# stands in for the static guest binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{StateDir: state, GuestBinary: guestBin, RunAs: fakeUser(), StartTimeout: 5 * time.Second}
	be, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{be: be, opts: be.opts, home: be.opts.LimaHome}
	expectCalls(t, "New", f.recorded(t), "--tty=false --version")
	t.Cleanup(func() {
		// Whatever a test left running: end the fake VMs.
		pids, _ := filepath.Glob(filepath.Join(f.home, "*", fakeGuestPID))
		for _, p := range pids {
			if b, err := os.ReadFile(p); err == nil {
				if pid, err := strconv.Atoi(string(b)); err == nil && pid > 0 {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		}
		os.RemoveAll(state)
	})
	return f
}

// started provisions sandbox id and starts it, and returns its spec.
func (f *fixture) started(t *testing.T, id string) backend.Spec {
	t.Helper()
	spec := backend.Spec{ID: id}
	if err := f.be.Provision(ctx(t), spec); err != nil {
		t.Fatal(err)
	}
	if err := f.be.Start(ctx(t), spec.ID); err != nil {
		t.Fatal(err)
	}
	return spec
}

// recorded returns the calls made since the last mark, and marks.
func (f *fixture) recorded(t *testing.T) []fakeCall {
	t.Helper()
	file, err := os.Open(filepath.Join(f.home, fakeCallsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var all []fakeCall
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c fakeCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("the fake's record: %v", err)
		}
		all = append(all, c)
	}
	news := all[f.calls:]
	f.calls = len(all)
	return news
}

// argv is the calls' argument lists, joined by spaces.
func argv(calls []fakeCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = strings.Join(c.Args, " ")
	}
	return out
}

func expectCalls(t *testing.T, step string, calls []fakeCall, want ...string) {
	t.Helper()
	if got := argv(calls); len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
		t.Fatalf("%s ran limactl:\n  %s\nwant:\n  %s", step, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

const profileCmd = "sudo sh -c cat > " + profileFile + ".tmp && chmod 0644 " + profileFile + ".tmp && mv -f " + profileFile + ".tmp " + profileFile

// TestLifecycle drives provision, start, stop and destroy (both pile
// policies) and checks exactly which limactl commands each issues.
func TestLifecycle(t *testing.T) {
	for _, keepPile := range []bool{true, false} {
		t.Run("keepPile="+strconv.FormatBool(keepPile), func(t *testing.T) {
			f := newFixture(t)
			spec := backend.Spec{ID: "sb1", Tenant: "ns/t", Persona: "tester"}
			inst, disk := "pg-sb1", "pg-sb1-pile"

			if err := f.be.Provision(ctx(t), spec); err != nil {
				t.Fatal(err)
			}
			calls := f.recorded(t)
			expectCalls(t, "Provision", calls,
				"--tty=false list --json "+inst,
				"--tty=false disk list --json "+disk,
				"--tty=false disk create "+disk+" --size 1024MiB",
				"--tty=false create --name="+inst+" -")
			if calls[3].Stdin == "" {
				t.Fatal("create got no lima.yaml on stdin")
			}
			if u := fakeUser(); u != nil {
				for _, c := range calls {
					if c.UID != int(u.UID) {
						t.Fatalf("limactl %v ran as uid %d, want %d", c.Args, c.UID, u.UID)
					}
				}
			}

			// Provisioning again keeps the instance.
			if err := f.be.Provision(ctx(t), spec); err != nil {
				t.Fatal(err)
			}
			expectCalls(t, "Provision again", f.recorded(t), "--tty=false list --json "+inst)

			if err := f.be.Start(ctx(t), spec.ID); err != nil {
				t.Fatal(err)
			}
			calls = f.recorded(t)
			expectCalls(t, "Start", calls,
				"--tty=false list --json "+inst,
				"--tty=false start "+inst,
				"--tty=false shell --workdir / "+inst+" "+profileCmd)
			if !strings.Contains(calls[2].Stdin, "export PERSONA='tester'") {
				t.Fatalf("the login profile pushed: %q", calls[2].Stdin)
			}
			if got := run(t, f.be, spec.ID, "echo hello"); got.out != "hello\n" || got.code != 0 {
				t.Fatalf("exec through the forwarded socket: %+v", got)
			}

			// Starting a running sandbox is a no-op for limactl too.
			if err := f.be.Start(ctx(t), spec.ID); err != nil {
				t.Fatal(err)
			}
			f.recorded(t)

			if err := f.be.Stop(ctx(t), spec.ID); err != nil {
				t.Fatal(err)
			}
			expectCalls(t, "Stop", f.recorded(t), "--tty=false list --json "+inst, "--tty=false stop "+inst)
			if _, err := f.be.Exec(ctx(t), spec.ID, backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotRunning) {
				t.Fatalf("exec in a stopped sandbox: %v, want ErrNotRunning", err)
			}
			// Stopping a stopped sandbox succeeds without limactl stop,
			// which would fail ("expected status Running").
			if err := f.be.Stop(ctx(t), spec.ID); err != nil {
				t.Fatal(err)
			}
			expectCalls(t, "Stop again", f.recorded(t), "--tty=false list --json "+inst)

			if err := f.be.Destroy(ctx(t), spec.ID, keepPile); err != nil {
				t.Fatal(err)
			}
			want := []string{"--tty=false list --json " + inst, "--tty=false delete --force " + inst}
			if !keepPile {
				want = append(want, "--tty=false disk list --json "+disk, "--tty=false disk delete --force "+disk)
			}
			expectCalls(t, "Destroy", f.recorded(t), want...)
			_, err := os.Stat(f.be.PileDir(spec.ID))
			if keepPile != (err == nil) {
				t.Fatalf("after Destroy(keepPile=%v), the pile's disk %s: %v", keepPile, f.be.PileDir(spec.ID), err)
			}
			if _, err := os.Stat(f.be.instanceDir(spec.ID)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the instance outlived Destroy: %v", err)
			}

			// Provisioned again: a kept pile's disk is reused, not made anew.
			if err := f.be.Provision(ctx(t), spec); err != nil {
				t.Fatal(err)
			}
			want = []string{"--tty=false list --json " + inst, "--tty=false disk list --json " + disk}
			if !keepPile {
				want = append(want, "--tty=false disk create "+disk+" --size 1024MiB")
			}
			want = append(want, "--tty=false create --name="+inst+" -")
			expectCalls(t, "Provision after Destroy", f.recorded(t), want...)

			// Destroying what does not exist succeeds.
			if err := f.be.Destroy(ctx(t), spec.ID, false); err != nil {
				t.Fatal(err)
			}
			if err := f.be.Destroy(ctx(t), spec.ID, false); err != nil {
				t.Fatalf("destroying a destroyed sandbox: %v", err)
			}
		})
	}
}

type result struct {
	out, err string
	code     int
}

type bufSink struct {
	mu       sync.Mutex
	out, err strings.Builder
}

func (s *bufSink) Write(st backend.Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == backend.Stdout {
		s.out.Write(p)
	} else {
		s.err.Write(p)
	}
}

func run(t *testing.T, be *Backend, id, cmd string) result {
	t.Helper()
	var sink bufSink
	p, err := be.Exec(ctx(t), id, backend.ExecRequest{Command: cmd, Shell: backend.ShellClean}, &sink)
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	st, err := p.Wait(ctx(t))
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return result{out: sink.out.String(), err: sink.err.String(), code: st.ExitCode}
}

// TestGeneratedConfig checks the lima.yaml that create receives: sized
// from the Spec, nothing of the host mounted but the guest binary's
// directory read-only, no containerd, init's socket forwarded and no
// port, Lima's user never the tenant's uid, and a provision script that
// bash accepts and that does what docs/lima.md says it does.
func TestGeneratedConfig(t *testing.T) {
	f := newFixture(t)
	spec := backend.Spec{
		ID:        "cfg",
		Resources: backend.Resources{CPUMillis: 1500, MemoryBytes: 1 << 30, PIDs: 256},
		Storage:   backend.Storage{LayerBytes: 4 << 30, PileBytes: 64 << 20},
	}
	if err := f.be.Provision(ctx(t), spec); err != nil {
		t.Fatal(err)
	}
	calls := f.recorded(t)
	expectCalls(t, "Provision", calls,
		"--tty=false list --json pg-cfg",
		"--tty=false disk list --json pg-cfg-pile",
		"--tty=false disk create pg-cfg-pile --size 64MiB",
		"--tty=false create --name=pg-cfg -")
	raw := calls[3].Stdin
	var y limaYAML
	if err := yaml.UnmarshalStrict([]byte(raw), &y); err != nil {
		t.Fatalf("lima.yaml: %v\n%s", err, raw)
	}
	if y.CPUs != 2 || y.Memory != "1536MiB" || y.Disk != "12288MiB" {
		t.Errorf("cpus %d, memory %s, disk %s: want 2, 1536MiB (1 GiB and the guest's 512 MiB), 12288MiB (4 GiB and the OS's 8 GiB)", y.CPUs, y.Memory, y.Disk)
	}
	if want := []string{"template:_images/ubuntu-lts"}; !reflect.DeepEqual(y.Base, want) {
		t.Errorf("base %v, want %v (images only: template:default would mount the home directory)", y.Base, want)
	}
	if want := []mount{{Location: filepath.Join(f.opts.StateDir, "guest"), MountPoint: guestShare}}; !reflect.DeepEqual(y.Mounts, want) {
		t.Errorf("mounts %+v, want only %+v, read-only", y.Mounts, want)
	}
	if entries, err := os.ReadDir(y.Mounts[0].Location); err != nil || len(entries) != 1 || entries[0].Name() != guestBinaryName {
		t.Errorf("the shared directory holds %v (%v), want the guest binary only", entries, err)
	}
	if y.Containerd.System || y.Containerd.User {
		t.Errorf("containerd %+v, want none", y.Containerd)
	}
	if want := []disk{{Name: "pg-cfg-pile", Format: true, FSType: "ext4"}}; !reflect.DeepEqual(y.AdditionalDisks, want) {
		t.Errorf("additionalDisks %+v, want %+v", y.AdditionalDisks, want)
	}
	if y.User.UID == guestapi.TenantUID || y.User.UID == 0 || y.User.Name == guestapi.TenantUser {
		t.Errorf("Lima's user %+v would be the tenant or root", y.User)
	}
	if len(y.PortForwards) != 2 ||
		y.PortForwards[0].GuestSocket != "/.playground/run/agent.sock" || y.PortForwards[0].HostSocket != "{{.Dir}}/sock/agent.sock" ||
		!y.PortForwards[1].Ignore || y.PortForwards[1].GuestIP != "0.0.0.0" || y.PortForwards[1].Proto != "any" ||
		y.PortForwards[1].GuestIPMustBeZero == nil || *y.PortForwards[1].GuestIPMustBeZero {
		t.Errorf("portForwards %+v: want init's socket, then every port ignored", y.PortForwards)
	}
	if y.PropagateProxyEnv || y.UpgradePackages {
		t.Errorf("propagateProxyEnv %v, upgradePackages %v: want neither", y.PropagateProxyEnv, y.UpgradePackages)
	}
	if len(y.Provision) != 1 || y.Provision[0].Mode != "system" || len(y.Probes) != 1 || y.Probes[0].Mode != "readiness" {
		t.Fatalf("provision %+v, probes %+v: want one system script and one readiness probe", y.Provision, y.Probes)
	}
	script := y.Provision[0].Script
	for _, s := range []string{y.Provision[0].Script, y.Probes[0].Script} {
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n refuses a script: %v: %s\n%s", err, out, s)
		}
	}
	for _, want := range []string{
		`tuid=1000 tgid=1000`,
		`sudo -n -l -U "$tuser"`,
		`gpasswd -d "$tuser"`,
		`if [ "$(id -g lima)" = "$tgid" ]`,
		`piledisk='/mnt/lima-pg-cfg-pile'`,
		`chattr +a "$pile"`,
		`chattr +a "$f"`,
		`for f in 'self.pile'; do`,
		"ExecStart=/usr/bin/unshare --pid --fork --mount-proc --mount --propagation private /.playground/bin/enter",
		"PrivateNetwork=yes",
		"NoNewPrivileges=yes",
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
		"SystemCallArchitectures=native",
		"MemoryMax=1073741824",
		"TasksMax=256",
		"CPUQuota=150%",
		"exec /.playground/bin/playground-sandbox init -spares 1",
		"umount -l /mnt/lima-cidata",
		`chgrp "\$\$g" /.playground/run /.playground/run/agent.sock`,
		"systemctl restart playground-sandbox.service",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the provision script lacks %q", want)
		}
	}
	if strings.Contains(script, "systemctl enable") {
		t.Error("the unit is enabled: it would start at boot before the provision script sealed the pile")
	}
}

// TestReattach: a running instance is taken over without being started
// or created again; a stopped one is ErrNotRunning, a missing one
// ErrNotFound, a broken one a clear error.
func TestReattach(t *testing.T) {
	f := newFixture(t)
	spec := backend.Spec{ID: "re", Persona: "first"}
	if err := f.be.Reattach(ctx(t), spec); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("reattaching a sandbox Lima does not have: %v, want ErrNotFound", err)
	}
	expectCalls(t, "Reattach (missing)", f.recorded(t), "--tty=false list --json pg-re")

	if err := f.be.Provision(ctx(t), spec); err != nil {
		t.Fatal(err)
	}
	f.recorded(t)
	if err := f.be.Reattach(ctx(t), spec); !errors.Is(err, backend.ErrNotRunning) {
		t.Fatalf("reattaching a stopped sandbox: %v, want ErrNotRunning", err)
	}
	expectCalls(t, "Reattach (stopped)", f.recorded(t), "--tty=false list --json pg-re")

	if err := f.be.Start(ctx(t), spec.ID); err != nil {
		t.Fatal(err)
	}
	f.recorded(t)
	// An agent restart: a new backend over the same state.
	be2, err := New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	spec.Persona = "second"
	if err := be2.Reattach(ctx(t), spec); err != nil {
		t.Fatal(err)
	}
	calls := f.recorded(t)
	expectCalls(t, "Reattach (running)", calls,
		"--tty=false --version",
		"--tty=false list --json pg-re",
		"--tty=false shell --workdir / pg-re "+profileCmd)
	if !strings.Contains(calls[2].Stdin, "export PERSONA='second'") {
		t.Fatalf("the reattached sandbox got the profile %q", calls[2].Stdin)
	}
	if got := run(t, be2, spec.ID, "echo still here"); got.out != "still here\n" {
		t.Fatalf("exec after reattach: %+v", got)
	}

	// Broken: limactl says so; the backend neither starts nor creates.
	if err := os.WriteFile(filepath.Join(f.home, "pg-re", fakeBrokenFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Reattach":  func() error { return be2.Reattach(ctx(t), spec) },
		"Start":     func() error { return be2.Start(ctx(t), spec.ID) },
		"Provision": func() error { return be2.Provision(ctx(t), spec) },
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "is Broken (host agent is running but driver is not)") || !strings.Contains(err.Error(), "destroy the sandbox") {
			t.Errorf("%s of a broken instance: %v, want an error that says it is Broken and what to do", name, err)
		}
		if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrNotRunning) {
			t.Errorf("%s of a broken instance: %v would make the agent provision or start it", name, err)
		}
		expectCalls(t, name+" (broken)", f.recorded(t), "--tty=false list --json pg-re")
	}
}

// TestStartNeverCreates: limactl start NAME creates NAME from
// template:default when it does not exist; Start must find out first.
func TestStartNeverCreates(t *testing.T) {
	f := newFixture(t)
	if err := f.be.Start(ctx(t), "ghost"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("starting a sandbox never provisioned: %v, want ErrNotFound", err)
	}
	expectCalls(t, "Start (missing)", f.recorded(t), "--tty=false list --json pg-ghost")
	if _, err := f.be.Exec(ctx(t), "ghost", backend.ExecRequest{Command: "true"}, nil); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("exec in a sandbox never provisioned: %v, want ErrNotFound", err)
	}
	if err := f.be.Stop(ctx(t), "ghost"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("stopping a sandbox never provisioned: %v, want ErrNotFound", err)
	}
}

// TestExec runs commands through the forwarded socket: output, exit code,
// stdin, and a cwd the guest refuses.
func TestExec(t *testing.T) {
	f := newFixture(t)
	spec := f.started(t, "ex")
	if got := run(t, f.be, spec.ID, "echo out; echo err >&2; exit 3"); got.out != "out\n" || got.err != "err\n" || got.code != 3 {
		t.Fatalf("got %+v", got)
	}
	var sink bufSink
	p, err := f.be.Exec(ctx(t), spec.ID, backend.ExecRequest{Command: "cat", Stdin: []byte("in\n")}, &sink)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx(t)); err != nil || st.ExitCode != 0 || sink.out.String() != "in\n" {
		t.Fatalf("cat: %+v %v %q", st, err, sink.out.String())
	}
	_, err = f.be.Exec(ctx(t), spec.ID, backend.ExecRequest{Command: "true", Cwd: "/no/such/dir"}, nil)
	if !errors.Is(err, backend.ErrInvalidRequest) {
		t.Fatalf("a cwd that does not exist: %v, want ErrInvalidRequest", err)
	}
	if _, err := f.be.DialSandbox(ctx(t), spec.ID, 8080); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Fatalf("dialing through the fake guest, which has no loopback: %v, want its refusal", err)
	}
}

// TestProof: a command whose connection breaks is proven dead only when
// the VM ended (Stop, as limactl then reports the instance Stopped);
// when init dies in a VM that still runs, the proof is lost.
func TestProof(t *testing.T) {
	f := newFixture(t)
	spec := backend.Spec{ID: "pr"}
	if err := f.be.Provision(ctx(t), spec); err != nil {
		t.Fatal(err)
	}
	start := func() backend.Process {
		t.Helper()
		if err := f.be.Start(ctx(t), spec.ID); err != nil {
			t.Fatal(err)
		}
		p, err := f.be.Exec(ctx(t), spec.ID, backend.ExecRequest{Command: "sleep 60"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := start()
	if err := f.be.Stop(ctx(t), spec.ID); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx(t))
	if err != nil || !st.Killed {
		t.Fatalf("a command running when its VM stopped: %+v, %v; want killed, with proof", st, err)
	}

	p = start()
	// "init" dies; the instance stays Running.
	b, err := os.ReadFile(filepath.Join(f.home, "pg-pr", fakeGuestPID))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx(t)); !errors.Is(err, backend.ErrProofLost) || !strings.Contains(err.Error(), "the VM still runs") {
		t.Fatalf("a command whose init died in a running VM: %v, want ErrProofLost", err)
	}
}

// TestRefusals: what the backend cannot run is refused before limactl
// runs, with the reason.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		spec backend.Spec
		want string
	}{
		{"egress", backend.Spec{ID: "a", Egress: []backend.EgressRule{{CIDR: "10.0.0.0/8"}}}, "network none only"},
		{"faculties", backend.Spec{ID: "a", Faculties: []backend.Faculty{{Name: "x"}}}, "does not install yet"},
		{"gvisor", backend.Spec{ID: "a", Isolation: backend.IsolationGVisor}, "offers no other"},
		{"id", backend.Spec{ID: "a..b"}, "invalid sandbox ID"},
		{"id-trailing", backend.Spec{ID: "a-"}, "invalid sandbox ID"},
		{"login-env", backend.Spec{ID: "a", LoginEnv: []backend.EnvVar{{Name: "A B"}}}, "not a valid name"},
		{"socket-path", backend.Spec{ID: strings.Repeat("x", 63)}, "shorter --lima-home"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for op, call := range map[string]func() error{
				"Provision": func() error { return f.be.Provision(ctx(t), tc.spec) },
				"Reattach":  func() error { return f.be.Reattach(ctx(t), tc.spec) },
			} {
				if err := call(); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want an error saying %q", op, err, tc.want)
				}
			}
			expectCalls(t, "refused specs", f.recorded(t))
		})
	}
}

// TestLimactlErrors: a missing limactl, running it as root, and a Lima
// older than 2 are refused when the backend is built, saying what to do.
func TestLimactlErrors(t *testing.T) {
	state := t.TempDir()
	guestBin := filepath.Join(state, "g")
	if err := os.WriteFile(guestBin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err := New(Options{StateDir: state, GuestBinary: guestBin, RunAs: fakeUser()})
	if err == nil || !strings.Contains(err.Error(), "limactl is not on PATH") || !strings.Contains(err.Error(), "install Lima") {
		t.Fatalf("no limactl on PATH: %v", err)
	}
	_, err = New(Options{StateDir: state, GuestBinary: guestBin, RunAs: fakeUser(), Limactl: filepath.Join(state, "no-limactl")})
	if err == nil || !strings.Contains(err.Error(), "no such file") || !strings.Contains(err.Error(), "--limactl") {
		t.Fatalf("--limactl naming nothing: %v", err)
	}
	if os.Geteuid() == 0 {
		_, err = New(Options{StateDir: state, GuestBinary: guestBin, Limactl: guestBin})
		if err == nil || !strings.Contains(err.Error(), "--lima-user") {
			t.Fatalf("root without a user to run limactl as: %v", err)
		}
	}

	// Lima 1 would misread the lima.yaml: refused when the agent starts.
	old := filepath.Join(installFake(t), "..", "limactl-1")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho 'limactl version 1.2.1'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{StateDir: state, GuestBinary: guestBin, RunAs: fakeUser(), Limactl: old, LimaHome: filepath.Join(fakeRoot, "home-v1")})
	if err == nil || !strings.Contains(err.Error(), "version 1.2.1: the lima backend needs Lima 2") {
		t.Fatalf("Lima 1: %v", err)
	}

	// limactl removed after the agent started: each call says so.
	f := newFixture(t)
	f.be.lctl.path = filepath.Join(fakeRoot, "no-such-limactl")
	err = f.be.Provision(ctx(t), backend.Spec{ID: "gone"})
	if err == nil || !strings.Contains(err.Error(), "install Lima") {
		t.Fatalf("limactl gone: %v", err)
	}
}

// TestFakeContract pins the documented limactl behaviours the backend's
// error handling relies on, as the fake reproduces them.
func TestFakeContract(t *testing.T) {
	f := newFixture(t)
	l := f.be.lctl
	if _, err := l.run(ctx(t), []byte("cpus: 1\n"), "create", "--name=dup", "-"); err != nil {
		t.Fatal(err)
	}
	_, err := l.run(ctx(t), []byte("cpus: 1\n"), "create", "--name=dup", "-")
	var ce *cmdError
	if !errors.As(err, &ce) || ce.code != 1 || !strings.Contains(err.Error(), "instance `dup` already exists") {
		t.Fatalf("a duplicate create: %v", err)
	}
	if inst, err := l.list(ctx(t), "nobody-here"); inst != nil || err != nil {
		t.Fatalf("listing an unknown instance: %v, %v; want none and no error", inst, err)
	}
	if inst, err := l.list(ctx(t), "dup"); err != nil || inst == nil || inst.Status != statusStopped || inst.Dir != filepath.Join(f.home, "dup") {
		t.Fatalf("listing a created instance: %+v, %v", inst, err)
	}
	if _, err := l.run(ctx(t), nil, "stop", "dup"); err == nil || !strings.Contains(err.Error(), "expected status `Running`, got `Stopped`") {
		t.Fatalf("stopping a stopped instance: %v", err)
	}
	if _, err := l.run(ctx(t), nil, "delete", "--force", "nobody-here"); err != nil {
		t.Fatalf("deleting an unknown instance: %v", err)
	}
	if d, err := l.disk(ctx(t), "nodisk"); d != nil || err != nil {
		t.Fatalf("listing an unknown disk: %v, %v", d, err)
	}
}

// TestTailBuffer: a long log keeps its end, where limactl's reason is.
func TestTailBuffer(t *testing.T) {
	b := tailBuffer{max: 8}
	for _, s := range []string{"0123456789", "abcdefghij", "level=fatal"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.String(); got != "el=fatal" {
		t.Fatalf("kept %q, want the last 8 bytes", got)
	}
}

// TestThroughAgent: the host agent's kernel drives the backend as it does
// every backend: Ensure finds nothing (Reattach: ErrNotFound), provisions
// and starts; a command runs through a session; after the sandbox is
// stopped behind the agent's back, Ensure starts it again over its
// instance (Reattach: ErrNotRunning); a new agent takes the running one
// over without starting it.
func TestThroughAgent(t *testing.T) {
	f := newFixture(t)
	spec := backend.Spec{ID: "ag", Tenant: "ns/t", Backend: Name}
	newAgent := func(be backend.Backend) *hostagent.Agent {
		a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		return a
	}
	execOnce := func(a *hostagent.Agent) string {
		t.Helper()
		if err := a.Ensure(ctx(t), spec); err != nil {
			t.Fatal(err)
		}
		h, err := a.Sessions().Open(ctx(t), spec.Tenant, spec.ID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Execs().Exec(ctx(t), spec.Tenant, h.ID, agentapi.ExecRequest{Command: "echo hi", Shell: backend.ShellClean})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec through the agent: %+v, %v", res, err)
		}
		return string(res.Stdout)
	}

	a := newAgent(f.be)
	if got := execOnce(a); got != "hi\n" {
		t.Fatalf("got %q", got)
	}
	calls := argv(f.recorded(t))
	for _, want := range []string{"--tty=false create --name=pg-ag -", "--tty=false start pg-ag"} {
		if !contains(calls, want) {
			t.Fatalf("the first Ensure ran %q, without %q", calls, want)
		}
	}

	if err := f.be.Stop(ctx(t), spec.ID); err != nil {
		t.Fatal(err)
	}
	f.recorded(t)
	if got := execOnce(a); got != "hi\n" {
		t.Fatalf("got %q", got)
	}
	if calls := argv(f.recorded(t)); !contains(calls, "--tty=false start pg-ag") || contains(calls, "--tty=false create --name=pg-ag -") {
		t.Fatalf("Ensure of a stopped sandbox ran %q: want a start, no create", calls)
	}

	be2, err := New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.recorded(t)
	if got := execOnce(newAgent(be2)); got != "hi\n" {
		t.Fatalf("got %q", got)
	}
	for _, c := range argv(f.recorded(t)) {
		if strings.Contains(c, " start ") || strings.Contains(c, " create ") || strings.Contains(c, " stop ") {
			t.Fatalf("a new agent took over the running sandbox with %q", c)
		}
	}
}
