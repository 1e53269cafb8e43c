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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// fakeBSD stands in for FreeBSD's tools as their manuals (jail(8),
// jexec(8), jls(8), rctl(8), chflags(1), mount_nullfs(8), umount(8),
// pwd_mkdb(8)) specify them: it records every command line, keeps the
// state they change (jails, mounts, rctl rules, file flags), refuses what
// the real ones refuse with their exit status and message, and prints
// what jls prints. A shell started through jexec runs on this machine, in
// the directory the jail's path resolves to through its nullfs mounts:
// it stands in for jexec's jail_attach(2) and chroot.
type fakeBSD struct {
	t *testing.T

	mu      sync.Mutex
	calls   []string
	jails   map[string]*fakeJail
	nextJID int
	mounts  map[string]fakeMount // by mount point
	rules   []string
	flags   map[string]map[string]bool // by path: the flags set (fakeFlags)
	// racctOff: the kernel was booted without kern.racct.enable=1.
	racctOff bool
	// dyingPolls: how many listings a removed jail stays dying for (a
	// socket in TIME_WAIT); -1 forever.
	dyingPolls int
	// reaperLoses: the guest's reaper reports descendants it could not
	// kill.
	reaperLoses bool
	// datasets are ZFS's, by name: their properties.
	datasets map[string]map[string]string
}

type fakeJail struct {
	jid      int
	path     string
	params   map[string]string
	dying    int // listings left while dying; -1 forever
	removed  bool
	loopback bool
	procs    []*fakeProc
}

type fakeMount struct {
	fstype, src string
	ro          bool
}

func newFake(t *testing.T) *fakeBSD {
	return &fakeBSD{t: t, jails: map[string]*fakeJail{}, nextJID: 1, mounts: map[string]fakeMount{}, flags: map[string]map[string]bool{},
		datasets: map[string]map[string]string{"zroot": {}, "zroot/playground": {}}}
}

// calls since the last reset, one command line each.
func (f *fakeBSD) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func fail(code int, cmd, msg string) error {
	return &ExitError{Cmd: cmd, Code: code, Stderr: msg + "\n"}
}

// jail parameters jail(8) documents, with whether they are boolean.
var jailParams = map[string]bool{
	"jid": false, "name": false, "path": false, "ip4.addr": false, "ip4": false, "ip6.addr": false, "ip6": false,
	"vnet": false, "host.hostname": false, "host": false, "securelevel": false, "devfs_ruleset": false,
	"children.max": false, "enforce_statfs": false, "persist": true, "mount.devfs": true,
	"allow.set_hostname": true, "allow.sysvipc": true, "allow.raw_sockets": true, "allow.chflags": true,
	"allow.mount": true, "allow.quotas": true, "allow.socket_af": true, "allow.mlock": true,
	"allow.reserved_ports": true, "allow.read_msgbuf": true, "allow.unprivileged_proc_debug": true,
}

// rctl(8)'s resources, and pcpu (FreeBSD 10 and later).
var rctlResources = []string{"cputime", "datasize", "stacksize", "coredumpsize", "memoryuse", "memorylocked",
	"maxproc", "openfiles", "vmemoryuse", "pseudoterminals", "swapuse", "nthr", "msgqqueued", "msgqsize",
	"nmsgq", "nsem", "nsemop", "nshm", "shmsize", "wallclock", "pcpu"}

func (f *fakeBSD) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, line)
	switch name {
	case "jls":
		return f.jls(line, args)
	case "jail":
		return nil, f.jail(line, args)
	case "jexec":
		return nil, f.jexec(line, args)
	case "rctl":
		return nil, f.rctl(line, args)
	case "chflags":
		return nil, f.chflags(line, args)
	case "mount_nullfs":
		return nil, f.mountNullfs(line, args)
	case "umount":
		if len(args) != 1 {
			return nil, fail(1, line, "usage: umount [-dfNnv] special ... | node ...")
		}
		if _, ok := f.mounts[args[0]]; !ok {
			return nil, fail(1, line, "umount: "+args[0]+": not a file system root directory")
		}
		delete(f.mounts, args[0])
		return nil, nil
	case "zfs":
		return f.zfs(line, args)
	case "pwd_mkdb":
		if len(args) != 4 || args[0] != "-d" || args[2] != "-p" {
			return nil, fail(1, line, "usage: pwd_mkdb [-BCilLNp] [-d directory] [-s cachesize] [-u username] file")
		}
		data, err := os.ReadFile(args[3])
		if err != nil {
			return nil, fail(1, line, "pwd_mkdb: "+args[3]+": No such file or directory")
		}
		for _, db := range []string{"pwd.db", "spwd.db"} {
			if err := os.WriteFile(filepath.Join(args[1], db), data, 0o644); err != nil {
				f.t.Error(err)
			}
		}
		return nil, nil
	}
	f.t.Errorf("the backend runs %q, which the fake does not know", line)
	return nil, fail(127, line, name+": not found")
}

