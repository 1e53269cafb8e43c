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

package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// pileFlagsOff clears, in chflags(1)'s words, every flag this backend
// puts on a pile's files: sappnd on the tenant's, schg on its signing key.
const pileFlagsOff = "nosappnd,noschg"

// clearPileFlags lifts the pile's flags from p, and from everything below
// it when recursive: a flagged file can be neither removed nor replaced.
// Only root outside the jail at securelevel 0 can do it, which the agent
// is.
func (b *Backend) clearPileFlags(ctx context.Context, p string, recursive bool) error {
	args := []string{pileFlagsOff, p}
	if recursive {
		args = append([]string{"-R"}, args...)
	}
	if _, err := b.run.Run(ctx, "chflags", args...); err != nil {
		return fmt.Errorf("jail: clearing the flags of %s: %w", p, err)
	}
	return nil
}

// installSigningKey is the backend's backend.KeyInstaller.Install: the key
// becomes the pile's guestapi.SigningKeyFile, written from the host, the
// tenant's, mode 0400 and flagged schg (system immutable: neither the tenant
// nor the jail's root can write, chmod, rename or remove it, and only root
// outside the jail at securelevel 0 can clear the flag; the jail runs at
// securelevel 3 without allow.chflags). The jail's /pile is a nullfs mount
// of the pile directory, so its processes see the new key at once: live. A
// sandbox that is provisioned has a pile whether its jail runs or not.
func (b *Backend) installSigningKey(ctx context.Context, id string, key []byte) (bool, error) {
	// Under the lock: a Destroy that ran first leaves no sandbox.json.
	if _, err := b.loadSpec(id); err != nil {
		return false, err
	}
	if err := b.writeSigningKey(ctx, b.PileDir(id), key); err != nil {
		return false, fmt.Errorf("jail: sandbox %s: installing the signing key: %w", id, err)
	}
	return true, nil
}

// writeSigningKey makes key the content of pile's self.key by a rename,
// so that a reader sees the old key or the new one, never a part. The new
// file is written under another name, root's 0400, given to the tenant
// just before the rename, and flagged schg only once renamed: FreeBSD's
// rename(2) refuses to move a flagged file, and to replace one, so the
// old key's schg is cleared first (and set again if the rest fails).
//
// The pile directory itself carries no flag (provisionPile: it is root's
// 0755, which is what keeps the tenant from creating, renaming or
// removing files in it), so nothing has to be lifted from it for the
// rename, and no tenant process can use the moment the old key is
// unflagged to remove or replace it. What the tenant can do, as the new
// file's owner, is chmod it between its chown and its flag, as on every
// backend that hands the key over this way: the window is the rename and
// one chflags.
func (b *Backend) writeSigningKey(ctx context.Context, pile string, key []byte) error {
	p := filepath.Join(pile, guestapi.SigningKeyFile)
	tmp := filepath.Join(pile, "."+guestapi.SigningKeyFile+".new")
	if _, err := os.Lstat(tmp); err == nil {
		// The leftover of an install cut short: never flagged by this
		// code, but cleared first all the same, or it stays for good.
		if err := b.clearPileFlags(ctx, tmp, true); err != nil {
			return err
		}
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
	}
	// A new file of root's, never one found under the name.
	if err := backend.WriteNewFile(tmp, key, 0o400); err != nil {
		return err
	}
	// Whatever the agent's umask made of the mode.
	if err := os.Chmod(tmp, 0o400); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	old, err := os.Lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return errors.Join(err, os.Remove(tmp))
	case !old.Mode().IsRegular():
		// Not a key of this backend's: rename cannot replace a
		// directory, so it goes, its flags cleared first.
		if err := b.clearPileFlags(ctx, p, true); err != nil {
			return errors.Join(err, os.Remove(tmp))
		}
		if err := os.RemoveAll(p); err != nil {
			return errors.Join(err, os.Remove(tmp))
		}
		old = nil
	default:
		if err := b.clearPileFlags(ctx, p, false); err != nil {
			return errors.Join(err, os.Remove(tmp))
		}
	}
	err = b.chown(tmp, guestapi.TenantUID, guestapi.TenantGID)
	if err == nil {
		err = b.rename(tmp, p)
	}
	if err != nil {
		err = errors.Join(err, os.Remove(tmp))
		if old != nil {
			// The old key stays the key: immutable again.
			err = errors.Join(err, b.setSchg(ctx, p))
		}
		return err
	}
	if err := b.setSchg(ctx, p); err != nil {
		return err
	}
	d, err := os.Open(pile)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// setSchg flags p system immutable.
func (b *Backend) setSchg(ctx context.Context, p string) error {
	if _, err := b.run.Run(ctx, "chflags", "schg", p); err != nil {
		return fmt.Errorf("jail: making %s immutable (a filesystem without file flags?): %w", p, err)
	}
	return nil
}
