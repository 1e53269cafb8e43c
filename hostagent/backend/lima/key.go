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

package lima

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/signingkey"
)

// guestPileDir is the pile directory in the VM's own mount namespace, on
// the disk Lima mounts at /mnt/lima-<disk>: init's /pile is a bind mount
// of it (the provision script's enter script), so what is renamed here
// the sandbox sees at once.
func guestPileDir(id string) string { return "/mnt/lima-" + pileDiskName(id) + "/pile" }

// keyScript installs the signing key it reads on its standard input as
// $1/self.key, $1 the pile directory, as root: never on a command line,
// which ps and logs show. The key is written to a new file, root's 0400,
// synced, given to the tenant (0400) only just before it is renamed over
// the old key, and made immutable (chattr +i) once renamed: an immutable
// file can be neither renamed nor replaced, so the old key loses its
// flags first, and has its +i back should the rename fail. A reader sees
// the old key or the new one, never a part.
//
// The pile directory is append-only (the provision script), and nothing in
// such a directory can be renamed or removed, so its flag is lifted for
// the install and set again on the way out, whatever happens. The
// directory is root's 0755: no tenant process can create, rename or
// remove anything in it meanwhile. What the tenant can do, as the new
// file's owner, is chmod it between its chown and its +i, as on every
// backend that hands the key over this way: the window is the rename.
var keyScript = fmt.Sprintf(`set -eu
pile="$1" key="$1/%[1]s" new="$1/.%[1]s.new"
if [ ! -d "$pile" ] || [ -L "$pile" ]; then
  echo "no pile directory at $pile" >&2
  exit 1
fi
chattr -a "$pile"
trap 'rc=$?; rm -f -- "$new" 2>/dev/null || true; chattr +a "$pile" || rc=1; exit $rc' EXIT
if [ -e "$new" ] || [ -L "$new" ]; then
  chattr -i -a "$new" 2>/dev/null || true
  rm -f -- "$new"
fi
(umask 0377 && cat > "$new")
if [ "$(wc -c < "$new")" -ne %[2]d ]; then
  echo "the key did not arrive whole" >&2
  exit 1
fi
sync "$new"
if [ -e "$key" ]; then
  chattr -i -a "$key"
fi
chown %[3]d:%[4]d "$new"
chmod 0400 "$new"
if ! mv -f -T -- "$new" "$key"; then
  if [ -f "$key" ]; then chattr +i "$key"; fi
  exit 1
fi
chattr +i "$key"
sync "$key" "$pile"
`, guestapi.SigningKeyFile, signingkey.Len, guestapi.TenantUID, guestapi.TenantGID)

// stagedKeyPath is where a key for a stopped sandbox waits for its next
// start: the agent's own state, root's 0600 in a 0700 directory, out of
// reach of the Lima user whose processes run the VMs.
func (b *Backend) stagedKeyPath(id string) string {
	return filepath.Join(b.opts.StateDir, "keys", id+".key")
}

// installSigningKey is the backend's backend.KeyInstaller.Install. The pile
// is a disk only the VM mounts, so the key goes in as root in the guest,
// over limactl shell (keyScript). A running VM takes it at once: live. A
// stopped one cannot be reached; the key is staged in the agent's state
// (stagedKeyPath) and installed by the next Start (or Reattach) before it
// returns, and the pile holds the previous key until then: not live. A key
// installed live supersedes one staged before it.
func (b *Backend) installSigningKey(ctx context.Context, id string, key []byte) (bool, error) {
	inst, err := b.inspect(ctx, id)
	if err != nil {
		return false, err
	}
	if inst.Status != statusRunning {
		p := b.stagedKeyPath(id)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return false, fmt.Errorf("lima: %w", err)
		}
		if err := atomicfile.Write(p, key, 0o600); err != nil {
			return false, fmt.Errorf("lima: sandbox %s: staging the signing key: %w", id, err)
		}
		return false, nil
	}
	// The staged key goes first: were it left after this one, the next
	// start would put the older key back.
	if err := b.dropStagedKey(id); err != nil {
		return false, err
	}
	if err := b.pushSigningKey(ctx, id, key); err != nil {
		return false, err
	}
	return true, nil
}

// pushSigningKey runs keyScript in sandbox id's running VM, the key on
// its standard input.
func (b *Backend) pushSigningKey(ctx context.Context, id string, key []byte) error {
	_, err := b.lctl.run(ctx, key, "shell", "--workdir", "/", InstanceName(id), "sudo", "sh", "-c", keyScript, "sh", guestPileDir(id))
	if err != nil {
		return fmt.Errorf("lima: sandbox %s: installing the signing key: %w", id, err)
	}
	return nil
}

// installStagedKey installs the key staged for sandbox id while it was
// stopped, if there is one, and then forgets it; its VM runs.
func (b *Backend) installStagedKey(ctx context.Context, id string) error {
	key, err := os.ReadFile(b.stagedKeyPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lima: %w", err)
	}
	if err := b.pushSigningKey(ctx, id, key); err != nil {
		return err
	}
	return b.dropStagedKey(id)
}

// dropStagedKey removes the key staged for sandbox id, if any.
func (b *Backend) dropStagedKey(id string) error {
	if err := os.Remove(b.stagedKeyPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lima: %w", err)
	}
	return nil
}
