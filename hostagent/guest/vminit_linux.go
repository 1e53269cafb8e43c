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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/guestapi/mux"
	"github.com/playground-dev/playground/hostagent/regularfile"
)

// The vm backend boots its kernel with an initramfs that holds this binary
// as /init and the kernel modules the guest needs (guestapi.VMModulesDir);
// RunVMInit, the first stage, mounts the sandbox's disks and execs RunInit,
// which serves the agent over a virtio-serial port (guestapi.VMPortName)
// instead of a bind-mounted socket.
const (
	// VMDiskDir is where the sandbox's disk is mounted in the guest.
	VMDiskDir = guestapi.Dir + "/disk"
	// vmDeviceWait bounds the wait for the disks to appear.
	vmDeviceWait = 30 * time.Second
)

// RunVMInit is PID 1 of a vm sandbox's initramfs. It loads the modules,
// mounts the root image read-only and the sandbox's disk, moves into the
// root and execs this binary's init there, still as PID 1. It returns only
// on failure (after which the kernel panics and the VM ends).
func RunVMInit() error {
	if os.Getpid() != 1 {
		return errors.New("playground-sandbox vminit must be PID 1 of the VM")
	}
	lg := log.New(os.Stderr, "playground-sandbox vminit: ", log.LstdFlags|log.LUTC|log.Lmicroseconds)
	lg.Printf("started")
	for _, m := range []struct{ src, dst, fs string }{
		{"devtmpfs", "/dev", "devtmpfs"},
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fs, unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting %s: %w", m.dst, err)
		}
	}
	// Pseudo-terminals, for terminal jobs: the devpts of the VM's kernel,
	// whose ptmx /dev/ptmx (devtmpfs's) is.
	if err := os.MkdirAll("/dev/pts", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "ptmxmode=0666,mode=0620,gid=5"); err != nil {
		return fmt.Errorf("mounting /dev/pts: %w", err)
	}
	if err := limitTenantPIDs(); err != nil {
		return err
	}
	if err := loadModules(guestapi.VMModulesDir); err != nil {
		return err
	}
	lg.Printf("modules loaded")
	const newRoot = "/newroot"
	if err := os.MkdirAll(newRoot, 0o755); err != nil {
		return err
	}
	if err := waitFor(guestapi.VMRootDevice, vmDeviceWait); err != nil {
		return err
	}
	// nosuid: the image's setuid binaries (su, mount) raise no one.
	if err := unix.Mount(guestapi.VMRootDevice, newRoot, "ext4", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, ""); err != nil {
		return fmt.Errorf("mounting the root image: %w", err)
	}
	// Our own directory: a tmpfs with this binary and the run directory.
	own := newRoot + guestapi.Dir
	if err := unix.Mount("playground", own, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return fmt.Errorf("mounting %s: %w", guestapi.Dir, err)
	}
	for _, d := range []string{own + "/bin", own + "/run", own + "/disk", own + "/etc"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := copyFile("/init", newRoot+guestapi.Binary, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", newRoot+"/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("mounting /run: %w", err)
	}
	if _, err := os.Stat(guestapi.VMDiskDevice); err == nil {
		if err := mountDisk(newRoot); err != nil {
			return err
		}
	} else {
		lg.Printf("no sandbox disk (%s): workspace and home are the root image's, /tmp a tmpfs", guestapi.VMDiskDevice)
		if err := unix.Mount("tmpfs", newRoot+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("mounting /tmp: %w", err)
		}
	}
	if _, err := os.Stat(guestapi.VMPileDevice); err == nil {
		if err := mountPile(newRoot); err != nil {
			return err
		}
	}
	if err := installConfig(newRoot); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bringing up the loopback interface: %w", err)
	}
	// The initramfs stays in memory under the new root; free what it held.
	_ = os.RemoveAll(guestapi.VMModulesDir)
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		if err := unix.Mount(d, newRoot+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("moving %s: %w", d, err)
		}
	}
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving the root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// Everything from here on (init, its shepherds, every tenant process)
	// runs with no_new_privs and the seccomp filter a container's runtime
	// would apply: no mount, module, kexec or reboot can touch the
	// supervision, whoever gains the guest's root. On the thread that
	// execs, which keeps them across execve.
	runtime.LockOSThread()
	if err := ConfineSelf(); err != nil {
		return fmt.Errorf("confining the guest: %w", err)
	}
	lg.Printf("root mounted, starting init")
	return unix.Exec(guestapi.Binary, []string{"playground-sandbox", "init", "-vm-port", guestapi.VMPortName}, guestapi.OwnEnv())
}