func (f *fakeBSD) jls(line string, args []string) ([]byte, error) {
	var dying bool
	var name string
	var params []string
	if len(args) == 0 || args[0] != "--libxo=json" {
		f.t.Errorf("jls without --libxo=json: %q", line)
	}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "-d":
			dying = true
		case "-n":
		case "-j":
			i++
			name = args[i]
		default:
			if _, ok := jailParams[args[i]]; !ok && args[i] != "dying" {
				return nil, fail(1, line, "jls: unknown parameter: "+args[i])
			}
			params = append(params, args[i])
		}
	}
	j := f.jails[name]
	if j != nil && j.removed && j.dying == 0 {
		delete(f.jails, name)
		j = nil
	}
	if j == nil || (j.removed && !dying) {
		return nil, fail(1, line, fmt.Sprintf("jls: jail %q not found", name))
	}
	entry := map[string]any{}
	for _, p := range params {
		switch p {
		case "jid":
			entry[p] = strconv.Itoa(j.jid) // -n prints every value as a string
		case "name":
			entry[p] = name
		case "path":
			entry[p] = j.path
		case "dying":
			entry[p] = j.removed
		default:
			entry[p] = j.params[p]
		}
	}
	if j.removed && j.dying > 0 {
		j.dying--
	}
	return json.Marshal(map[string]any{"__version": "2", "jail-information": map[string]any{"jail": []any{entry}}})
}

