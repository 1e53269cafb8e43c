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

package boundedlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBoundedLogRotates writes far more than the bound, in lines and in
// one line longer than a file: the log and its predecessor stay within
// it, the newest bytes are in the log, and lines are cut only when longer
// than a file.
func TestBoundedLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	const bound = 4096
	l, err := Open(path, bound)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := range 10000 {
		last = fmt.Sprintf("line %d of a guest that prints a lot\n", i)
		if n, err := l.Write([]byte(last)); n != len(last) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
		if i == 5000 {
			long := bytes.Repeat([]byte("x"), 3*bound)
			if n, err := l.Write(append(long, '\n')); n != len(long)+1 || err != nil {
				t.Fatalf("Write of a long line: %d, %v", n, err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) > bound || len(prev) > bound || len(prev) < bound/2 {
		t.Errorf("sizes %d and %d, want each at most %d (and the previous one well filled)", len(cur), len(prev), bound)
	}
	if !strings.HasSuffix(string(cur), last) {
		t.Errorf("the log does not end with the last line written: ...%q", cur[max(0, len(cur)-80):])
	}
	for _, b := range [][]byte{cur, prev} {
		if !bytes.HasPrefix(b, []byte("line ")) || !bytes.HasSuffix(b, []byte("\n")) {
			t.Errorf("a file does not hold whole lines: %q...%q", b[:min(len(b), 20)], b[max(0, len(b)-20):])
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 2 {
		t.Errorf("%d files, want the log and one predecessor", len(ents))
	}

	// Opened again (an agent that restarts), it counts what is there.
	l, err = Open(path, bound)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		_, _ = l.Write([]byte(last))
	}
	l.Close()
	if st, err := os.Stat(path); err != nil || st.Size() > bound {
		t.Errorf("reopened: %v, %v", st.Size(), err)
	}
}
