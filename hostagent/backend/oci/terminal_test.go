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

package oci

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/jobs/heldjob"
)

// screenShows waits until j's screen shows want on some line, following
// the job's output: each new output is a reason to look again, and the
// job's end with want still missing fails.
func screenShows(t *testing.T, j *guestexec.Job, cursor *string, want string) heldjob.Screen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		scr, err := j.Screen(ctx, heldjob.ScreenRequest{})
		if err != nil {
			t.Fatalf("screen: %v", err)
		}
		if strings.Contains(strings.Join(scr.Lines, "\n"), want) {
			return scr
		}
		p, err := j.Poll(ctx, heldjob.PollRequest{Cursor: *cursor, Max: 64 << 10, Wait: 2 * time.Second})
		if err != nil {
			t.Fatalf("waiting for %q on the screen: %v\nscreen:\n%s", want, err, strings.Join(scr.Lines, "\n"))
		}
		*cursor = p.Next
		if p.Exit != nil && p.AtEnd {
			scr, _ = j.Screen(ctx, heldjob.ScreenRequest{})
			if strings.Contains(strings.Join(scr.Lines, "\n"), want) {
				return scr
			}
			t.Fatalf("the job ended (%+v) and its screen never showed %q:\n%s", *p.Exit, want, strings.Join(scr.Lines, "\n"))
		}
	}
}

func ttyJob(t *testing.T, b *Backend, id, jobID, cmd string, rows, cols int) *guestexec.Job {
	t.Helper()
	ctx := context.Background()
	conn, err := b.dial(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	spec := jobSpec(jobID)
	spec.TTY = &agentapi.TTYSize{Rows: rows, Cols: cols}
	j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: cmd, Shell: backend.ShellLogin}, spec)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestTerminalJob: a job on a pseudo-terminal is a program's terminal as
