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

package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Disk limits. Each sandbox's writable layer (home, workspace, tmp) and its
// pile are ext4 filesystems of their own, each in a sparse image file in
// the sandbox's directory, loop-mounted by the agent and bind-mounted into
// the container. The kernel enforces the image's size and its inode count:
// a full sandbox gets ENOSPC, and nothing outside the image notices.
//
// Why images and not quotas: project quotas need a filesystem mounted with
// them (ext4 -O project + prjquota, XFS pquota), which a node's state
// directory rarely is and which the agent cannot turn on; an image works on
// any filesystem that holds sparse files, costs ~0.1 s and ~2.2 MiB of disk
// per 4 GiB image at provisioning, and can be retained (the pile) as one
// file. The image file is the source of truth: its size and inode count are
// fixed when it is made, and whatever mounts it gets the same bounds.
//
// Images are sparse: the node's disk is overcommitted by the sum of the
// sandboxes' unused limits. Options.StorageReserve keeps new sandboxes off
// a node whose free space runs low.
//
// The node's mount table holds an image only while the agent works on its
// files: once a runc container runs, its own mount namespace holds the
// filesystem (its binds of the layer's directories and of the pile keep it
// alive, and the loop device with it), and the agent unmounts the node's
// mount (releaseVolumes). Every process that reads the node's mount table
// (runc for the cgroup v1 mount points and its init for the rootfs's parent
// mount, mkfs.ext4 for its is-it-mounted check) and every new mount
// namespace (each container's init copies the node's table before it
// pivots) pays for each mount on it: with two mounts per running sandbox, a
// start on a node of a thousand sandboxes cost several times one on an
// empty node. To touch a running sandbox's files the agent mounts the
// image again through the same loop device, which shares the container's
// filesystem (mounting the image through a second device would corrupt
// it). gVisor's sandboxes and builders keep their mounts: runsc's gofer
// serves files from the node's paths, and a build's output is read from
// its layer after its container is gone.

const (
	layerName   = "layer"
	pileName    = "pile"
	imageSuffix = ".img"

	// MinVolumeBytes is the smallest image: ext4's journal and metadata
	// need a few MiB of it.
	MinVolumeBytes = 32 << 20
	// MinVolumeInodes is the fewest inodes an image may have.
	MinVolumeInodes = 256
	// volumeBlock is the images' block size; an image has at most one
	// inode per block.
	volumeBlock = 4096
	// mountOptions: inode tables of a fresh image are never written (they
	// read as zeros from the sparse file), and deleted files give their
	// space back to the node (discard punches holes in the image).
	mountOptions = "noinit_itable,discard"
)

// DefaultStorage is the disk a sandbox gets when its Spec leaves the
// limits zero: a 4 GiB, 262144-inode writable layer and a 512 MiB,
// 4096-inode pile.
var DefaultStorage = backend.Storage{
	LayerBytes: 4 << 30, LayerInodes: 262144,
	PileBytes: 512 << 20, PileInodes: 4096,
}

// loopControl is the loop devices' control node; a variable for tests.
var loopControl = "/dev/loop-control"

// volume is one kernel-bounded filesystem of a sandbox, mounted at
// <sandbox>/<name> from the image <sandbox>/<name>.img.
type volume struct {
	name   string
	bytes  int64
	inodes int64
	flags  uintptr // mount flags beyond nosuid and nodev
}

var _ backend.StorageReporter = (*Backend)(nil)

// Storage implements backend.StorageReporter: the limits sandbox id was
// provisioned with (its images have them).
func (b *Backend) Storage(id string) (backend.Storage, error) {
	if err := backend.ValidateID(id); err != nil {
		return backend.Storage{}, err
	}
	sb, err := b.load(id)
	if err != nil {
		return backend.Storage{}, err
	}
	return b.storage(sb.spec.Storage), nil
}