func (f *fakeBSD) jail(line string, args []string) error {
	if len(args) == 0 {
		return fail(1, line, "usage: jail ...")
	}
	switch args[0] {
	case "-R":
		if len(args) != 2 {
			return fail(1, line, "usage: jail -R jail")
		}
		j := f.jails[args[1]]
		if j == nil || j.removed {
			return fail(1, line, fmt.Sprintf("jail: %q not found", args[1]))
		}
		// "All jailed processes are killed."
		for _, p := range j.procs {
			if p.holder {
				killTree(p.cmd.Process.Pid)
				continue
			}
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		j.removed, j.dying = true, f.dyingPolls
		return nil
	case "-c":
	default:
		f.t.Errorf("the backend runs %q: only -c and -R are expected", line)
		return fail(1, line, "usage")
	}
	params := map[string]string{}
	for _, a := range args[1:] {
		k, v, hasValue := strings.Cut(a, "=")
		isBool, known := jailParams[k]
		if !known {
			return fail(1, line, "jail: unknown parameter: "+k)
		}
		if isBool && hasValue && v != "true" && v != "false" {
			return fail(1, line, fmt.Sprintf("jail: %s: invalid boolean value %q", k, v))
		}
		if isBool && !hasValue {
			v = "true"
		}
		if !isBool && !hasValue {
			return fail(1, line, "jail: "+k+": missing value")
		}
		params[k] = v
	}
	name := params["name"]
	if j := f.jails[name]; j != nil && !j.removed {
		return fail(1, line, fmt.Sprintf("jail: %s: jail %d already exists", name, j.jid))
	}
	if params["persist"] != "true" {
		return fail(1, line, "jail: "+name+": no command specified")
	}
	if st, err := os.Stat(params["path"]); err != nil || !st.IsDir() {
		return fail(1, line, "jail: "+name+": path "+params["path"]+": No such file or directory")
	}
	if n, err := strconv.Atoi(params["enforce_statfs"]); params["enforce_statfs"] != "" && (err != nil || n < 0 || n > 2) {
		return fail(1, line, "jail: enforce_statfs: invalid value")
	}
	if params["mount.devfs"] == "true" {
		dev := filepath.Join(params["path"], "dev")
		if _, err := os.Stat(dev); err != nil {
			return fail(1, line, "jail: "+name+": mount.devfs: "+dev+": No such file or directory")
		}
		f.mounts[dev] = fakeMount{fstype: "devfs", src: "devfs"}
	}
	f.jails[name] = &fakeJail{jid: f.nextJID, path: params["path"], params: params}
	f.nextJID++
	return nil
}

// resolve maps path p inside jail j to this machine through its mounts.
func (f *fakeBSD) resolve(j *fakeJail, p string) string {
	full := filepath.Join(j.path, p)
	best := ""
	for dst := range f.mounts {
		if (full == dst || strings.HasPrefix(full, dst+"/")) && len(dst) > len(best) && f.mounts[dst].fstype == "nullfs" {
			best = dst
		}
	}
	if best == "" {
		return full
	}
	return filepath.Join(f.mounts[best].src, strings.TrimPrefix(full, best))
}

func (f *fakeBSD) running(line, name string) (*fakeJail, error) {
	j := f.jails[name]
	if j == nil || j.removed {
		return nil, fail(1, line, fmt.Sprintf("jexec: jail %q not found", name))
	}
	return j, nil
}

// jexecUser checks -U's user in the jail's own database, as jexec does.
func (f *fakeBSD) jexecUser(line string, j *fakeJail, user string) error {
	data, err := os.ReadFile(filepath.Join(j.path, "etc", "pwd.db"))
	if err != nil || !strings.Contains(string(data), "\n"+user+":") && !strings.HasPrefix(string(data), user+":") {
		return fail(1, line, "jexec: getpwnam: "+user+": no such user")
	}
	return nil
}

func (f *fakeBSD) jexec(line string, args []string) error {
	user := ""
	if len(args) > 1 && args[0] == "-U" {
		user, args = args[1], args[2:]
	}
	if len(args) < 2 {
		return fail(1, line, "usage: jexec [-l] [-d working-directory] [[-u username] | [-U username]] jail [command ...]")
	}
	j, err := f.running(line, args[0])
	if err != nil {
		return err
	}
	if user != "" {
		if err := f.jexecUser(line, j, user); err != nil {
			return err
		}
	}
	cmd := args[1:]
	switch {
	case slices.Equal(cmd, []string{"/sbin/ifconfig", "lo0", "inet", "127.0.0.1/8", "up"}):
		j.loopback = true
		return nil
	case len(cmd) == 6 && cmd[0] == "/bin/test" && cmd[1] == "-d" && cmd[3] == "-a" && cmd[4] == "-x":
		if st, err := os.Stat(f.resolve(j, cmd[2])); err != nil || !st.IsDir() {
			return fail(1, line, "")
		}
		return nil
	}
	f.t.Errorf("jexec of %q, which the fake does not run", line)
	return fail(127, line, "jexec: execvp: "+cmd[0]+": No such file or directory")
}

func (f *fakeBSD) rctl(line string, args []string) error {
	if len(args) != 2 {
		return fail(1, line, "usage: rctl ...")
	}
	switch args[0] {
	case "-a":
		rule := args[1]
		fields := strings.Split(rule, ":")
		if len(fields) != 4 {
			return fail(1, line, fmt.Sprintf("rctl: failed to add rule '%s': Invalid argument", rule))
		}
		action, amount, ok := strings.Cut(fields[3], "=")
		_, err := strconv.ParseInt(amount, 10, 64)
		if !ok || err != nil || !slices.Contains([]string{"process", "user", "loginclass", "jail"}, fields[0]) || fields[1] == "" ||
			!slices.Contains(rctlResources, fields[2]) ||
			!(slices.Contains([]string{"deny", "log", "devctl"}, action) || strings.HasPrefix(action, "sig")) ||
			action == "deny" && (fields[2] == "cputime" || fields[2] == "wallclock") {
			return fail(1, line, fmt.Sprintf("rctl: failed to add rule '%s': Invalid argument", rule))
		}
		if f.racctOff {
			return fail(1, line, "rctl: failed to add rule '"+rule+"': RACCT/RCTL present, but disabled; enable using kern.racct.enable=1 tunable")
		}
		f.rules = append(f.rules, rule)
		return nil
	case "-r":
		n := len(f.rules)
		f.rules = slices.DeleteFunc(f.rules, func(r string) bool { return strings.HasPrefix(r, args[1]) })
		if len(f.rules) == n {
			return fail(1, line, "rctl: failed to remove rules for '"+args[1]+"': No such process")
		}
		return nil
	}
	f.t.Errorf("rctl %q is not expected", line)
	return fail(1, line, "usage")
}

// fakeFlags are the file flags chflags(1) names that the fake keeps:
// sappnd (SF_APPEND) and schg (SF_IMMUTABLE), the system flags the backend
// sets.
var fakeFlags = []string{"sappnd", "schg"}

// chflags: [-R] FLAGS FILE, FLAGS a comma-separated list of keywords,
// each set, or cleared with "no" before it, the others left as they are
// (strtofflags(3) as chflags.c applies it).
func (f *fakeBSD) chflags(line string, args []string) error {
	recursive := false
	if len(args) > 0 && args[0] == "-R" {
		recursive, args = true, args[1:]
	}
	if len(args) != 2 {
		f.t.Errorf("chflags %q is not expected", line)
		return fail(1, line, "usage: chflags [-fhvx] [-R [-H | -L | -P]] flags file ...")
	}
	set, unset := map[string]bool{}, map[string]bool{}
	for _, kw := range strings.Split(args[0], ",") {
		name, off := strings.CutPrefix(kw, "no")
		if !slices.Contains(fakeFlags, name) {
			f.t.Errorf("chflags %q: the fake knows flags %v only", line, fakeFlags)
			return fail(1, line, "chflags: invalid flag: "+kw)
		}
		if off {
			unset[name] = true
		} else {
			set[name] = true
		}
	}
	apply := func(p string) {
		fl := f.flags[p]
		if fl == nil {
			fl = map[string]bool{}
		}
		for k := range set {
			fl[k] = true
		}
		for k := range unset {
			delete(fl, k)
		}
		if len(fl) == 0 {
			delete(f.flags, p)
		} else {
			f.flags[p] = fl
		}
	}
	if _, err := os.Lstat(args[1]); err != nil {
		return fail(1, line, "chflags: "+args[1]+": No such file or directory")
	}
	if !recursive {
		apply(args[1])
		return nil
	}
	return filepath.Walk(args[1], func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			apply(p)
		}
		return err
	})
}

