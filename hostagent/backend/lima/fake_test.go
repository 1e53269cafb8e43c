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

// The recorded fake of limactl. It stands in for the real limactl
// command line (github.com/lima-vm/lima/v2, cmd/limactl at commit
// 183a60d7, Lima 2.x) and, behind its forwarded socket, for
// playground-sandbox init inside the VM. What it reproduces, from
// limactl's source:
//
//   - the global flags --tty=false and the refusal to run as root
//     ("limactl: must not run as the root user", exit 1, main.go);
//   - create --name=NAME - : the template from stdin, refused with
//     "instance `NAME` already exists" (exit 1) for a duplicate, an
//     invalid name refused (pkg/identifiers), the instance Stopped after
//     (start.go, createAction);
//   - start NAME: a Running instance is left as it is (exit 0); a Broken
//     one fails with "errors inspecting instance"; a NAME with no
//     instance is created from template:default, as the real one does
//     (loadOrCreateInstance, the deprecated form), which this backend
//     must never rely on;
//   - stop NAME: only a Running instance ("expected status `Running`,
//     got `Stopped` (maybe use `limactl stop -f`?)", pkg/instance/stop.go);
//     an unknown one fails (store.Inspect);
//   - delete [--force] NAME: an unknown one is "Ignoring non-existent
//     instance" and exit 0 (delete.go); the disks it used are unlocked;
//   - list --json NAME: one JSON object per line with name, status, dir
//     and errors (pkg/limatype.Instance); an unmatched NAME is "No
//     instance matching NAME found." and exit 1 (unmatchedInstancesError);
//   - disk create NAME --size S, disk list --json NAME (unknown: a warning,
//     exit 0, no output), disk delete [--force] NAME (unknown: "Ignoring
//     non-existent disk", exit 0) (disk.go);
//   - shell [--workdir DIR] NAME CMD...: only on a Running instance.
//
// Where it simplifies: the status is what start and stop recorded (Lima
// derives it from its host agent's and hypervisor's PID files; this
// backend reads only the reported status), a test marks an instance
// Broken with a file, and "the VM" is one process (fakeGuest) that
// serves the guest protocol on the instance's sock/agent.sock, where
// Lima's portForwards rule (guestSocket to hostSocket) would put init's
// socket, running each command with the host's /bin/sh.
//
// Also --version ("limactl version 2.0.0", cobra's template).
//
// Every call is recorded, args and stdin, in $LIMA_HOME/_fake-calls.jsonl.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

const (
	fakeCallsFile   = "_fake-calls.jsonl"
	fakeStateFile   = "fake-state"  // Running or Stopped
	fakeBrokenFile  = "fake-broken" // present: the instance is Broken
	fakeGuestPID    = "fake-guest.pid"
	fakeGuestArgv0  = "fake-lima-guest"
	fakeGuestSocket = "FAKE_LIMA_GUEST_SOCKET"
)

// fakeVersion is what --version reports; a test may change the copy it
// runs (see TestLimactlErrors).
var fakeVersion = "2.0.0"

// fakeCall is one recorded invocation.
type fakeCall struct {
	Args  []string `json:"args"`
	Stdin string   `json:"stdin,omitempty"`
	UID   int      `json:"uid"`
}

var fakeIdentifier = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

type fakeExit struct {
	code int
	msg  string
}

func fatalf(format string, args ...any) {
	panic(fakeExit{1, fmt.Sprintf("level=fatal msg=%q", fmt.Sprintf(format, args...))})
}

func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "level=warning msg=%q\n", fmt.Sprintf(format, args...))
}

