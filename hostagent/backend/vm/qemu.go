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

package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/guestapi/mux"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/boundedlog"
)

// Accelerators QEMU can run a guest with.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"
)

// Files of a VM in its directory.
const (
	portSocket    = "agent.sock"   // the virtio-serial port's host end
	consoleSocket = "console.sock" // the serial console's host end
	qmpSocket     = "qmp.sock"     // QEMU's control socket
	consoleLog    = "console.log"  // the guest kernel's and init's console, bounded
	qemuLog       = "qemu.log"     // QEMU's own messages, bounded
	pidFile       = "qemu.pid"
)

// Credential is who QEMU runs as.
type Credential struct {
	UID, GID uint32
	// Groups are supplementary: /dev/kvm's group when the VM uses KVM.
	Groups []uint32
}

// Sandbox is QEMU's seccomp sandbox, on for every VM: no obsolete system
// calls, no set*uid/set*gid (QEMU starts with its credentials already
// dropped), no fork or exec, no affinity or scheduler changes.
const Sandbox = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"

// Config describes one VM.
type Config struct {
	// QEMU is the qemu-system-x86_64 binary; empty means the one on PATH.
	QEMU string
	// Kernel and Initrd are booted directly (WriteInitrd makes the initrd).
	Kernel, Initrd string
	// Root is the read-only root image, shared by every VM.
	Root string
	// Disks are the sandbox's own ext4 images, in the guest's order
	// after the root (guestapi.VMDiskDevice: workspace, home and tmp; then
	// guestapi.VMPileDevice: the pile); optional.
	Disks []string
	// Dir holds the VM's sockets, logs and pid file.
	Dir string
	// Accel is AccelKVM or AccelTCG.
	Accel string
	// VCPUs and MemoryMiB size the VM.
	VCPUs, MemoryMiB int
	// User is who QEMU runs as; nil is this process's own user. QEMU
	// opens no path of the VM's: Start opens the kernel, the initrd and
	// the images and binds the sockets, and QEMU inherits them. It reopens
	// the kernel and the initrd through /proc/self/fd, so User must be
	// able to read those two files (not their directories). With a User
	// (which needs a root agent), QEMU also starts in network, IPC, UTS
	// and PID namespaces of its own.
	User *Credential
	// LogBytes bounds console.log and qemu.log, each kept with one
	// predecessor (.1); zero means boundedlog.DefaultBytes.
	LogBytes int64
	// KernelArgs are added to the guest kernel's command line.
	KernelArgs []string
	// Incoming, when set, is a state SaveMemory wrote: QEMU loads it
	// instead of booting, and the guest goes on where it was saved. The
	// VM's size must be the saved one's.
	Incoming string
}

// Descriptors QEMU inherits (ExtraFiles from 3 on): the kernel, the
// initrd, the root image, each disk twice (read-write, then read-only:
// QEMU takes from a disk's fd set the descriptor whose access mode is the
// one it would open with, and it opens a writable disk read-only too);
// then the listening sockets of the port, the console and QMP.
const (
	fdKernel = 3 + iota
	fdInitrd
	fdRoot
	fdDisks
)

func (c Config) fdPort() int    { return fdDisks + 2*len(c.Disks) }
func (c Config) fdConsole() int { return c.fdPort() + 1 }
func (c Config) fdQMP() int     { return c.fdPort() + 2 }

// fdIncoming is Incoming's descriptor.
func (c Config) fdIncoming() int { return c.fdPort() + 3 }