// an interactive user's would be. Typed input reaches a REPL, whose answer
// the holder's emulator puts on the screen under the prompt; a resize
// reaches the program (tput asks the terminal); a full-screen program
// (top) draws a screen whose first line reads as text, and a key ends it.
// The screen and the job outlive the agent's connection.
func TestTerminalJob(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "tty"})
	ctx := context.Background()

	t.Run("shell", func(t *testing.T) {
		j := ttyJob(t, b, id, "tty-sh", "exec sh", 24, 80)
		defer j.Close()
		cursor := ""
		if err := j.Input(ctx, []byte("echo $((6*7)) $TERM\r"), false); err != nil {
			t.Fatal(err)
		}
		scr := screenShows(t, j, &cursor, "42 xterm-256color")
		if scr.Rows != 24 || scr.Cols != 80 {
			t.Errorf("screen is %dx%d; want 24x80", scr.Rows, scr.Cols)
		}
		if err := j.Resize(ctx, heldjob.TTYSize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		if err := j.Input(ctx, []byte("echo cols=$(tput cols) lines=$(tput lines)\r"), false); err != nil {
			t.Fatal(err)
		}
		// The shell's next prompt under it: the shell waits for input,
		// and the screen stays as it is.
		scr = screenShows(t, j, &cursor, "cols=120 lines=40\n$")
		if scr.Rows != 40 || scr.Cols != 120 {
			t.Errorf("screen is %dx%d after the resize; want 40x120", scr.Rows, scr.Cols)
		}

		// The agent goes: a new connection finds the same screen, and
		// types on.
		j.Close()
		ac, err := guestexec.Control(b.jobConn).AttachJob(ctx, id, "tty-sh")
		if err != nil {
			t.Fatal(err)
		}
		j2 := guestexec.HeldJob(ac)
		defer j2.Close()
		again, err := j2.Screen(ctx, heldjob.ScreenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(again.Lines, "\n") != strings.Join(scr.Lines, "\n") {
			t.Errorf("the screen changed with the connection:\nbefore:\n%s\nafter:\n%s", strings.Join(scr.Lines, "\n"), strings.Join(again.Lines, "\n"))
		}
		if err := j2.Input(ctx, []byte("exit 7\r"), false); err != nil {
			t.Fatal(err)
		}
		select {
		case <-j2.Ended():
		case <-time.After(time.Minute):
			t.Fatal("the shell did not exit")
		}
		if exit, _, err := j2.End(); err != nil || exit == nil || exit.ExitCode != 7 {
			t.Errorf("end = %+v, %v; want exit 7", exit, err)
		}
		if err := j2.Input(ctx, []byte("x"), false); !errors.Is(err, heldjob.ErrRefused) {
			t.Errorf("input after the end = %v; want a refusal", err)
		}
		if _, err := j2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("python REPL", func(t *testing.T) {
		if r := run(t, b, id, backend.ExecRequest{Command: "command -v python3"}); r.Status.ExitCode != 0 {
			t.Skip("no python3 in the sandbox's root")
		}
		j := ttyJob(t, b, id, "tty-py", "python3 -q", 24, 80)
		defer j.Close()
		cursor := ""
		screenShows(t, j, &cursor, ">>>")
		if err := j.Input(ctx, []byte("print(6*7)\r"), false); err != nil {
			t.Fatal(err)
		}
		scr := screenShows(t, j, &cursor, "42\n>>>")
		at := -1
		for i, l := range scr.Lines {
			if strings.TrimSpace(l) == "42" {
				at = i
			}
		}
		if at < 1 || !strings.HasPrefix(scr.Lines[at-1], ">>> print(6*7)") || !strings.HasPrefix(scr.Lines[at+1], ">>>") {
			t.Errorf("want 42 under the prompt and a new prompt under it:\n%s", strings.Join(scr.Lines, "\n"))
		}
		if err := j.Input(ctx, nil, true); err != nil { // Ctrl-D ends the REPL
			t.Fatal(err)
		}
		<-j.Ended()
		if exit, _, err := j.End(); err != nil || exit == nil || exit.ExitCode != 0 {
			t.Errorf("end = %+v, %v; want exit 0", exit, err)
		}
		_, _ = j.Release(ctx)
	})

	t.Run("top", func(t *testing.T) {
		j := ttyJob(t, b, id, "tty-top", "top -d 1", 24, 80)
		defer j.Close()
		cursor := ""
		scr := screenShows(t, j, &cursor, "load average")
		if !strings.HasPrefix(scr.Lines[0], "top - ") {
			t.Errorf("top's first line = %q; want \"top - …\"", scr.Lines[0])
		}
		if err := j.Input(ctx, []byte("q"), false); err != nil {
			t.Fatal(err)
		}
		<-j.Ended()
		if exit, _, err := j.End(); err != nil || exit == nil || exit.ExitCode != 0 {
			t.Errorf("end = %+v, %v; want exit 0", exit, err)
		}
		_, _ = j.Release(ctx)
	})

	t.Run("pipe", func(t *testing.T) {
		conn, err := b.dial(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		spec := jobSpec("pipe-cat")
		spec.Input = true
		j, err := guestexec.StartJob(ctx, conn, backend.ExecRequest{Command: "cat; echo eof", Shell: backend.ShellClean}, spec)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if err := j.Input(ctx, []byte("hello\n"), false); err != nil {
			t.Fatal(err)
		}
		if err := j.Resize(ctx, heldjob.TTYSize{Rows: 10, Cols: 10}); !errors.Is(err, heldjob.ErrRefused) {
			t.Errorf("resize of a pipe job = %v; want a refusal", err)
		}
		if err := j.Input(ctx, []byte("world\n"), true); err != nil {
			t.Fatal(err)
		}
		out, _, p := jobOutput(t, j, "")
		if out != "hello\nworld\neof\n" || p.Exit.ExitCode != 0 {
			t.Errorf("output %q, exit %+v; want the input echoed, then eof, exit 0", out, *p.Exit)
		}
		_, _ = j.Release(ctx)
	})
}
