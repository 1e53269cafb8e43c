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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Images. A sandbox whose Spec names an image boots on a root disk made
// of it in place of Options.Root: <state>/images/<hex>.ext4, built once
// per image digest and shared, read-only, by every VM of that digest. It
// is the image's layers (unpacked by the agent's image store, whiteouts in
// overlay form) merged by the kernel's overlayfs, read-only, in a mount
// namespace of the build's own (nothing of it is seen on the node, nor
// left behind by an agent that dies mid-build), under a layer of the
// guest's mount points and /etc links (imageSkeleton), and copied into a
// new ext4 filesystem by mkfs.ext4 -d: built under a temporary name, then
// renamed. Two sandboxes that want the same digest at once build it once
// (imageLocks). The disk goes when no sandbox on this node names its
// digest any more (releaseImage): the agent's image store holds an image
// while a sandbox of the node names it, so a disk never outlives its
// image there.

// imagesDir (in the state directory) holds the images' root disks.
const imagesDir = "images"

// buildPrefix names an image disk's build directory in imagesDir.
const buildPrefix = ".build-"

// validateImage checks a spec's image (backend.Image.Validate).
func validateImage(img *backend.Image) error {
	if err := img.Validate(); err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	return nil
}

// imageOf is the digest of spec's image; empty without one.
func imageOf(spec backend.Spec) string {
	if spec.Image == nil {
		return ""
	}
	return spec.Image.Digest
}

// imageDisk is the root disk of the image of digest.
func (b *Backend) imageDisk(digest string) string {
	_, h, _ := strings.Cut(digest, ":")
	return filepath.Join(b.opts.StateDir, imagesDir, h+".ext4")
}

// rootOf is the root disk a sandbox boots on: its image's, or Options.Root.
func (b *Backend) rootOf(spec backend.Spec) string {
	if spec.Image == nil {
		return b.opts.Root
	}
	return b.imageDisk(spec.Image.Digest)
}

// holdImageDisk builds img's root disk unless it is there, and returns
// with its digest's lock held: a release of the digest (releaseImage)
// waits until the caller has recorded that its sandbox runs it. Callers
// that want one digest at once build it once, the others waiting for it.
func (b *Backend) holdImageDisk(ctx context.Context, img *backend.Image) (unlock func(), err error) {
	unlock = b.imageLocks.Lock(img.Digest)
	disk := b.imageDisk(img.Digest)
	if backend.FileExists(disk) {
		return unlock, nil
	}
	if err := b.buildImageDisk(ctx, img, disk); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// buildImageDisk makes img's root disk at disk. The caller holds the
// digest's lock.
func (b *Backend) buildImageDisk(ctx context.Context, img *backend.Image, disk string) error {
	for _, l := range img.Layers {
		fi, err := os.Lstat(l)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("vm: image %s: its layer %s is not a directory (was it removed from the node's image store?)", img.Digest, l)
		}
	}
	dir := filepath.Dir(disk)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	work, err := os.MkdirTemp(dir, buildPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b.imageBuilds.Add(1)
	skeleton, root, tmp := filepath.Join(work, "skeleton"), filepath.Join(work, "root"), filepath.Join(work, "disk.ext4")
	if err := writeSkeleton(skeleton); err != nil {
		return fmt.Errorf("vm: image %s: %w", img.Digest, err)
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		return err
	}
	data, cwd, err := overlayData(skeleton, img.Layers)
	if err != nil {
		return fmt.Errorf("vm: image %s %w", img.Digest, err)
	}
	errc := make(chan error, 1)
	go func() {
		// A thread of its own, never unlocked (it ends with the
		// goroutine), in a mount namespace of its own: the overlay is
		// mounted there, mkfs (forked from this thread) reads it there,
		// and it goes with the thread.
		runtime.LockOSThread()
		errc <- b.mkfsFromLayers(ctx, img, data, cwd, root, tmp)
	}()
	if err := <-errc; err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, disk)
}

// overlayData is the overlay mount's options for skeleton over layers
// (bottom first), and the directory its layer names are relative to,
// where they have one (the store's), so that an image of many layers fits
// in the page of a mount's options.
func overlayData(skeleton string, layers []string) (data, cwd string, err error) {
	cwd = filepath.Dir(layers[0])
	for _, l := range layers {
		if filepath.Dir(l) != cwd {
			cwd = ""
		}
	}
	names := []string{escapeLayer(skeleton)}
	for _, l := range slices.Backward(layers) {
		if cwd != "" {
			l = filepath.Base(l)
		}
		names = append(names, escapeLayer(l))
	}
	// No redirect or metacopy xattr of a layer is followed.
	data = "lowerdir=" + strings.Join(names, ":") + ",redirect_dir=nofollow,metacopy=off"
	if len(data) >= os.Getpagesize() {
		return "", "", fmt.Errorf("has %d layers, more than one overlay mount takes here (%d bytes of options, past %d): flatten the image", len(layers), len(data), os.Getpagesize()-1)
	}
	return data, cwd, nil
}

