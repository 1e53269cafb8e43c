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
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/internal/testbin"
)

// guestDriver stands in for Lima and systemd around the generated
// provision script, in a private mount namespace over a Debian root
// ($ROOT): Lima's share of the guest binary (read-only) and its mount of
// the pile's disk (an ext4 image on a loop device), Lima's own user
// (cloud-init's, uid 1500), a systemctl that only records; then the
// script: refusing while uid 1000 is another account, then twice (every
// boot runs it); then the unit it wrote: its
// ExecStartPre, its ExecStart under NoNewPrivileges in a network
// namespace whose loopback is up (PrivateNetwork), its ExecStartPost,
// each read from the unit file as systemd would ($$ for $). It waits
// with init.
const guestDriver = `set -eu
# A VM's root is a mount point (unshare --propagation needs one).
mount --bind "$ROOT" "$ROOT"
mount -t ext4 -o loop "$IMG" "$ROOT/mnt/lima-$DISK"
mount --bind "$SHARE" "$ROOT/.playground-host"
mount -o remount,bind,ro "$ROOT/.playground-host"
mkdir -p "$ROOT/mnt/lima-cidata"
mount -t tmpfs -o size=1m cidata "$ROOT/mnt/lima-cidata"
mount -t proc proc "$ROOT/proc"
mount --bind /dev "$ROOT/dev"
chroot "$ROOT" useradd --create-home --user-group --uid 1500 lima
printf '#!/bin/sh\necho "$*" >> /var/log/systemctl.calls\n' > "$ROOT/usr/local/sbin/systemctl"
chmod 0755 "$ROOT/usr/local/sbin/systemctl"
# uid 1000 taken by another account: the script refuses, saying so.
chroot "$ROOT" useradd --uid 1000 --user-group impostor
if chroot "$ROOT" /bin/bash /provision.sh 2> "$ROOT/impostor.err"; then
  echo "the script made the tenant over another account"; exit 1
fi
grep -q "uid 1000 is impostor, not sandbox" "$ROOT/impostor.err" || { cat "$ROOT/impostor.err"; exit 1; }
chroot "$ROOT" userdel impostor
chroot "$ROOT" /bin/bash /provision.sh
chroot "$ROOT" /bin/bash /provision.sh
unit="$ROOT/etc/systemd/system/playground-sandbox.service"
field() { sed -n "s/^$1=//p" "$unit" | sed 's/\$\$/$/g'; }
eval "chroot \"\$ROOT\" $(field ExecStartPre)"
start=$(field ExecStart)
unshare --net sh -c 'ip link set lo up && exec setpriv --no-new-privs chroot "$0" '"$start" "$ROOT" > "$ROOT/init.log" 2>&1 &
init=$!
eval "chroot \"\$ROOT\" $(field ExecStartPost)"
echo ready
wait $init
`

