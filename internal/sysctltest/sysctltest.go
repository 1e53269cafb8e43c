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

// Package sysctltest lets tests that run at once, in several test
// processes, share host-wide settings and give the machine back what it
// had: the egress tests of the oci backend and of the node agent both need
// IPv4 forwarding on (and the connection tracker's accounting, which the
// egress flow records turn on), and one restoring it while the other runs
// broke the other's sandboxes' routes.
package sysctltest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// egressSettings are the settings egress changes: IPv4 forwarding, and
// the connection tracker's per-flow bytes and timestamps.
var egressSettings = []string{
	"/proc/sys/net/ipv4/ip_forward",
	"/proc/sys/net/ipv6/conf/all/forwarding",
	"/proc/sys/net/netfilter/nf_conntrack_acct",
	"/proc/sys/net/netfilter/nf_conntrack_timestamp",
}

// HoldIPv4Forwarding keeps IPv4 forwarding (and the other settings egress
// changes) as the code under test sets it for as long as the test runs,
// and when the last holder ends, in whichever test process, restores the
// values the machine had before the first one began.
//
// Each holder keeps a shared lock on holders.lock for as long as it holds,
// so holders in one process or several run at once (and one test may hold
// twice, as netnstest does for it). A holder records the original values
// when none are recorded, under a lock of its own (a moment). A holder
// that ends and can turn its shared lock exclusive is the last: it
// restores the values, while a new holder waits for its shared lock.
func HoldIPv4Forwarding(tb testing.TB) {
	tb.Helper()
	hold(tb, filepath.Join(os.TempDir(), "playground-sysctltest"), egressSettings)
}

// hold is HoldIPv4Forwarding of settings, its locks and saved values in
// dir.
func hold(tb testing.TB, dir string, settings []string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	holders, err := os.OpenFile(filepath.Join(dir, "holders.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	saved := func(setting string) string { return filepath.Join(dir, filepath.Base(setting)+".saved") }
	if err := unix.Flock(int(holders.Fd()), unix.LOCK_SH); err != nil {
		holders.Close()
		tb.Fatal(err)
	}
	if err := record(dir, settings, saved); err != nil {
		holders.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		defer holders.Close()
		if unix.Flock(int(holders.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			return // another holder remains: the last one restores
		}
		for _, setting := range settings {
			if v, err := os.ReadFile(saved(setting)); err == nil {
				_ = os.WriteFile(setting, v, 0o644)
				_ = os.Remove(saved(setting))
			}
		}
	})
}

// record saves each setting's value beside the lock where none is saved
// (no holder changed it yet), under record.lock.
func record(dir string, settings []string, saved func(string) string) error {
	lock, err := os.OpenFile(filepath.Join(dir, "record.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close() // releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	for _, setting := range settings {
		if _, err := os.Stat(saved(setting)); os.IsNotExist(err) {
			if v, err := os.ReadFile(setting); err == nil {
				_ = os.WriteFile(saved(setting), v, 0o600)
			}
		}
	}
	return nil
}
