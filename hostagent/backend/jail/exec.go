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
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// execArgs is the jexec(8) command line of req in jail name: an
// environment of the shell mode's and nothing of the agent's (env -i), a
// fresh /bin/sh in dir, as the sandbox user. jexec attaches to the jail
// and execs the command in place. With reap, that command is the guest
// binary's reaper, as the jail's root, which runs the rest as the sandbox
// user (reaper_freebsd.go); without, it is the tenant's shell, as the
// sandbox user from the jail's own user database (-U).
func execArgs(name string, req backend.ExecRequest, dir string, reap bool) []string {
	env, sh := guestapi.CleanEnv(), []string{guestapi.Shell, "-c", req.Command}
	if req.Shell != backend.ShellClean {
		// A login shell reads /etc/profile (the generated login profile)
		// and then ~/.profile.
		env, sh = guestapi.LoginEnv(), []string{guestapi.Shell, "-l", "-c", req.Command}
	}
	args := []string{"-U", guestapi.TenantUser, name, "/usr/bin/env", "-i"}
	if reap {
		args = []string{name, guestapi.Binary, guestapi.ReapMode, "-uid", strconv.Itoa(guestapi.TenantUID), "-gid", strconv.Itoa(guestapi.TenantGID), "--", "/usr/bin/env", "-i"}
	}
	args = append(args, env...)
	// cd in a wrapper shell, then exec the command's own: one
	// command's cd never carries into the next.
	args = append(args, guestapi.Shell, "-c", `cd -- "$1" || exit 126; shift; exec "$@"`, "sh", dir)
	return append(args, sh...)
}

// cwd is the directory a command runs in, as the guest's shepherd
// resolves it: the home when empty, relative to it when relative.
func cwd(req backend.ExecRequest) string {
	switch {
	case req.Cwd == "":
		return guestapi.TenantHome
	case !path.IsAbs(req.Cwd):
		return path.Join(guestapi.TenantHome, req.Cwd)
	}
	return path.Clean(req.Cwd)
}

// Exec implements backend.Backend. The command's working directory is
// checked first (test -d and -x as the sandbox user), so that a bad cwd
// is the caller's error, not a shell's exit code.
func (b *Backend) Exec(ctx context.Context, id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
	if err := validateJailName(id); err != nil {
		return nil, err
	}
	switch req.Shell {
	case backend.ShellLogin, backend.ShellClean, "":
	default:
		return nil, fmt.Errorf("%w: unknown shell mode %q", backend.ErrInvalidRequest, req.Shell)
	}
	if len(req.Command) > bounds.MaxCommandBytes {
		return nil, fmt.Errorf("%w: %s", backend.ErrInvalidRequest, bounds.CommandTooLong(len(req.Command)))
	}
	if _, err := b.loadSpec(id); err != nil {
		return nil, err
	}
	up, err := b.running(ctx, id)
	if err != nil {
		return nil, err
	}
	if !up {
		return nil, fmt.Errorf("%w: jail %s", backend.ErrNotRunning, jailNameOf(id))
	}
	name, dir := jailNameOf(id), cwd(req)
	if _, err := b.run.Run(ctx, "jexec", "-U", guestapi.TenantUser, name, "/bin/test", "-d", dir, "-a", "-x", dir); err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && ee.Code == 1 {
			return nil, fmt.Errorf("%w: cwd %s does not exist or cannot be entered", backend.ErrInvalidRequest, dir)
		}
		return nil, fmt.Errorf("jail: checking cwd %s in jail %s: %w", dir, name, err)
	}
	if sink == nil {
		sink = discard{}
	}
	reap := b.guestDir != ""
	p := &process{start: time.Now(), reap: reap, Ended: backend.NewEnded()}
	cmd := Command{
		Name:   "jexec",
		Args:   execArgs(name, req, dir, reap),
		Stdin:  bytes.NewReader(req.Stdin),
		Stdout: streamWriter{sink, backend.Stdout},
		Stderr: streamWriter{sink, backend.Stderr},
	}
	proc, err := b.run.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("jail: starting jexec in jail %s: %w", name, err)
	}
	p.proc = proc
	// Owned by the process: ends when the shell does.
	go p.wait()
	return p, nil
}

type streamWriter struct {
	sink   backend.Sink
	stream backend.Stream
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.sink.Write(w.stream, p)
	return len(p), nil
}

type discard struct{}

func (discard) Write(backend.Stream, []byte) {}

// process is a command under jexec: its reaper, or its shell.
type process struct {
	proc  Proc
	start time.Time
	reap  bool

	mu     sync.Mutex
	killed bool

	// Ended is the command's end, which Wait answers.
	backend.Ended
}

func (p *process) wait() {
	defer close(p.Done)
	code, sig, err := p.proc.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Status = backend.ExitStatus{ExitCode: code, Signal: sig, Killed: p.killed, Duration: time.Since(p.start)}
	p.Err = err
	if !p.killed || err != nil {
		return
	}
	switch {
	case !p.reap:
		p.Err = ErrNoReaper
	case code == guestapi.ReapProvedExit:
		p.Status.ExitCode, p.Status.Signal = -1, "SIGKILL"
	case code == guestapi.ReapLostExit:
		p.Err = fmt.Errorf("%w: the jail's reaper could not kill every descendant of the command (its message is on the command's stderr)", backend.ErrProofLost)
	case sig != "":
		p.Err = fmt.Errorf("%w: the jail's reaper was ended by %s before it proved the command's descendants dead", backend.ErrProofLost, sig)
	}
	// Any other exit: the command had ended by itself as it was killed;
	// what it left in the background belongs to the sandbox.
}

// ErrNoReaper says why Kill cannot prove cleanup without the guest binary.
var ErrNoReaper = fmt.Errorf("%w: the jail backend runs without the guest binary (playground-sandbox for FreeBSD, --guest-binary), so it kills the command's shell but cannot prove that the shell's descendants are gone; stopping the sandbox (jail -R) ends them all", backend.ErrProofLost)

// Kill implements backend.Process. With the reaper, SIGTERM asks it to
// kill the command's whole subtree, and its exit status says whether the
// kernel then counted none left; without, the shell is killed and the
// error says that its descendants may live on (ErrNoReaper).
func (p *process) Kill(ctx context.Context) error {
	select {
	case <-p.Done:
		return p.Err
	default:
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	send := p.proc.Kill
	if p.reap {
		send = p.proc.Terminate
	}
	if err := send(); err != nil {
		select {
		case <-p.Done:
		default:
			return fmt.Errorf("%w: signalling the command's %s: %v", backend.ErrProofLost, map[bool]string{true: "reaper", false: "shell"}[p.reap], err)
		}
	}
	select {
	case <-p.Done:
		return p.Err
	case <-ctx.Done():
		return fmt.Errorf("%w: no proof of cleanup yet: %w", backend.ErrProofLost, ctx.Err())
	}
}