// Args is QEMU's command line for c. No network device, no default
// devices, no display; a panic or exit of the guest's init ends QEMU.
// Every file and socket is a descriptor Start passes.
func (c Config) Args() []string {
	cpu := "max"
	if c.Accel == AccelKVM {
		cpu = "host"
	}
	fd := func(n int) string { return "/proc/self/fd/" + strconv.Itoa(n) }
	// panic=-1 turns a dead init into a reboot, which -no-reboot turns
	// into QEMU's exit.
	cmdline := strings.Join(append([]string{"console=ttyS0 panic=-1 quiet"}, c.KernelArgs...), " ")
	args := []string{
		// The name marks the process as this VM's (isQEMUOf).
		"-name", vmName(c.Dir),
		"-sandbox", Sandbox,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-machine", "q35,accel=" + c.Accel,
		"-cpu", cpu,
		"-smp", strconv.Itoa(c.VCPUs),
		"-m", strconv.Itoa(c.MemoryMiB),
		"-kernel", fd(fdKernel),
		"-initrd", fd(fdInitrd),
		"-append", cmdline,
		"-chardev", "socket,id=console,fd=" + strconv.Itoa(c.fdConsole()) + ",server=on,wait=off",
		"-serial", "chardev:console",
		"-add-fd", "fd=" + strconv.Itoa(fdRoot) + ",set=0",
		"-drive", "file=/dev/fdset/0,if=none,id=root,format=raw,readonly=on",
		"-device", "virtio-blk-pci,drive=root",
	}
	for i := range c.Disks {
		id, set := "disk"+strconv.Itoa(i), strconv.Itoa(i+1)
		args = append(args,
			"-add-fd", "fd="+strconv.Itoa(fdDisks+2*i)+",set="+set,
			"-add-fd", "fd="+strconv.Itoa(fdDisks+2*i+1)+",set="+set,
			"-drive", "file=/dev/fdset/"+set+",if=none,id="+id+",format=raw,cache=none,aio=threads",
			"-device", "virtio-blk-pci,drive="+id)
	}
	args = append(args,
		"-device", "virtio-serial-pci,id=vser",
		"-chardev", "socket,id=agent,fd="+strconv.Itoa(c.fdPort())+",server=on,wait=off",
		"-device", "virtserialport,bus=vser.0,chardev=agent,name="+guestapi.VMPortName,
		"-chardev", "socket,id=qmp,fd="+strconv.Itoa(c.fdQMP())+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	)
	if c.Incoming != "" {
		args = append(args, "-incoming", "fd:"+strconv.Itoa(c.fdIncoming()))
	}
	return args
}

// vmName is QEMU's -name of the VM in dir.
func vmName(dir string) string { return "playground:" + dir }

// VM is a running QEMU, started by this process or found running.
type VM struct {
	cfg   Config
	pid   int
	pidfd int           // QEMU's: a reused PID never passes for it
	done  chan struct{} // closed when QEMU has exited
	err   error         // QEMU's end, valid after done

	mu      sync.Mutex
	session *mux.Session
	// console is this process's connection to the serial console, and
	// consoleDone is closed once its reader has written all it read.
	console     net.Conn
	consoleDone chan struct{}
	// connecting serialises reconnections: the port takes one client at a
	// time, so a second Connect would wait for the first's connection to
	// end.
	connecting sync.Mutex
}

// EnsureConnected connects to the guest unless a connection is up; calls
// that find none at once make one connection between them.
func (v *VM) EnsureConnected(ctx context.Context) error {
	v.connecting.Lock()
	defer v.connecting.Unlock()
	if v.Connected() {
		return nil
	}
	return v.Connect(ctx)
}

// Start runs QEMU for cfg, in a session of its own (a signal to the
// agent's process group does not reach it), so that it outlives the agent,
// as cfg.User, under its seccomp sandbox, with a minimal environment. The
// guest is booting when it returns; Connect waits for its init.
func Start(cfg Config) (*VM, error) {
	bin := cfg.QEMU
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	open := func(path string, flag int, reopened bool) error {
		f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("vm: %w", err)
		}
		files = append(files, f)
		if reopened && cfg.User != nil {
			return readableBy(f, *cfg.User)
		}
		return nil
	}
	if err := open(cfg.Kernel, os.O_RDONLY, true); err != nil {
		return nil, err
	}
	if err := open(cfg.Initrd, os.O_RDONLY, true); err != nil {
		return nil, err
	}
	if err := open(cfg.Root, os.O_RDONLY, false); err != nil {
		return nil, err
	}
	for _, d := range cfg.Disks {
		if err := open(d, os.O_RDWR, false); err != nil {
			return nil, err
		}
		if err := open(d, os.O_RDONLY, false); err != nil {
			return nil, err
		}
	}
	// The sockets are bound here, by the agent, in a directory only it
	// enters: QEMU listens on them without a path of its own, and only
	// this agent's user connects.
	for _, name := range []string{portSocket, consoleSocket, qmpSocket} {
		f, err := listenUnix(filepath.Join(cfg.Dir, name))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if cfg.Incoming != "" {
		if err := open(cfg.Incoming, os.O_RDONLY, false); err != nil {
			return nil, err
		}
	}
	log, err := boundedlog.Open(filepath.Join(cfg.Dir, qemuLog), cfg.LogBytes)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, cfg.Args()...)
	cmd.ExtraFiles = files
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	// A pipe, which exec copies into the bounded log until QEMU ends.
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if u := cfg.User; u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: append([]uint32{}, u.Groups...)}
		// Nothing of the node's network (QEMU has descriptors, and no
		// network device), IPC or processes is QEMU's to reach.
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWPID
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("vm: starting qemu: %w", err)
	}
	// The child is not reaped before Wait: its PID is still its own.
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err == nil {
		err = atomicfile.Write(filepath.Join(cfg.Dir, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
		return nil, fmt.Errorf("vm: pidfd of qemu: %w", err)
	}
	v := &VM{cfg: cfg, pid: cmd.Process.Pid, pidfd: fd, done: make(chan struct{})}
	// Owned by the VM: ends when QEMU does, and reaps it.
	go func() {
		v.err = cmd.Wait()
		log.Close()
		close(v.done)
	}()
	// From the first byte: the connection waits in the socket's backlog
	// until QEMU accepts it.
	_ = v.watchConsole()
	return v, nil
}

// listenUnix binds and listens on a unix socket at path (replacing what
// a previous VM left there), mode 0600.
func listenUnix(path string) (*os.File, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("vm: the socket path %s is longer than the %d bytes a unix socket's name may have: use a shorter state directory", path, maxSocketPath)
	}
	_ = os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	// The socket file outlives this listener: QEMU holds the socket.
	l.SetUnlinkOnClose(false)
	defer l.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, err
	}
	return l.File()
}

