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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Bounds of the worker's supervision.
const (
	// minWorkerBackoff and maxWorkerBackoff pace restarts of a worker
	// that keeps exiting; one that ran workerStableAfter starts again at
	// once.
	minWorkerBackoff  = time.Second
	maxWorkerBackoff  = 30 * time.Second
	workerStableAfter = 30 * time.Second
	// workerStopGrace is how long a worker has between SIGTERM and
	// SIGKILL when it is stopped or replaced.
	workerStopGrace = 5 * time.Second
)

// supervisor keeps the worker of WorkerSpecFile running in the sandbox.
// All its methods run on init's main loop.
type supervisor struct {
	log *log.Logger

	raw   []byte               // the spec file's bytes, to see a change
	spec  *guestapi.WorkerSpec // nil: no worker wanted
	state guestapi.WorkerState

	backoff   time.Duration
	nextStart time.Time
	// stopping are worker processes told to stop, by the time they are
	// killed.
	stopping map[int]time.Time
}

func newSupervisor(l *log.Logger) *supervisor {
	return &supervisor{log: l, stopping: map[int]time.Time{}}
}

// reload reads the spec file; a changed spec stops the running worker and
// starts the new one.
func (s *supervisor) reload() {
	raw, err := os.ReadFile(filepath.Join(guestapi.RunDir, guestapi.WorkerSpecFile))
	if errors.Is(err, os.ErrNotExist) {
		raw, err = nil, nil
	}
	if err != nil {
		s.log.Printf("worker: reading its spec: %v", err)
		return
	}
	if bytes.Equal(raw, s.raw) && (raw != nil) == (s.spec != nil) {
		return
	}
	var spec *guestapi.WorkerSpec
	if raw != nil {
		spec = new(guestapi.WorkerSpec)
		if err := json.Unmarshal(raw, spec); err != nil || len(spec.Argv) == 0 {
			s.log.Printf("worker: its spec is not valid (%v); keeping the current one", err)
			return
		}
	}
	s.raw, s.spec = raw, spec
	s.stop()
	s.state = guestapi.WorkerState{}
	s.backoff, s.nextStart = 0, time.Time{}
	if spec == nil {
		_ = os.Remove(guestapi.WorkerTokenFile)
	}
	s.publish()
}

// stop tells the running worker to go.
func (s *supervisor) stop() {
	if !s.state.Running {
		return
	}
	_ = unix.Kill(-s.state.PID, unix.SIGTERM)
	s.stopping[s.state.PID] = time.Now().Add(workerStopGrace)
	s.state.Running, s.state.PID = false, 0
}

// tick starts the worker when it is wanted and due, kills stopped ones
// past their grace, and returns when it wants to run next (zero: never).
func (s *supervisor) tick() time.Time {
	now := time.Now()
	var next time.Time
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for pid, deadline := range s.stopping {
		if now.Before(deadline) {
			soonest(deadline)
			continue
		}
		_ = unix.Kill(-pid, unix.SIGKILL)
		delete(s.stopping, pid)
	}
	if s.spec == nil || s.state.Running {
		return next
	}
	if now.Before(s.nextStart) {
		soonest(s.nextStart)
		return next
	}
	if err := s.start(); err != nil {
		s.state.Error = err.Error()
		s.log.Printf("worker: %v", err)
		s.failed()
		soonest(s.nextStart)
	}
	s.publish()
	return next
}

func (s *supervisor) failed() {
	switch {
	case s.backoff == 0:
		s.backoff = minWorkerBackoff
	case s.backoff < maxWorkerBackoff:
		s.backoff = min(2*s.backoff, maxWorkerBackoff)
	}
	s.nextStart = time.Now().Add(s.backoff)
}

