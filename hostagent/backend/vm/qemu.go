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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guest"
	"github.com/playground-dev/playground/hostagent/guest/mux"
)

// Accelerators QEMU can run a guest with.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"
)

// Files of a VM in its directory.
const (
	portSocket = "agent.sock"  // the virtio-serial port's host end
	qmpSocket  = "qmp.sock"    // QEMU's control socket
	consoleLog = "console.log" // the guest kernel's and init's console
	pidFile    = "qemu.pid"
)

// Config describes one VM.
type Config struct {
	// QEMU is the qemu-system-x86_64 binary; empty means the one on PATH.
	QEMU string
	// Kernel and Initrd are booted directly (WriteInitrd makes the initrd).
	Kernel, Initrd string
	// Root is the read-only root image, shared by every VM.
	Root string
	// Disks are the sandbox's own ext4 images, in the guest's order
	// after the root (guest.VMDiskDevice: workspace, home and tmp; then
	// guest.VMPileDevice: the pile); optional.
	Disks []string
	// Dir holds the VM's sockets, console log and pid file.
	Dir string
	// Accel is AccelKVM or AccelTCG.
	Accel string
	// VCPUs and MemoryMiB size the VM.
	VCPUs, MemoryMiB int
}

// Args is QEMU's command line for c. No network device, no default
// devices, no display; a panic or exit of the guest's init ends QEMU.
func (c Config) Args() []string {
	cpu := "max"
	if c.Accel == AccelKVM {
		cpu = "host"
	}
	args := []string{
		"-name", "playground",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-machine", "q35,accel=" + c.Accel,
		"-cpu", cpu,
		"-smp", strconv.Itoa(c.VCPUs),
		"-m", strconv.Itoa(c.MemoryMiB),
		"-kernel", c.Kernel,
		"-initrd", c.Initrd,
		// panic=-1 turns a dead init into a reboot, which -no-reboot
		// turns into QEMU's exit.
		"-append", "console=ttyS0 panic=-1 quiet",
		"-serial", "file:" + filepath.Join(c.Dir, consoleLog),
		"-drive", "file=" + c.Root + ",if=none,id=root,format=raw,readonly=on",
		"-device", "virtio-blk-pci,drive=root",
	}
	for i, d := range c.Disks {
		id := "disk" + strconv.Itoa(i)
		args = append(args,
			"-drive", "file="+d+",if=none,id="+id+",format=raw,cache=none,aio=threads",
			"-device", "virtio-blk-pci,drive="+id)
	}
	args = append(args,
		"-device", "virtio-serial-pci,id=vser",
		"-chardev", "socket,id=agent,path="+filepath.Join(c.Dir, portSocket)+",server=on,wait=off",
		"-device", "virtserialport,bus=vser.0,chardev=agent,name="+guest.VMPortName,
		"-qmp", "unix:"+filepath.Join(c.Dir, qmpSocket)+",server=on,wait=off",
		"-pidfile", filepath.Join(c.Dir, pidFile),
	)
	return args
}

// VM is a running QEMU, started by this process or found running.
type VM struct {
	cfg   Config
	pid   int
	pidfd int           // QEMU's: a reused PID never passes for it
	done  chan struct{} // closed when QEMU has exited
	err   error         // QEMU's end, valid after done

	mu      sync.Mutex
	session *mux.Session
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
// agent's process group does not reach it), so that it outlives the agent.
// The guest is booting when it returns; Connect waits for its init.
func Start(cfg Config) (*VM, error) {
	bin := cfg.QEMU
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if p := filepath.Join(cfg.Dir, portSocket); len(p) > maxSocketPath {
		return nil, fmt.Errorf("vm: the socket path %s is longer than the %d bytes a unix socket's name may have: use a shorter state directory", p, maxSocketPath)
	}
	cmd := exec.Command(bin, cfg.Args()...)
	out, err := os.Create(filepath.Join(cfg.Dir, "qemu.log"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("vm: starting qemu: %w", err)
	}
	// The child is not reaped before Wait: its PID is still its own.
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("vm: pidfd of qemu: %w", err)
	}
	v := &VM{cfg: cfg, pid: cmd.Process.Pid, pidfd: fd, done: make(chan struct{})}
	// Owned by the VM: ends when QEMU does, and reaps it.
	go func() {
		v.err = cmd.Wait()
		close(v.done)
	}()
	return v, nil
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
	return v, nil
}

// ErrNotRunning: no QEMU runs for the VM.
var ErrNotRunning = errors.New("vm: not running")

// isQEMUOf says whether process pid is the QEMU whose pid file is in dir.
func isQEMUOf(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-pidfile" && args[i+1] == filepath.Join(dir, pidFile) {
			return true
		}
	}
	return false
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
		c, err := net.Dial("unix", path)
		if err == nil {
			s := mux.Client(c)
			select {
			case <-s.Synced():
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
			return fmt.Errorf("vm: qemu exited before its port opened: %v (see %s)", v.err, filepath.Join(v.cfg.Dir, "qemu.log"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Result is what Exec returns.
type Result struct {
	Stdout, Stderr []byte
	Exit           guest.Exit
}

// Exec runs command in the guest over the guest protocol and collects its
// output (the prototype of the backend's Exec: no stdin, no streaming).
func (v *VM) Exec(ctx context.Context, command string) (Result, error) {
	var res Result
	st, err := v.Open()
	if err != nil {
		return res, err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { _ = st.Close() })
	defer stop()
	req, err := guest.AppendJSONFrame(nil, guest.FrameStart, guest.StartRequest{Version: guest.ProtocolVersion, Command: command})
	if err != nil {
		return res, err
	}
	req = guest.AppendFrame(req, guest.FrameStdinEnd, nil)
	if _, err := st.Write(req); err != nil {
		return res, err
	}
	fr := guest.NewFrameReader(bufio.NewReader(st))
	for {
		t, payload, err := fr.ReadFrame()
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return res, fmt.Errorf("vm: reading the command's frames: %w", err)
		}
		switch t {
		case guest.FrameStarted:
		case guest.FrameStdout:
			res.Stdout = append(res.Stdout, payload...)
		case guest.FrameStderr:
			res.Stderr = append(res.Stderr, payload...)
		case guest.FrameError:
			return res, fmt.Errorf("vm: command did not start: %s", payload)
		case guest.FrameExit:
			err := json.Unmarshal(payload, &res.Exit)
			return res, err
		case guest.FrameProofLost:
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

// Disconnect closes the connection to the guest, as an agent's exit would.
func (v *VM) Disconnect() {
	v.mu.Lock()
	s := v.session
	v.session = nil
	v.mu.Unlock()
	if s != nil {
		s.Close()
	}
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