// storage fills zero limits from the backend's defaults.
func (b *Backend) storage(s backend.Storage) backend.Storage {
	d := b.opts.DefaultStorage
	for _, f := range []struct{ v, d *int64 }{
		{&s.LayerBytes, &d.LayerBytes}, {&s.LayerInodes, &d.LayerInodes},
		{&s.PileBytes, &d.PileBytes}, {&s.PileInodes, &d.PileInodes},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return s
}

// validateStorage checks limits after defaulting.
func validateStorage(s backend.Storage) error {
	for _, v := range []struct {
		what          string
		bytes, inodes int64
	}{{"writable layer", s.LayerBytes, s.LayerInodes}, {"pile", s.PileBytes, s.PileInodes}} {
		if v.bytes < MinVolumeBytes {
			return fmt.Errorf("oci: the %s's size of %s is below the minimum of %s", v.what, backend.FormatBytes(v.bytes), backend.FormatBytes(MinVolumeBytes))
		}
		if v.inodes < MinVolumeInodes {
			return fmt.Errorf("oci: the %s's %d inodes are below the minimum of %d", v.what, v.inodes, MinVolumeInodes)
		}
		if v.inodes > v.bytes/volumeBlock || v.inodes > 1<<32-1 {
			return fmt.Errorf("oci: the %s's %d inodes exceed what %s hold (one inode per 4Ki at most: %d)", v.what, v.inodes, backend.FormatBytes(v.bytes), v.bytes/volumeBlock)
		}
	}
	return nil
}

func (b *Backend) volumes(sb *sandbox) []volume {
	s := b.storage(sb.spec.Storage)
	if sb.builder {
		// A builder has no pile.
		return []volume{{name: layerName, bytes: s.LayerBytes, inodes: s.LayerInodes}}
	}
	return []volume{
		{name: layerName, bytes: s.LayerBytes, inodes: s.LayerInodes},
		{name: pileName, bytes: s.PileBytes, inodes: s.PileInodes, flags: unix.MS_NOEXEC},
	}
}

// checkDiskSupport tells why this host cannot enforce disk limits, if it
// cannot: loop devices and mkfs.ext4 are needed.
func checkDiskSupport(mkfs string) error {
	if _, err := exec.LookPath(mkfs); err != nil {
		return fmt.Errorf("oci: disk limits need %s (Debian: apt-get install e2fsprogs): %w", mkfs, err)
	}
	fd, err := unix.Open(loopControl, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("oci: disk limits need loop devices, and %s cannot be opened (%w): run the agent as root with the host's /dev (a privileged pod), load the loop module, or opt out of disk limits explicitly (--unbounded-storage)", loopControl, err)
	}
	unix.Close(fd)
	return nil
}

// checkReserve refuses a new sandbox when the state directory's filesystem
// has less free space than the reserve.
func (b *Backend) checkReserve() error {
	if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve); err != nil {
		return fmt.Errorf("oci: %w", err)
	}
	return nil
}

// mountVolume makes <sandbox>/<name> the root of the volume: it makes the
// image at first use (fixing its limits) and mounts it unless it is
// mounted already. With UnboundedStorage it is a plain directory.
func (b *Backend) mountVolume(ctx context.Context, sb *sandbox, v volume) error {
	dir := filepath.Join(sb.dir, v.name)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if b.opts.UnboundedStorage {
		return nil
	}
	img := dir + imageSuffix
	fresh := !backend.FileExists(img)
	if !fresh {
		if ok, err := mountedFrom(dir, img); ok || err != nil {
			return err
		}
	} else {
		if mounted, err := isMountPoint(dir); err != nil || mounted {
			return fmt.Errorf("oci: %s is a mount point without its image %s: %v", dir, img, err)
		}
		if err := b.makeImage(ctx, img, v); err != nil {
			return err
		}
	}
	if _, err := b.attachAndMount(img, dir, v.flags, fresh); err != nil {
		return fmt.Errorf("oci: sandbox %s: mounting its %s: %w", sb.spec.ID, v.name, err)
	}
	return nil
}