// fakeLimactl is the fake's main.
func fakeLimactl(args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(fakeExit)
			if !ok {
				panic(r)
			}
			fmt.Fprintln(os.Stderr, e.msg)
			code = e.code
		}
	}()
	if os.Geteuid() == 0 {
		fmt.Fprint(os.Stderr, "limactl: must not run as the root user\n")
		return 1
	}
	home := os.Getenv("LIMA_HOME")
	if home == "" {
		fatalf("LIMA_HOME is not set (the fake needs it)")
	}
	var stdin []byte
	if len(args) > 1 && (args[len(args)-1] == "-" || contains(args, "shell")) {
		stdin, _ = io.ReadAll(os.Stdin)
	}
	rec, _ := json.Marshal(fakeCall{Args: args, Stdin: string(stdin), UID: os.Geteuid()})
	if f, err := os.OpenFile(filepath.Join(home, fakeCallsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		_, _ = f.Write(append(rec, '\n'))
		f.Close()
	}
	var rest []string
	for _, a := range args {
		switch a {
		case "--tty=false", "-y", "--yes":
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		fatalf("no command")
	}
	if rest[0] == "--version" {
		fmt.Println("limactl version " + fakeVersion)
		return 0
	}
	fs := fakeStore{home: home}
	switch cmd, rest := rest[0], rest[1:]; cmd {
	case "create":
		fs.create(rest, stdin)
	case "start":
		fs.start(onlyArg(rest))
	case "stop":
		fs.stop(onlyArg(rest))
	case "delete":
		fs.delete(without(rest, "--force", "-f"))
	case "list":
		return fs.list(without(rest, "--json"))
	case "disk":
		fs.disk(rest)
	case "shell":
		fs.shell(rest)
	default:
		fatalf("unknown command %q for \"limactl\"", cmd)
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func without(list []string, drop ...string) []string {
	var out []string
	for _, x := range list {
		if !contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

func onlyArg(rest []string) string {
	if len(rest) != 1 {
		fatalf("accepts 1 arg(s), received %d", len(rest))
	}
	return rest[0]
}

type fakeStore struct{ home string }

func (s fakeStore) dir(name string) string { return filepath.Join(s.home, name) }

func (s fakeStore) exists(name string) bool {
	_, err := os.Stat(filepath.Join(s.dir(name), "lima.yaml"))
	return err == nil
}

func (s fakeStore) status(name string) string {
	if _, err := os.Stat(filepath.Join(s.dir(name), fakeBrokenFile)); err == nil {
		return "Broken"
	}
	b, _ := os.ReadFile(filepath.Join(s.dir(name), fakeStateFile))
	if string(b) == "Running" {
		return "Running"
	}
	return "Stopped"
}

func (s fakeStore) setStatus(name, st string) {
	if err := os.WriteFile(filepath.Join(s.dir(name), fakeStateFile), []byte(st), 0o644); err != nil {
		fatalf("%v", err)
	}
}

func (s fakeStore) inspect(name string) {
	if !s.exists(name) {
		fatalf("open %s: no such file or directory", filepath.Join(s.dir(name), "lima.yaml"))
	}
}

func (s fakeStore) create(rest []string, stdin []byte) {
	var name string
	var tmpl string
	for _, a := range rest {
		switch {
		case strings.HasPrefix(a, "--name="):
			name = strings.TrimPrefix(a, "--name=")
		case !strings.HasPrefix(a, "-") || a == "-":
			tmpl = a
		default:
			fatalf("unknown flag: %s", a)
		}
	}
	if tmpl == "-" && name == "" {
		fatalf("must pass instance name with --name when reading template from stdin")
	}
	if !fakeIdentifier.MatchString(name) || len(name) > 76 {
		fatalf("instance name %q is not a valid identifier", name)
	}
	if s.exists(name) {
		fatalf("instance `%s` already exists", name)
	}
	if tmpl != "-" {
		fatalf("the fake reads templates from stdin only")
	}
	var y map[string]any
	if err := yaml.Unmarshal(stdin, &y); err != nil {
		fatalf("failed to unmarshal YAML: %v", err)
	}
	s.write(name, stdin)
}

func (s fakeStore) write(name string, config []byte) {
	if err := os.MkdirAll(s.dir(name), 0o755); err != nil {
		fatalf("%v", err)
	}
	if err := os.WriteFile(filepath.Join(s.dir(name), "lima.yaml"), config, 0o644); err != nil {
		fatalf("%v", err)
	}
	s.setStatus(name, "Stopped")
	fmt.Fprintf(os.Stderr, "level=info msg=\"Run `limactl start %s` to start the instance.\"\n", name)
}

// config is what start reads of an instance's lima.yaml.
type fakeConfig struct {
	AdditionalDisks []struct {
		Name string `json:"name"`
	} `json:"additionalDisks"`
	PortForwards []struct {
		GuestSocket string `json:"guestSocket"`
		HostSocket  string `json:"hostSocket"`
	} `json:"portForwards"`
}

func (s fakeStore) config(name string) fakeConfig {
	data, err := os.ReadFile(filepath.Join(s.dir(name), "lima.yaml"))
	if err != nil {
		fatalf("%v", err)
	}
	var c fakeConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		fatalf("%v", err)
	}
	return c
}

func (s fakeStore) start(name string) {
	if !fakeIdentifier.MatchString(name) {
		fatalf("the fake starts instances by name only, got %q", name)
	}
	if !s.exists(name) {
		warnf("This form is deprecated. Use `limactl create --name=%s template:default` instead", name)
		s.write(name, []byte("# template:default\n"))
	}
	switch s.status(name) {
	case "Running":
		fmt.Fprintf(os.Stderr, "level=info msg=\"The instance `%s` is already running.\"\n", name)
		return
	case "Broken":
		fatalf("errors inspecting instance: [host agent is running but driver is not]")
	}
	c := s.config(name)
	for _, d := range c.AdditionalDisks {
		dd := filepath.Join(s.home, "_disks", d.Name)
		if _, err := os.Stat(dd); err != nil {
			fatalf("failed to run attach disk %q, in use by instance %q: disk does not exist", d.Name, name)
		}
		if err := os.WriteFile(filepath.Join(dd, "in_use_by"), []byte(name), 0o644); err != nil {
			fatalf("%v", err)
		}
	}
	for _, pf := range c.PortForwards {
		if pf.GuestSocket == "" {
			continue
		}
		host := strings.ReplaceAll(pf.HostSocket, "{{.Dir}}", s.dir(name))
		if !filepath.IsAbs(host) {
			host = filepath.Join(s.dir(name), host)
		}
		s.boot(name, host)
	}
	s.setStatus(name, "Running")
}

// boot starts "the VM": a process serving the guest protocol on host,
// and waits for it as Lima's readiness probe waits for init's socket.
func (s fakeStore) boot(name, host string) {
	if err := os.MkdirAll(filepath.Dir(host), 0o700); err != nil {
		fatalf("%v", err)
	}
	_ = os.Remove(host)
	self, err := os.Executable()
	if err != nil {
		fatalf("%v", err)
	}
	logf, err := os.Create(filepath.Join(s.dir(name), "fake-guest.log"))
	if err != nil {
		fatalf("%v", err)
	}
	defer logf.Close()
	cmd := &exec.Cmd{
		Path: self, Args: []string{fakeGuestArgv0},
		Env:    []string{fakeGuestSocket + "=" + host, "PATH=/usr/bin:/bin"},
		Stdout: logf, Stderr: logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		fatalf("%v", err)
	}
	_ = os.WriteFile(filepath.Join(s.dir(name), fakeGuestPID), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	_ = cmd.Process.Release()
	for range 100 {
		if fi, err := os.Stat(host); err == nil && fi.Mode().Type() == os.ModeSocket {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fatalf("did not receive an event with the \"running\" status")
}

// halt ends "the VM" and everything it ran (its session).
func (s fakeStore) halt(name string) {
	b, err := os.ReadFile(filepath.Join(s.dir(name), fakeGuestPID))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(string(b)); err == nil && pid > 0 {
		// limactl stop returns once the VM has ended; so does this: every
		// thread of the guest gone, however long a loaded machine takes.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		deadline := time.Now().Add(time.Minute)
		for alive(pid) {
			if time.Now().After(deadline) {
				fatalf("the VM (fake guest %d) did not end a minute after SIGKILL", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	_ = os.Remove(filepath.Join(s.dir(name), fakeGuestPID))
}

// alive is whether any thread of pid runs. A killed Go process's main
// thread can be a zombie while its other threads still exit, holding the
// files they share (the guest's listening socket: a connection made then
// is reset, not refused); only when every thread is a zombie, or gone,
// are they closed.
func alive(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X' {
			return true
		}
	}
	return false
}

func (s fakeStore) stop(name string) {
	s.inspect(name)
	if st := s.status(name); st != "Running" {
		fatalf("expected status `Running`, got `%s` (maybe use `limactl stop -f`?)", st)
	}
	s.halt(name)
	s.setStatus(name, "Stopped")
}

func (s fakeStore) delete(names []string) {
	if len(names) == 0 {
		fatalf("requires at least 1 arg(s), only received 0")
	}
	for _, name := range names {
		if !s.exists(name) {
			warnf("Ignoring non-existent instance `%s`", name)
			continue
		}
		s.halt(name)
		for _, d := range s.config(name).AdditionalDisks {
			_ = os.Remove(filepath.Join(s.home, "_disks", d.Name, "in_use_by"))
		}
		if err := os.RemoveAll(s.dir(name)); err != nil {
			fatalf("failed to delete instance `%s`: %v", name, err)
		}
	}
}

func (s fakeStore) list(names []string) int {
	unmatched := false
	for _, name := range names {
		if !s.exists(name) {
			warnf("No instance matching %s found.", name)
			unmatched = true
			continue
		}
		inst := map[string]any{"name": name, "status": s.status(name), "dir": s.dir(name), "vmType": "qemu", "arch": "x86_64", "protected": false, "limaVersion": "2.0.0"}
		if inst["status"] == "Broken" {
			inst["errors"] = []string{"host agent is running but driver is not"}
		}
		line, _ := json.Marshal(inst)
		fmt.Println(string(line))
	}
	if unmatched {
		fmt.Fprintln(os.Stderr, "level=fatal msg=\"unmatched instances\"")
		return 1
	}
	return 0
}

func (s fakeStore) disk(rest []string) {
	if len(rest) == 0 {
		fatalf("disk needs a subcommand")
	}
	dir := func(n string) string { return filepath.Join(s.home, "_disks", n) }
	switch sub, rest := rest[0], rest[1:]; sub {
	case "create":
		var name, size string
		for i := 0; i < len(rest); i++ {
			switch {
			case rest[i] == "--size" && i+1 < len(rest):
				size = rest[i+1]
				i++
			case strings.HasPrefix(rest[i], "-"):
				fatalf("unknown flag: %s", rest[i])
			default:
				name = rest[i]
			}
		}
		if size == "" {
			fatalf("requires --size argument")
		}
		if !fakeIdentifier.MatchString(name) {
			fatalf("disk name %q is not a valid identifier", name)
		}
		if _, err := os.Stat(dir(name)); err == nil {
			fatalf("disk %q already exists (%q)", name, dir(name))
		}
		if err := os.MkdirAll(dir(name), 0o755); err != nil {
			fatalf("%v", err)
		}
		_ = os.WriteFile(filepath.Join(dir(name), "datadisk"), []byte(size), 0o644)
	case "list":
		for _, name := range without(rest, "--json") {
			if _, err := os.Stat(dir(name)); err != nil {
				warnf("No disk matching %v found.", name)
				continue
			}
			inUse, _ := os.ReadFile(filepath.Join(dir(name), "in_use_by"))
			line, _ := json.Marshal(map[string]any{"name": name, "size": 0, "format": "qcow2", "dir": dir(name), "instance": string(inUse)})
			fmt.Println(string(line))
		}
	case "delete":
		force := contains(rest, "--force") || contains(rest, "-f")
		for _, name := range without(rest, "--force", "-f") {
			if _, err := os.Stat(dir(name)); err != nil {
				warnf("Ignoring non-existent disk %q", name)
				continue
			}
			if inUse, _ := os.ReadFile(filepath.Join(dir(name), "in_use_by")); len(inUse) > 0 && !force {
				fatalf("cannot delete disk %q in use by instance %q", name, inUse)
			}
			if err := os.RemoveAll(dir(name)); err != nil {
				fatalf("failed to delete disk %q: %v", name, err)
			}
		}
	default:
		fatalf("unknown command %q for \"limactl disk\"", sub)
	}
}

func (s fakeStore) shell(rest []string) {
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		if rest[0] == "--workdir" && len(rest) > 1 {
			rest = rest[2:]
			continue
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		fatalf("requires at least 1 arg(s)")
	}
	name := rest[0]
	s.inspect(name)
	if st := s.status(name); st != "Running" {
		fatalf("instance %q status is not %q (current status: %q)", name, "Running", st)
	}
}

// fakeGuest is "the VM": it serves the guest protocol on the socket that
// Lima's port forward would make, with the host's /bin/sh standing in
// for init's shepherds (no namespaces, no tenant user, no proof beyond
// the process's own end). It returns when it can serve no more: the guest
// then exits 1.
func fakeGuest() {
	path := os.Getenv(fakeGuestSocket)
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake guest:", err)
		return
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go serveFakeCommand(c)
	}
}

func serveFakeCommand(c net.Conn) {
	defer c.Close()
	fr := guestapi.NewFrameReader(bufio.NewReader(c))
	t, payload, err := fr.ReadFrame()
	if err != nil || t != guestapi.FrameStart {
		return
	}
	var req guestapi.StartRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return
	}
	if req.Dial != 0 {
		_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte("fake guest: no loopback to dial")))
		return
	}
	if req.Version != guestapi.ProtocolVersion {
		_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(guestapi.UnsupportedVersion(req.Version, guestapi.ProtocolVersion))))
		return
	}
	if req.Jobs {
		// It holds no jobs: it lists none, and starts or attaches to none.
		_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameJobs, []byte("[]")))
		return
	}
	if req.Job != nil || req.Attach != "" {
		_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte("fake guest: it holds no jobs")))
		return
	}
	var stdin []byte
	for {
		t, payload, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if t == guestapi.FrameStdinEnd {
			break
		}
		stdin = append(stdin, payload...)
	}
	cmd := exec.Command("/bin/sh", "-c", req.Command)
	cmd.Dir = req.Cwd
	if cmd.Dir != "" {
		if _, err := os.Stat(cmd.Dir); err != nil {
			_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte("cwd "+req.Cwd+" does not exist")))
			return
		}
	}
	cmd.Stdin = strings.NewReader(string(stdin))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(err.Error())))
		return
	}
	started, _ := guestapi.AppendJSONFrame(nil, guestapi.FrameStarted, guestapi.Started{PID: cmd.Process.Pid})
	if _, err := c.Write(started); err != nil {
		_ = cmd.Process.Kill()
		return
	}
	err = cmd.Wait()
	var frames []byte
	if out.Len() > 0 {
		frames = guestapi.AppendFrame(frames, guestapi.FrameStdout, []byte(out.String()))
	}
	if errb.Len() > 0 {
		frames = guestapi.AppendFrame(frames, guestapi.FrameStderr, []byte(errb.String()))
	}
	exit := guestapi.End{Status: guestapi.Exit{ExitCode: cmd.ProcessState.ExitCode()}}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			exit = guestapi.End{Status: guestapi.Exit{ExitCode: -1, Signal: guestapi.SignalName(int(ws.Signal()))}}
		}
	}
	frames, _ = guestapi.AppendJSONFrame(frames, guestapi.FrameExit, exit)
	_, _ = c.Write(frames)
}