// start runs the worker as the sandbox user, in a process group of its
// own, its output going to the worker log.
func (s *supervisor) start() error {
	if err := writeToken(s.spec.Token); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	path := s.spec.Argv[0]
	if !filepath.IsAbs(path) {
		// Looked up on the PATH the spec gives the worker.
		lp, err := lookPath(path, s.spec.Env)
		if err != nil {
			return fmt.Errorf("starting %s: %w", path, err)
		}
		path = lp
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		r.Close()
		w.Close()
		return err
	}
	defer devNull.Close()
	p, err := os.StartProcess(path, s.spec.Argv, &os.ProcAttr{
		Dir:   guestapi.TenantHome,
		Env:   append(slices.Clone(s.spec.Env), guestapi.WorkerTokenEnv+"="+guestapi.WorkerTokenFile),
		Files: []*os.File{devNull, w, w},
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Credential: &syscall.Credential{Uid: guestapi.TenantUID, Gid: guestapi.TenantGID, Groups: []uint32{}},
		},
	})
	w.Close()
	if err != nil {
		r.Close()
		return fmt.Errorf("starting %s: %w", s.spec.Argv[0], err)
	}
	// The OOM killer takes the tenant's processes before the supervision.
	_ = os.WriteFile("/proc/"+strconv.Itoa(p.Pid)+"/oom_score_adj", []byte(strconv.Itoa(min(1000, readOOMScoreAdj()+guestapi.TenantOOMScoreBoost))), 0)
	go copyWorkerLog(r)
	if s.state.StartedAt.IsZero() && s.state.LastExit == "" {
		s.state.Restarts = 0
	} else {
		s.state.Restarts++
	}
	s.state.Running, s.state.PID, s.state.StartedAt, s.state.Error = true, p.Pid, time.Now().UTC(), ""
	_ = p.Release() // init reaps with wait4(-1)
	return nil
}

// exited records the end of a child of init; it reports whether the child
// was a worker.
func (s *supervisor) exited(pid int, ws unix.WaitStatus) bool {
	if _, ok := s.stopping[pid]; ok {
		delete(s.stopping, pid)
		return true
	}
	if !s.state.Running || pid != s.state.PID {
		return false
	}
	ran := time.Since(s.state.StartedAt)
	s.state.Running, s.state.PID = false, 0
	s.state.LastExit, s.state.LastExitTime = describeWait(ws), time.Now().UTC()
	s.log.Printf("worker %d ended after %s: %s", pid, ran.Round(time.Millisecond), s.state.LastExit)
	if ran >= workerStableAfter {
		s.backoff = 0
		s.nextStart = time.Time{}
	} else {
		s.failed()
	}
	s.publish()
	return true
}

// publish writes the state for the agent, by rename.
func (s *supervisor) publish() {
	b, err := json.Marshal(s.state)
	if err != nil || s.spec == nil {
		b = nil
	}
	path := filepath.Join(guestapi.RunDir, guestapi.WorkerStatusFile)
	if b == nil {
		_ = os.Remove(path)
		return
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		_ = os.Rename(tmp, path)
	}
}

// writeToken puts the worker's bearer where only the sandbox user reads it:
// a file of that user's, mode 0400, in a directory of init's that others
// may traverse but not list or write (0711).
func writeToken(token string) error {
	dir := filepath.Dir(guestapi.WorkerTokenFile)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	tmp := guestapi.WorkerTokenFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(token), 0o400); err != nil {
		return err
	}
	if err := os.Chown(tmp, guestapi.TenantUID, guestapi.TenantGID); err != nil {
		return err
	}
	return os.Rename(tmp, guestapi.WorkerTokenFile)
}

// lookPath finds file on the PATH of env (DefaultPath without one).
func lookPath(file string, env []string) (string, error) {
	path := guestapi.DefaultPath
	for _, kv := range env {
		if v, ok := bytes.CutPrefix([]byte(kv), []byte("PATH=")); ok {
			path = string(v)
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s is not on the worker's PATH (%s)", exec.ErrNotFound, file, path)
}

// copyWorkerLog appends the worker's output to the worker log, rotating it
// past MaxWorkerLog, until the last writer closes the pipe.
func copyWorkerLog(r *os.File) {
	defer r.Close()
	path := filepath.Join(guestapi.RunDir, guestapi.WorkerLogFile)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if fi, err := os.Stat(path); err == nil && fi.Size()+int64(n) > guestapi.MaxWorkerLog {
				_ = os.Rename(path, path+".1")
			}
			if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
				_, _ = f.Write(buf[:n])
				f.Close()
			}
		}
		if err != nil {
			return
		}
	}
}
