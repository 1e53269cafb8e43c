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
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/guestapi/mux"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/keyedmutex"
)

// Defaults of a sandbox's VM, for what its Spec leaves at zero.
const (
	DefaultVCPUs       = 1
	DefaultMemoryBytes = 512 << 20
	DefaultPIDs        = 1024
	DefaultLayerBytes  = 1 << 30
	DefaultLayerInodes = 65536
	DefaultPileBytes   = 64 << 20
	DefaultPileInodes  = 1024
	// DefaultBootTimeout bounds a boot to the guest's first answer: about
	// ten seconds under TCG on an idle machine, one or two under KVM.
	DefaultBootTimeout = 3 * time.Minute
)

// Options configure the vm backend.
type Options struct {
	// StateDir holds the sandboxes' disks, definitions, sockets and logs.
	// Keep it short: a VM's socket is StateDir/sandboxes/ID/agent.sock,
	// and a unix socket's name has at most 107 bytes.
	StateDir string
	// GuestBinary is the static playground-sandbox binary: the
	// initramfs's /init and the guest's init.
	GuestBinary string
	// QEMU is qemu-system-x86_64; empty means the one on PATH.
	QEMU string
	// Kernel, Modules and Root are hack/vm-image.sh's outputs: the guest
	// kernel, the directory of its modules, the read-only root image.
	Kernel, Modules, Root string
	// Accel is AccelKVM or AccelTCG; empty probes (ProbeAccel) when the
	// backend is made.
	Accel string
	// PileFiles are created, empty and the tenant's, in a new pile, which
	// the guest seals append-only; default self.pile.
	PileFiles []string
	// StartTimeout bounds a command's start when its context has no
	// deadline; BootTimeout a VM's boot.
	StartTimeout, BootTimeout time.Duration
	// StorageReserve is the free space, in bytes, that the state
	// directory's file system keeps: below it no new sandbox's disks are
	// made (backend.ErrInsufficientStorage). Zero: no reserve.
	StorageReserve int64
	// UIDBase is the first of the host UIDs (and GIDs) QEMU runs as when
	// the agent is root: each sandbox's QEMU as UIDBase + its slot (1 to
	// 65535, kept in its record; slot 0 runs the start-up checks), so that
	// no two VMs, nor a VM and the agent, are one user. Nothing is created
	// on the node: the IDs need no names. Default DefaultUIDBase, below
	// the oci backend's ID maps (1<<28 on).
	UIDBase uint32
	// LogBytes bounds each VM's console.log and qemu.log, each kept with
	// one predecessor; default boundedlog.DefaultBytes.
	LogBytes int64
}

// DefaultUIDBase is Options.UIDBase's default: clear of /etc/subuid's
// usual ranges (100000 on) and of the oci backend's (1<<28 on).
const DefaultUIDBase = 1 << 27

// uidSlots is how many VM users there are above UIDBase, slot 0 included.
const uidSlots = 1 << 16

// Backend runs each sandbox in a QEMU virtual machine of its own: its own
// kernel, no network device, its disks images under the state directory.
type Backend struct {
	opts        Options
	initrd      []byte // the shared initramfs: the guest binary and the modules
	accel       string
	accelReason string
	// dropped: the agent is root, and QEMU runs as a user of its own per
	// sandbox; otherwise as the agent's own user.
	dropped bool
	debugfs string // debugfs's absolute path

	mu sync.Mutex
	// locks serialises the lifecycle operations on each sandbox.
	locks keyedmutex.Mutex
	// imageLocks serialise the builds and removals of each image's root
	// disk (image.go), by digest; taken after a sandbox's lock.
	imageLocks keyedmutex.Mutex
	// imageBuilds counts the root disks built.
	imageBuilds atomic.Int64
	vms         map[string]*VM
	starts      backend.StartCount
	// slots are the VM users' slots in use and their sandboxes, read from
	// the records on first use (loadSlots).
	slots backend.Slots
	// closed: Close let go of the VMs for the next agent, and no call
	// connects to them again.
	closed bool

	// caps are the Capabilities, made once (Capabilities).
	caps backend.Described
}

var (
	_ backend.Backend = (*Backend)(nil)
)

