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

package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeRoot writes files under a temporary root.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2 in a container (its cgroup namespace)", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "536870912\n",
		}, 512 << 20},
		{"v2 at its path", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "1073741824\n",
		}, 1 << 30},
		{"v2 unlimited", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v1 (this machine's kind: a hybrid)", map[string]string{
			"proc/self/cgroup": "12:pids:/x\n9:memory:/kubepods/pod2\n0::/\n",
			"sys/fs/cgroup/memory/kubepods/pod2/memory.limit_in_bytes": "268435456\n",
		}, 256 << 20},
		{"v1 unlimited", map[string]string{
			"proc/self/cgroup":                           "9:cpu,memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"no cgroup files", map[string]string{"proc/self/cgroup": "0::/\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := cgroupLimit(fakeRoot(t, tc.files))
			if err != nil || got != tc.want {
				t.Fatalf("limit %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, _, err := cgroupLimit(fakeRoot(t, map[string]string{
		"proc/self/cgroup":         "0::/\n",
		"sys/fs/cgroup/memory.max": "lots\n",
	})); err == nil {
		t.Fatal("a limit that is not a number was taken")
	}
}

// TestOperatorWins: GOMEMLIMIT, when set, is left as it is.
func TestOperatorWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "300MiB")
	if set, source, err := Set(DefaultFraction); set != 0 || err != nil || source != "GOMEMLIMIT=300MiB" {
		t.Fatalf("Set: %d from %q, %v", set, source, err)
	}
}
