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

package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/internal/testbin"
)

// The probe (package probe) tries from inside a sandbox what a shell
// cannot: sockets of any address family, system calls of another ABI. The
// suite builds it once for this machine and writes it into a sandbox with
// the kernel's WriteFile, as a tenant would with the write tool.
var probeBuild struct {
	once sync.Once
	path string
	data []byte
	err  error
}

func probeBinary(t testing.TB) (path string, data []byte) {
	t.Helper()
	probeBuild.once.Do(func() {
		p := &probeBuild
		// Stripped, it is half the size: well below the 3 MiB a write takes.
		p.path, p.err = testbin.Build("github.com/playground-dev/playground/hostagent/conformance/probe", "-ldflags=-s -w", "-trimpath")
		if p.err == nil {
			p.data, p.err = os.ReadFile(p.path)
		}
	})
	if probeBuild.err != nil {
		t.Fatalf("building the probe: %v", probeBuild.err)
	}
	return probeBuild.path, probeBuild.data
}

// probeInside installs the probe in the sandbox of s and returns a function
// that runs it there with args and returns its output, or how it ended
// when it printed nothing (killed by a signal, say).
func (s *session) probeInside(t *testing.T) func(args ...string) string {
	t.Helper()
	_, data := probeBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	const name = ".conformance-probe"
	if _, err := s.agent.Files().WriteFile(ctx, s.tenant, s.handle, name, "", data); err != nil {
		t.Fatalf("writing the probe into the sandbox: %v", err)
	}
	s.sh(t, "chmod 755 ~/"+name)
	return func(args ...string) string {
		t.Helper()
		res := s.exec(t, agentapi.ExecRequest{Command: "~/" + name + " " + strings.Join(args, " "), Shell: backend.ShellClean})
		if out := strings.TrimSpace(string(res.Stdout)); out != "" {
			return out
		}
		return fmt.Sprintf("exit %d (signal %q): %s", res.ExitCode, res.Signal, res.Stderr)
	}
}

// probeOnHost runs the probe on this machine, outside any sandbox: what
// the node's kernel does with the same call.
func probeOnHost(t *testing.T, args ...string) string {
	t.Helper()
	path, _ := probeBinary(t)
	out, err := exec.Command(path, args...).Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		return s
	}
	return fmt.Sprintf("error %v", err)
}
