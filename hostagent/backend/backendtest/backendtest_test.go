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

package backendtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestFakeBuild: by default a build copies the source's files, nested and
// with their modes, and no link; BuildFunc replaces it; every call counts.
func TestFakeBuild(t *testing.T) {
	f := New("fake", Writes())
	src, out := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"tool": 0o755, "sub/data": 0o644} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	res, err := f.Build(context.Background(), backend.BuildRequest{ID: "b1", Source: src, Out: out, Command: []string{"make"}})
	if err != nil || res.Exit.ExitCode != 0 {
		t.Fatalf("Build: %+v, %v", res, err)
	}
	for name, mode := range map[string]os.FileMode{"tool": 0o755, "sub/data": 0o644} {
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s in the output: %v, %v; want mode %v", name, fi, err, mode)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "link")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a link came into the output: %v", err)
	}

	f.BuildFunc = func(req backend.BuildRequest) (backend.BuildResult, error) {
		return backend.BuildResult{Exit: backend.ExitStatus{ExitCode: 2}, Log: []byte(req.ID + " failed")}, nil
	}
	res, err = f.Build(context.Background(), backend.BuildRequest{ID: "b2", Source: src, Out: t.TempDir()})
	if err != nil || res.Exit.ExitCode != 2 || string(res.Log) != "b2 failed" {
		t.Fatalf("Build with BuildFunc: %+v, %v", res, err)
	}
	if f.Builds() != 2 {
		t.Fatalf("Builds() = %d, want 2", f.Builds())
	}
}

// TestFakeFaculties: a sandbox runs with the faculties it started with; a
// new spec applies at its next start, as on a real backend.
func TestFakeFaculties(t *testing.T) {
	f := New("fake", Writes())
	ctx := context.Background()
	one := []backend.Faculty{{Name: "one", Dir: "/builds/1", Binaries: []string{"a"}}}
	two := []backend.Faculty{{Name: "two", Dir: "/builds/2", Binaries: []string{"b"}}}
	if err := f.Provision(ctx, backend.Spec{ID: "s", Faculties: one}); err != nil {
		t.Fatal(err)
	}
	if got := f.Faculties("s"); got != nil {
		t.Fatalf("before the start: %v", got)
	}
	if err := f.Start(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := f.Reattach(ctx, backend.Spec{ID: "s", Faculties: two}); err != nil {
		t.Fatal(err)
	}
	if got := f.Faculties("s"); !reflect.DeepEqual(got, one) {
		t.Fatalf("running, after a new spec: %v, want the first", got)
	}
	if err := f.Stop(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if got := f.Faculties("s"); !reflect.DeepEqual(got, two) {
		t.Fatalf("after a restart: %v, want the second", got)
	}
}

func TestFakeCapabilities(t *testing.T) { CheckCapabilities(t, New("mem", nil)) }
