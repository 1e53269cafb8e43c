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

// Package vm is the groundwork of the vm backend: one QEMU virtual machine
// per sandbox, booted directly (-kernel/-initrd) from a Debian kernel, with
// a read-only root image and a writable disk of its own, reached over a
// virtio-serial port on which the guest's init serves the guest protocol
// (streams multiplexed by hostagent/guestapi/mux). hack/vm-image.sh builds
// the kernel, modules and root image; the initramfs is made here, from the
// agent's own playground-sandbox binary. A sandbox on an OCI image boots on
// a root disk made of it instead, once per digest (image.go).
//
// It is not a backend.Backend yet: see docs/isolation.md.
package vm