// readableBy says why u cannot read f, if it cannot: QEMU reopens the
// kernel and the initrd through /proc/self/fd, which checks the file's
// own permissions (not its directories').
func readableBy(f *os.File, u Credential) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	mode := st.Mode
	ok := mode&0o004 != 0 ||
		(st.Uid == u.UID && mode&0o400 != 0) ||
		((st.Gid == u.GID || slices.Contains(u.Groups, st.Gid)) && mode&0o040 != 0)
	if !ok {
		return fmt.Errorf("vm: %s (owner %d:%d, mode %#o) is not readable by uid %d, whom QEMU runs as: make it readable by others (a Debian kernel is no secret)", f.Name(), st.Uid, st.Gid, mode&0o7777, u.UID)
	}
	return nil
}

// Attach finds the QEMU of cfg that an earlier agent process started, by
// its pid file; ErrNotRunning when there is none.
func Attach(cfg Config) (*VM, error) {
	b, err := os.ReadFile(filepath.Join(cfg.Dir, pidFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return nil, fmt.Errorf("vm: %s holds %q, not a PID", filepath.Join(cfg.Dir, pidFile), b)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, ErrNotRunning
	}
	// With the pidfd held, the PID is this process's until we drop it:
	// check that it is the QEMU of this VM, not a reuse of its PID.
	if !isQEMUOf(pid, cfg.Dir) {
		unix.Close(fd)
		return nil, ErrNotRunning
	}
	v := &VM{cfg: cfg, pid: pid, pidfd: fd, done: make(chan struct{})}
	// Owned by the VM: ends when QEMU does (its parent reaps it).
	go func() {
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(fds, -1); n > 0 || (err != nil && err != unix.EINTR) {
				break
			}
		}
		v.err = errors.New("qemu exited")
		close(v.done)
	}()
	// QEMU's own output went to the agent that started it; the console
	// is taken over.
	_ = v.watchConsole()
	return v, nil
}

// ErrNotRunning says that no QEMU runs for the VM.
var ErrNotRunning = errors.New("vm: not running")

// isQEMUOf says whether process pid is the QEMU of the VM in dir.
func isQEMUOf(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-name" && args[i+1] == vmName(dir) {
			return true
		}
	}
	return false
}

// watchConsole connects to the VM's serial console, unless connected, and
// copies what the guest prints into console.log, bounded (cfg.LogBytes,
// one predecessor kept), until the connection ends: QEMU's exit, or
// Disconnect. While no agent is connected, QEMU drops the console's output.
func (v *VM) watchConsole() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.console != nil {
		return nil
	}
	c, err := net.Dial("unix", filepath.Join(v.cfg.Dir, consoleSocket)) //nolint:noctx // a unix socket's connect does not wait
	if err != nil {
		return err
	}
	log, err := boundedlog.Open(filepath.Join(v.cfg.Dir, consoleLog), v.cfg.LogBytes)
	if err != nil {
		c.Close()
		return err
	}
	done := make(chan struct{})
	v.console, v.consoleDone = c, done
	// Owned by the VM: ends with the connection.
	go func() {
		defer close(done)
		_, _ = io.Copy(log, c)
		log.Close()
	}()
	return nil
}

// unwatchConsole closes the console's connection and waits until its
// reader has written what it read.
func (v *VM) unwatchConsole() {
	v.mu.Lock()
	c, done := v.console, v.consoleDone
	v.console, v.consoleDone = nil, nil
	v.mu.Unlock()
	if c != nil {
		c.Close()
		<-done
	}
}

