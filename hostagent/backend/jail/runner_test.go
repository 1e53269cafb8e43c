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

package jail

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The real runner, with sh standing in for FreeBSD's tools (it is in
// SystemPath on both systems).
func TestExecRunner(t *testing.T) {
	r := ExecRunner{}
	out, err := r.Run(context.Background(), "sh", "-c", `echo "$PATH"; echo refused >&2; exit 3`)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || strings.TrimSpace(ee.Stderr) != "refused" || string(out) != SystemPath+"\n" {
		t.Fatalf("Run: %q, %v; want the system PATH, exit 3 and its stderr", out, err)
	}
	if _, err := r.Run(context.Background(), "no-such-tool-here"); err == nil || !strings.Contains(err.Error(), "not found in "+SystemPath) {
		t.Errorf("a missing tool: %v", err)
	}

	// A command ends when its shell does, not when a background process
	// holding its output does.
	var stdout bytes.Buffer
	start := time.Now()
	p, err := r.Start(Command{Name: "sh", Args: []string{"-c", "sleep 20 & echo done; exit 5"}, Stdout: &stdout})
	if err != nil {
		t.Fatal(err)
	}
	code, sig, err := p.Wait()
	if err != nil || code != 5 || sig != "" || stdout.String() != "done\n" {
		t.Fatalf("Wait: %d %q %v, output %q", code, sig, err, stdout.String())
	}
	if d := time.Since(start); d > OutputDrain+5*time.Second {
		t.Errorf("the command took %v to end: its background process held it", d)
	}

	for _, tc := range []struct {
		signal func(Proc) error
		want   string
	}{{Proc.Terminate, "SIGTERM"}, {Proc.Kill, "SIGKILL"}} {
		p, err := r.Start(Command{Name: "sh", Args: []string{"-c", "exec sleep 20"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.signal(p); err != nil {
			t.Fatal(err)
		}
		if code, sig, err := p.Wait(); err != nil || code != -1 || sig != tc.want {
			t.Errorf("after %s: %d %q %v", tc.want, code, sig, err)
		}
	}
}
