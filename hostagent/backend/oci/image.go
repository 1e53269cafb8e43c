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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Images. A sandbox whose Spec names an image runs it as its system: the
// image's layers (unpacked by the agent's image store) are mounted once per
// image, read-only, as an overlay at <state>/images/<hex>, shared by every
// sandbox of that image, and that mount takes the place of BaseRoot: the
// sandbox's base directories and /etc entries come from it as they come
// from BaseRoot for the others (through overlays of the sandbox's own under
// runc, bound under gVisor). Everything else of the sandbox (its generated
// /etc, the guest binary, faculties, /workspace, home, /pile) is as for any
// sandbox. The mount has no upper layer: nothing, not even the node's root,
// writes through it. The agent reads it only with lstat, component by
// component, so that a symlink of the image is never followed on the node:
// a base directory or /etc entry that is a symlink is made a symlink in the
// sandbox, resolved inside it.

// imagesDir (in the state directory) holds the images' mounts.
const imagesDir = "images"

// system is what a sandbox's system is made of: the node's (BaseRoot) or
// its image's.
type system struct {
	root     string            // BaseRoot, or the image's mount
	dirs     []string          // base directories that are directories
	links    map[string]string // base directories that are symlinks
	etc      []string          // entries of root/etc bound in
	etcLinks map[string]string // entries of root/etc that are symlinks (an image's)
	image    bool
}

// validateImage checks a spec's image (backend.Image.Validate).
func validateImage(img *backend.Image) error {
	if err := img.Validate(); err != nil {
		return fmt.Errorf("oci: %w", err)
	}
	return nil
}

// systemOf returns sb's system, mounting its image if it has one and the
// image is not mounted yet.
func (b *Backend) systemOf(sb *sandbox) (system, error) {
	img := sb.spec.Image
	if img == nil {
		return system{root: b.opts.BaseRoot, dirs: b.baseDirs, links: b.baseLinks, etc: b.etcBinds}, nil
	}
	b.imageMu.Lock()
	defer b.imageMu.Unlock()
	root := b.imageMount(img.Digest)
	if mounted, _ := isMountPoint(root); !mounted {
		if err := b.mountImage(img, root); err != nil {
			return system{}, err
		}
	}
	if s, ok := b.imageSystems[img.Digest]; ok {
		return s, nil
	}
	s, err := b.inspectImage(root)
	if err != nil {
		return system{}, fmt.Errorf("oci: image %s: %w", img.Digest, err)
	}
	b.imageSystems[img.Digest] = s
	return s, nil
}

func (b *Backend) imageMount(digest string) string {
	_, h, _ := strings.Cut(digest, ":")
	return filepath.Join(b.opts.StateDir, imagesDir, h)
}

// mountImage mounts img's layers at root: an overlay of lower layers only
// (top first), read-only. The layers are named relative to their common
// directory where they have one (the store's), so that an image of many
// layers fits in the page of a mount's options.
func (b *Backend) mountImage(img *backend.Image, root string) error {
	for _, l := range img.Layers {
		fi, err := os.Lstat(l)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("oci: image %s: its layer %s is not a directory (was it removed from the node's image store?)", img.Digest, l)
		}
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o711); err != nil {
		return err
	}
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	dir := filepath.Dir(img.Layers[0])
	names := make([]string, 0, len(img.Layers)+1)
	for _, l := range slices.Backward(img.Layers) {
		if filepath.Dir(l) != dir {
			dir = ""
		}
		names = append(names, l)
	}
	if len(names) == 1 {
		// overlayfs wants two layers without an upper one.
		names = append(names, filepath.Join(b.opts.StateDir, emptyDir))
		dir = ""
	}
	for i, n := range names {
		if dir != "" {
			n = filepath.Base(n)
		}
		names[i] = escapeLayer(n)
	}
	data := "lowerdir=" + strings.Join(names, ":") + "," + overlayOptions
	if len(data) >= os.Getpagesize() {
		return fmt.Errorf("oci: image %s has %d layers, more than one overlay mount takes here (%d bytes of options, past %d): flatten the image", img.Digest, len(img.Layers), len(data), os.Getpagesize()-1)
	}
	errc := make(chan error, 1)
	go func() {
		// A thread of its own, whose working directory is not the
		// agent's: the layers are named relative to it. Never unlocked:
		// the thread ends with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- err
			return
		}
		if dir != "" {
			if err := unix.Chdir(dir); err != nil {
				errc <- err
				return
			}
		}
		errc <- unix.Mount("overlay", root, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, data)
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("oci: mounting image %s at %s: %w", img.Digest, root, err)
	}
	return nil
}

