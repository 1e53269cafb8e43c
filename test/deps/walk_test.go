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

package deps

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// moduleRoot is the module's root, from this package's directory.
var moduleRoot = filepath.Join("..", "..")

// goFiles reads the Go files under dir (a directory of the module: "." is
// all of it), skipping hidden directories, testdata and bin, and tests
// unless withTests, keyed by their path from the module's root. It fails
// t when the walk fails or finds fewer than 100 files, so that a walk
// that no longer sees the code fails rather than pass for ever.
func goFiles(t *testing.T, dir string, withTests bool) map[string][]byte {
	t.Helper()
	if _, err := os.Stat(filepath.Join(moduleRoot, "go.mod")); err != nil {
		t.Fatalf("the module's root is not at %s: %v", moduleRoot, err)
	}
	top := filepath.Join(moduleRoot, dir)
	files := map[string][]byte{}
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != top && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || (!withTests && strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		files[filepath.ToSlash(rel)] = src
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("read %d Go files under %s: the walk no longer sees the code", len(files), top)
	}
	return files
}
