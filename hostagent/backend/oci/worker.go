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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// SetWorker implements backend.WorkerSupervisor: it writes the worker's
// spec into the sandbox's run directory and signals the sandbox's init,
// which reads it (also whenever it starts) and keeps that worker running
// (guest's supervisor). The directory is the sandbox root's, mode
// 0700: the tenant reads neither the spec nor the token in it.
func (b *Backend) SetWorker(_ context.Context, id string, w *backend.Worker) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	if !backend.FileExists(filepath.Join(b.sandboxDir(id), "sandbox.json")) {
		return fmt.Errorf("oci: sandbox %s: %w", id, backend.ErrNotFound)
	}
	path := filepath.Join(b.runDir(id), guestapi.WorkerSpecFile)
	if w == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("oci: stopping the worker of sandbox %s: %w", id, err)
		}
		return b.signalInit(id, guestapi.WorkerSignal, "telling the init of sandbox %s about its worker")
	}
	if len(w.Argv) == 0 {
		return fmt.Errorf("oci: the worker of sandbox %s has no command", id)
	}
	data, err := json.Marshal(guestapi.WorkerSpec{Argv: w.Argv, Env: w.Env, Token: w.Token, Port: w.Port})
	if err != nil {
		return err
	}
	// Whatever the sandbox's root left under that name (a link to a file
	// of the host, say) is replaced, never read through.
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("oci: setting the worker of sandbox %s: %w", id, err)
		}
	}
	// Init, the sandbox's root, reads it: 0644 in a directory only that
	// root may enter.
	if err := writeIfChanged(path, data, 0o644); err != nil {
		return fmt.Errorf("oci: setting the worker of sandbox %s: %w", id, err)
	}
	return b.signalInit(id, guestapi.WorkerSignal, "telling the init of sandbox %s about its worker")
}

// signalInit sends sig to the sandbox's running init: WorkerSignal to
// read its worker spec again (a sandbox that is not running reads it when
// it starts), ResumeSignal to keep its spares (wakeInit). The signal goes
// through a pidfd of the process whose command line is the guest's, so
// that a reused PID never gets it. what, with the sandbox's ID for its %s,
// says what the signal was for in an error.
func (b *Backend) signalInit(id string, sig unix.Signal, what string) error {
	pid, err := b.initPID(id)
	if err != nil {
		return nil // not started
	}
	if b.isGVisorSandbox(pid, id) {
		// The guest's init has no PID on the node: runsc signals it.
		ctx, cancel := context.WithTimeout(context.Background(), b.opts.StartTimeout)
		defer cancel()
		if err := b.gvisor.signal(ctx, containerID(id), strconv.Itoa(int(sig))); err != nil && b.Alive(id) {
			return fmt.Errorf("oci: "+what+": %w", id, err)
		}
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // gone
	}
	defer unix.Close(fd)
	if !isGuestInit(pid) { // checked with the pidfd held: the pidfd is that process's
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("oci: "+what+": %w", id, err)
	}
	return nil
}

// Worker implements backend.WorkerSupervisor: the spec last set.
func (b *Backend) Worker(_ context.Context, id string) (*backend.Worker, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	data, err := readNoFollow(filepath.Join(b.runDir(id), guestapi.WorkerSpecFile), 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oci: the worker of sandbox %s: %w", id, err)
	}
	var spec guestapi.WorkerSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("oci: the worker spec of sandbox %s is not valid", id)
	}
	return &backend.Worker{Argv: spec.Argv, Env: spec.Env, Token: spec.Token, Port: spec.Port}, nil
}

// WorkerStatus implements backend.WorkerSupervisor from the state file
// the sandbox's init keeps.
func (b *Backend) WorkerStatus(_ context.Context, id string) (backend.WorkerStatus, error) {
	if err := backend.ValidateID(id); err != nil {
		return backend.WorkerStatus{}, err
	}
	// An unset worker has no status, whatever init has not yet removed
	// of its last one.
	if !backend.FileExists(filepath.Join(b.runDir(id), guestapi.WorkerSpecFile)) {
		return backend.WorkerStatus{}, fmt.Errorf("oci: sandbox %s has no worker: %w", id, backend.ErrNotFound)
	}
	data, err := readNoFollow(filepath.Join(b.runDir(id), guestapi.WorkerStatusFile), 64<<10)
	if errors.Is(err, os.ErrNotExist) {
		return backend.WorkerStatus{}, nil // set, not started yet
	}
	if err != nil {
		return backend.WorkerStatus{}, fmt.Errorf("oci: the worker status of sandbox %s: %w", id, err)
	}
	var st guestapi.WorkerState
	if err := json.Unmarshal(data, &st); err != nil {
		return backend.WorkerStatus{}, fmt.Errorf("oci: the worker status of sandbox %s is not valid", id)
	}
	return backend.WorkerStatus{Running: st.Running, StartedAt: st.StartedAt, Restarts: st.Restarts,
		LastExit: st.LastExit, LastExitTime: st.LastExitTime, Error: st.Error}, nil
}

// WorkerLog implements backend.WorkerSupervisor: the end of the worker's
// output, across the rotated file and the current one.
func (b *Backend) WorkerLog(_ context.Context, id string, limit int) ([]byte, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	path := filepath.Join(b.runDir(id), guestapi.WorkerLogFile)
	cur, err := readNoFollow(path, limit)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("oci: the worker log of sandbox %s: %w", id, err)
	}
	if len(cur) < limit {
		prev, err := readNoFollow(path+".1", limit-len(cur))
		if err == nil {
			cur = append(prev, cur...)
		}
	}
	return cur, nil
}

func (b *Backend) runDir(id string) string { return filepath.Join(b.sandboxDir(id), "run") }

// readNoFollow reads at most the last limit bytes of the regular file at
// path, which lives in a directory of the sandbox's root: a symbolic link
// there is never followed to a file of the host.
func readNoFollow(path string, limit int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, os.ErrNotExist
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if off := fi.Size() - int64(limit); off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, int64(limit)))
}
