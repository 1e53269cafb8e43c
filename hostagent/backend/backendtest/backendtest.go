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

// Package backendtest has an in-memory backend for tests of what sits on
// top of a backend (the kernel, the agent's API, the node agent's routing,
// the gateway's encoding) where a real one would only add time: its
// sandboxes are entries in a map and its commands run a Go function. It
// proves nothing about isolation; the conformance suite
// (hostagent/conformance) is what a real backend must pass. Both are test
// libraries, for tests alone: test/deps keeps them out
// of every shipped binary.
package backendtest

import (
	"context"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// RunFunc is what a command does: it writes its output to sink and
// returns its exit code.
type RunFunc func(id string, req backend.ExecRequest, sink backend.Sink) (exitCode int, err error)

// Fake is an in-memory backend. Its sandboxes keep their state across
// Provision, Start, Stop and Reattach as a real backend's do, so an agent
// restart over the same Fake reattaches them. It is safe for concurrent
// use.
//
// It is a backend.Builder too: a build runs BuildFunc, or by default
// copies the source's files into the output, as `cp -r /src/. /out`.
type Fake struct {
	name string
	run  RunFunc

	// BuildFunc, if set, is what every Build does (after ctx is checked).
	// Set it before the Fake is in use.
	BuildFunc func(backend.BuildRequest) (backend.BuildResult, error)
	// ExecFunc, if set, starts the commands of a running sandbox instead
	// of the RunFunc, for a process that runs on after Exec returns (a
	// job that keeps running). Set it before the Fake is in use.
	ExecFunc func(id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error)

	mu        sync.Mutex
	sandboxes map[string]bool // provisioned: running
	commands  map[string][]string
	// specFaculties are the faculties of each sandbox's latest spec;
	// faculties those its running incarnation started with.
	specFaculties map[string][]backend.Faculty
	faculties     map[string][]backend.Faculty
	builds        int
	holders       map[string]*Holder
}

var (
	_ backend.Builder   = (*Fake)(nil)
	_ backend.JobHolder = (*Fake)(nil)
)

// New returns a Fake of backend class name whose commands run run.
func New(name string, run RunFunc) *Fake {
	return &Fake{
		name: name, run: run, sandboxes: map[string]bool{}, commands: map[string][]string{},
		specFaculties: map[string][]backend.Faculty{}, faculties: map[string][]backend.Faculty{},
		holders: map[string]*Holder{},
	}
}

// Writes returns a RunFunc that writes the pieces in order and exits 0.
func Writes(pieces ...Piece) RunFunc {
	return func(_ string, _ backend.ExecRequest, sink backend.Sink) (int, error) {
		for _, p := range pieces {
			sink.Write(p.Stream, p.Data)
		}
		return 0, nil
	}
}

// Piece is one write of a command's output.
type Piece struct {
	Stream backend.Stream
	Data   []byte
}

func (f *Fake) Name() string { return f.name }

func (f *Fake) Capabilities() backend.Capabilities {
	return backend.Capabilities{ProvesCleanup: true, Builder: f, JobHolder: f}
}

// holder is sandbox id's Holder, made on first use; nil when the sandbox
// does not run.
func (f *Fake) holder(id string) *Holder {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.sandboxes[id] {
		return nil
	}
	h := f.holders[id]
	if h == nil {
		h = NewHolder(func(req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
			return f.Exec(context.Background(), id, req, sink)
		})
		f.holders[id] = h
	}
	return h
}

// JobConn implements backend.JobHolder: the sandbox's jobs are held by a
// Holder, in memory, and run the Fake's RunFunc.
func (f *Fake) JobConn(_ context.Context, id string) (net.Conn, error) {
	h := f.holder(id)
	if h == nil {
		return nil, backend.ErrNotRunning
	}
	return h.Conn(), nil
}

// AttachJob implements backend.JobHolder.
func (f *Fake) AttachJob(_ context.Context, id, jobID string) (net.Conn, error) {
	h := f.holder(id)
	if h == nil {
		return nil, backend.ErrNotRunning
	}
	return h.Attach(jobID)
}

// ListJobs implements backend.JobHolder.
func (f *Fake) ListJobs(_ context.Context, id string) ([]backend.JobRecord, error) {
	h := f.holder(id)
	if h == nil {
		return nil, backend.ErrNotRunning
	}
	return h.List(), nil
}

func (f *Fake) Provision(_ context.Context, spec backend.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sandboxes[spec.ID]; !ok {
		f.sandboxes[spec.ID] = false // provisioned, not running
	}
	f.specFaculties[spec.ID] = spec.Faculties
	return nil
}

func (f *Fake) Start(_ context.Context, id string) error { return f.set(id, true) }
func (f *Fake) Stop(_ context.Context, id string) error  { return f.set(id, false) }

func (f *Fake) set(id string, running bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	was, ok := f.sandboxes[id]
	if !ok {
		return backend.ErrNotFound
	}
	if running && !was {
		// As a real backend's: the faculties are fixed at the start.
		f.faculties[id] = f.specFaculties[id]
	}
	f.sandboxes[id] = running
	if h := f.holders[id]; h != nil && !running {
		// The sandbox's jobs end with it.
		delete(f.holders, id)
		go h.Close()
	}
	return nil
}

func (f *Fake) Reattach(_ context.Context, spec backend.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	running, ok := f.sandboxes[spec.ID]
	if !ok {
		return backend.ErrNotFound
	}
	f.specFaculties[spec.ID] = spec.Faculties
	if !running {
		return backend.ErrNotRunning
	}
	return nil
}

func (f *Fake) Detach(context.Context, string) error { return nil }

func (f *Fake) Destroy(_ context.Context, id string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sandboxes[id]; !ok {
		return backend.ErrNotFound
	}
	delete(f.sandboxes, id)
	if h := f.holders[id]; h != nil {
		delete(f.holders, id)
		go h.Close()
	}
	delete(f.specFaculties, id)
	delete(f.faculties, id)
	return nil
}

func (f *Fake) PileDir(id string) string { return "/nonexistent/" + id }

// Exec runs the command's RunFunc to its end before it returns, and the
// process it returns has ended; or it starts it with ExecFunc.
func (f *Fake) Exec(_ context.Context, id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
	f.mu.Lock()
	running := f.sandboxes[id]
	if running {
		f.commands[id] = append(f.commands[id], req.Command)
	}
	f.mu.Unlock()
	if !running {
		return nil, backend.ErrNotRunning
	}
	if f.ExecFunc != nil {
		return f.ExecFunc(id, req, sink)
	}
	start := time.Now()
	code, err := f.run(id, req, sink)
	if err != nil {
		return nil, err
	}
	return ended{backend.ExitStatus{ExitCode: code, Duration: time.Since(start)}}, nil
}

// Has reports whether the sandbox is provisioned.
func (f *Fake) Has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.sandboxes[id]
	return ok
}