// flagged says whether p carries flag.
func (f *fakeBSD) flagged(p, flag string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flags[p][flag]
}

// rename is FreeBSD's rename(2) as ufs_rename and zfs_rename treat flags:
// EPERM when the file moved or the file replaced is sappnd or schg, or
// the directory of either is sappnd; else the file moves with its flags
// (they are its inode's), and those of the file replaced are gone.
func (f *fakeBSD) rename(oldpath, newpath string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "rename(2) "+oldpath+" "+newpath)
	for _, p := range []string{oldpath, newpath} {
		if len(f.flags[p]) > 0 || f.flags[filepath.Dir(p)]["sappnd"] {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EPERM}
		}
	}
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	delete(f.flags, newpath)
	if fl, ok := f.flags[oldpath]; ok {
		f.flags[newpath] = fl
		delete(f.flags, oldpath)
	}
	return nil
}

func (f *fakeBSD) mountNullfs(line string, args []string) error {
	ro := false
	if len(args) == 4 && args[0] == "-o" && args[1] == "ro" {
		ro, args = true, args[2:]
	}
	if len(args) != 2 {
		return fail(1, line, "usage: mount_nullfs [-o options] target mount-point")
	}
	for _, p := range args {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			return fail(1, line, "mount_nullfs: "+p+": No such file or directory")
		}
	}
	if _, ok := f.mounts[args[1]]; ok {
		f.t.Errorf("%q stacks a second mount on %s", line, args[1])
	}
	f.mounts[args[1]] = fakeMount{fstype: "nullfs", src: args[0], ro: ro}
	return nil
}