// New checks opts and prepares the state directory. With no Accel it
// boots a probe VM (ProbeAccel): up to DefaultProbeTimeout where /dev/kvm
// opens but KVM does not work.
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.StateDir == "" || opts.GuestBinary == "" || opts.Kernel == "" || opts.Modules == "" || opts.Root == "" {
		return nil, errors.New("vm: the state directory, the guest binary, and the kernel, modules and root image of hack/vm-image.sh are required")
	}
	if opts.QEMU == "" {
		p, err := exec.LookPath("qemu-system-x86_64")
		if err != nil {
			return nil, fmt.Errorf("vm: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86): %w", err)
		}
		opts.QEMU = p
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return nil, fmt.Errorf("vm: mkfs.ext4 is not installed (apt-get install e2fsprogs): %w", err)
	}
	debugfs, err := exec.LookPath("debugfs")
	if err == nil {
		debugfs, err = filepath.Abs(debugfs)
	}
	if err != nil {
		return nil, fmt.Errorf("vm: debugfs is not installed (apt-get install e2fsprogs): %w", err)
	}
	if opts.UIDBase == 0 {
		opts.UIDBase = DefaultUIDBase
	}
	if uint64(opts.UIDBase)+uidSlots > 1<<32-2 {
		return nil, fmt.Errorf("vm: the VM users from %d on exceed the 32-bit ID space", opts.UIDBase)
	}
	for _, f := range []string{opts.GuestBinary, opts.Kernel, opts.Root} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("vm: %w", err)
		}
	}
	if opts.PileFiles, err = backend.PileFiles(opts.PileFiles); err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.BootTimeout <= 0 {
		opts.BootTimeout = DefaultBootTimeout
	}
	if opts.StateDir, err = filepath.Abs(opts.StateDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "sandboxes"), 0o700); err != nil {
		return nil, err
	}
	var initrd bytes.Buffer
	if err := WriteInitrd(&initrd, opts.GuestBinary, opts.Modules); err != nil {
		return nil, fmt.Errorf("vm: the initramfs: %w", err)
	}
	b := &Backend{
		opts: opts, initrd: initrd.Bytes(), accel: opts.Accel, debugfs: debugfs,
		dropped: os.Geteuid() == 0,
		vms:     map[string]*VM{},
	}
	b.slots = b.newSlots()
	if err := b.removeImageLeftovers(); err != nil {
		return nil, err
	}
	if err := b.checkQEMU(ctx); err != nil {
		return nil, err
	}
	if u := b.user(0, false); u != nil {
		// QEMU reads the kernel through its descriptor, as its own user.
		f, err := os.Open(opts.Kernel)
		if err != nil {
			return nil, fmt.Errorf("vm: %w", err)
		}
		err = readableBy(f, *u)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	switch opts.Accel {
	case AccelKVM:
		if u := b.user(0, true); u != nil {
			if err := kvmOpenTo(*u); err != nil {
				return nil, fmt.Errorf("vm: --vm-accel=kvm: %w", err)
			}
		}
		b.accelReason = "set by the agent's configuration"
	case AccelTCG:
		b.accelReason = "set by the agent's configuration"
	case "":
		probe := filepath.Join(opts.StateDir, "probe")
		initrd := filepath.Join(opts.StateDir, "probe-initrd.cpio")
		if err := b.writeOwn(initrd, b.initrd, b.user(0, false)); err != nil {
			return nil, err
		}
		b.accel, b.accelReason = ProbeAccel(ctx, Config{
			QEMU: opts.QEMU, Kernel: opts.Kernel, Initrd: initrd,
			Root: opts.Root, Dir: probe, VCPUs: 1, MemoryMiB: 256,
			User: b.user(0, true), LogBytes: opts.LogBytes,
		}, DefaultProbeTimeout)
		_ = os.RemoveAll(probe)
		_ = os.Remove(initrd)
	default:
		return nil, fmt.Errorf("vm: accelerator %q: want %s, %s or empty (probe)", opts.Accel, AccelKVM, AccelTCG)
	}
	return b, nil
}

// user is who the QEMU of slot runs as: nil (the agent's own user) when
// the agent is not root. With kvm, /dev/kvm's group too.
func (b *Backend) user(slot int, kvm bool) *Credential {
	if !b.dropped {
		return nil
	}
	id := b.opts.UIDBase + uint32(slot)
	u := &Credential{UID: id, GID: id}
	if kvm {
		u.Groups = kvmGroups()
	}
	return u
}