// Ran is the commands run in the sandbox, in order.
func (f *Fake) Ran(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.commands[id]...)
}

// Faculties returns the faculties sandbox id runs with: those of the
// spec it last started with (a later Provision or Reattach of the running
// sandbox changes them at its next start, as on a real backend); nil when
// it never started.
func (f *Fake) Faculties(id string) []backend.Faculty {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]backend.Faculty(nil), f.faculties[id]...)
}

// Build implements backend.Builder: BuildFunc if set, else a copy of the
// source's directories and regular files into the output (symbolic links
// and other files are left out), exit 0. Every call counts in Builds.
func (f *Fake) Build(ctx context.Context, req backend.BuildRequest) (backend.BuildResult, error) {
	f.mu.Lock()
	f.builds++
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return backend.BuildResult{}, err
	}
	if f.BuildFunc != nil {
		return f.BuildFunc(req)
	}
	start := time.Now()
	if err := copyTree(req.Source, req.Out); err != nil {
		return backend.BuildResult{}, err
	}
	return backend.BuildResult{Exit: backend.ExitStatus{Duration: time.Since(start)}}, nil
}

// Builds is how many times Build was called.
func (f *Fake) Builds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builds
}

// copyTree copies src's directories and regular files into dst, modes
// kept, links not followed.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case p == src:
			return nil
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case !d.Type().IsRegular():
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

type ended struct{ st backend.ExitStatus }

func (e ended) Wait(context.Context) (backend.ExitStatus, error) { return e.st, nil }
func (e ended) Kill(context.Context) error                       { return nil }
