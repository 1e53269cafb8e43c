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
	"bytes"
	"math/rand"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/playground-dev/playground/mcpgateway/tools"
)

// TestSequenceJobPrintsWhatIsExpected: the job's shell prints exactly the
// bytes the check expects, stderr and exit code included.
func TestSequenceJobPrintsWhatIsExpected(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", seqCommand("t-1", 3))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3", err)
	}
	if want := seqExpected("t-1", 3); !bytes.Equal(stdout.Bytes(), want) {
		t.Errorf("stdout %q, want %q", stdout.Bytes(), want)
	}
	if stderr.String() != "end t-1\n" {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestCheckSeqAllowsOnlyReportedGaps: a job's output passes byte for
// byte, or with exactly the bytes a gap reported cut where it was
// reported; a repeat or an unreported loss fails.
func TestCheckSeqAllowsOnlyReportedGaps(t *testing.T) {
	full := seqExpected("t", 2)
	for _, tc := range []struct {
		name   string
		stdout []byte
		gaps   []gapAt
		ok     bool
	}{
		{"whole", full, nil, true},
		{"a reported gap", append(slices.Clone(full[:100]), full[150:]...), []gapAt{{at: 100, bytes: 50}}, true},
		{"an unreported loss", append(slices.Clone(full[:100]), full[150:]...), nil, false},
		{"a repeat", append(slices.Clone(full), full[len(full)-10:]...), nil, false},
		{"a gap of the wrong size", append(slices.Clone(full[:100]), full[150:]...), []gapAt{{at: 100, bytes: 40}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{led: newLedger(nil)}
			c := &goodClient{s: s, name: "c"}
			j := &seqJob{tag: "t", batches: 2, stdout: tc.stdout, stderr: []byte("end t\n"), gaps: tc.gaps}
			c.checkSeq(j, tools.JobPollOutput{State: "exited", Done: true, Result: &tools.JobResult{ExitCode: 3}})
			if ok := len(s.led.violations) == 0; ok != tc.ok {
				t.Errorf("passed %v, want %v: %v", ok, tc.ok, s.led.examples)
			}
		})
	}
}

// TestScheduleIsTheSeeds: the same seed gives the same faults in the same
// order, each kind as many times as asked.
func TestScheduleIsTheSeeds(t *testing.T) {
	a := schedule(rand.New(rand.NewSource(7)), faultKinds, 2)
	b := schedule(rand.New(rand.NewSource(7)), faultKinds, 2)
	if !slices.Equal(a, b) || len(a) != 2*len(faultKinds) {
		t.Fatalf("%v and %v", a, b)
	}
	for _, k := range faultKinds {
		if n := len(slices.DeleteFunc(slices.Clone(a), func(x string) bool { return x != k })); n != 2 {
			t.Errorf("%s %d times", k, n)
		}
	}
}

// TestWindowsExcuseOnlyTheirSpans: a call is excused when it meets a
// fault's span (open, or closed less than the grace ago).
func TestWindowsExcuseOnlyTheirSpans(t *testing.T) {
	var w windows
	before := time.Now()
	time.Sleep(time.Millisecond)
	i := w.open()
	if !w.active() || w.covers(before.Add(-time.Second), before) {
		t.Fatal("an open span: active, and it does not reach back before it opened")
	}
	w.close(i)
	if !w.covers(time.Now(), time.Now()) || w.covers(time.Now().Add(2*grace), time.Now().Add(3*grace)) {
		t.Error("a closed span covers its grace and no more")
	}
}