// escapeLayer escapes what overlayfs's lowerdir option separates on.
func escapeLayer(p string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`).Replace(p)
}

// mkfsFromLayers mounts the overlay (data) at root in a new mount
// namespace of the calling thread, which is locked to it, and makes the
// ext4 filesystem tmp of what it shows, sized to it.
func (b *Backend) mkfsFromLayers(ctx context.Context, img *backend.Image, data, cwd, root, tmp string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		return fmt.Errorf("vm: image %s: a mount namespace to build its root disk in (the agent must be root): %w", img.Digest, err)
	}
	// Nothing mounted here propagates to the node's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("vm: image %s: %w", img.Digest, err)
	}
	if cwd != "" {
		if err := unix.Chdir(cwd); err != nil {
			return err
		}
	}
	if err := unix.Mount("overlay", root, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("vm: image %s: mounting its layers: %w", img.Digest, err)
	}
	size, inodes, err := measure(root)
	if err != nil {
		return fmt.Errorf("vm: image %s: %w", img.Digest, err)
	}
	if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve+size); err != nil {
		return fmt.Errorf("vm: image %s: its root disk (up to %s) would take the node's free space below its reserve: %w", img.Digest, backend.HumanBytes(size), err)
	}
	// No journal: nothing writes to it.
	args := []string{"-q", "-F", "-L", "playground-image", "-m", "0", "-N", strconv.FormatInt(inodes, 10),
		"-O", "^has_journal", "-E", "root_owner=0:0", "-d", root, tmp, strconv.FormatInt(size>>10, 10) + "k"}
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("vm: image %s: making its root disk: mkfs.ext4: %v: %s", img.Digest, err, bytes.TrimSpace(out))
	}
	return nil
}

// measure returns the size of an ext4 filesystem that holds the tree at
// root, with room for its metadata, and the inodes it needs. It never
// follows a symbolic link.
func measure(root string) (size, inodes int64, err error) {
	const block = 4096
	var data int64
	seen := map[uint64]bool{} // hard-linked inodes, counted once
	err = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		inodes++
		// Its entry in its directory.
		data += int64(len(d.Name())) + 16
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch st, _ := fi.Sys().(*unix.Stat_t); {
		case fi.Mode().IsRegular():
			if st != nil && st.Nlink > 1 {
				if seen[st.Ino] {
					return nil
				}
				seen[st.Ino] = true
			}
			data += (fi.Size() + block - 1) / block * block
		case fi.IsDir():
			data += block
		case fi.Mode()&fs.ModeSymlink != 0 && fi.Size() >= 60:
			// A short link's target lives in its inode.
			data += block
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	inodes += 64
	// The inode tables (256 bytes an inode), the block groups' bitmaps
	// and descriptors and the indirect blocks, with room: the disk is
	// sparse, and what is not written takes nothing.
	size = data + data/8 + inodes*256 + 32<<20
	size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	return size, inodes, nil
}

// writeSkeleton writes, at dir, the layer put over every image: the
// mount points the guest's first stage mounts on (the root is read-only
// in the guest, so they must be on it), and /etc's links to the files the
// agent generates (guestapi.EtcDir), as hack/vm-image.sh puts them in
// Options.Root. Over the image, a directory of it merges with the
// image's, and anything else of it hides the image's.
func writeSkeleton(dir string) error {
	dirs := []struct {
		path string
		mode uint32
	}{
		{"/", 0o755}, {guestapi.Dir, 0o755}, {guestapi.Workspace, 0o755}, {guestapi.PileDir, 0o755},
		{filepath.Dir(guestapi.TenantHome), 0o755}, {guestapi.TenantHome, 0o755},
		{filepath.Dir(guestapi.FacultiesDir), 0o755}, {guestapi.FacultiesDir, 0o755},
		{"/run", 0o755}, {"/tmp", 0o1777}, {"/dev", 0o755}, {"/proc", 0o555}, {"/sys", 0o555}, {"/etc", 0o755},
	}
	for _, d := range dirs {
		p := filepath.Join(dir, d.path)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		// unix.Chmod: os.Chmod would not take 01777's sticky bit.
		if err := unix.Chmod(p, d.mode); err != nil {
			return err
		}
	}
	for _, n := range guestapi.EtcNames {
		if err := os.Symlink(guestapi.EtcDir+"/"+n, filepath.Join(dir, "etc", n)); err != nil {
			return err
		}
	}
	return nil
}

// releaseImage removes the root disk of an image no sandbox on disk names
// any more. The caller has recorded or removed the sandbox that named it.
// A VM still running on it keeps its descriptor of the disk until it
// stops.
func (b *Backend) releaseImage(digest string) error {
	if digest == "" {
		return nil
	}
	defer b.imageLocks.Lock(digest)()
	ents, _ := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	for _, e := range ents {
		if r, err := b.load(e.Name()); err == nil && imageOf(r.Spec) == digest {
			return nil
		}
	}
	if err := os.Remove(b.imageDisk(digest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("vm: removing the root disk of image %s: %w", digest, err)
	}
	return nil
}

// removeImageLeftovers removes what builds of an agent that died left in
// imagesDir (their mounts went with their namespaces), and the disks no
// sandbox names.
func (b *Backend) removeImageLeftovers() error {
	dir := filepath.Join(b.opts.StateDir, imagesDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		switch h, ok := strings.CutSuffix(name, ".ext4"); {
		case strings.HasPrefix(name, buildPrefix):
			errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
		case ok:
			errs = append(errs, b.releaseImage("sha256:"+h))
		}
	}
	return errors.Join(errs...)
}
