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
	"time"
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
	cfg.Accel, cfg.Disks = AccelKVM, nil
	start := time.Now()
	v, err := Start(cfg)
	if err != nil {
		return AccelTCG, fmt.Sprintf("a guest could not start under KVM: %v", err)
	}
	defer v.Stop(5 * time.Second)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := v.Connect(ctx); err != nil {
		select {
		case <-v.Done():
			// With -cpu host, QEMU on the reference machine aborts
			// ("failed to set MSR 0x10a"); with qemu64 the guest hangs.
			return AccelTCG, fmt.Sprintf("/dev/kvm opens, but QEMU ended under KVM: %v: %s", v.err, lastLine(filepath.Join(cfg.Dir, "qemu.log")))
		default:
		}
		return AccelTCG, fmt.Sprintf("/dev/kvm opens, but a guest under KVM did not answer within %v (nested KVM?): %v", timeout, err)
	}
	if res, err := v.Exec(ctx, "true"); err != nil || res.Exit.Code != 0 {
		return AccelTCG, fmt.Sprintf("/dev/kvm opens, but a command in a guest under KVM failed: %v (exit %+v)", err, res.Exit)
	}
	return AccelKVM, fmt.Sprintf("a guest under KVM ran a command %v after starting", time.Since(start).Round(time.Millisecond))
}

// lastLine is the last non-empty line of a small log file.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(lines[len(lines)-1])
}