// TestGuestSide runs the guest's half of the design for real, without
// Lima and without systemd: the generated provision script in a Debian
// root, and init started as the unit it writes starts it. It needs root
// (mounts, chroot, loop devices) and a Debian root filesystem as a
// tar.gz in $PLAYGROUND_LIMA_GUEST_ROOT, else hack/image.sh's cached base
// layer (~/.cache/playground/image/base-*.tar.gz). What it does
// not show: Lima's cloud-init, systemd's handling of the unit, the ssh
// forward of the socket, a real VM's kernel.
func TestGuestSide(t *testing.T) {
	tarball := os.Getenv("PLAYGROUND_LIMA_GUEST_ROOT")
	if tarball == "" {
		// hack/image.sh's cached base layer, if this machine has one.
		if cache, err := os.UserCacheDir(); err == nil {
			found, _ := filepath.Glob(filepath.Join(cache, "playground", "image", "base-*.tar.gz"))
			if len(found) > 0 {
				tarball = found[len(found)-1]
			}
		}
	}
	switch {
	case os.Geteuid() != 0:
		t.Skip("needs root (mounts, chroot and loop devices)")
	case tarball == "":
		t.Skip("no Debian root: set PLAYGROUND_LIMA_GUEST_ROOT to one as a tar.gz, or build hack/image.sh's base layer (cached in ~/.cache/playground/image)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no loop devices here (/dev/loop-control): the pile's disk is an ext4 image on one")
	}
	for _, tool := range []string{"tar", "unshare", "setpriv", "chroot", "ip", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	share := filepath.Join(dir, "share")
	for _, d := range []string{root, share} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("tar", "-xzf", tarball, "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v: %s", tarball, err, out)
	}
	guestBin, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFile(guestBin, filepath.Join(share, guestBinaryName), 0o755); err != nil {
		t.Fatal(err)
	}
	// The conformance suite's probe serves HTTP on the sandbox's loopback.
	probe, err := testbin.Build("github.com/playground-dev/playground/hostagent/conformance/probe", "-ldflags=-s -w", "-trimpath")
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFile(probe, filepath.Join(root, "usr/local/bin/probe"), 0o755); err != nil {
		t.Fatal(err)
	}

	// The script, as limactl create would receive it.
	o := Options{StateDir: dir, GuestAdmin: "lima", GuestAdminUID: 1500, ImageTemplate: "template:_images/ubuntu-lts",
		PileFiles: []string{"self.pile"}, SpareShepherds: 1, DefaultCPUs: 1, DefaultMemoryBytes: 2 << 30,
		GuestOverheadBytes: 512 << 20, OSDiskBytes: 8 << 30, DefaultLayerBytes: 10 << 30, DefaultPileBytes: 1 << 30}
	const id, disk = "guest", "pg-guest-pile"
	config, err := o.generate(backend.Spec{ID: id, Resources: backend.Resources{PIDs: 64}}, disk)
	if err != nil {
		t.Fatal(err)
	}
	var y limaYAML
	if err := yaml.Unmarshal(config, &y); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "provision.sh"), []byte(y.Provision[0].Script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"mnt/lima-" + disk, ".playground-host", "usr/local/sbin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "pile.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-L", "lima-"+disk, img, "32M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}

	driver := exec.Command("unshare", "--mount", "--propagation", "private", "bash", "-c", guestDriver)
	driver.Env = append(os.Environ(), "ROOT="+root, "SHARE="+share, "IMG="+img, "DISK="+disk)
	driver.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logPath := filepath.Join(dir, "driver.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	driver.Stdout, driver.Stderr = logf, logf
	if err := driver.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	var waitErr error
	// Owned by the test: ends with the driver, which the cleanup kills.
	go func() { waitErr = driver.Wait(); close(ended) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-driver.Process.Pid, syscall.SIGKILL)
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Errorf("the driver (pid %d) outlived SIGKILL", driver.Process.Pid)
		}
	})
	logs := func() string {
		d, _ := os.ReadFile(logPath)
		i, _ := os.ReadFile(filepath.Join(root, "init.log"))
		return "driver:\n" + string(d) + "\ninit:\n" + string(i)
	}
	out := func() string { d, _ := os.ReadFile(logPath); return string(d) }

	sock := filepath.Join(root, ".playground", "run", "agent.sock")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out(), "ready") {
		select {
		case <-ended:
			t.Fatalf("the driver ended: %v\n%s", waitErr, logs())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("init did not listen in 60s:\n%s", logs())
		}
	}

	// The socket handed to Lima's user's group, never the tenant's.
	for p, want := range map[string]os.FileMode{filepath.Dir(sock): 0o710, sock: 0o660} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != want || st.Uid != 0 || st.Gid != 1500 {
			t.Errorf("%s: mode %v, owner %d:%d; want %v, root and Lima's group (1500)", p, fi.Mode().Perm(), st.Uid, st.Gid, want)
		}
	}
	// The unit as this machine's systemd reads it: every directive known
	// (an unknown one is only a warning, which fails here).
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		unit := filepath.Join(root, "etc/systemd/system", unitName)
		if out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v: %s", unitName, err, out)
		}
	} else {
		t.Log("systemd-analyze is not installed: the unit's directives are not checked")
	}
	calls, _ := os.ReadFile(filepath.Join(root, "var/log/systemctl.calls"))
	if want := strings.Repeat("daemon-reload\nrestart playground-sandbox.service\n", 2); string(calls) != want {
		t.Errorf("the script ran systemctl %q, want %q", calls, want)
	}

	// The login profile, as Start pushes it (limactl shell … sudo sh -c).
	push := exec.Command("chroot", root, "sh", "-c", profileScript)
	push.Stdin = strings.NewReader(backend.LoginProfile(backend.Spec{Persona: "tester", LoginEnv: []backend.EnvVar{{Name: "GREETING", Value: "it's me"}}}))
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("pushing the login profile: %v: %s", err, out)
	}

	sh := func(cmd string) (string, int) {
		t.Helper()
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		frames, err := guestexec.Encode(backend.ExecRequest{Command: cmd, Shell: backend.ShellLogin})
		if err != nil {
			t.Fatal(err)
		}
		var sink bufSink
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := guestexec.Start(ctx, conn, frames, &sink, backend.GuestHooks{})
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		st, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		return sink.out.String() + sink.err.String(), st.ExitCode
	}
	for _, tc := range []struct{ cmd, want string }{
		{"id -u; id -g; id -G", "1000\n1000\n1000\n"},
		{"tr '\\0' ' ' < /proc/1/cmdline", "/.playground/bin/playground-sandbox init -spares 1 "},
		{"grep NoNewPrivs /proc/self/status", "NoNewPrivs:\t1\n"},
		{"ls -A /.playground-host /mnt/lima-cidata; grep -c -e lima-pg -e playground-host -e lima-cidata /proc/mounts || true", "/.playground-host:\n\n/mnt/lima-cidata:\n0\n"},
		{"tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", "lo\n"},
		{"stat -c %a /tmp /home/sandbox /workspace /pile /pile/self.pile", "1777\n755\n755\n755\n644\n"},
		{"lsattr -d /pile /pile/self.pile | cut -c6", "a\na\n"},
		{"echo one >> /pile/self.pile && cat /pile/self.pile", "one\n"},
		{`echo "$PERSONA: $GREETING"`, "tester: it's me\n"},
	} {
		if got, code := sh(tc.cmd); got != tc.want || code != 0 {
			t.Errorf("%q: %q (exit %d), want %q", tc.cmd, got, code, tc.want)
		}
	}
	for _, cmd := range []string{
		": > /pile/self.pile",
		"printf X | dd of=/pile/self.pile conv=notrunc status=none",
		"rm -f /pile/self.pile",
		"chattr -a /pile/self.pile",
		"chmod 600 /pile/self.pile",
		"touch /pile/new",
		"ls /.playground/run",
		"cat /etc/shadow",
		"umount /pile",
	} {
		if got, code := sh(cmd); code == 0 {
			t.Errorf("%q succeeded in the guest (%q)", cmd, got)
		}
	}
	if got, _ := sh("cat /pile/self.pile"); got != "one\n" {
		t.Errorf("the pile after the refusals: %q", got)
	}

	// The signing key, as InstallSigningKey installs it (limactl shell …
	// sudo sh -c keyScript, the key on stdin): as root in the VM's own
	// mount namespace (the driver's, where the pile's disk is mounted),
	// seen at once through init's bind mount of the pile.
	inVM := func(stdin string, argv ...string) {
		t.Helper()
		cmd := exec.Command("nsenter", append([]string{"--mount", "--target", strconv.Itoa(driver.Process.Pid), "chroot", root}, argv...)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s in the VM: %v: %s", argv[0], err, out)
		}
	}
	key1, key2 := strings.Repeat("0123456789abcdef", 4), strings.Repeat("fedcba9876543210", 4)
	const keyState = "cat /pile/self.key; echo; stat -c '%a %u:%g' /pile/self.key; lsattr /pile/self.key | cut -c5; lsattr -d /pile | cut -c6; ls -A /pile"
	inVM(key1, "sh", "-c", keyScript, "sh", "/mnt/lima-"+disk+"/pile")
	if got, code := sh(keyState); got != key1+"\n400 1000:1000\ni\na\nself.key\nself.pile\n" || code != 0 {
		t.Errorf("the installed key as the tenant sees it: %q (exit %d)", got, code)
	}
	for _, cmd := range []string{
		"echo x > /pile/self.key",
		"echo x >> /pile/self.key",
		"truncate -s 0 /pile/self.key",
		"chmod 600 /pile/self.key",
		"rm -f /pile/self.key",
		"mv /pile/self.key /pile/moved",
		"ln /pile/self.key /tmp/link",
		"chattr -i /pile/self.key",
	} {
		if got, code := sh(cmd); code == 0 {
			t.Errorf("%q succeeded on the signing key (%q)", cmd, got)
		}
	}
	inVM(key2, "sh", "-c", keyScript, "sh", "/mnt/lima-"+disk+"/pile")
	if got, _ := sh(keyState); got != key2+"\n400 1000:1000\ni\na\nself.key\nself.pile\n" {
		t.Errorf("the replaced key: %q", got)
	}
	// A boot runs the provision script again: it seals the pile's files
	// and leaves the key as it is, or seals it again should an install
	// have been cut short between its rename and its flag.
	for _, cutShort := range []bool{false, true} {
		if cutShort {
			inVM("", "chattr", "-i", "/mnt/lima-"+disk+"/pile/self.key")
		}
		inVM("", "/bin/bash", "/provision.sh")
		if got, _ := sh(keyState + "; lsattr /pile/self.pile | cut -c6"); got != key2+"\n400 1000:1000\ni\na\nself.key\nself.pile\na\n" {
			t.Errorf("the key after the provision script ran again (install cut short: %v): %q", cutShort, got)
		}
	}

	// The relay: a shepherd dials the sandbox's loopback, which the host's
	// is not.
	if got, code := sh("nohup probe serve 18080 >/dev/null 2>&1 & sleep 0.5; echo started"); code != 0 || got != "started\n" {
		t.Fatalf("starting the probe's server: %q (exit %d)", got, code)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:18080", time.Second); err == nil {
		c.Close()
		t.Error("the sandbox's loopback port answers on the host's loopback")
	}
	rconn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	relay, err := guestexec.Dial(rctx, rconn, 18080)
	if err != nil {
		t.Fatalf("relay to the sandbox's port 18080: %v", err)
	}
	if _, err := relay.Write([]byte("GET /hello HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = relay.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, _ := io.ReadAll(relay)
	relay.Close()
	if !strings.Contains(string(answer), "probe GET /hello Bearer t") {
		t.Errorf("through the relay: %q", answer)
	}

	// Kill proves the command's whole tree dead (a setsid child ignoring
	// TERM included), as in every sandbox: the shepherds work in init's
	// PID namespace.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	frames, err := guestexec.Encode(backend.ExecRequest{Command: `setsid sh -c 'trap "" TERM; sleep 1000' & sleep 1000`, Shell: backend.ShellClean})
	if err != nil {
		t.Fatal(err)
	}
	kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := guestexec.Start(kctx, conn, frames, nil, backend.GuestHooks{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := p.Kill(kctx); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if st, err := p.Wait(kctx); err != nil || !st.Killed {
		t.Fatalf("the killed command: %+v, %v", st, err)
	}
	const count = `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 1000' || true`
	if got, _ := sh(count); got != "0\n" {
		t.Errorf("%s sleep 1000 processes left after the kill", strings.TrimSpace(got))
	}
}
