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
// (hostagent/backend/conformance) is what a real backend must pass.
package backendtest

import (
	"context"
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
type Fake struct {
	name string
	run  RunFunc

	mu        sync.Mutex
	sandboxes map[string]bool // provisioned: running
	commands  map[string][]string
}

// New returns a Fake of backend class name whose commands run run.
func New(name string, run RunFunc) *Fake {
	return &Fake{name: name, run: run, sandboxes: map[string]bool{}, commands: map[string][]string{}}
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
	return backend.Capabilities{ProvesCleanup: true}
}

func (f *Fake) Provision(_ context.Context, spec backend.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes[spec.ID] = f.sandboxes[spec.ID]
	return nil
}

func (f *Fake) Start(_ context.Context, id string) error { return f.set(id, true) }
func (f *Fake) Stop(_ context.Context, id string) error  { return f.set(id, false) }

func (f *Fake) set(id string, running bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sandboxes[id]; !ok {
		return backend.ErrNotFound
	}
	f.sandboxes[id] = running
	return nil
}

func (f *Fake) Reattach(_ context.Context, spec backend.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	running, ok := f.sandboxes[spec.ID]
	switch {
	case !ok:
		return backend.ErrNotFound
	case !running:
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
	return nil
}

func (f *Fake) PileDir(id string) string { return "/nonexistent/" + id }

// Exec runs the command's RunFunc to its end before it returns; the
// process it returns has ended.
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
	start := time.Now()
	code, err := f.run(id, req, sink)
	if err != nil {
		return nil, err
	}
	return ended{backend.ExitStatus{Code: code, Duration: time.Since(start)}}, nil
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

type ended struct{ st backend.ExitStatus }

func (e ended) Wait(context.Context) (backend.ExitStatus, error) { return e.st, nil }
func (e ended) Kill(context.Context) error                       { return nil }
