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

// Package childproc runs Playground's components (`playground manager`,
// `agent`, `gateway`) as child processes, as a cluster runs them: each with
// its log in a file, stopped by a signal, its exit observed. The benchmarks
// and the soak stand on it.
package childproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const StopTimeout = 30 * time.Second

// Process is a component running as a child process.
type Process struct {
	// Name is the role, the first argument.
	Name string
	// Cmd is the running command; Log the file its output is appended to.
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
	err  error
}

// Start runs bin with args, appending its standard output and error to
// logPath (so that the incarnations of a restarted component share one
// log). ctx ending kills it.
func Start(ctx context.Context, logPath, bin string, args ...string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	name := filepath.Base(bin)
	if len(args) > 0 {
		name = args[0]
	}
	p := &Process{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited says why the process ended, with the end of its log, or nil while
// it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	tail, _ := os.ReadFile(p.Log)
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return fmt.Errorf("playground %s exited: %v\n%s", p.Name, p.err, tail)
}

// Signal sends sig to the process, if it still runs.
func (p *Process) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.Cmd.Process.Signal(sig)
	}
}

// Wait waits up to timeout for the process to exit and says whether it did.
func (p *Process) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Stop sends SIGTERM and waits for the exit; SIGKILL after StopTimeout.
func (p *Process) Stop() {
	p.Signal(syscall.SIGTERM)
	if !p.Wait(StopTimeout) {
		p.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// Failed returns the first of ps that has exited (Exited), or nil.
func Failed(ps ...*Process) error {
	for _, p := range ps {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

// FreeAddress is a loopback address with a port free now, for a component
// to listen on (and to keep across its restarts).
func FreeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// BinaryNextToThis is flagValue, else the named binary beside this
// process's executable (make build puts them together in bin/).
func BinaryNextToThis(flagValue, name string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not next to this binary (%w): build it, or pass its path", name, err)
	}
	return p, nil
}