// inspectImage reads which base directories and /etc entries an image's
// mount has, and of which kind, never following a symlink.
func (b *Backend) inspectImage(root string) (system, error) {
	s := system{root: root, links: map[string]string{}, etcLinks: map[string]string{}, image: true}
	for _, d := range b.opts.BaseDirs {
		fi, err := lstatIn(root, d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(root, d))
			if err != nil {
				return system{}, err
			}
			s.links[d] = target
		case fi.IsDir():
			s.dirs = append(s.dirs, d)
		}
	}
	for _, e := range b.opts.EtcFiles {
		fi, err := lstatIn(root, filepath.Join("etc", e))
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			// A link is made in the sandbox's /etc, where it resolves in
			// the image; one below a directory of /etc is left out.
			if !strings.Contains(e, "/") {
				target, err := os.Readlink(filepath.Join(root, "etc", e))
				if err != nil {
					return system{}, err
				}
				s.etcLinks[e] = target
			}
		case fi.IsDir() || fi.Mode().IsRegular():
			s.etc = append(s.etc, e)
		}
	}
	return s, nil
}

// lstatIn is os.Lstat of root/rel that fails on a symlink anywhere but at
// rel's last element.
func lstatIn(root, rel string) (os.FileInfo, error) {
	parts := strings.Split(strings.Trim(filepath.Clean("/"+rel), "/"), "/")
	p := root
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if i == len(parts)-1 {
			return fi, nil
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", p)
		}
	}
	return nil, os.ErrNotExist
}

// releaseImage unmounts an image no sandbox on disk names any more. The
// caller has removed the sandbox that named it.
func (b *Backend) releaseImage(digest string) error {
	b.imageMu.Lock()
	defer b.imageMu.Unlock()
	entries, _ := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	for _, e := range entries {
		sb, err := b.load(e.Name())
		if err == nil && sb.spec.Image != nil && sb.spec.Image.Digest == digest {
			return nil
		}
	}
	delete(b.imageSystems, digest)
	root := b.imageMount(digest)
	if mounted, _ := isMountPoint(root); mounted {
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("oci: unmounting image %s: %w", digest, err)
		}
	}
	if err := os.Remove(root); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// releaseImageMounts unmounts every image once no sandbox runs (StopAll):
// a stopped sandbox mounts its image again when it starts (systemOf), and
// a node's state directory is left with nothing mounted under it.
func (b *Backend) releaseImageMounts() error {
	b.imageMu.Lock()
	defer b.imageMu.Unlock()
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, imagesDir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		root := filepath.Join(b.opts.StateDir, imagesDir, e.Name())
		if mounted, _ := isMountPoint(root); mounted {
			if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("oci: unmounting image %s: %w", e.Name(), err))
				continue
			}
		}
		if err := os.Remove(root); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	clear(b.imageSystems)
	return errors.Join(errs...)
}

// imageOf is the digest of spec's image; empty without one.
func imageOf(spec backend.Spec) string {
	if spec.Image == nil {
		return ""
	}
	return spec.Image.Digest
}

// imageChanged releases the image a sandbox ran before its spec named
// another (or none), once its sandbox.json says so.
func (b *Backend) imageChanged(previous string, spec backend.Spec) error {
	if previous == "" || previous == imageOf(spec) {
		return nil
	}
	return b.releaseImage(previous)
}
