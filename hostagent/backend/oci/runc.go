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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// runc drives the OCI runtime binary. All its state lives under root, one
// per agent state directory, so agents never see each other's containers.
// The same driver runs runsc (gVisor) for sandboxes of IsolationGVisor,
// over a root of its own: its commands and flags are runc's, but its state
// files, the PID it reports and its cgroups are its own (see gvisor.go).
type runc struct {
	bin  string
	root string
	// flags go before the command: runsc's global configuration.
	flags []string
	// gvisor marks runsc.
	gvisor bool
}

// containerState is the part of `runc state` output that we use.
type containerState struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"` // created, running, paused, stopped
}

// maxLogSize bounds init.log: it is truncated at the next start beyond it.
const maxLogSize = 1 << 20

// exists reports whether the runtime has state for the container: its
// directory under root, which is also how runc and crun themselves decide
// that an ID is taken (runc keeps state.json in it, crun status). It
// avoids parsing the runtime's "does not exist" error text.
func (r *runc) exists(id string) bool {
	if r.gvisor {
		return backend.FileExists(r.gvisorStateFile(id))
	}
	return backend.FileExists(filepath.Join(r.root, id))
}

func (r *runc) state(ctx context.Context, id string) (*containerState, error) {
	out, err := r.output(ctx, "state", r.name(id))
	if err != nil {
		return nil, err
	}
	var st containerState
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("runc state %s: %w", id, err)
	}
	return &st, nil
}

// run creates and starts the container detached. Its stdio is not tied to
// the agent: stdin is /dev/null and stdout/stderr go to logPath, which is
// also where runc's own errors land. A pipe here would keep the agent
// waiting for the container's exit.
//
// setup, when not nil, runs first in a mount namespace of its own where
// the runtime then runs (inMountNamespace): what it mounts is the
// container's to bind, and never the node's.
//
// flags are global flags of this run alone, after the runtime's own (the
// last of a flag wins).
func (r *runc) run(ctx context.Context, bundle, id, logPath string, setup func() error, flags ...string) (pid int, err error) {
	return r.create(ctx, []string{"run"}, bundle, id, logPath, setup, flags...)
}

// restore is run from a checkpoint's image (runsc only): the container's
// processes are restored as they were saved, none started.
func (r *runc) restore(ctx context.Context, bundle, id, logPath, image string, flags ...string) (pid int, err error) {
	return r.create(ctx, []string{"restore", "--image-path", image}, bundle, id, logPath, nil, flags...)
}

// create runs the runtime's command sub (run, restore) detached, and
// returns the container's PID.
func (r *runc) create(ctx context.Context, sub []string, bundle, id, logPath string, setup func() error, flags ...string) (pid int, err error) {
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxLogSize {
		_ = os.Truncate(logPath, 0)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	before, _ := logf.Seek(0, 2)
	// The PID file saves a `runc state` after the start: a third runtime
	// process, about 18 ms of a 70 ms start on a small machine.
	pidFile := filepath.Join(bundle, "init.pid")
	args := append(append(r.args(flags...), sub...), "--detach", "--pid-file", pidFile, "--bundle", bundle, r.name(id))
	// The caller's cancel does not kill the runtime mid-create: killed
	// between making the container's cgroups and recording its state, it
	// leaves cgroups that no delete knows of (a cancelled gVisor build did).
	// The cancel takes effect when run returns; ctx's deadline still holds.
	rctx := context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(rctx, deadline)
		defer cancel()
	}
	cmd := exec.CommandContext(rctx, r.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if r.gvisor {
		fd, err := r.gvisorIntoUnified(bundle)
		if err != nil {
			return 0, err
		}
		if fd >= 0 {
			defer unix.Close(fd)
			cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		}
	}
	start := cmd.Run
	if setup != nil {
		start = func() error {
			return inMountNamespace(func() error {
				if err := setup(); err != nil {
					return err
				}
				return cmd.Run()
			})
		}
	}
	if err := start(); err != nil {
		msg := tailFrom(logPath, before)
		return 0, fmt.Errorf("%s %s: %w: %s", filepath.Base(r.bin), sub[0], err, msg)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s %s: %w (the container was made; the caller removes it)", filepath.Base(r.bin), sub[0], err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("%s %s: the container's PID: %w", filepath.Base(r.bin), sub[0], err)
	}
	if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s %s: the container's PID file holds %q", filepath.Base(r.bin), sub[0], b)
	}
	return pid, nil
}

