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
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

var (
	testKey1 = strings.Repeat("0123456789abcdef", 4)
	testKey2 = strings.Repeat("fedcba9876543210", 4)
)

// keyCmd is the limactl shell command that installs sandbox id's key.
func keyCmd(id string) string {
	return "sudo sh -c " + keyScript + " sh /mnt/lima-pg-" + id + "-pile/pile"
}

// expectKeyPushed: call is keyScript's limactl shell for id, the key on
// its standard input and on no command line.
func expectKeyPushed(t *testing.T, call fakeCall, id, key string) {
	t.Helper()
	if got, want := strings.Join(call.Args, " "), "--tty=false shell --workdir / pg-"+id+" "+keyCmd(id); got != want {
		t.Fatalf("the key was installed by\n  %s\nwant\n  %s", got, want)
	}
	if call.Stdin != key {
		t.Fatal("keyScript did not get the key, and the key only, on its standard input")
	}
}

// TestSigningKey: a running VM gets the key at once, over limactl shell
// as root, on stdin (live); a stopped one has it staged in the agent's
// state, root's 0600, and installed by the next Start (not live); a key
// installed live supersedes a staged one; Destroy drops a staged key with
// the pile and keeps it with a kept pile. The limactl calls are the
// fake's record (fake_test.go); what keyScript does in the guest is
// TestKeyScript's and TestGuestSide's.
func TestSigningKey(t *testing.T) {
	f := newFixture(t)
	spec := f.started(t, "key")
	inst := "pg-key"
	f.recorded(t)

	live, err := f.be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx(t), spec.ID, []byte(testKey1))
	if err != nil || !live {
		t.Fatalf("a key for a running VM: live %v, %v; want live", live, err)
	}
	calls := f.recorded(t)
	expectCalls(t, "InstallSigningKey (running)", calls, "--tty=false list --json "+inst, "--tty=false shell --workdir / "+inst+" "+keyCmd(spec.ID))
	expectKeyPushed(t, calls[1], spec.ID, testKey1)

	// Stopped: staged, not live, no limactl shell (it would fail).
	if err := f.be.Stop(ctx(t), spec.ID); err != nil {
		t.Fatal(err)
	}
	f.recorded(t)
	live, err = f.be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx(t), spec.ID, []byte(testKey2))
	if err != nil || live {
		t.Fatalf("a key for a stopped VM: live %v, %v; want staged, not live", live, err)
	}
	expectCalls(t, "InstallSigningKey (stopped)", f.recorded(t), "--tty=false list --json "+inst)
	staged := f.be.stagedKeyPath(spec.ID)
	checkStaged := func(t *testing.T, want string) {
		t.Helper()
		data, err := os.ReadFile(staged)
		if err != nil || string(data) != want {
			t.Fatalf("the staged key: %v; want the key last installed", err)
		}
		fi, _ := os.Stat(staged)
		di, _ := os.Stat(filepath.Dir(staged))
		if fi.Mode() != 0o600 || di.Mode().Perm() != 0o700 {
			t.Fatalf("the staged key is %v in a directory %v; want 0600 in 0700", fi.Mode(), di.Mode())
		}
	}
	checkStaged(t, testKey2)

	// The next start installs it before it returns, and forgets it.
	if err := f.be.Start(ctx(t), spec.ID); err != nil {
		t.Fatal(err)
	}
	calls = f.recorded(t)
	expectCalls(t, "Start with a staged key", calls,
		"--tty=false list --json "+inst,
		"--tty=false start "+inst,
		"--tty=false shell --workdir / "+inst+" "+profileCmd,
		"--tty=false shell --workdir / "+inst+" "+keyCmd(spec.ID))
	expectKeyPushed(t, calls[3], spec.ID, testKey2)
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the staged key outlived its install: %v", err)
	}
	// stage stops the VM and installs key, which is staged.
	stage := func(key string) {
		t.Helper()
		if err := f.be.Stop(ctx(t), spec.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx(t), spec.ID, []byte(key)); err != nil {
			t.Fatal(err)
		}
	}

	// Staged, then the VM started behind the backend's back: a key
	// installed live drops the staged one, which is older.
	stage(testKey1)
	if _, err := f.be.lctl.run(ctx(t), nil, "start", inst); err != nil {
		t.Fatal(err)
	}
	f.recorded(t)
	if live, err := f.be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx(t), spec.ID, []byte(testKey2)); err != nil || !live {
		t.Fatalf("a key for a running VM with one staged: live %v, %v", live, err)
	}
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a staged key outlived a newer one installed live: %v", err)
	}
	if err := f.be.Reattach(ctx(t), spec); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.recorded(t) {
		if c.Stdin == testKey1 {
			t.Fatal("the older, staged key was installed after the newer one")
		}
	}

	// A kept pile keeps its staged key; a deleted one loses it.
	stage(testKey1)
	if err := f.be.Destroy(ctx(t), spec.ID, true); err != nil {
		t.Fatal(err)
	}
	checkStaged(t, testKey1)
	if err := f.be.Destroy(ctx(t), spec.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the staged key outlived its pile: %v", err)
	}

	// No sandbox: ErrNotFound, nothing staged.
	if _, err := f.be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx(t), spec.ID, []byte(testKey1)); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("a key for an unknown sandbox: %v; want ErrNotFound", err)
	}
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key for an unknown sandbox was staged: %v", err)
	}
	for _, c := range f.recorded(t) {
		for _, a := range c.Args {
			if strings.Contains(a, testKey1) || strings.Contains(a, testKey2) {
				t.Fatalf("a key on limactl's command line: %v", c.Args)
			}
		}
	}
}

