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

package guestapi

import (
	"encoding/json"
	"testing"
	"time"
)

// TestEndIsVersion1 keeps the Exit frame's payload, and a Page's exit,
// the bytes protocol version 1 fixed, whatever the agent API names the
// same fields: a sandbox's guest keeps running across an agent's upgrade
// (and an agent's rollback), and each reads what the other wrote.
func TestEndIsVersion1(t *testing.T) {
	for _, tc := range []struct {
		end  End
		wire string
	}{
		{End{Status: Exit{ExitCode: 0}}, `{"code":0}`},
		{End{Status: Exit{ExitCode: 3, Duration: 2 * time.Second}}, `{"code":3,"ms":2000}`},
		{End{Status: Exit{ExitCode: -1, Signal: "SIGKILL", Killed: true, Duration: 1500 * time.Millisecond}, Output: 10, DroppedBytes: 2, DroppedChunks: 1},
			`{"code":-1,"signal":9,"killed":true,"ms":1500,"out":10,"droppedBytes":2,"droppedChunks":1}`},
		{End{Status: Exit{ExitCode: -1, Signal: "signal 40"}}, `{"code":-1,"signal":40}`},
	} {
		b, err := json.Marshal(tc.end)
		if err != nil || string(b) != tc.wire {
			t.Errorf("%+v is written %s, %v; version 1 writes %s", tc.end, b, err, tc.wire)
		}
		var got End
		if err := json.Unmarshal([]byte(tc.wire), &got); err != nil || got != tc.end {
			t.Errorf("%s is read %+v, %v; want %+v", tc.wire, got, err, tc.end)
		}
	}

	// What only the host knows is not the guest's to say.
	b, _ := json.Marshal(End{Status: Exit{ExitCode: 1, TimedOut: true, OOMKilled: true}})
	if string(b) != `{"code":1}` {
		t.Errorf("the host's fields went on the guest's wire: %s", b)
	}
	// A signal's number wins over the code a guest sent with it.
	var e End
	if err := json.Unmarshal([]byte(`{"code":0,"signal":15}`), &e); err != nil || e.ExitCode != -1 || e.Signal != "SIGTERM" {
		t.Errorf("a signalled end is read %+v, %v", e, err)
	}
	// A Page carries its exit in the same form.
	b, err := json.Marshal(Page{Next: "1.0", Exit: &End{Status: Exit{ExitCode: 3}}})
	if err != nil || string(b) != `{"next":"1.0","exit":{"code":3}}` {
		t.Errorf("a page is written %s, %v", b, err)
	}
}

// FuzzEnd feeds arbitrary payloads, as a compromised sandbox could send
// them in an Exit frame, to End's decoder: it never panics, and a signal
// it reads is named and ends the code.
func FuzzEnd(f *testing.F) {
	f.Add([]byte(`{"code":0}`))
	f.Add([]byte(`{"code":-1,"signal":9,"killed":true,"ms":1500,"out":10,"droppedBytes":2,"droppedChunks":1}`))
	f.Add([]byte(`{"code":3,"signal":-7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e End
		if json.Unmarshal(b, &e) != nil || e.Signal == "" {
			return
		}
		if e.ExitCode != -1 || signalNumber(e.Signal) == 0 {
			t.Fatalf("%s is read %+v", b, e)
		}
	})
}
