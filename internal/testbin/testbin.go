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

// Package testbin builds this module's commands for tests that run them as
// real processes (the guest binary in a sandbox, the playground binary).
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/playground-dev/playground/internal/controlplane"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
)

// Build builds the command at pkg (an import path of this module) into the
// repository's bin/test/ once per test process, and returns its path. The
// guest binary is static (CGO_ENABLED=0), as the agent image ships it.
// flags go to go build (say "-ldflags=-s -w" for a smaller binary); a
// build with flags has a path of its own, so that two builds of one
// command (an agent and its upgrade) coexist.
func Build(pkg string, flags ...string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	key := strings.Join(append([]string{pkg}, flags...), " ")
	if p, ok := built[key]; ok {
		return p, nil
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(root, "bin", "test", filepath.Base(pkg))
	if len(flags) > 0 {
		// Another build of the same command must not replace this one.
		sum := sha256.Sum256([]byte(key))
		out += "-" + hex.EncodeToString(sum[:4])
	}
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	built[key] = out
	return out, nil
}
