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

package main

import (
	"flag"
	"strings"
	"testing"
)

// TestLimaFlags: the lima backend is off unless --limactl names limactl,
// and a limactl that is not there is a clear error, not a silent "off".
func TestLimaFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" means: no backend, no error
	}{
		{nil, ""},
		{[]string{"--lima-user=nobody"}, "need --limactl"},
		{[]string{"--limactl=/nonexistent/limactl"}, "install Lima"},
		{[]string{"--limactl=no-such-limactl-here"}, "install Lima"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f := registerLimaFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		be, err := f.backend(t.TempDir(), "")
		switch {
		case tc.want == "" && (err != nil || be != nil):
			t.Errorf("%v: backend %v, error %v; want none and no error", tc.args, be, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}