// Start runs a jexec'd shell on this machine, in the directory its cd
// resolves to through the jail's mounts, with the environment env -i is
// given; a login shell reads the jail's generated /etc/profile. Under the
// guest's reaper (jexec NAME /.playground/bin/playground-sandbox reap
// ...), the binary must be where the jail's mounts put it, and the
// reaper's protocol is played: the shell's status passes through, and
// SIGTERM kills the shell's process group and exits ReapProvedExit (or
// ReapLostExit). That stands in for the PROC_REAP_KILL loop of
// hostagent/guest/reaper_freebsd.go, which only FreeBSD runs: this fake
// tests the agent's side of the protocol, not the proof.
func (f *fakeBSD) Start(c Command) (Proc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := strings.Join(append([]string{c.Name}, c.Args...), " ")
	f.calls = append(f.calls, line)
	a := c.Args
	if c.Name != "jexec" || len(a) < 2 {
		f.t.Errorf("Start of %q, which the fake does not run", line)
		return nil, fail(127, line, "")
	}
	reaper := a[0] != "-U"
	name := a[0]
	if !reaper {
		name = a[2]
	}
	j, err := f.running(line, name)
	if err != nil {
		return nil, err
	}
	if reaper && len(a) >= 3 && a[1] == guestapi.Binary && a[2] == guestapi.HoldMode {
		return f.startHolder(line, j, a[3:], c)
	}
	var rest []string
	if reaper {
		want := []string{guestapi.Binary, guestapi.ReapMode, "-uid", "1000", "-gid", "1000", "--", "/usr/bin/env", "-i"}
		if len(a) < 1+len(want) || !slices.Equal(a[1:1+len(want)], want) {
			f.t.Errorf("unexpected reaper command line %q", line)
			return nil, fail(127, line, "")
		}
		if _, err := os.Stat(f.resolve(j, guestapi.Binary)); err != nil {
			return nil, fail(1, line, "jexec: execvp: "+guestapi.Binary+": No such file or directory")
		}
		rest = a[1+len(want):]
	} else {
		if len(a) < 6 || a[3] != "/usr/bin/env" || a[4] != "-i" {
			f.t.Errorf("unexpected jexec command line %q", line)
			return nil, fail(127, line, "")
		}
		if err := f.jexecUser(line, j, a[1]); err != nil {
			return nil, err
		}
		rest = a[5:]
	}
	var env []string
	for len(rest) > 0 && strings.Contains(rest[0], "=") {
		env, rest = append(env, rest[0]), rest[1:]
	}
	// rest: /bin/sh -c WRAPPER sh DIR /bin/sh [-l] -c COMMAND
	if len(rest) < 8 || rest[0] != "/bin/sh" || rest[1] != "-c" || rest[3] != "sh" || rest[5] != "/bin/sh" {
		f.t.Errorf("unexpected shell in %q", line)
		return nil, fail(127, line, "")
	}
	dir, command := f.resolve(j, rest[4]), rest[len(rest)-1]
	if rest[6] == "-l" {
		command = ". " + backend.ShellQuote(filepath.Join(j.path, "etc", "profile")) + "\n" + command
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &fakeProc{cmd: cmd, reaper: reaper, loses: f.reaperLoses}
	j.procs = append(j.procs, p)
	return p, nil
}

// startHolder runs the guest binary's job holder (jexec NAME
// /.playground/bin/playground-sandbox hold ARGS): the real one, built for
// this machine and found where the jail's mounts put it, told the
// directories its run directory and home resolve to through the jail's
// mounts (what jail_attach and chroot do on FreeBSD), with the backend's
// socket as its standard input. It is hostagent/guest/hold.go's code but
// for process_freebsd.go (procctl's reaper and kqueue), whose Linux
// counterparts run here.
func (f *fakeBSD) startHolder(line string, j *fakeJail, args []string, c Command) (Proc, error) {
	bin := f.resolve(j, guestapi.Binary)
	if _, err := os.Stat(bin); err != nil {
		return nil, fail(1, line, "jexec: execvp: "+guestapi.Binary+": No such file or directory")
	}
	home := f.resolve(j, guestapi.TenantHome)
	// The jail's mounts make the home reachable to the sandbox user; here
	// the directories above it are the test's.
	for d := home; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	argv := append([]string{guestapi.HoldMode, "-run", f.resolve(j, guestapi.RunDir), "-home", home}, args...)
	cmd := exec.Command(bin, argv...)
	cmd.Env = guestapi.OwnEnv()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: c.Detach, Setpgid: !c.Detach}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &fakeProc{cmd: cmd, holder: true}
	j.procs = append(j.procs, p)
	return p, nil
}

