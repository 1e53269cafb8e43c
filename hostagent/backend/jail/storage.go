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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
	"github.com/playground-dev/playground/internal/atomicfile"
)

// DefaultStorage is the disk of a sandbox whose Spec and Options leave it
// zero: the oci backend's defaults.
var DefaultStorage = backend.Storage{
	LayerBytes: 4 << 30, LayerInodes: 262144,
	PileBytes: 512 << 20, PileInodes: 4096,
}

// storageOf is spec's disk limits, defaults filled in.
func (b *Backend) storageOf(spec backend.Spec) backend.Storage {
	s, o := spec.Storage, b.opts.DefaultStorage
	pick := func(v, opt, def int64) int64 {
		if v != 0 {
			return v
		}
		if opt != 0 {
			return opt
		}
		return def
	}
	return backend.Storage{
		LayerBytes:  pick(s.LayerBytes, o.LayerBytes, DefaultStorage.LayerBytes),
		LayerInodes: pick(s.LayerInodes, o.LayerInodes, DefaultStorage.LayerInodes),
		PileBytes:   pick(s.PileBytes, o.PileBytes, DefaultStorage.PileBytes),
		PileInodes:  pick(s.PileInodes, o.PileInodes, DefaultStorage.PileInodes),
	}
}

func (b *Backend) layerDataset(id string) string { return b.opts.ZFSParent + "/" + id }
func (b *Backend) pileDataset(id string) string  { return b.opts.ZFSParent + "/" + id + "-pile" }

// ensureDatasets gives a new sandbox its two ZFS datasets, mounted at the
// layer and the pile, bounded in bytes (refquota) and in the sandbox
// user's files (userobjquota, OpenZFS's object quota): the kernel's
// bound on one sandbox's disk. A dataset that exists keeps its limits:
// they are fixed when the sandbox is provisioned.
func (b *Backend) ensureDatasets(ctx context.Context, spec backend.Spec) error {
	if b.opts.ZFSParent == "" {
		return nil
	}
	// The limits of the first provision are the sandbox's for good.
	st, err := b.Storage(spec.ID)
	if errors.Is(err, backend.ErrNotFound) {
		st = b.storageOf(spec)
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(b.storageFile(spec.ID), data, 0o600); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
	} else if err != nil {
		return err
	}
	for _, d := range []struct {
		ds, dir       string
		bytes, inodes int64
	}{
		{b.layerDataset(spec.ID), b.layerDir(spec.ID), st.LayerBytes, st.LayerInodes},
		{b.pileDataset(spec.ID), b.PileDir(spec.ID), st.PileBytes, st.PileInodes},
	} {
		_, err := b.run.Run(ctx, "zfs", "list", "-H", "-o", "name", d.ds)
		if err == nil {
			continue
		}
		if !failedWith(err, "dataset does not exist") {
			return fmt.Errorf("jail: looking up ZFS dataset %s: %w", d.ds, err)
		}
		if _, err := b.run.Run(ctx, "zfs", "create", "-p",
			"-o", "mountpoint="+d.dir,
			"-o", "refquota="+strconv.FormatInt(d.bytes, 10),
			"-o", "userobjquota@"+strconv.Itoa(guestapi.TenantUID)+"="+strconv.FormatInt(d.inodes, 10),
			d.ds); err != nil {
			if failedWith(err, "userobj") {
				return fmt.Errorf("jail: creating ZFS dataset %s: the pool lacks object quotas (feature userobj_accounting: zpool upgrade): %w", d.ds, err)
			}
			return fmt.Errorf("jail: creating ZFS dataset %s: %w", d.ds, err)
		}
	}
	return nil
}

// destroyDataset destroys ds and what is below it (zfs unmounts it
// first); one that does not exist is no error.
func (b *Backend) destroyDataset(ctx context.Context, ds string) error {
	if _, err := b.run.Run(ctx, "zfs", "destroy", "-r", ds); err != nil && !failedWith(err, "dataset does not exist") {
		return fmt.Errorf("jail: destroying ZFS dataset %s: %w", ds, err)
	}
	return nil
}

var _ backend.StorageReporter = (*Backend)(nil)

func (b *Backend) storageFile(id string) string {
	return filepath.Join(b.sandboxDir(id), "storage.json")
}

// Storage implements backend.StorageReporter: the limits sandbox id's
// datasets were created with. ErrNotFound without ZFS, where nothing
// bounds the disk.
func (b *Backend) Storage(id string) (backend.Storage, error) {
	var st backend.Storage
	if err := validateJailName(id); err != nil {
		return st, err
	}
	data, err := os.ReadFile(b.storageFile(id))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%w: no disk limits recorded for %s", backend.ErrNotFound, id)
	}
	if err != nil {
		return st, fmt.Errorf("jail: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("jail: %s: %w", b.storageFile(id), err)
	}
	return st, nil
}
