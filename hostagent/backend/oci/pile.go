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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// fsAppendFL is FS_APPEND_FL (chattr +a): the inode may only be opened for
// writing with O_APPEND; it cannot be truncated, renamed, unlinked, linked,
// chmod-ed or chown-ed; in a directory, entries can be created but not
// removed or renamed. Setting or clearing it needs CAP_LINUX_IMMUTABLE in
// the initial user namespace, which no sandbox process has.
const fsAppendFL = 0x20

// fsImmutableFL is FS_IMMUTABLE_FL (chattr +i): the inode cannot be opened
// for writing, truncated, renamed, unlinked, linked, chmod-ed or chown-ed,
// by anyone; it takes CAP_LINUX_IMMUTABLE in the initial user namespace to
// set or clear, as fsAppendFL does. The signing key has it.
const fsImmutableFL = 0x10

// preparePile makes the pile what the sandbox relies on:
//
//   - the directory is owned by the sandbox's root, mode 0755, so the
//     tenant cannot create entries in it, and is append-only, so nothing in
//     it can be removed or renamed;
//   - the files in Options.PileFiles exist, owned by the tenant (who needs
//     to open them for appending);
//   - every regular file in the pile is append-only, but the signing key
//     (guestapi.SigningKeyFile, kept from an earlier incarnation), which
//     is the tenant's, mode 0400 and immutable (InstallSigningKey).
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
	if err := setOwnerMode(pile, hostRoot, hostRoot, 0o755, fsAppendFL); err != nil {
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
	if hasSharedPile(sb) {
		// The shared pile's mount point: the sandbox root's, like the
		// pile, so that the tenant cannot use it for anything else.
		if err := os.Mkdir(filepath.Join(pile, guestapi.SharedPileName), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
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
			return setOwnerMode(p, hostRoot, hostRoot, 0o755, fsAppendFL)
		case p == filepath.Join(pile, guestapi.SigningKeyFile) && d.Type().IsRegular():
			return setOwnerMode(p, hostTenant, hostTenant, 0o400, fsImmutableFL)
		case d.Type().IsRegular():
			return setOwnerMode(p, hostTenant, hostTenant, 0o644, fsAppendFL)
		}
		return nil // symlinks and others: left alone, never followed
	})
	if err != nil {
		return fmt.Errorf("oci: pile: %w", err)
	}
	return setFlag(pile, fsAppendFL, true)
}

// setOwnerMode gives p the owner and mode, then the flag (fsAppendFL or
// fsImmutableFL), the other one cleared. A flagged inode refuses chown
// and chmod, so the flags are lifted first when a change is needed.
func setOwnerMode(p string, uid, gid int, mode os.FileMode, flag uint32) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid || int(st.Gid) != gid || fi.Mode().Perm() != mode {
		if err := setFlag(p, fsAppendFL|fsImmutableFL, false); err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	if err := setFlag(p, (fsAppendFL|fsImmutableFL)&^flag, false); err != nil {
		return err
	}
	return setFlag(p, flag, true)
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

// clearAppendOnly lifts the append-only and immutable flags from dir and
// everything below it, so that it can be removed.
func clearAppendOnly(dir string) error {
	if err := setFlag(dir, fsAppendFL|fsImmutableFL, false); err != nil {
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
			return setFlag(p, fsAppendFL|fsImmutableFL, false)
		}
		return nil
	})
}

// installSigningKey is the backend's backend.KeyInstaller.Install. The
// key replaces self.key by a rename, so that a reader sees the old key or
// the new one, never a part: the pile's directory is append-only (nothing in it may be
// renamed), so the flag is lifted for the rename; the directory is the
// sandbox root's, so no tenant process could use the moment to remove
// anything. The sandbox sees the new file at once (its /pile is a bind
// mount of this directory; gVisor revalidates bind mounts): live.
func (b *Backend) installSigningKey(ctx context.Context, id string, key []byte) (bool, error) {
	return b.installKey(ctx, id, key, true)
}