// releaseVolumes unmounts the volumes of sb, whose runc container runs and
// holds them, from the node (see the top of this file); gVisor's sandboxes
// and builders keep theirs. A failure only leaves the mounts, as before.
func (b *Backend) releaseVolumes(sb *sandbox) {
	if b.opts.UnboundedStorage || sb.builder || backend.IsolationOf(sb.spec) != backend.IsolationContainer {
		return
	}
	for _, v := range b.volumes(sb) {
		_ = unmountVolume(filepath.Join(sb.dir, v.name))
	}
}

// makeImage creates a sparse ext4 image of v's size and inodes, under a
// temporary name first so that a crash never leaves a half-made image.
func (b *Backend) makeImage(ctx context.Context, img string, v volume) error {
	tmp := img + ".new"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(v.bytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("oci: image %s: %w", img, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// -m 0: no blocks reserved for root (the sandbox's root is not the
	// host's); lazy init and no discard keep the file sparse and mkfs
	// fast; -N is a minimum that ext4 rounds up to fill its inode tables.
	out, err := exec.CommandContext(ctx, b.opts.Mkfs, "-q", "-F", "-b", strconv.Itoa(volumeBlock), "-I", "256",
		"-N", strconv.FormatInt(v.inodes, 10), "-m", "0", "-L", v.name,
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("oci: making the %s image: %s: %w: %s", v.name, b.opts.Mkfs, err, strings.TrimSpace(string(out)))
	}
	return os.Rename(tmp, img)
}

// isMountPoint says whether something is mounted at dir (it lies on
// another device than its parent).
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// mountedFrom says whether dir is the root of img's filesystem. Something
// else mounted there is an error.
func mountedFrom(dir, img string) (bool, error) {
	mounted, err := isMountPoint(dir)
	if errors.Is(err, os.ErrNotExist) {
		// A retained pile keeps no mount point (removeSandboxDir).
		return false, nil
	}
	if err != nil || !mounted {
		return false, err
	}
	var st, is unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Stat(img, &is); err != nil {
		return false, err
	}
	// The device of the mount, if a loop device, names its backing file.
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if target, err := os.Readlink(sys); err == nil && backend.FileExists(filepath.Join(sys, "loop", "backing_file")) {
		if p, err := loopNode(filepath.Base(target)); err == nil {
			if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				info, err := unix.IoctlLoopGetStatus64(fd)
				unix.Close(fd)
				if err == nil && info.Device == is.Dev && info.Inode == is.Ino {
					return true, nil
				}
			}
		}
	}
	return false, fmt.Errorf("oci: %s is mounted from something other than its image %s", dir, img)
}

// findLoop returns the loop device backed by img, or "". A running
// container keeps its image attached when the node has no mount of it (see
// releaseVolumes; an agent pod restarted): mounting that same device again
// shares its filesystem, where attaching the image a second time would
// corrupt it. hint, when not empty, is the device to try first; the search
// reads every loop device of the node (two per sandbox).
func findLoop(img, hint string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		return "", err
	}
	if hint != "" && loopBacks(hint, &st) {
		return hint, nil
	}
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "loop") || !backend.FileExists(filepath.Join("/sys/block", name, "loop", "backing_file")) {
			continue
		}
		p, err := loopNode(name)
		if err == nil && loopBacks(p, &st) {
			return p, nil
		}
	}
	return "", nil
}

// loopBacks says whether the loop device dev is backed by the file st is
// of.
func loopBacks(dev string, st *unix.Stat_t) bool {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	info, err := unix.IoctlLoopGetStatus64(fd)
	unix.Close(fd)
	return err == nil && info.Device == st.Dev && info.Inode == st.Ino
}

// loopHint is the device last attached or found for img, or "".
func (b *Backend) loopHint(img string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loops[img]
}

func (b *Backend) setLoopHint(img, dev string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.loops == nil {
		b.loops = map[string]string{}
	}
	if dev == "" {
		delete(b.loops, img)
	} else {
		b.loops[img] = dev
	}
}

