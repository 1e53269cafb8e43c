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
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// fsAppendFL is FS_APPEND_FL (chattr +a): the inode may only be opened for
// writing with O_APPEND; it cannot be truncated, renamed, unlinked, linked,
// chmod-ed or chown-ed; in a directory, entries can be created but not
// removed or renamed. Setting or clearing it needs CAP_LINUX_IMMUTABLE in
// the initial user namespace, which no sandbox process has.
const fsAppendFL = 0x20

// preparePile makes the pile what the sandbox relies on:
//
//   - the directory is owned by the sandbox's root, mode 0755, so the
//     tenant cannot create entries in it, and is append-only, so nothing in
//     it can be removed or renamed;
//   - the files in Options.PileFiles exist, owned by the tenant (who needs
//     to open them for appending);
//   - every regular file in the pile is append-only.
//
// Why the tenant cannot create files: the append-only flag is not
// inherited, so a file the tenant created would be rewritable until the
// agent marked it, and a descriptor opened for writing before the mark
// keeps its right to write anywhere in the file. Files the agent creates
// are append-only before any tenant process can open them.
func (b *Backend) preparePile(ctx context.Context, sb *sandbox) error {
	hostRoot, hostTenant := b.hostIDs(sb)
	pile := filepath.Join(sb.dir, pileName)
	if err := b.mountVolume(ctx, sb, b.volumes(sb)[1]); err != nil {
		return err
	}
	if !b.opts.UnboundedStorage {
		// mkfs's empty lost+found would show in /pile (also after a mount
		// that failed once); e2fsck makes it again if it ever needs one,
		// and one it filled stays.
		_ = os.Remove(filepath.Join(pile, "lost+found"))
	}
	if err := setOwnerMode(pile, hostRoot, hostRoot, 0o755); err != nil {
		return fmt.Errorf("oci: pile: %w", err)
	}
	for _, name := range b.opts.PileFiles {
		p := filepath.Join(pile, name)
		// O_EXCL|O_NOFOLLOW: never write through something already there.
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o644)
		if err == nil {
			err = f.Close()
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("oci: pile: %w", err)
		}
	}
	// Seal everything below the pile: files the operator placed there and
	// piles kept from an earlier incarnation of the sandbox (whose ID
	// range may differ) become the tenant's and append-only.
	err := filepath.WalkDir(pile, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case p == pile:
			return nil
		case d.IsDir():
			return setOwnerMode(p, hostRoot, hostRoot, 0o755)
		case d.Type().IsRegular():
			return setOwnerMode(p, hostTenant, hostTenant, 0o644)
		}
		return nil // symlinks and others: left alone, never followed
	})
	if err != nil {
		return fmt.Errorf("oci: pile: %w", err)
	}
	return setFlag(pile, fsAppendFL, true)
}

// setOwnerMode gives p the owner and mode, then makes it append-only. An
// append-only inode refuses chown and chmod, so the flag is lifted first
// when a change is needed.
func setOwnerMode(p string, uid, gid int, mode os.FileMode) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid || int(st.Gid) != gid || fi.Mode().Perm() != mode {
		if err := setFlag(p, fsAppendFL, false); err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return setFlag(p, fsAppendFL, true)
}

// setFlag sets or clears an inode flag with FS_IOC_GETFLAGS/SETFLAGS. It
// opens p without following symlinks and without blocking on a FIFO, and
// only touches regular files and directories.
func setFlag(p string, flag uint32, on bool) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if m := st.Mode & unix.S_IFMT; m != unix.S_IFREG && m != unix.S_IFDIR {
		return nil
	}
	cur, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		return fmt.Errorf("%s: reading inode flags: %w", p, err)
	}
	next := cur &^ flag
	if on {
		next = cur | flag
	}
	if next == cur {
		return nil
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(next)); err != nil {
		return fmt.Errorf("%s: setting inode flags (does the file system support chattr +a?): %w", p, err)
	}
	return nil
}

// clearAppendOnly lifts the append-only flag from dir and everything below
// it, so that it can be removed.
func clearAppendOnly(dir string) error {
	if err := setFlag(dir, fsAppendFL, false); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if d.IsDir() || d.Type().IsRegular() {
			return setFlag(p, fsAppendFL, false)
		}
		return nil
	})
}