// installSigningKeyUntouched is the backend's
// backend.KeyInstaller.InstallUntouched: the sandbox has run nothing of
// its tenant's, so it is not frozen (no runc state, pause and resume,
// three runtime processes, on a warm claim's path).
func (b *Backend) installSigningKeyUntouched(ctx context.Context, id string, key []byte) (bool, error) {
	return b.installKey(ctx, id, key, false)
}

func (b *Backend) installKey(ctx context.Context, id string, key []byte, freeze bool) (bool, error) {
	sb, err := b.loadTenant(id)
	if err != nil {
		return false, err
	}
	_, hostTenant := b.hostIDs(sb)
	thaw := func() error { return nil }
	if freeze {
		if thaw, err = b.freeze(ctx, id); err != nil {
			return false, fmt.Errorf("oci: sandbox %s: freezing it while its signing key changes: %w", id, err)
		}
	}
	err = b.withPile(id, 0, func(dir string) error {
		return writeSigningKey(dir, key, hostTenant)
	})
	if terr := thaw(); err == nil && terr != nil {
		err = fmt.Errorf("thawing the sandbox: %w", terr)
	}
	if err != nil {
		return false, fmt.Errorf("oci: sandbox %s: installing the signing key: %w", id, err)
	}
	return true, nil
}

// freeze pauses sandbox id's processes, when it runs and is not paused
// already, until thaw: a new signing key is the tenant's a moment before
// it is immutable, and a process that ran then could chmod it and keep a
// descriptor that writes. The caller holds id's lock.
func (b *Backend) freeze(ctx context.Context, id string) (thaw func() error, err error) {
	none := func() error { return nil }
	rt, cid, err := b.container(id)
	if errors.Is(err, backend.ErrNotRunning) {
		return none, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := rt.state(ctx, cid)
	if err != nil {
		return nil, err
	}
	if st.Status != "running" {
		return none, nil // created, paused or stopped: nothing of it runs
	}
	if err := rt.pause(ctx, cid); err != nil {
		return nil, err
	}
	return func() error { return rt.resume(context.WithoutCancel(ctx), cid) }, nil
}

// writeSigningKey makes key the content of dir's self.key, owned by uid,
// mode 0400 and immutable; a key already there is left as it is.
func writeSigningKey(dir string, key []byte, uid int) error {
	p := filepath.Join(dir, guestapi.SigningKeyFile)
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		if have, err := os.ReadFile(p); err == nil && bytes.Equal(have, key) {
			return setOwnerMode(p, uid, uid, 0o400, fsImmutableFL)
		}
	}
	if err := setFlag(dir, fsAppendFL, false); err != nil {
		return err
	}
	defer func() { _ = setFlag(dir, fsAppendFL, true) }()
	tmp := filepath.Join(dir, "."+guestapi.SigningKeyFile+".new")
	if err := removeFlagged(tmp); err != nil {
		return err
	}
	err := backend.WriteNewFile(tmp, key, 0o400)
	if err == nil {
		// The node's root's until it is in place: no sandbox process can
		// open it before. Immutable only once renamed: an immutable file
		// cannot be.
		err = setOwnerMode(tmp, 0, 0, 0o400, 0)
	}
	if err == nil {
		// The old key (or whatever has its name) loses its flags, or
		// the rename cannot replace it; a directory is removed.
		if fi, lerr := os.Lstat(p); lerr == nil && fi.IsDir() {
			err = removeFlagged(p)
		} else if lerr == nil && fi.Mode().IsRegular() {
			err = setFlag(p, fsAppendFL|fsImmutableFL, false)
		}
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = removeFlagged(tmp)
		return err
	}
	// The tenant's, then immutable: between the two calls the tenant owns
	// a key it could chmod and open for writing, were any of its
	// processes to run (InstallSigningKey freezes them).
	if err := os.Lchown(p, uid, uid); err != nil {
		return err
	}
	if err := setFlag(p, fsImmutableFL, true); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeFlagged removes p and what is below it, flags lifted first; a p
// that does not exist is removed already.
func removeFlagged(p string) error {
	if err := clearAppendOnly(p); err != nil {
		return err
	}
	return os.RemoveAll(p)
}