// checkQEMU starts QEMU without a machine, as a VM's user under its
// seccomp sandbox, and has it quit: a QEMU built without seccomp, or a
// user the node cannot switch to (an agent in a user namespace that does
// not map UIDBase), is refused here rather than at a tenant's boot.
func (b *Backend) checkQEMU(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.opts.QEMU, "-sandbox", Sandbox, "-machine", "none", "-nodefaults",
		"-no-user-config", "-display", "none", "-monitor", "stdio")
	cmd.Stdin = strings.NewReader("quit\n")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if u := b.user(0, false); u != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}}
	}
	if err := cmd.Run(); err != nil {
		who := fmt.Sprintf("as uid %d", os.Geteuid())
		if u := b.user(0, false); u != nil {
			who = fmt.Sprintf("as uid %d (Options.UIDBase, --vm-uid-base)", u.UID)
		}
		return fmt.Errorf("vm: %s cannot run %s under its seccomp sandbox (-sandbox %s): %v: %s", b.opts.QEMU, who, Sandbox, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// writeOwn writes a file QEMU reads as u (through /proc/self/fd): the
// agent's, or u's to read alone.
func (b *Backend) writeOwn(path string, data []byte, u *Credential) error {
	if err := atomicfile.Write(path, data, 0o400); err != nil {
		return err
	}
	if u != nil {
		return os.Chown(path, int(u.UID), int(u.GID))
	}
	return nil
}

// Accel is the accelerator this backend's VMs run with, and why: TCG
// emulates every instruction, for development only.
func (b *Backend) Accel() (accel, reason string) { return b.accel, b.accelReason }

// Describe implements backend.Describer: the accelerator, and why, and
// who QEMU runs as; TCG, and a QEMU that runs as the agent's own user,
// are caveats.
func (b *Backend) Describe() (string, bool) {
	note, caveat := "vm sandboxes run under KVM: "+b.accelReason, false
	if b.accel == AccelTCG {
		note, caveat = "vm sandboxes run under TCG emulation, for development only (about ten times slower than KVM): "+b.accelReason, true
	}
	if b.dropped {
		note += fmt.Sprintf("; QEMU runs under its seccomp sandbox, as a user of its own per sandbox (uid %d + slot), without capabilities", b.opts.UIDBase)
	} else {
		note += fmt.Sprintf("; QEMU runs under its seccomp sandbox, but as the agent's own user (uid %d): the agent is not root, so the sandboxes' QEMUs are not kept apart from each other and from the agent by user", os.Geteuid())
		caveat = true
	}
	return note, caveat
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "vm" }

// Capabilities implements backend.Backend: the shepherds in the guest prove
// cleanup as in a container, and the guest's kernel enforces the pile's
// append-only flag, and the signing key's immutable one, which only the
// guest's root could clear. A sandbox on an image boots on a root disk
// made of it (image.go).
func (b *Backend) Capabilities() backend.Capabilities {
	return b.caps.Get(func() backend.Capabilities {
		return backend.Capabilities{
			ProvesCleanup: true, AppendOnlyPile: true, Images: true,
			Prober: b, StartCounter: &b.starts, Dialer: b, StorageReporter: b, PileReader: b, FileServer: b, UsageMeter: b, Describer: b,
			Suspender: b, Snapshotter: b.snapshots(), SigningKeyHolder: backend.KeyInstaller{Name: "vm", Locks: &b.locks, Install: b.installSigningKey}, JobHolder: guestexec.Holder{Shepherd: b.jobConn},
			Guest: &backend.Guest{StartTimeout: b.opts.StartTimeout, Connect: b.connectGuest},
		}
	})
}

// Files of a sandbox in its directory (besides the VM's, in qemu.go).
const (
	recordFile = "sandbox.json"
	diskImage  = "disk.img"
	pileImage  = "pile.img"
	initrdFile = "initrd.cpio"
)

// record is a sandbox's definition, kept in its directory.
type record struct {
	Spec backend.Spec
	// Storage is fixed when the disks are made; later specs cannot change it.
	Storage backend.Storage
	// Slot is the sandbox's VM user's (Options.UIDBase + Slot), fixed at
	// its first provision.
	Slot int `json:",omitempty"`
}

// validateSpec refuses what this backend cannot give rather than run the
// sandbox without it.
func validateSpec(spec backend.Spec) error {
	if err := backend.ValidateID(spec.ID); err != nil {
		return err
	}
	if iso := backend.IsolationOf(spec); iso != backend.IsolationContainer {
		return fmt.Errorf("vm: sandbox %s asks for isolation %q, which only the oci backend offers: a vm sandbox has a kernel of its own", spec.ID, iso)
	}
	if len(spec.Egress) > 0 {
		return fmt.Errorf("vm: sandbox %s asks for egress, but vm sandboxes have no network device (network none only)", spec.ID)
	}
	if len(spec.Faculties) > 0 {
		return fmt.Errorf("vm: sandbox %s has faculties, which the vm backend does not install yet: run it on the oci backend", spec.ID)
	}
	if err := validateImage(spec.Image); err != nil {
		return err
	}
	if err := backend.ValidateLogin(spec); err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	r, s := spec.Resources, spec.Storage
	if r.CPUMillis < 0 || r.MemoryBytes < 0 || r.PIDs < 0 || s.LayerBytes < 0 || s.LayerInodes < 0 || s.PileBytes < 0 || s.PileInodes < 0 {
		return errors.New("vm: resources and storage must not be negative")
	}
	if r.PIDs > 0 && r.PIDs < 16 {
		return fmt.Errorf("vm: pids limit %d is below 16", r.PIDs)
	}
	if r.MemoryBytes > 0 && r.MemoryBytes < 128<<20 {
		return fmt.Errorf("vm: memory %s is below the 128Mi a VM's kernel and init need", backend.FormatBytes(r.MemoryBytes))
	}
	if s.LayerBytes > 0 && s.LayerBytes < 16<<20 {
		return fmt.Errorf("vm: layer size %s is below 16Mi", backend.FormatBytes(s.LayerBytes))
	}
	if s.PileBytes > 0 && s.PileBytes < 1<<20 {
		return fmt.Errorf("vm: pile size %s is below 1Mi", backend.FormatBytes(s.PileBytes))
	}
	return nil
}

// resolve fills in the storage defaults.
func resolve(s backend.Storage) backend.Storage {
	if s.LayerBytes == 0 {
		s.LayerBytes = DefaultLayerBytes
	}
	if s.LayerInodes == 0 {
		s.LayerInodes = DefaultLayerInodes
	}
	if s.PileBytes == 0 {
		s.PileBytes = DefaultPileBytes
	}
	if s.PileInodes == 0 {
		s.PileInodes = DefaultPileInodes
	}
	return s
}

func (b *Backend) sandboxDir(id string) string {
	return filepath.Join(b.opts.StateDir, "sandboxes", id)
}

func (b *Backend) load(id string) (*record, error) {
	var r record
	if err := backend.ReadRecord(filepath.Join(b.sandboxDir(id), recordFile), "vm: sandbox "+id, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Storage implements backend.StorageReporter.
func (b *Backend) Storage(id string) (backend.Storage, error) {
	r, err := b.load(id)
	if err != nil {
		return backend.Storage{}, err
	}
	return r.Storage, nil
}

// Provision implements backend.Backend: the sandbox's disk (workspace, home
// and tmp) and pile, each an ext4 image of the spec's size and inodes,
// sparse until written, made once; its image's root disk, made once per
// digest (image.go); and its definition, updated each time. A new image
// applies from the VM's next boot.
func (b *Backend) Provision(ctx context.Context, spec backend.Spec) error {
	if err := validateSpec(spec); err != nil {
		return err
	}
	defer b.locks.Lock(spec.ID)()
	return b.provision(ctx, spec)
}

func (b *Backend) provision(ctx context.Context, spec backend.Spec) error {
	dir := b.sandboxDir(spec.ID)
	rec := record{Spec: spec, Storage: resolve(spec.Storage)}
	old, err := b.load(spec.ID)
	fork := false
	if err == nil && backend.FileExists(filepath.Join(dir, diskImage)) {
		rec.Storage = old.Storage
	} else if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve); err != nil {
		// A new sandbox's images are sparse, but they fill as it writes.
		return fmt.Errorf("vm: %w", err)
	} else {
		fork = spec.FromSnapshot != ""
	}
	if old != nil {
		rec.Slot = old.Slot
	}
	if rec.Slot, err = b.claimSlot(spec.ID, rec.Slot); err != nil {
		return err
	}
	unlockImage := func() {}
	if spec.Image != nil {
		// Held until the record names it: a release of the digest meanwhile
		// would remove the disk.
		if unlockImage, err = b.holdImageDisk(ctx, spec.Image); err != nil {
			return err
		}
	}
	err = b.provisionHeld(ctx, spec, old, rec, fork)
	unlockImage()
	if err != nil {
		return err
	}
	// Released with no image lock held: two sandboxes that swap images
	// would otherwise each wait for the other's.
	if old != nil && imageOf(old.Spec) != imageOf(spec) {
		return b.releaseImage(imageOf(old.Spec))
	}
	return nil
}

// provisionHeld is provision once the sandbox's slot and root disk are
// held: its disks (a fork's from its snapshot) and record.
func (b *Backend) provisionHeld(ctx context.Context, spec backend.Spec, old *record, rec record, fork bool) error {
	dir := b.sandboxDir(spec.ID)
	if err := os.MkdirAll(filepath.Join(dir, "pile"), 0o700); err != nil {
		return err
	}
	if fork {
		// A fork: its disk is the snapshot's, with its limits.
		storage, err := b.forkDisk(ctx, spec, filepath.Join(dir, diskImage))
		if err != nil {
			_ = os.Remove(filepath.Join(dir, diskImage))
			return err
		}
		rec.Storage.LayerBytes, rec.Storage.LayerInodes = storage.LayerBytes, storage.LayerInodes
	}
	if err := makeImage(ctx, filepath.Join(dir, diskImage), rec.Storage.LayerBytes, rec.Storage.LayerInodes, "playground-disk", true, nil); err != nil {
		return err
	}
	// No journal for the pile: see guest.mountPile.
	pile := filepath.Join(dir, "pile", pileImage)
	if err := makeImage(ctx, pile, rec.Storage.PileBytes, rec.Storage.PileInodes, "playground-pile", false, b.opts.PileFiles); err != nil {
		return err
	}
	// The pile's image is the agent's; its VM user's group reads it, for
	// the confined reader (PileFile). A retained pile adopted under
	// another slot changes group with it.
	if u := b.user(rec.Slot, false); u != nil {
		if err := os.Chown(pile, 0, int(u.GID)); err != nil {
			return err
		}
		if err := os.Chmod(pile, 0o640); err != nil {
			return err
		}
	}
	if old != nil && imageOf(old.Spec) != imageOf(spec) {
		// A memory saved on the other root is not this root's: the VM
		// boots afresh.
		if err := os.Remove(b.memoryPath(spec.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, recordFile), data, 0o600)
}

// makeImage makes an ext4 image at path unless one is there, holding the
// tenant's empty files (the pile's).
func makeImage(ctx context.Context, path string, size, inodes int64, label string, journal bool, files []string) error {
	if backend.FileExists(path) {
		return nil
	}
	tmp := path + ".new"
	args := []string{"-q", "-F", "-L", label, "-m", "0", "-N", strconv.FormatInt(inodes, 10), "-E", "root_owner=0:0"}
	if !journal {
		args = append(args, "-O", "^has_journal")
	}
	if len(files) > 0 {
		seed, err := os.MkdirTemp(filepath.Dir(path), ".seed-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(seed)
		for _, f := range files {
			p := filepath.Join(seed, f)
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
			if err := os.Chown(p, guestapi.TenantUID, guestapi.TenantGID); err != nil {
				return err
			}
		}
		args = append(args, "-d", seed)
	}
	args = append(args, tmp, strconv.FormatInt(size>>10, 10)+"k")
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", args...).CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("vm: making %s: mkfs.ext4: %v: %s", path, err, bytes.TrimSpace(out))
	}
	// The agent's alone: QEMU gets it as a descriptor.
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// config is the QEMU configuration of a sandbox.
func (b *Backend) config(rec *record) Config {
	dir := b.sandboxDir(rec.Spec.ID)
	vcpus := DefaultVCPUs
	if m := rec.Spec.Resources.CPUMillis; m > 0 {
		vcpus = int((m + 999) / 1000)
	}
	mem := int64(DefaultMemoryBytes)
	if m := rec.Spec.Resources.MemoryBytes; m > 0 {
		mem = m
	}
	pids := int64(DefaultPIDs)
	if p := rec.Spec.Resources.PIDs; p > 0 {
		pids = p
	}
	return Config{
		// The guest's init gives the tenant's processes this bound
		// (guestapi.VMPIDsParam); its own and its shepherds' are root's.
		KernelArgs: []string{guestapi.VMPIDsParam + "=" + strconv.FormatInt(pids, 10)},
		QEMU:       b.opts.QEMU, Kernel: b.opts.Kernel, Initrd: filepath.Join(dir, initrdFile), Root: b.rootOf(rec.Spec),
		Disks: []string{filepath.Join(dir, diskImage), filepath.Join(dir, "pile", pileImage)},
		Dir:   dir, Accel: b.accel, VCPUs: vcpus, MemoryMiB: int(mem >> 20),
		User: b.user(rec.Slot, b.accel == AccelKVM), LogBytes: b.opts.LogBytes,
	}
}

// claimSlot returns the VM user's slot of sandbox id: want when it is
// set and no other sandbox holds it, else a free one, picked starting
// from a hash of id (b.slots).
func (b *Backend) claimSlot(id string, want int) (int, error) {
	slot, ok, err := b.slots.Claim(id, want)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, fmt.Errorf("vm: all %d VM users are in use", uidSlots-1)
	}
	return slot, nil
}

// newSlots is the table of the VM users' slots (1 to uidSlots-1; 0 is
// the agent's), read from the records on first use.
func (b *Backend) newSlots() backend.Slots {
	return backend.Slots{First: 1, N: uidSlots - 1, Load: b.loadSlots}
}

// loadSlots reads the VM users' slots the records on disk hold (b.slots
// asks once).
func (b *Backend) loadSlots() (map[int]string, error) {
	ents, err := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	if err != nil {
		return nil, err
	}
	slots := map[int]string{}
	for _, e := range ents {
		if r, err := b.load(e.Name()); err == nil && r.Slot > 0 {
			slots[r.Slot] = e.Name()
		}
	}
	return slots, nil
}

// Start implements backend.Backend.
func (b *Backend) Start(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	rec, err := b.load(id)
	if err != nil {
		return err
	}
	_, err = b.running(ctx, rec, true)
	return err
}

// Reattach implements backend.Backend: a VM left running by an earlier
// agent is taken over through its pid file and its port; a VM that is not
// running is booted again over its disks. The spec is recorded; the login
// profile and the VM's size apply from its next boot (they are the
// initramfs's and QEMU's). A VM whose image changed while no agent ran
// boots afresh on the new one, its files kept, rather than run on the old.
func (b *Backend) Reattach(ctx context.Context, spec backend.Spec) error {
	if err := backend.ValidateID(spec.ID); err != nil {
		return err
	}
	defer b.locks.Lock(spec.ID)()
	// Not found comes first: a sandbox that was never made is provisioned
	// next, and a spec it cannot run is refused there, as a provisioning.
	old, err := b.load(spec.ID)
	if err != nil {
		return err
	}
	if err := validateSpec(spec); err != nil {
		return err
	}
	if err := b.provision(ctx, spec); err != nil {
		return err
	}
	if imageOf(old.Spec) != imageOf(spec) {
		if err := b.stop(ctx, spec.ID); err != nil {
			return err
		}
	}
	rec, err := b.load(spec.ID)
	if err != nil {
		return err
	}
	starts := b.starts.Starts(spec.ID)
	v, err := b.running(ctx, rec, true)
	if err != nil || b.starts.Starts(spec.ID) != starts {
		return err // a VM booted now has the spec's /etc already
	}
	// A VM that ran on: its /etc files follow the spec now, as a
	// container's do. The VM's size applies from its next boot.
	st, err := v.Open()
	if err != nil {
		return fmt.Errorf("vm: sandbox %s: %w", spec.ID, err)
	}
	uctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	if err := guestexec.WriteEtc(uctx, st, backend.EtcFiles(spec, guestapi.NoNetworkResolv)); err != nil {
		return fmt.Errorf("vm: sandbox %s: updating its /etc: %w", spec.ID, err)
	}
	return nil
}

// running returns the sandbox's VM, connected: the one this backend holds,
// one an earlier agent left, or (with boot) a new one. The caller holds
// the sandbox's lock when boot is true.
func (b *Backend) running(ctx context.Context, rec *record, boot bool) (*VM, error) {
	id := rec.Spec.ID
	v, err := b.held(rec)
	switch {
	case errors.Is(err, ErrNotRunning):
		if !boot {
			return nil, fmt.Errorf("vm: sandbox %s: %w", id, backend.ErrNotRunning)
		}
		return b.boot(ctx, rec)
	case err != nil:
		return nil, err
	}
	if !v.Connected() {
		cctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
		defer cancel()
		if err := v.EnsureConnected(cctx); err != nil {
			return nil, fmt.Errorf("vm: sandbox %s: %w", id, err)
		}
	}
	return v, nil
}

// held is the sandbox's running VM as this backend holds it, or as an
// earlier agent left it (then held from now on); ErrNotRunning when its
// QEMU is gone. Calls at once find the same VM.
func (b *Backend) held(rec *record) (*VM, error) {
	id := rec.Spec.ID
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("vm: the backend is closed")
	}
	if v := b.vms[id]; v != nil {
		select {
		case <-v.Done():
			delete(b.vms, id)
		default:
			return v, nil
		}
	}
	v, err := Attach(b.config(rec))
	if err != nil {
		return nil, err
	}
	b.vms[id] = v
	return v, nil
}

// boot starts the sandbox's VM and waits for its init to answer. The
// caller holds the sandbox's lock.
func (b *Backend) boot(ctx context.Context, rec *record) (*VM, error) {
	id := rec.Spec.ID
	cfg := b.config(rec)
	if err := b.writeInitrd(rec, cfg.Initrd); err != nil {
		return nil, err
	}
	// What a previous VM left: its sockets and pid file.
	for _, f := range []string{portSocket, consoleSocket, qmpSocket, pidFile} {
		_ = os.Remove(filepath.Join(cfg.Dir, f))
	}
	restoring := b.Checkpointed(id)
	if restoring {
		// Suspended with its memory: loaded, not booted (suspend.go).
		// Its kernel has the pile mounted: a key kept for its next
		// start waits for a boot.
		cfg.Incoming = b.memoryPath(id)
	} else if err := b.installStagedKey(id); err != nil {
		return nil, err
	}
	v, err := b.startOnRoot(ctx, rec, cfg)
	if err != nil {
		return nil, err
	}
	if err := b.enterCgroup(id, v.pid); err != nil {
		// It runs uncounted: said where the operator looks, and its
		// usage is unreadable, so a usage limit refuses its calls.
		backend.AppendLog(filepath.Join(cfg.Dir, qemuLog), err.Error()+"\n")
	}
	if !restoring {
		b.starts.Started(id)
	}
	bctx, cancel := context.WithTimeout(ctx, b.opts.BootTimeout)
	defer cancel()
	if err := v.Connect(bctx); err != nil {
		_ = v.Stop(5 * time.Second)
		if restoring && ctx.Err() == nil {
			// Said in QEMU's log, which the agent keeps; the sandbox starts
			// afresh, its memory lost, and the caller sees a start.
			backend.AppendLog(filepath.Join(cfg.Dir, qemuLog), fmt.Sprintf("restoring the VM from its suspension failed, so it boots afresh, its memory lost: %v\n", err))
			if rerr := os.Remove(cfg.Incoming); rerr != nil {
				return nil, errors.Join(err, rerr)
			}
			return b.boot(ctx, rec)
		}
		return nil, fmt.Errorf("vm: sandbox %s did not boot (%s): %w; its console ends: %s", id, b.accel, err, lastLine(filepath.Join(cfg.Dir, consoleLog)))
	}
	if restoring {
		if err := os.Remove(cfg.Incoming); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	b.vms[id] = v
	b.mu.Unlock()
	return v, nil
}

// startOnRoot starts QEMU for cfg once the sandbox's root disk is there:
// an image's is made again if it is not (its build was lost), and held
// until QEMU has it open.
func (b *Backend) startOnRoot(ctx context.Context, rec *record, cfg Config) (*VM, error) {
	if rec.Spec.Image == nil {
		return Start(cfg)
	}
	unlock, err := b.holdImageDisk(ctx, rec.Spec.Image)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return Start(cfg)
}

// writeInitrd writes the sandbox's initramfs: the shared one, then an
// archive of the sandbox's /etc files (the kernel unpacks both in turn).
func (b *Backend) writeInitrd(rec *record, path string) error {
	var buf bytes.Buffer
	buf.Write(b.initrd)
	cw := &cpioWriter{w: &buf}
	files := backend.EtcFiles(rec.Spec, guestapi.NoNetworkResolv)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	etc := strings.TrimPrefix(guestapi.VMConfigEtc, "/")
	cw.file(filepath.Dir(etc), 0o040755, nil)
	cw.file(etc, 0o040755, nil)
	for _, n := range names {
		cw.file(etc+"/"+n, 0o100644, []byte(files[n]))
	}
	cw.file("TRAILER!!!", 0, nil)
	if cw.err != nil {
		return cw.err
	}
	return b.writeOwn(path, buf.Bytes(), b.user(rec.Slot, false))
}

// Alive implements backend.Prober: whether the sandbox's QEMU runs.
func (b *Backend) Alive(id string) bool {
	if backend.ValidateID(id) != nil {
		return false
	}
	rec, err := b.load(id)
	if err != nil {
		return false
	}
	_, err = b.held(rec)
	return err == nil
}

// Close drops the backend's connections to its VMs, which keep running:
// what the agent's exit does. A VM's port takes one connection at a time,
// so the next agent connects once this one has let go; later calls that
// would connect fail.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	vms := b.vms
	b.vms = map[string]*VM{}
	b.mu.Unlock()
	for _, v := range vms {
		v.Disconnect()
	}
	return nil
}

// Detach implements backend.Backend: the VM keeps running, as a
// container does, so that a session opened again finds its processes.
func (b *Backend) Detach(_ context.Context, id string) error {
	return backend.ValidateID(id)
}

// Stop implements backend.Backend: the guest's file systems are synced,
// then QEMU ends, and with it every process of the sandbox.
func (b *Backend) Stop(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	// A stop is a stop: the next start boots afresh, not from a
	// suspension's saved state.
	if err := os.Remove(b.memoryPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vm: stopping sandbox %s: removing its saved state: %w", id, err)
	}
	return b.stop(ctx, id)
}

func (b *Backend) stop(ctx context.Context, id string) error {
	rec, err := b.load(id)
	if errors.Is(err, backend.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	v, err := b.running(ctx, rec, false)
	if errors.Is(err, backend.ErrNotRunning) {
		return nil
	}
	if v == nil {
		// Running, but its guest does not answer: it cannot sync.
		b.mu.Lock()
		v = b.vms[id]
		b.mu.Unlock()
	} else {
		b.sync(ctx, v)
	}
	if v != nil {
		_ = v.Stop(10 * time.Second)
	}
	b.mu.Lock()
	delete(b.vms, id)
	b.mu.Unlock()
	return nil
}

// sync flushes the guest's file systems to its disks, so that what the
// tenant wrote survives the VM's end.
func (b *Backend) sync(ctx context.Context, v *VM) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The guest binary's sync, not the root's: an image may have none.
	frames, err := guestexec.Encode(backend.ExecRequest{Command: guestapi.Binary + " " + guestapi.SyncMode, Shell: backend.ShellClean})
	if err != nil {
		return
	}
	st, err := v.Open()
	if err != nil {
		return
	}
	p, err := guestexec.Start(ctx, st, frames, nil, backend.GuestHooks{})
	if err != nil {
		return
	}
	_, _ = p.Wait(ctx)
}

// StopAll stops every VM this backend runs or an earlier agent left: what
// `playground-dev` does on exit, so that no QEMU outlives it.
func (b *Backend) StopAll(ctx context.Context) error {
	ents, err := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if backend.ValidateID(e.Name()) != nil {
			continue
		}
		errs = append(errs, b.Stop(ctx, e.Name()))
	}
	return errors.Join(errs...)
}

// Destroy implements backend.Backend.
func (b *Backend) Destroy(ctx context.Context, id string, keepPile bool) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	if err := b.stop(ctx, id); err != nil {
		return err
	}
	rec, _ := b.load(id) // its image is released once its record is gone
	b.removeCgroup(id)
	dir := b.sandboxDir(id)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if keepPile && e.Name() == "pile" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	b.slots.Release(id)
	if !keepPile {
		if err := os.Remove(dir); err != nil {
			return err
		}
	}
	if rec != nil {
		return b.releaseImage(imageOf(rec.Spec))
	}
	return nil
}

// connectGuest is the backend's Guest.Connect (Capabilities.Guest): a
// stream of the VM's port to the guest's init, where an idle shepherd
// runs the command as in a container.
func (b *Backend) connectGuest(ctx context.Context, id string) (net.Conn, backend.GuestHooks, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, backend.GuestHooks{}, err
	}
	vm, st, err := b.stream(ctx, id)
	if err != nil {
		return nil, backend.GuestHooks{}, err
	}
	return st, backend.GuestHooks{
		// The VM's end is the end of every process in it.
		Lost: func(err error) error {
			if vm.Exited(guestapi.ProofTimeout) {
				return nil
			}
			return fmt.Errorf("%w: the connection to the VM's shepherd broke without a result: %v", backend.ErrProofLost, err)
		},
		StartFailed: func(err error, _ bool) error {
			if vm.Exited(0) {
				return fmt.Errorf("vm: sandbox %s: %w (its VM ended while the command started)", id, backend.ErrNotRunning)
			}
			return fmt.Errorf("vm: starting command in sandbox %s: %w", id, err)
		},
	}, nil
}