// TestSigningKeyRefusals: a key that is not exactly 64 lowercase hex
// digits is refused, unquoted, before limactl is asked anything; and the
// key's name is no pile file.
func TestSigningKeyRefusals(t *testing.T) {
	f := newFixture(t)
	spec := backend.Spec{ID: "bad"}
	if err := f.be.Provision(ctx(t), spec); err != nil {
		t.Fatal(err)
	}
	f.recorded(t)
	backendtest.CheckMalformedKeysRefused(t, f.be.Capabilities().SigningKeyHolder, spec.ID, testKey1)
	expectCalls(t, "refused keys", f.recorded(t))
	if _, err := f.be.Capabilities().SigningKeyHolder.InstallSigningKey(ctx(t), "a..b", []byte(testKey1)); err == nil {
		t.Error("a key for an invalid ID was taken")
	}
	o := f.opts
	o.PileFiles = []string{"self.pile", guestapi.SigningKeyFile}
	if err := o.defaults(); err == nil {
		t.Error("the signing key's name was taken for a pile file, which the provision script would make appendable")
	}
}

// TestKeyScript runs keyScript with the host's sh over a directory
// standing in for the pile, with stand-ins for chattr(1) (e2fsprogs) and
// chown(1) that record their command lines instead of needing root and
// ext4, and an mv(1) that records and then runs the real one: the key
// reaches self.key, 0400, given to the tenant just before its rename and
// made immutable after it; a second key clears the first one's flags
// first; the directory's +a is lifted for the install and set again,
// also when it fails. TestGuestSide runs it for real, as root on ext4.
func TestKeyScript(t *testing.T) {
	realMv, err := exec.LookPath("mv")
	if err != nil {
		t.Skip("no mv")
	}
	dir := t.TempDir()
	bin, pile, log := filepath.Join(dir, "bin"), filepath.Join(dir, "pile"), filepath.Join(dir, "calls")
	for _, d := range []string{bin, pile} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"chattr": `echo "chattr $*" >> "$CALLS"`,
		"chown":  `echo "chown $*" >> "$CALLS"`,
		"mv":     `echo "mv $*" >> "$CALLS"; exec ` + realMv + ` "$@"`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key, tmp := pile+"/"+guestapi.SigningKeyFile, pile+"/."+guestapi.SigningKeyFile+".new"
	install := func(t *testing.T, stdin string) (calls []string, err error) {
		t.Helper()
		_ = os.Remove(log)
		cmd := exec.Command("sh", "-c", keyScript, "sh", pile)
		cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "CALLS=" + log}
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), testKey1) || strings.Contains(string(out), testKey2) {
			t.Errorf("keyScript printed the key: %s", out)
		}
		data, _ := os.ReadFile(log)
		if err != nil {
			err = errors.New(err.Error() + ": " + string(out))
		}
		return strings.Split(strings.TrimSpace(string(data)), "\n"), err
	}
	checkKey := func(t *testing.T, want string) {
		t.Helper()
		data, err := os.ReadFile(key)
		if err != nil || string(data) != want {
			t.Fatalf("self.key: %v; want the key", err)
		}
		if fi, _ := os.Lstat(key); fi.Mode() != 0o400 {
			t.Fatalf("self.key is %v, want 0400", fi.Mode())
		}
		if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the temporary file is left: %v", err)
		}
	}
	owner := "chown 1000:1000 " + tmp
	renamed := "mv -f -T -- " + tmp + " " + key

	calls, err := install(t, testKey1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chattr -a " + pile, owner, renamed, "chattr +i " + key, "chattr +a " + pile}; strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the first key ran\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	checkKey(t, testKey1)

	calls, err = install(t, testKey2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chattr -a " + pile, "chattr -i -a " + key, owner, renamed, "chattr +i " + key, "chattr +a " + pile}; strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the second key ran\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	checkKey(t, testKey2)

	// A key cut short in transit: refused, the old one untouched, the
	// directory append-only again.
	calls, err = install(t, testKey1[:40])
	if err == nil || !strings.Contains(err.Error(), "did not arrive whole") {
		t.Fatalf("a partial key: %v", err)
	}
	if want := []string{"chattr -a " + pile, "chattr +a " + pile}; strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("a partial key ran\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	checkKey(t, testKey2)
}