// Done is closed when QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Exited says whether QEMU has exited, waiting at most timeout for it.
func (v *VM) Exited(timeout time.Duration) bool {
	select {
	case <-v.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Connect connects to the guest's port and waits for the guest's init to
// answer (once it has booted). Connecting again, as a restarted agent
// would, drops the previous connection's streams.
func (v *VM) Connect(ctx context.Context) error {
	path := filepath.Join(v.cfg.Dir, portSocket)
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
		if err == nil {
			s := mux.Client(c)
			select {
			case <-s.Synced():
				_ = v.watchConsole()
				v.mu.Lock()
				old := v.session
				v.session = s
				v.mu.Unlock()
				if old != nil {
					old.Close()
				}
				return nil
			case <-ctx.Done():
				s.Close()
				return fmt.Errorf("vm: waiting for the guest's init to answer: %w", ctx.Err())
			case <-v.done:
				s.Close()
				return fmt.Errorf("vm: qemu exited before the guest answered: %v (see %s)", v.err, filepath.Join(v.cfg.Dir, consoleLog))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("vm: connecting to %s: %w", path, err)
		case <-v.done:
			return fmt.Errorf("vm: qemu exited before its port opened: %v (see %s)", v.err, filepath.Join(v.cfg.Dir, qemuLog))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Result is what Exec returns.
type Result struct {
	Stdout, Stderr []byte
	Exit           backend.ExitStatus
}

// Exec runs command in the guest over the guest protocol and collects its
// output (the prototype of the backend's Exec: no stdin, no streaming).
func (v *VM) Exec(ctx context.Context, command string) (Result, error) {
	var res Result
	begin := time.Now()
	st, err := v.Open()
	if err != nil {
		return res, err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { _ = st.Close() })
	defer stop()
	req, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStart, guestapi.StartRequest{Version: guestapi.ProtocolVersion, Command: command})
	if err != nil {
		return res, err
	}
	req = guestapi.AppendFrame(req, guestapi.FrameStdinEnd, nil)
	if _, err := st.Write(req); err != nil {
		return res, err
	}
	fr := guestapi.NewFrameReader(bufio.NewReader(st))
	for {
		t, payload, err := fr.ReadFrame()
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return res, fmt.Errorf("vm: reading the command's frames: %w", err)
		}
		switch t {
		case guestapi.FrameStarted:
		case guestapi.FrameStdout:
			res.Stdout = append(res.Stdout, payload...)
		case guestapi.FrameStderr:
			res.Stderr = append(res.Stderr, payload...)
		case guestapi.FrameError:
			return res, fmt.Errorf("vm: command did not start: %s", payload)
		case guestapi.FrameExit:
			var e guestapi.End
			err := json.Unmarshal(payload, &e)
			res.Exit = e.Status
			res.Exit.Duration = time.Since(begin)
			return res, err
		case guestapi.FrameProofLost:
			return res, fmt.Errorf("vm: proof lost: %s", payload)
		default:
			return res, fmt.Errorf("vm: unexpected %v frame", t)
		}
	}
}

// Open opens a stream to the guest's init: a connection that an idle
// shepherd accepts, as a container's socket would be.
func (v *VM) Open() (*mux.Stream, error) {
	v.mu.Lock()
	s := v.session
	v.mu.Unlock()
	if s == nil {
		return nil, errors.New("vm: not connected to the guest")
	}
	return s.Open()
}

// Connected says whether the connection to the guest is up.
func (v *VM) Connected() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.session == nil {
		return false
	}
	select {
	case <-v.session.Done():
		return false
	default:
		return true
	}
}

// Disconnect closes the connections to the guest and its console, as an
// agent's exit would.
func (v *VM) Disconnect() {
	v.mu.Lock()
	s := v.session
	v.session = nil
	v.mu.Unlock()
	if s != nil {
		s.Close()
	}
	v.unwatchConsole()
}

// Stop ends QEMU (SIGTERM, then SIGKILL after grace) and waits for it,
// and releases the VM.
func (v *VM) Stop(grace time.Duration) error {
	v.Disconnect()
	defer func() {
		<-v.done
		unix.Close(v.pidfd)
	}()
	select {
	case <-v.done:
		return nil
	default:
	}
	_ = unix.PidfdSendSignal(v.pidfd, unix.SIGTERM, nil, 0)
	select {
	case <-v.done:
		return nil
	case <-time.After(grace):
	}
	_ = unix.PidfdSendSignal(v.pidfd, unix.SIGKILL, nil, 0)
	// A QEMU that is not this process's child is reaped by its parent:
	// the pidfd turns readable when it has exited, before that.
	<-v.done
	return errors.New("vm: qemu did not stop in time; killed")
}

// maxSocketPath is the usable length of sun_path.
const maxSocketPath = 107
