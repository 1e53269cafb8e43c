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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Instance statuses, as limactl list --json reports them
// (pkg/limatype/lima_instance.go).
const (
	statusRunning = "Running"
	statusStopped = "Stopped"
	statusBroken  = "Broken"
)

// instance is the part of one line of limactl list --json that this
// backend reads.
type instance struct {
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Dir    string   `json:"dir"`
	Errors []string `json:"errors,omitempty"`
}

// diskInfo is one line of limactl disk list --json (pkg/store/disk.go).
type diskInfo struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`
	Instance string `json:"instance"`
}

// maxOutput bounds what is kept of one limactl call's output.
const maxOutput = 1 << 20

// limactl runs the limactl command line.
type limactl struct {
	path string
	home string // LIMA_HOME
	// cred, when set, is who limactl runs as: limactl refuses root.
	cred    *syscall.Credential
	userDir string // HOME of that user
}

// cmdError is a limactl call that failed: its args, exit code and the
// end of its standard error (logrus lines).
type cmdError struct {
	args   []string
	code   int
	stderr string
	err    error
}

func (e *cmdError) Error() string {
	// limactl's reason is in the last lines of its log on stderr.
	lines := strings.Split(strings.TrimSpace(e.stderr), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	msg := strings.Join(lines, "; ")
	if len(msg) > 2048 {
		msg = msg[len(msg)-2048:]
	}
	return fmt.Sprintf("limactl %s: %v: %s", strings.Join(e.args, " "), e.err, msg)
}

func (e *cmdError) Unwrap() error { return e.err }

// run runs limactl with args (the global --tty=false first: never an
// editor or a menu) and stdin, and returns its standard output.
func (l *limactl) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	full := append([]string{"--tty=false"}, args...)
	cmd := exec.CommandContext(ctx, l.path, full...)
	env := []string{"LIMA_HOME=" + l.home, "PATH=" + os.Getenv("PATH")}
	if l.cred != nil {
		env = append(env, "HOME="+l.userDir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: l.cred}
	} else if h := os.Getenv("HOME"); h != "" {
		env = append(env, "HOME="+h)
	}
	cmd.Env = env
	cmd.Dir = l.home
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout boundedBuffer
	var stderr tailBuffer
	stdout.max, stderr.max = maxOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("limactl %s: %w (install Lima, or start the agent with --limactl naming it)", l.path, err)
		}
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.Bytes(), &cmdError{args: full, code: code, stderr: stderr.String(), err: err}
	}
	return stdout.Bytes(), nil
}

// list returns the instance name, or nil when Lima has none of that name.
func (l *limactl) list(ctx context.Context, name string) (*instance, error) {
	out, err := l.run(ctx, nil, "list", "--json", name)
	if err != nil {
		// An unmatched name: "No instance matching NAME found." and
		// exit 1 (cmd/limactl/list.go, unmatchedInstancesError).
		var ce *cmdError
		if errors.As(err, &ce) && ce.code == 1 && strings.Contains(ce.stderr, "No instance matching") {
			return nil, nil
		}
		return nil, err
	}
	// One JSON object per line (JSON Lines): several lines when name
	// matched more than one, which an exact name does not.
	return named(out, "limactl list --json "+name, name, func(i *instance) string { return i.Name })
}

// disk returns Lima's disk name, or nil when there is none.
func (l *limactl) disk(ctx context.Context, name string) (*diskInfo, error) {
	// An unknown disk is a warning and exit 0 with no output
	// (cmd/limactl/disk.go, diskListAction).
	out, err := l.run(ctx, nil, "disk", "list", "--json", name)
	if err != nil {
		return nil, err
	}
	return named(out, "limactl disk list --json "+name, name, func(d *diskInfo) string { return d.Name })
}

// named returns the object named name in out, the JSON Lines (one object
// a line) that cmd answered with, or nil when none is.
func named[T any](out []byte, cmd, name string, nameOf func(*T) string) (*T, error) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		v := new(T)
		if err := json.Unmarshal(line, v); err != nil {
			return nil, fmt.Errorf("%s: unexpected output %.200q: %w", cmd, line, err)
		}
		if nameOf(v) == name {
			return v, nil
		}
	}
	return nil, nil
}

// boundedBuffer keeps the first max bytes written: the output limactl
// answers with (JSON lines), of which more would be no instance's.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.max - b.Len(); room < len(p) {
		p = p[:max(room, 0)]
	}
	b.Buffer.Write(p)
	return n, nil
}

// tailBuffer keeps the last max bytes written: limactl's reason for
// failing ends its log.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	if len(b.buf) > b.max {
		return string(b.buf[len(b.buf)-b.max:])
	}
	return string(b.buf)
}