// limitTenantPIDs sets this process's RLIMIT_NPROC to the sandbox's PIDs
// limit (VMPIDsParam). Every process inherits it; the kernel enforces it
// on the tenant's user, whose tasks it counts, and not on root's: init,
// the shepherds and the job holders are root, and a tenant that takes
// every PID it may leaves them theirs.
func limitTenantPIDs() error {
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(string(cmdline)) {
		v, ok := strings.CutPrefix(f, guestapi.VMPIDsParam+"=")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("%s=%q: want a positive number", guestapi.VMPIDsParam, v)
		}
		return unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n})
	}
	return nil
}

// mountDisk mounts the sandbox's disk and binds its workspace and home
// over the root image's mount points.
func mountDisk(newRoot string) error {
	if err := waitFor(guestapi.VMDiskDevice, vmDeviceWait); err != nil {
		return err
	}
	disk := newRoot + VMDiskDir
	// What the guest's page cache holds is lost if its VM dies (QEMU
	// killed, the node's power): commit the journal every second and
	// write dirty pages back once they are a second old, so that a crash
	// loses about the last two seconds of writes, not the last thirty.
	if err := unix.Mount(guestapi.VMDiskDevice, disk, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "commit=1"); err != nil {
		return fmt.Errorf("mounting the sandbox's disk: %w", err)
	}
	for _, knob := range []string{"dirty_expire_centisecs", "dirty_writeback_centisecs"} {
		if err := os.WriteFile("/proc/sys/vm/"+knob, []byte("100"), 0); err != nil {
			return fmt.Errorf("setting vm.%s: %w", knob, err)
		}
	}
	for _, d := range []struct {
		src, dst string
		mode     os.FileMode
		uid      int
	}{
		{"workspace", guestapi.Workspace, 0o755, guestapi.TenantUID},
		{"home", guestapi.TenantHome, 0o755, guestapi.TenantUID},
		// Sticky, as a container's: an entry is removed only by its owner.
		{"tmp", "/tmp", 0o1777, 0},
	} {
		src := filepath.Join(disk, d.src)
		if err := os.Mkdir(src, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := os.Lchown(src, d.uid, d.uid); err != nil {
			return err
		}
		// unix.Chmod: os.Chmod would not take 01777's sticky bit.
		if err := unix.Chmod(src, uint32(d.mode)); err != nil {
			return err
		}
		if err := unix.Mount(src, newRoot+d.dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s: %w", d.dst, err)
		}
	}
	return nil
}

// mountPile mounts the sandbox's pile and seals it, as the oci backend
// seals a container's: the directory is the guest root's, mode 0755, so
// the tenant creates nothing in it, and append-only, so nothing in it is
// removed or renamed; every regular file in it is append-only (the agent
// made them the tenant's), but the signing key (guestapi.SigningKeyFile,
// which the agent writes into the image while no VM runs), which is the
// tenant's, mode 0400 and immutable: read, never written, chmod-ed,
// renamed or removed. Setting or clearing either flag needs
// CAP_LINUX_IMMUTABLE, which the tenant's commands (uid 1000, no
// capabilities, nosuid root) never have. The mount is synchronous and the
// file system has no journal: what the tenant appended is in place on the
// pile's image when its write returns, for the host to read while the VM
// runs (with a journal, the file's new size could wait in the journal).
func mountPile(newRoot string) error {
	if err := waitFor(guestapi.VMPileDevice, vmDeviceWait); err != nil {
		return err
	}
	pile := newRoot + guestapi.PileDir
	if err := unix.Mount(guestapi.VMPileDevice, pile, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_SYNCHRONOUS, ""); err != nil {
		return fmt.Errorf("mounting the pile: %w", err)
	}
	// mkfs's empty lost+found would show in the pile; e2fsck makes it
	// again if it needs one.
	// The directory was sealed at the last boot: unseal it to fix its
	// owner and mode, which a flagged inode refuses.
	if err := setFlags(pile, 0, fsAppendFL|fsImmutableFL); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(pile, "lost+found"))
	if err := os.Chown(pile, 0, 0); err != nil {
		return err
	}
	if err := os.Chmod(pile, 0o755); err != nil {
		return err
	}
	key := filepath.Join(pile, guestapi.SigningKeyFile)
	err := filepath.WalkDir(pile, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == key && d.Type().IsRegular():
			return sealSigningKey(p)
		case d.Type().IsRegular() || d.IsDir():
			return setFlags(p, fsAppendFL, fsImmutableFL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sealing the pile: %w", err)
	}
	return nil
}

// fsAppendFL is FS_APPEND_FL (chattr +a); fsImmutableFL is
// FS_IMMUTABLE_FL (chattr +i).
const (
	fsAppendFL    = 0x20
	fsImmutableFL = 0x10
)

// setFlags sets the inode flags set and clears unset on path, without
// following a symlink.
func setFlags(path string, set, unset uint32) error {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return setFileFlags(f, set, unset)
}

func setFileFlags(f *os.File, set, unset uint32) error {
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	want := flags&^unset | set
	if want == flags {
		return nil
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(want))
}

// sealSigningKey makes the regular file path the tenant's, mode 0400 and
// immutable, not append-only. An immutable inode refuses chown and chmod,
// so its flags are lifted first; no tenant process runs yet to see it.
func sealSigningKey(path string) error {
	f, _, err := regularfile.Open(path, os.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := setFileFlags(f, 0, fsAppendFL|fsImmutableFL); err != nil {
		return err
	}
	if err := f.Chown(guestapi.TenantUID, guestapi.TenantGID); err != nil {
		return err
	}
	if err := f.Chmod(0o400); err != nil {
		return err
	}
	return setFileFlags(f, fsImmutableFL, 0)
}

// installConfig copies the sandbox's /etc files from the initramfs to
// EtcDir, and sets the hostname its hostname file names.
func installConfig(newRoot string) error {
	ents, err := os.ReadDir(guestapi.VMConfigEtc)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	files := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(guestapi.VMConfigEtc, e.Name()))
		if err != nil {
			return err
		}
		files[e.Name()] = string(b)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(newRoot+guestapi.EtcDir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if h := strings.TrimSpace(files["hostname"]); h != "" {
		if err := unix.Sethostname([]byte(h)); err != nil {
			return fmt.Errorf("setting the hostname: %w", err)
		}
	}
	return nil
}

// loopbackUp brings up lo, the only interface of a VM without network:
// the agent's relay reaches a tenant's worker on it.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// loadModules loads dir's modules in the order its order file gives.
func loadModules(dir string) error {
	order, err := os.ReadFile(filepath.Join(dir, guestapi.VMModulesOrder))
	if err != nil {
		return fmt.Errorf("module order: %w", err)
	}
	for _, name := range strings.Fields(string(order)) {
		if name != filepath.Base(name) {
			return fmt.Errorf("module name %q", name)
		}
		f, err := os.Open(filepath.Join(dir, name)) //nolint:gosec // name is a plain file name, checked above
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("loading %s: %w", name, err)
		}
	}
	return nil
}

func waitFor(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// findPort returns the device of the virtio-serial port named name.
func findPort(name string) (string, error) {
	const class = "/sys/class/virtio-ports"
	ents, err := os.ReadDir(class)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(class, e.Name(), "name"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return "/dev/" + e.Name(), nil
		}
	}
	return "", fmt.Errorf("no virtio-serial port named %s", name)
}

// servePort relays every stream the agent opens on the virtio-serial port
// to init's socket, as if the agent had connected to it. One mux session
// serves the port for init's lifetime: an agent that restarts resyncs it
// with a Hello (see package mux).
func (in *initProc) servePort(name string) {
	sock := filepath.Join(guestapi.RunDir, guestapi.SocketName)
	var port *os.File
	for {
		dev, err := findPort(name)
		if err == nil {
			port, err = os.OpenFile(dev, os.O_RDWR, 0)
		}
		if err == nil {
			break
		}
		in.log.Printf("agent port: %v", err)
		time.Sleep(time.Second)
	}
	s := mux.Server(&waitingPort{File: port})
	for {
		st, err := s.Accept()
		if err != nil {
			in.log.Printf("agent port: %v", err)
			return
		}
		// One goroutine per stream, ended by the stream's end.
		go in.serveStream(st, sock)
	}
}

// waitingPort reads a virtio-serial port, whose reads return EOF at once
// while no agent is connected: it waits for one instead.
type waitingPort struct{ *os.File }

func (p *waitingPort) Read(b []byte) (int, error) {
	for {
		n, err := p.File.Read(b)
		if n > 0 || !errors.Is(err, io.EOF) {
			return n, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveStream serves a stream of the agent port: init answers a job
// listing or attachment itself (answerControl), as on a container's control
// socket; anything else goes to a shepherd, on init's socket.
func (in *initProc) serveStream(st *mux.Stream, sock string) {
	defer st.Close()
	br := bufio.NewReader(st)
	req, start, err := readStart(guestapi.NewFrameReader(br))
	if err != nil {
		_, _ = st.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(err.Error())))
		return
	}
	if isControl(req) {
		answerControl(st, br, st.CloseWrite, req)
		return
	}
	// The request goes to a shepherd as it came: its Start frame again,
	// then whatever followed it.
	relay(st, io.MultiReader(bytes.NewReader(guestapi.AppendFrame(nil, guestapi.FrameStart, start)), br), sock)
}

// relay joins a stream (read through from, which holds what was read of
// it already) to a connection to init's socket, half-closes included.
func relay(st *mux.Stream, from io.Reader, sock string) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := io.Copy(c, from); err != nil {
			// The agent reset the stream (or went away): the
			// shepherd's end goes too, which ends its command.
			_ = c.Close()
			return
		}
		_ = c.CloseWrite()
	}()
	if _, err := io.Copy(st, c); err != nil {
		_ = c.Close()
	}
	_ = st.CloseWrite()
	<-done
}
