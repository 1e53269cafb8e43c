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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/conformance"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// TestFacultySpecRules: names that are not a plain path element, that
// would hide the binaries' directory, or that repeat, and binaries that
// are not plain file names, are refused before anything is made; so is a
// build that is not there, or lacks a listed binary, when the sandbox
// starts, with a message that names it.
func TestFacultySpecRules(t *testing.T) {
	requireRunc(t)
	b := newBackend(t, newStateDir(t))
	ctx := context.Background()
	dir := t.TempDir()
	for name, fs := range map[string][]backend.Faculty{
		"dot-dot":       {{Name: "..", Dir: dir}},
		"slash":         {{Name: "a/b", Dir: dir}},
		"bin":           {{Name: "bin", Dir: dir}},
		"twice":         {{Name: "a", Dir: dir}, {Name: "a", Dir: dir}},
		"relative dir":  {{Name: "a", Dir: "rel"}},
		"binary path":   {{Name: "a", Dir: dir, Binaries: []string{"../x"}}},
		"binary dot":    {{Name: "a", Dir: dir, Binaries: []string{"."}}},
		"binary empty":  {{Name: "a", Dir: dir, Binaries: []string{""}}},
		"unclean dir":   {{Name: "a", Dir: dir + "/../x"}},
		"nul in binary": {{Name: "a", Dir: dir, Binaries: []string{"a\x00"}}},
	} {
		if err := b.Provision(ctx, backend.Spec{ID: "rules", Faculties: fs}); err == nil {
			t.Errorf("%s: Provision accepted %+v", name, fs)
		}
	}

	build := conformance.HostDir(t, nil)
	if err := os.Chmod(build, 0o700); err != nil { // the sandbox's root cannot reach it
		t.Fatal(err)
	}
	spec := backend.Spec{ID: "rules", Faculties: []backend.Faculty{{Name: "tools", Dir: build, Binaries: []string{"tool"}}}}
	if err := b.Provision(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, spec.ID); err == nil || !strings.Contains(err.Error(), "not readable and searchable by others") {
		t.Fatalf("a build the sandbox cannot reach: %v", err)
	}
	if err := os.Chmod(build, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, spec.ID); err == nil || !strings.Contains(err.Error(), "has no binary tool") {
		t.Fatalf("a build without its binary: %v", err)
	}
	if err := os.WriteFile(filepath.Join(build, "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, spec.ID, "tool"); got != "tool\n" {
		t.Fatalf("tool: %q", got)
	}
}

// TestNoFaculties: a sandbox without faculties has the faculties' directory
// all the same, read-only, with an empty bin on its PATH; the guest's own
// processes do not have it on theirs.
func TestNoFaculties(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "plain"})
	if got := sh(t, b, id, "ls -A "+guestapi.FacultiesDir+"; ls -A "+guestapi.FacultiesBin+"; if touch "+guestapi.FacultiesBin+"/x 2>/dev/null; then echo writable; fi"); got != "bin\n" {
		t.Fatalf("%s in a sandbox without faculties: %q, want bin alone, empty and read-only", guestapi.FacultiesDir, got)
	}
	env, err := os.ReadFile(filepath.Join("/proc", readPID(t, b, id), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), "PATH="+guestapi.SystemPath+"\x00") {
		t.Fatalf("init's environment %q, want PATH=%s", env, guestapi.SystemPath)
	}
}

func readPID(t *testing.T, b *Backend, id string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.sandboxDir(id), "init.pid"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestBuildCancelledWhileRunning: cancelling a build whose command runs
// kills it and removes the builder, processes included.
func TestBuildCancelledWhileRunning(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	b := newBackend(t, state)
	src, out := conformance.HostDir(t, nil), conformance.HostDir(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Build(ctx, backend.BuildRequest{ID: "cancel", Source: src, Out: out, Command: []string{"sleep", "7654329"}, Timeout: time.Hour})
		done <- err
	}()
	waitHostProcess(t, "sleep 7654329", true)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Build: %v, want context.Canceled", err)
	}
	waitHostProcess(t, "sleep 7654329", false)
	if left := leftovers(t, state, "cancel"); len(left) > 0 {
		t.Fatalf("a cancelled build left %q", left)
	}
}

// TestBuilderLeftByDeadAgent: a builder whose agent died mid-build (here:
// made and started, never removed) is removed by the next agent's New,
// processes, mounts and files; a tenant's sandbox is never taken for one.
func TestBuilderLeftByDeadAgent(t *testing.T) {
	requireRunc(t)
	state := newStateDir(t)
	b := newBackend(t, state)
	ctx := context.Background()
	startSandbox(t, b, backend.Spec{ID: "tenant"})
	conformance.StartNamed(t, b, "tenant", "sleep 7654330")
	if err := os.WriteFile(filepath.Join(state, buildersDir, "tenant"), nil, 0o600); err != nil {
		t.Fatal(err) // a marker naming a tenant's sandbox: ignored
	}
	if err := os.WriteFile(filepath.Join(state, buildersDir, "orphan"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sb, err := b.allocate(backend.Spec{ID: "orphan", Storage: b.storage(backend.Storage{})}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	sb.source = conformance.HostDir(t, nil)
	if err := b.start(ctx, sb); err != nil {
		t.Fatal(err)
	}
	conformance.StartNamed(t, b, "orphan", "sleep 7654331")
	// One whose marker is lost: a tenant's sandbox of its ID replaces it.
	unmarked, err := b.allocate(backend.Spec{ID: "unmarked", Storage: b.storage(backend.Storage{})}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	unmarked.source = conformance.HostDir(t, nil)
	if err := b.start(ctx, unmarked); err != nil {
		t.Fatal(err)
	}

	next := newBackend(t, state)
	waitHostProcess(t, "sleep 7654331", false)
	if left := leftovers(t, state, "orphan"); len(left) > 0 {
		t.Fatalf("the orphaned builder left %q", left)
	}
	if got := conformance.Running(t, next, "tenant", "sleep 7654330"); got != 1 {
		t.Fatalf("the tenant's sandbox lost its process: %d running", got)
	}

	spec := backend.Spec{ID: "unmarked"}
	if err := next.Reattach(ctx, spec); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Reattach over a builder: %v, want ErrNotFound", err)
	}
	startSandbox(t, next, spec)
	if got := sh(t, next, spec.ID, "ls -A /pile; ls -A /src /out 2>/dev/null; true"); got != "self.pile\n" {
		t.Fatalf("a sandbox provisioned over a builder's ID: %q, want its pile and no /src or /out", got)
	}
}

// waitHostProcess waits until a process with the command line runs on the
// host (in any sandbox), or until none does.
func waitHostProcess(t *testing.T, cmdline string, present bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		found := false
		pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range pids {
			if data, err := os.ReadFile(p); err == nil && strings.TrimRight(strings.ReplaceAll(string(data), "\x00", " "), " ") == cmdline {
				found = true
				break
			}
		}
		if found == present {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %q present=%v: not within 30s", cmdline, found)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
