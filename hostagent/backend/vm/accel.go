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

package vm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultProbeTimeout bounds ProbeAccel's boot under KVM: a Debian kernel
// boots to init in one or two seconds with KVM, and in about ten under TCG.
const DefaultProbeTimeout = 15 * time.Second

// ProbeAccel says which accelerator the VMs of cfg should use, and why:
// KVM when /dev/kvm opens and a guest booted with it (cfg without its disk,
// in cfg.Dir) runs a command within timeout; TCG otherwise. Opening
// /dev/kvm is not enough: under nested virtualisation it may open while
// guests hang at kernel entry, as on the reference machine.
func ProbeAccel(ctx context.Context, cfg Config, timeout time.Duration) (accel, reason string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return AccelTCG, fmt.Sprintf("KVM is unavailable: %v", err)
	}
	f.Close()
	if u := cfg.User; u != nil {
		if err := kvmOpenTo(*u); err != nil {
			return AccelTCG, err.Error()
		}
	}
	cfg.Accel, cfg.Disks = AccelKVM, nil
	start := time.Now()
	v, err := Start(cfg)
	if err != nil {
		return AccelTCG, fmt.Sprintf("a guest could not start under KVM: %v", err)
	}
	defer func() { _ = v.Stop(5 * time.Second) }()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := v.Connect(ctx); err != nil {
		select {
		case <-v.Done():
			// With -cpu host, QEMU on the reference machine aborts
			// ("failed to set MSR 0x10a"); with qemu64 the guest hangs.
			return AccelTCG, fmt.Sprintf("/dev/kvm opens, but QEMU ended under KVM: %v: %s", v.err, lastLine(filepath.Join(cfg.Dir, qemuLog)))
		default:
		}
		return AccelTCG, fmt.Sprintf("/dev/kvm opens, but a guest under KVM did not answer within %v (nested KVM?): %v", timeout, err)
	}
	if res, err := v.Exec(ctx, "true"); err != nil || res.Exit.ExitCode != 0 {
		return AccelTCG, fmt.Sprintf("/dev/kvm opens, but a command in a guest under KVM failed: %v (exit %+v)", err, res.Exit)
	}
	return AccelKVM, fmt.Sprintf("a guest under KVM ran a command %v after starting", time.Since(start).Round(time.Millisecond))
}

// kvmDevice is KVM's device, which QEMU opens by its path.
const kvmDevice = "/dev/kvm"

// kvmGroups are the groups that give QEMU /dev/kvm: its group, when the
// device is the group's to read and write (Debian's kvm, 0660); none when
// it is root's alone.
func kvmGroups() []uint32 {
	var st unix.Stat_t
	if err := unix.Stat(kvmDevice, &st); err != nil || st.Gid == 0 || st.Mode&0o060 != 0o060 {
		return nil
	}
	return []uint32{st.Gid}
}

// kvmOpenTo says why u cannot open /dev/kvm, if it cannot.
func kvmOpenTo(u Credential) error {
	var st unix.Stat_t
	if err := unix.Stat(kvmDevice, &st); err != nil {
		return fmt.Errorf("KVM is unavailable: %v", err)
	}
	if st.Mode&0o006 == 0o006 || (st.Uid == u.UID && st.Mode&0o600 == 0o600) ||
		((st.Gid == u.GID || slices.Contains(u.Groups, st.Gid)) && st.Mode&0o060 == 0o060) {
		return nil
	}
	return fmt.Errorf("KVM is unavailable to QEMU's unprivileged user (uid %d): %s is %d:%d, mode %#o; give it a group that may read and write it (Debian's kvm, mode 0660)", u.UID, kvmDevice, st.Uid, st.Gid, st.Mode&0o777)
}

// lastLine is the last non-empty line of a small log file, or of its
// predecessor when a rotation has just emptied it.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if prev, err := os.ReadFile(path + ".1"); err == nil {
			b = prev
		}
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(lines[len(lines)-1])
}
