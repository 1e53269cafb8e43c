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
	"time"

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
	// Disk is the sandbox's own ext4 image (workspace and home); optional.
	Disk string
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
	if c.Disk != "" {
		args = append(args,
			"-drive", "file="+c.Disk+",if=none,id=disk,format=raw,cache=none,aio=threads",
			"-device", "virtio-blk-pci,drive=disk")
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

// VM is a running QEMU.
type VM struct {
	cfg  Config
	cmd  *exec.Cmd
	done chan struct{} // closed when QEMU has exited
	err  error         // QEMU's end, valid after done

	session *mux.Session
}

// Start runs QEMU for cfg. The guest is booting when it returns; Connect
// waits for its init.
func Start(cfg Config) (*VM, error) {
	bin := cfg.QEMU
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, cfg.Args()...)
	out, err := os.Create(filepath.Join(cfg.Dir, "qemu.log"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("vm: starting qemu: %w", err)
	}
	v := &VM{cfg: cfg, cmd: cmd, done: make(chan struct{})}
	// Owned by the VM: ends when QEMU does.
	go func() {
		v.err = cmd.Wait()
		close(v.done)
	}()
	return v, nil
}

// Done is closed when QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

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
				v.session = s
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
	st, err := v.session.Open()
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

// Disconnect closes the connection to the guest, as an agent's exit would.
func (v *VM) Disconnect() {
	if v.session != nil {
		v.session.Close()
	}
}

// Stop ends QEMU (SIGTERM, then SIGKILL after grace) and waits for it.
func (v *VM) Stop(grace time.Duration) error {
	if v.session != nil {
		v.session.Close()
	}
	select {
	case <-v.done:
		return nil
	default:
	}
	_ = v.cmd.Process.Signal(os.Interrupt)
	select {
	case <-v.done:
		return nil
	case <-time.After(grace):
	}
	_ = v.cmd.Process.Kill()
	<-v.done
	return errors.New("vm: qemu did not stop in time; killed")
}