// cgroupPaths returns the container's cgroup directories (one per v1
// controller, or the v2 one) from runc's state file.
func (r *runc) cgroupPaths(id string) []string {
	if r.gvisor {
		return r.gvisorCgroupPaths(id)
	}
	var paths []string
	for _, p := range r.stateCgroups(id) {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// oomCounter returns the file of the container's memory cgroup that
// counts OOM kills ("oom_kill N"), or "" when runc's state names none.
func (r *runc) oomCounter(id string) string {
	if r.gvisor {
		return r.gvisorOOMCounter(id)
	}
	paths := r.stateCgroups(id)
	if p := paths["memory"]; p != "" {
		return filepath.Join(p, "memory.oom_control")
	}
	if p := paths[""]; p != "" {
		return filepath.Join(p, "memory.events")
	}
	return ""
}

// stateCgroups are the container's cgroups as runc's state names them, by
// controller (v1) or "" (the unified hierarchy); none when it names none.
func (r *runc) stateCgroups(id string) map[string]string {
	data, err := os.ReadFile(filepath.Join(r.root, id, "state.json"))
	if err != nil {
		return nil
	}
	var st struct {
		CgroupPaths map[string]string `json:"cgroup_paths"`
	}
	if json.Unmarshal(data, &st) != nil {
		return nil
	}
	return st.CgroupPaths
}

// processes lists the processes in the container's pids cgroup (host
// PIDs).
func (r *runc) processes(id string) ([]int, error) {
	events := r.pidsCounter(id)
	if events == "" {
		return nil, fmt.Errorf("no pids cgroup known for container %s", id)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(events), "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s/cgroup.procs holds %q", filepath.Dir(events), f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// pidsCounter returns the file of the container's pids cgroup that counts
// the forks its limit refused ("max N"), or "" when runc's state names
// none (gVisor: the sentry's processes are not the host's).
func (r *runc) pidsCounter(id string) string {
	if r.gvisor {
		return ""
	}
	paths := r.stateCgroups(id)
	if p := paths["pids"]; p != "" {
		return filepath.Join(p, "pids.events")
	}
	if p := paths[""]; p != "" {
		return filepath.Join(p, "pids.events")
	}
	return ""
}

func (r *runc) pause(ctx context.Context, id string) error {
	_, err := r.output(ctx, "pause", r.name(id))
	return err
}

func (r *runc) resume(ctx context.Context, id string) error {
	_, err := r.output(ctx, "resume", r.name(id))
	return err
}

// delete removes the container; with force it kills a running one first
// (SIGKILL to every process of the container).
func (r *runc) delete(ctx context.Context, id string, force bool) error {
	args := []string{"delete"}
	if force {
		args = append(args, "--force")
	}
	_, err := r.output(ctx, append(args, r.name(id))...)
	return err
}

func (r *runc) output(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.bin, r.args(args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(r.bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// name is the runtime's name of container id. runsc takes any unique
// prefix of a name for the name, and refuses a name that is also the
// prefix of another's ("pg-a" of "pg-ab") as ambiguous: its names end in
// a '+', which no sandbox ID holds, so none is the prefix of another.
func (r *runc) name(id string) string {
	if r.gvisor {
		return id + "+"
	}
	return id
}

// args are the runtime's global flags, then the command's.
func (r *runc) args(cmd ...string) []string {
	args := append([]string{"--root", r.root}, r.flags...)
	return append(args, cmd...)
}

// tailFrom returns what was appended to a log after offset, bounded.
func tailFrom(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || offset > int64(len(data)) {
		return tail(path)
	}
	data = data[offset:]
	if len(data) > 2048 {
		data = data[len(data)-2048:]
	}
	return strings.TrimSpace(string(data))
}