// jobConn is a stream to an idle shepherd of the guest, which holds the
// job it is asked to start in the VM (backend.JobHolder's JobConn); the
// guest's init answers attachments and lists on the same agent port.
func (b *Backend) jobConn(ctx context.Context, id string) (net.Conn, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	_, st, err := b.stream(ctx, id)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// File implements backend.FileServer: an idle shepherd of the guest's
// init serves the call with the tenant's credentials (guestexec.File),
// over a stream of the agent port.
func (b *Backend) File(ctx context.Context, id string, call backend.FileCall) (backend.FileResult, error) {
	conn, err := b.jobConn(ctx, id)
	if err != nil {
		return backend.FileResult{}, err
	}
	return guestexec.File(ctx, conn, call)
}

// Exec implements backend.Backend: the command runs over the guest
// protocol with the backend's Guest, as the kernel runs it
// (guestexec.Exec).
func (b *Backend) Exec(ctx context.Context, id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
	return guestexec.Exec(ctx, b.Capabilities().Guest, id, req, sink)
}

// stream opens a connection to an idle shepherd of the sandbox's running
// VM (it boots none), as a container's socket would be.
func (b *Backend) stream(ctx context.Context, id string) (*VM, *mux.Stream, error) {
	rec, err := b.load(id)
	if err != nil {
		return nil, nil, err
	}
	v, err := b.running(ctx, rec, false)
	if err != nil {
		return nil, nil, err
	}
	st, err := v.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("vm: sandbox %s: %w", id, err)
	}
	return v, st, nil
}

// DialSandbox implements backend.Dialer: a shepherd in the guest connects
// to port on the guest's loopback and relays.
func (b *Backend) DialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	return guestexec.DialPort(ctx, "vm", id, port, b.opts.StartTimeout, func(ctx context.Context) (net.Conn, error) {
		_, st, err := b.stream(ctx, id)
		return st, err
	})
}
