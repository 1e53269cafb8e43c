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
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/hostagent/regularfile"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/signingkey"
)

// The tenant's signing key (backend.SigningKeyHolder) is self.key in the
// pile's image. The host writes it there only while no VM has the image
// mounted: a running guest's kernel holds the file system's state in its
// memory, and would neither see nor survive a write under it. So a key
// installed while the VM runs (or is suspended, its memory saved with the
// mount) waits in the pile's directory, stagedKeyFile, until the next
// boot writes it into the image before QEMU starts. The guest seals it
// when it mounts the pile (guest.mountPile): the tenant's, mode 0400,
// immutable.

// stagedKeyFile, in the pile's directory (the agent's alone, 0700), is a
// key waiting for the next boot: beside the image, so that a Destroy that
// keeps the pile keeps it too.
const stagedKeyFile = "signing.key"

// installSigningKey is the backend's backend.KeyInstaller.Install. A
// sandbox whose VM is not running (provisioned, or stopped) has the key written into
// its pile's image at once, by the confined writer (writeSigningKey):
// live, as its next processes, the first to exist, see it, and so does
// PileFile. A running or suspended one has it kept for its next boot:
// not live, and the pile holds the previous key until then.
func (b *Backend) installSigningKey(_ context.Context, id string, key []byte) (bool, error) {
	rec, err := b.load(id)
	if err != nil {
		return false, err
	}
	staged := filepath.Join(b.PileDir(id), stagedKeyFile)
	_, err = b.held(rec)
	switch {
	case err == nil || b.Checkpointed(id):
		if err := atomicfile.Write(staged, key, 0o600); err != nil {
			return false, fmt.Errorf("vm: sandbox %s: keeping the signing key for its next start: %w", id, err)
		}
		return false, nil
	case !errors.Is(err, ErrNotRunning):
		return false, fmt.Errorf("vm: sandbox %s: %w", id, err)
	}
	if err := b.writeSigningKey(id, key); err != nil {
		return false, fmt.Errorf("vm: sandbox %s: installing the signing key: %w", id, err)
	}
	// A key kept for the next boot is older than this one.
	if err := os.Remove(staged); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// installStagedKey writes the key InstallSigningKey kept for sandbox id's
// next boot into its pile's image, and drops it; boot calls it, the
// sandbox's lock held, before QEMU starts. An error fails the boot: the
// key was promised from this start.
func (b *Backend) installStagedKey(id string) error {
	staged := filepath.Join(b.PileDir(id), stagedKeyFile)
	key, err := os.ReadFile(staged)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vm: sandbox %s: %w", id, err)
	}
	if err := signingkey.Check(key); err != nil {
		return fmt.Errorf("vm: sandbox %s: the key kept for its start (%s): %w: install it again", id, staged, err)
	}
	if err := b.writeSigningKey(id, key); err != nil {
		return fmt.Errorf("vm: sandbox %s: installing the signing key kept for its start: %w", id, err)
	}
	return os.Remove(staged)
}

// writeSigningKey makes key the content of self.key in sandbox id's pile
// image, the tenant's and mode 0400 (the guest adds the immutable flag as
// it mounts the pile), and reads it back. No VM may have the image open,
// and id's lock is held.
//
// debugfs writes it, confined as the pile reader is (PileFile), for it
// parses a file system a guest wrote, but allowed to write the image in
// place: it reopens the image by its descriptor's path, so the image's
// group, the sandbox's VM user, may write it for the call (that user is
// the sandbox's QEMU, which writes the image anyway while it runs). The
// old key goes first (debugfs's rm ignores the immutable flag), which
// also frees the block and inode the new one takes; the key reaches
// debugfs as a memfd, never as a file of the node's.
func (b *Backend) writeSigningKey(id string, key []byte) error {
	img := filepath.Join(b.PileDir(id), pileImage)
	f, st, err := regularfile.Open(img, os.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Close()
	if b.dropped {
		mode := os.FileMode(st.Mode & 0o777)
		if err := f.Chmod(mode | 0o060); err != nil {
			return err
		}
		defer func() { _ = f.Chmod(mode) }()
	}
	fd, err := unix.MemfdCreate("signing-key", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(fd), "signing-key")
	defer mem.Close()
	if _, err := mem.Write(key); err != nil {
		return err
	}
	name := "/" + guestapi.SigningKeyFile
	script := fmt.Sprintf("rm %[1]s\nwrite /proc/self/fd/4 %[1]s\nsif %[1]s mode 0100400\nsif %[1]s uid %[2]d\nsif %[1]s gid %[3]d\n",
		name, guestapi.TenantUID, guestapi.TenantGID)
	stderr, err := b.debugfsConfined(f, &st, []*os.File{mem}, true, []byte(script), &limitedBuffer{limit: 64 << 10}, "-w", "-f", "-")
	if err != nil {
		return fmt.Errorf("writing %s into %s (confined debugfs): %v: %s", guestapi.SigningKeyFile, img, err, bytes.TrimSpace(stderr))
	}
	// debugfs goes on after a command fails, and exits 0: what counts
	// is what the image holds now, read by a debugfs of its own (not in
	// the reader's catastrophic mode: the bitmaps it wrote must load).
	got := &limitedBuffer{limit: int64(len(key))}
	rerr, err := b.debugfsConfined(f, &st, nil, false, nil, got, "-R", "cat "+name)
	if err != nil || got.over || !bytes.Equal(got.Bytes(), key) {
		return fmt.Errorf("%s in %s is not the key after debugfs wrote it (%v): %s", guestapi.SigningKeyFile, img, err, bytes.TrimSpace(append(stderr, rerr...)))
	}
	return nil
}
