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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Runner runs the base system's tools. ExecRunner runs the real ones;
// tests run a fake that behaves as their manuals say.
type Runner interface {
	// Run runs name with args to its end and returns its standard output.
	// A non-zero exit is an *ExitError carrying its standard error.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
	// Start starts a command whose streams the caller owns: a tenant's
	// shell through jexec.
	Start(cmd Command) (Proc, error)
}

// Command is a command started by Runner.Start.
type Command struct {
	Name   string
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Detach starts the command in a session of its own: a job's holder,
	// which outlives the agent and whatever signals the agent's group.
	Detach bool
}

// Proc is a started Command.
type Proc interface {
	// Wait waits for the command's end: its exit code, or -1 and the
	// name of the signal that ended it.
	Wait() (code int, signal string, err error)
	// Terminate sends SIGTERM: the reaper's cue to kill and prove.
	Terminate() error
	// Kill sends SIGKILL.
	Kill() error
}

// ExitError is a tool's failure: its exit code and what it printed on
// standard error.
type ExitError struct {
	Cmd    string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("%s: exit status %d: %s", e.Cmd, e.Code, msg)
}

// failedWith reports whether err is a tool's failure whose message
// contains one of msgs.
func failedWith(err error, msgs ...string) bool {
	var ee *ExitError
	if !errors.As(err, &ee) {
		return false
	}
	for _, m := range msgs {
		if strings.Contains(ee.Stderr, m) {
			return true
		}
	}
	return false
}

// SystemPath is where ExecRunner finds the tools: the base system's
// directories only, whatever the agent's PATH.
const SystemPath = "/sbin:/bin:/usr/sbin:/usr/bin"

// OutputDrain bounds how long a started command's output is still read
// after it has ended.
const OutputDrain = 2 * time.Second

// ExecRunner runs the real tools from SystemPath.
type ExecRunner struct{}

func lookSystem(name string) (string, error) {
	for _, dir := range strings.Split(SystemPath, ":") {
		p := dir + "/" + name
		if err := unix.Access(p, unix.X_OK); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s: the jail backend needs FreeBSD's base system", name, SystemPath)
}

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path, err := lookSystem(name)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"PATH=" + SystemPath}
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.Bytes(), &ExitError{Cmd: name + " " + strings.Join(args, " "), Code: ee.ExitCode(), Stderr: stderr.String()}
	}
	return stdout.Bytes(), err
}

// Start implements Runner.
func (ExecRunner) Start(c Command) (Proc, error) {
	path, err := lookSystem(c.Name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, c.Args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.Env = []string{"PATH=" + SystemPath}
	// A command's background processes may hold its output open after it
	// ends: what they write within OutputDrain still goes out, then the
	// pipes close, so that the command's end is not theirs.
	cmd.WaitDelay = OutputDrain
	if c.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return execProc{cmd}, nil
}

type execProc struct{ cmd *exec.Cmd }

func (p execProc) Wait() (int, string, error) {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return -1, "", err
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, unix.SignalName(ws.Signal()), nil
	}
	return p.cmd.ProcessState.ExitCode(), "", nil
}

func (p execProc) Terminate() error { return p.cmd.Process.Signal(syscall.SIGTERM) }

func (p execProc) Kill() error { return p.cmd.Process.Kill() }