// waitReleased waits, a bounded time, until no loop device is backed by
// img: the last mount of its filesystem is gone (a container's, with its
// mount namespace), and autoclear detaches the device asynchronously.
// Without the wait a Stop or Destroy would return while the node still
// shows the device, backed by an image that may be deleted next. A device
// still held elsewhere (a container that outlived the agent's mount
// namespace) is left to autoclear.
//
// The device this agent attached img to (its hint) is the only one img
// can be attached to: once that one is released, so is img, with no
// search of the node's loop devices (two per sandbox: a search cost some
// 20 ms per image with 80 of them, and grows with the node). Only an
// image this agent process never attached (it restarted) is searched for.
func (b *Backend) waitReleased(img string) {
	// Forgotten whatever follows: a hint kept for an image that is gone
	// would stay in the map for the agent's life.
	defer b.setLoopHint(img, "")
	var st unix.Stat_t
	if unix.Stat(img, &st) != nil {
		return
	}
	dev := b.loopHint(img)
	if dev == "" {
		var err error
		if dev, err = findLoop(img, ""); err != nil || dev == "" {
			return
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for delay := time.Millisecond; loopBacks(dev, &st) && time.Now().Before(deadline); {
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// loopNode returns /dev/<name>, creating the device node when /dev lacks
// it: a container's /dev is a copy made at its start, so loop devices the
// kernel adds later are missing there.
func loopNode(name string) (string, error) {
	p := filepath.Join("/dev", name)
	if backend.FileExists(p) {
		return p, nil
	}
	data, err := os.ReadFile(filepath.Join("/sys/block", name, "dev"))
	if err != nil {
		return "", err
	}
	maj, minor, ok := strings.Cut(strings.TrimSpace(string(data)), ":")
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(minor, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return "", fmt.Errorf("oci: %s: unexpected device number %q", name, data)
	}
	if err := unix.Mknod(p, unix.S_IFBLK|0o660, int(unix.Mkdev(uint32(ma), uint32(mi)))); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("oci: creating %s: %w", p, err)
	}
	return p, nil
}

// attachAndMount mounts img at dir through a loop device: the one already
// backed by img, else a free one attached with autoclear, so that the
// device goes away with the filesystem's last mount. It reports whether it
// attached a device. An image made just now (fresh) has no device yet:
// the search is skipped.
func (b *Backend) attachAndMount(img, dir string, flags uintptr, fresh bool) (attached bool, err error) {
	var dev string
	if !fresh {
		if dev, err = findLoop(img, b.loopHint(img)); err != nil {
			return false, err
		}
	}
	var fd int
	if dev != "" {
		if fd, err = unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
			return false, err
		}
	} else if dev, fd, err = attachLoop(img); err != nil {
		return false, err
	} else {
		attached = true
	}
	// The open descriptor holds the device until the mount does.
	defer unix.Close(fd)
	flags |= unix.MS_NOSUID | unix.MS_NODEV
	err = unix.Mount(dev, dir, "ext4", flags, mountOptions)
	if errors.Is(err, unix.EBUSY) && flags&unix.MS_RDONLY != 0 && !attached {
		// The filesystem is mounted read-write already (by a running
		// container): the kernel shares it only read-write, so this
		// mount is made read-only on its own.
		if err = unix.Mount(dev, dir, "ext4", flags&^unix.MS_RDONLY, mountOptions); err == nil {
			if err = unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
				_ = unix.Unmount(dir, unix.MNT_DETACH)
			}
		}
	}
	if err != nil {
		return attached, fmt.Errorf("mount %s (%s) on %s: %w", img, dev, dir, err)
	}
	b.setLoopHint(img, dev)
	return attached, nil
}

// attachLoop binds img to a free loop device and returns it, open.
func attachLoop(img string) (string, int, error) {
	ctl, err := unix.Open(loopControl, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("loop devices: %w", err)
	}
	defer unix.Close(ctl)
	file, err := unix.Open(img, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, err
	}
	defer unix.Close(file)
	for attempt := 0; ; attempt++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", -1, fmt.Errorf("finding a free loop device: %w", err)
		}
		dev, err := loopNode("loop" + strconv.Itoa(n))
		if err != nil {
			return "", -1, err
		}
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", -1, err
		}
		cfg := unix.LoopConfig{Fd: uint32(file), Size: volumeBlock}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
		copy(cfg.Info.File_name[:], img)
		err = unix.IoctlLoopConfigure(fd, &cfg)
		if errors.Is(err, unix.EINVAL) {
			// Direct I/O (no second copy of the image in the page cache)
			// needs a backing filesystem that supports it.
			cfg.Info.Flags, cfg.Size = unix.LO_FLAGS_AUTOCLEAR, 0
			err = unix.IoctlLoopConfigure(fd, &cfg)
		}
		if err == nil {
			return dev, fd, nil
		}
		unix.Close(fd)
		// Another process took the device between GET_FREE and CONFIGURE.
		if errors.Is(err, unix.EBUSY) && attempt < 16 {
			continue
		}
		return "", -1, fmt.Errorf("attaching %s to %s: %w", img, dev, err)
	}
}

