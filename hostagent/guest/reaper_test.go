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

package guest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// fakeReaper is a subtree that dies by steps: each kill takes out kills
// processes (a nested reaper's orphans show up only once it is dead).
type fakeReaper struct {
	left, perKill     int
	countErr, killErr error
	counted, killed   int
	reaped            int
}

func (f *fakeReaper) descendants() (int, error) {
	f.counted++
	return f.left, f.countErr
}

func (f *fakeReaper) killAll() error {
	f.killed++
	if f.killErr != nil {
		return f.killErr
	}
	f.left = max(0, f.left-f.perKill)
	return nil
}

func (f *fakeReaper) reap() { f.reaped++ }

// The proof is the kernel's count reaching zero, and nothing else.
func TestProveSubtreeDead(t *testing.T) {
	f := &fakeReaper{left: 5, perKill: 2}
	if code, why := proveSubtreeDead(f, 5*time.Second); code != guestapi.ReapProvedExit || why != "" || f.killed != 3 || f.reaped != 3 || f.counted != 4 {
		t.Errorf("a subtree that dies in three kills: %d %q, %+v", code, why, f)
	}
	f = &fakeReaper{}
	if code, _ := proveSubtreeDead(f, time.Second); code != guestapi.ReapProvedExit || f.killed != 0 {
		t.Errorf("an empty subtree: %d, %+v", code, f)
	}
	f = &fakeReaper{left: 1, perKill: 0}
	start := time.Now()
	if code, why := proveSubtreeDead(f, 200*time.Millisecond); code != guestapi.ReapLostExit || !strings.Contains(why, "1 descendants still alive") || time.Since(start) > 5*time.Second {
		t.Errorf("a process that never dies: %d %q", code, why)
	}
	f = &fakeReaper{left: 1, countErr: errors.New("EINVAL")}
	if code, why := proveSubtreeDead(f, time.Second); code != guestapi.ReapLostExit || !strings.Contains(why, "PROC_REAP_STATUS") {
		t.Errorf("a count refused: %d %q", code, why)
	}
	f = &fakeReaper{left: 1, killErr: errors.New("EPERM")}
	if code, why := proveSubtreeDead(f, time.Second); code != guestapi.ReapLostExit || !strings.Contains(why, "PROC_REAP_KILL") {
		t.Errorf("a kill refused: %d %q", code, why)
	}
}

func TestReapArgs(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		uid, gid uint32
		argv     []string
		err      bool
	}{
		{[]string{"-uid", "1000", "-gid", "1000", "--", "/usr/bin/env", "-i", "sh"}, 1000, 1000, []string{"/usr/bin/env", "-i", "sh"}, false},
		{[]string{"-gid", "5", "-uid", "7", "sh", "-uid"}, 7, 5, []string{"sh", "-uid"}, false},
		{[]string{"-uid", "0", "-gid", "0", "--", "sh"}, 0, 0, nil, true}, // never root
		{[]string{"-gid", "1000", "--", "sh"}, 0, 0, nil, true},           // no uid: root
		{[]string{"-uid", "1000", "-gid", "1000", "--"}, 0, 0, nil, true}, // no command
		{[]string{"-uid", "x", "--", "sh"}, 0, 0, nil, true},
	} {
		uid, gid, argv, err := reapArgs(tc.args)
		if (err != nil) != tc.err || uid != tc.uid || gid != tc.gid || !slices.Equal(argv, tc.argv) {
			t.Errorf("reapArgs(%q) = %d %d %q %v", tc.args, uid, gid, argv, err)
		}
	}
}
