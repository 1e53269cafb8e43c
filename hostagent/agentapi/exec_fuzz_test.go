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

package agentapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzReadBinaryExec: an exec answer from an agent, however malformed, is
// read within its bounds or refused; a well-formed one round-trips.
func FuzzReadBinaryExec(f *testing.F) {
	good := func(stdout, stderr []byte) []byte {
		h, _ := json.Marshal(ExecHeader{StdoutSize: len(stdout), StderrSize: len(stderr), ExitStatus: ExitStatus{ExitCode: 3}})
		return append(append(append(h, '\n'), stdout...), stderr...)
	}
	f.Add(good([]byte("out"), []byte("err")))
	f.Add(good(nil, nil))
	f.Add([]byte(`{"stdout_size":1073741824,"stderr_size":0}` + "\n"))
	f.Add([]byte(`{"stdout_size":-1}` + "\n"))
	f.Add([]byte(`{"stdout_size":2}` + "\nabc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var reserved int64
		res, err := readBinaryExec(bytes.NewReader(data), func(n int64) error { reserved = n; return nil })
		if err != nil {
			return
		}
		if int64(len(res.Stdout)+len(res.Stderr)) > maxResponseBytes || reserved < int64(len(res.Stdout)+len(res.Stderr)) {
			t.Fatalf("read %d+%d bytes with %d reserved", len(res.Stdout), len(res.Stderr), reserved)
		}
		if !bytes.HasSuffix(data, append(append([]byte{}, res.Stdout...), res.Stderr...)) {
			t.Fatal("the output is not the answer's last bytes")
		}
	})
}