// unmountVolume unmounts whatever is mounted at dir. A busy filesystem is
// detached lazily, and released when its last user is gone; the loop
// device goes with the filesystem's last mount (autoclear: see
// waitReleased).
func unmountVolume(dir string) error {
	// Mounts may be stacked (say by two agents racing); a few rounds at most.
	for range 8 {
		mounted, err := isMountPoint(dir)
		if errors.Is(err, os.ErrNotExist) || (err == nil && !mounted) {
			return nil
		}
		if err != nil {
			return err
		}
		err = unix.Unmount(dir, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(dir, unix.MNT_DETACH)
		}
		if err != nil {
			return fmt.Errorf("oci: unmounting %s: %w", dir, err)
		}
	}
	return fmt.Errorf("oci: %s stays mounted after 8 unmounts", dir)
}

// unmountVolumes unmounts the sandbox's volumes, whose container is gone,
// and waits until their loop devices are released.
func (b *Backend) unmountVolumes(id string) error {
	dir := b.sandboxDir(id)
	var errs []error
	for _, name := range []string{layerName, pileName} {
		p := filepath.Join(dir, name)
		errs = append(errs, unmountVolume(p))
		if !b.opts.UnboundedStorage {
			b.waitReleased(p + imageSuffix)
		}
	}
	return errors.Join(errs...)
}

// InspectPile mounts the pile of sandbox id read-only at a temporary
// directory and calls fn with it: the way to read a retained pile, whose
// image is not mounted once its sandbox is destroyed. A mounted pile (a
// provisioned sandbox) is passed as is.
func (b *Backend) InspectPile(id string, fn func(dir string) error) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	return b.withPile(id, unix.MS_RDONLY, fn)
}

// withPile calls fn with the directory of sandbox id's pile, mounted
// with flags (and noexec) for the call when it is not mounted already;
// id's lock is held.
func (b *Backend) withPile(id string, flags uintptr, fn func(dir string) error) error {
	dir := filepath.Join(b.sandboxDir(id), pileName)
	img := dir + imageSuffix
	if b.opts.UnboundedStorage || !backend.FileExists(img) {
		if !backend.FileExists(dir) {
			return fmt.Errorf("oci: sandbox %s has no pile: %w", id, backend.ErrNotFound)
		}
		return fn(dir)
	}
	if ok, err := mountedFrom(dir, img); err != nil {
		return err
	} else if ok {
		return fn(dir)
	}
	tmp, err := os.MkdirTemp(b.opts.StateDir, ".inspect-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	attached, err := b.attachAndMount(img, tmp, flags|unix.MS_NOEXEC, false)
	if err != nil {
		return err
	}
	defer func() {
		_ = unmountVolume(tmp)
		if attached {
			// Nothing else held the image: its device goes now.
			b.waitReleased(img)
		}
	}()
	return fn(tmp)
}
