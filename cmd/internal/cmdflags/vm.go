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

package cmdflags

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/vm"
)

// VMFlags configure the vm backend of `playground agent` and
// `playground-dev`: offered when the kernel, modules and root image are
// given (each defaults to the environment variable `eval
// "$(hack/vm-image.sh)"` sets).
type VMFlags struct {
	kernel, modules, root, accel, qemu string
	uidBase                            uint
}

// AddVMFlags registers the vm backend's flags on fs.
func AddVMFlags(fs *flag.FlagSet) *VMFlags {
	f := &VMFlags{}
	fs.StringVar(&f.kernel, "vm-kernel", os.Getenv("PLAYGROUND_VM_KERNEL"), "the guest kernel of Sandboxes of backend vm, from hack/vm-image.sh ($PLAYGROUND_VM_KERNEL); empty: this node offers no vm backend")
	fs.StringVar(&f.modules, "vm-modules", os.Getenv("PLAYGROUND_VM_MODULES"), "the directory of the guest kernel's modules, from hack/vm-image.sh ($PLAYGROUND_VM_MODULES)")
	fs.StringVar(&f.root, "vm-root", os.Getenv("PLAYGROUND_VM_ROOT"), "the read-only root image of the guests, from hack/vm-image.sh ($PLAYGROUND_VM_ROOT)")
	fs.StringVar(&f.accel, "vm-accel", "auto", "how VMs run: kvm, tcg (emulation, for development: about ten times slower) or auto (kvm when a probe VM boots under it, else tcg)")
	fs.StringVar(&f.qemu, "qemu", "", "qemu-system-x86_64 (default: from PATH)")
	fs.UintVar(&f.uidBase, "vm-uid-base", vm.DefaultUIDBase, "when the agent is root, each vm sandbox's QEMU runs as host UID and GID vm-uid-base + its slot (1 to 65535): a range no one else uses; nothing is created on the node")
	return f
}

// Backend is the vm backend over stateDir/vm, keeping reserve bytes free
// there, or nil when --vm-kernel is not set. It says in log which
// accelerator its VMs use, and why.
func (f *VMFlags) Backend(ctx context.Context, stateDir, guestBinary string, reserve int64, log logr.Logger) (*vm.Backend, error) {
	if f.kernel == "" {
		return nil, nil
	}
	if f.modules == "" || f.root == "" {
		return nil, fmt.Errorf("--vm-kernel needs --vm-modules and --vm-root (all three from hack/vm-image.sh)")
	}
	accel := f.accel
	switch accel {
	case "auto":
		accel = ""
	case vm.AccelKVM, vm.AccelTCG:
	default:
		return nil, fmt.Errorf("--vm-accel: want kvm, tcg or auto, not %q", f.accel)
	}
	if guestBinary == "" {
		var err error
		if guestBinary, err = backend.FindGuestBinary(); err != nil {
			return nil, fmt.Errorf("the vm backend: %w", err)
		}
	}
	if f.uidBase == 0 || f.uidBase > 1<<32-1 {
		return nil, fmt.Errorf("--vm-uid-base: %d is not a UID above 0", f.uidBase)
	}
	be, err := vm.New(ctx, vm.Options{
		StateDir: filepath.Join(stateDir, "vm"), GuestBinary: guestBinary, QEMU: f.qemu,
		Kernel: f.kernel, Modules: f.modules, Root: f.root, Accel: accel,
		StorageReserve: reserve, UIDBase: uint32(f.uidBase),
	})
	if err != nil {
		return nil, fmt.Errorf("the vm backend: %w", err)
	}
	a, why := be.Accel()
	if a == vm.AccelTCG {
		log.Info("vm sandboxes run under TCG emulation: for development only, about ten times slower than KVM", "reason", why)
	} else {
		log.Info("vm sandboxes run under KVM", "reason", why)
	}
	if note, caveat := be.Describe(); caveat {
		log.Info("The vm backend has caveats on this node", "note", note)
	}
	return be, nil
}