// killTree kills pid's descendants (a holder's: a subreaper, every
// orphan of its job is its child) until none is left, then pid: what
// jail -R does to a jail's processes.
func killTree(pid int) {
	killDescendants(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// killDescendants kills pid's descendants until none is left.
func killDescendants(pid int) {
	for range 100 {
		kids := descendantsOf(pid)
		if len(kids) == 0 {
			break
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// descendantsOf lists the live descendants of pid, from /proc.
func descendantsOf(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

type fakeProc struct {
	cmd    *exec.Cmd
	reaper bool
	loses  bool
	holder bool

	mu         sync.Mutex
	terminated bool
}

func (p *fakeProc) Wait() (int, string, error) {
	err := p.cmd.Wait()
	p.mu.Lock()
	terminated := p.terminated
	p.mu.Unlock()
	if p.reaper && terminated {
		if p.loses {
			return guestapi.ReapLostExit, "", nil
		}
		return guestapi.ReapProvedExit, "", nil
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, unix.SignalName(ws.Signal()), nil
	}
	if _, ok := err.(*exec.ExitError); ok {
		err = nil
	}
	return p.cmd.ProcessState.ExitCode(), "", err
}

func (p *fakeProc) Terminate() error {
	if !p.reaper {
		return p.cmd.Process.Signal(syscall.SIGTERM)
	}
	p.mu.Lock()
	p.terminated = true
	p.mu.Unlock()
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (p *fakeProc) Kill() error { return p.cmd.Process.Kill() }

// zfs: create (-p, -o property=value), list -H -o name, destroy -r, as
// zfs(8) documents them; a dataset's mountpoint is made a directory, as
// zfs mounts it.
func (f *fakeBSD) zfs(line string, args []string) ([]byte, error) {
	notExist := func(ds string) error {
		return fail(1, line, "cannot open '"+ds+"': dataset does not exist")
	}
	switch {
	case len(args) == 5 && args[0] == "list" && args[1] == "-H" && args[2] == "-o" && args[3] == "name":
		if _, ok := f.datasets[args[4]]; !ok {
			return nil, notExist(args[4])
		}
		return []byte(args[4] + "\n"), nil
	case len(args) == 3 && args[0] == "destroy" && args[1] == "-r":
		if _, ok := f.datasets[args[2]]; !ok {
			return nil, notExist(args[2])
		}
		for ds, props := range f.datasets {
			if ds == args[2] || strings.HasPrefix(ds, args[2]+"/") {
				delete(f.datasets, ds)
				if mp := props["mountpoint"]; mp != "" {
					delete(f.mounts, mp)
				}
			}
		}
		return nil, nil
	case len(args) >= 2 && args[0] == "create":
		props := map[string]string{}
		parents := false
		rest := args[1:]
		for len(rest) > 1 {
			switch rest[0] {
			case "-p":
				parents, rest = true, rest[1:]
				continue
			case "-o":
				k, v, ok := strings.Cut(rest[1], "=")
				n, err := strconv.ParseInt(v, 10, 64)
				switch {
				case !ok:
					return nil, fail(1, line, "missing '=' for property argument")
				case k == "mountpoint" && !filepath.IsAbs(v):
					return nil, fail(1, line, "cannot create: 'mountpoint' must be an absolute path, 'none', or 'legacy'")
				case (k == "refquota" || k == "quota" || strings.HasPrefix(k, "userobjquota@")) && (err != nil || n <= 0):
					return nil, fail(1, line, "bad numeric value '"+v+"'")
				case k != "mountpoint" && k != "refquota" && k != "quota" && !strings.HasPrefix(k, "userobjquota@"):
					f.t.Errorf("zfs property %q is not expected", k)
				}
				props[k] = v
				rest = rest[2:]
				continue
			}
			break
		}
		if len(rest) != 1 {
			return nil, fail(2, line, "usage: zfs create [-Pnpuv] [-o property=value] ... <filesystem>")
		}
		ds := rest[0]
		if _, ok := f.datasets[ds]; ok {
			return nil, fail(1, line, "cannot create '"+ds+"': dataset already exists")
		}
		if parent := filepath.Dir(ds); !parents {
			if _, ok := f.datasets[parent]; !ok {
				return nil, fail(1, line, "cannot create '"+ds+"': parent does not exist")
			}
		}
		if mp := props["mountpoint"]; mp != "" {
			if err := os.MkdirAll(mp, 0o755); err != nil {
				f.t.Error(err)
			}
			f.mounts[mp] = fakeMount{fstype: "zfs", src: ds}
		}
		f.datasets[ds] = props
		return nil, nil
	}
	f.t.Errorf("zfs %q is not expected", line)
	return nil, fail(2, line, "usage")
}
