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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Suspension with memory (backend.Suspender): QEMU saves the whole VM (its
// RAM, CPU and device state, the guest's processes and page cache with it)
// to <sandbox>/memory.img through its migration to a descriptor, and ends;
// the next start loads it (-incoming) instead of booting, and removes it.
// The disks are not copied: the guest was stopped, its writes flushed, and
// nothing else writes them until it goes on. QEMU runs under a seccomp
// filter that forbids it to spawn: it writes to a descriptor the agent
// opened, never to a path or a command of its own.

// memoryImage is the file, in the sandbox's directory, of its saved state.
const memoryImage = "memory.img"

func (b *Backend) memoryPath(id string) string {
	return filepath.Join(b.sandboxDir(id), memoryImage)
}

// Checkpointed implements backend.Suspender.
func (b *Backend) Checkpointed(id string) bool {
	return backend.ValidateID(id) == nil && backend.FileExists(b.memoryPath(id))
}

// CheckpointIsolations implements backend.Suspender: every VM's (a VM has
// no choice of isolation, which the API calls container).
func (b *Backend) CheckpointIsolations() []string {
	return []string{backend.IsolationContainer}
}

// Suspend implements backend.Suspender.
func (b *Backend) Suspend(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	rec, err := b.load(id)
	if err != nil {
		return err
	}
	v, err := b.running(ctx, rec, false)
	if err != nil {
		return err
	}
	memory := int64(b.config(rec).MemoryMiB) << 20
	if err := backend.CheckReserve(b.opts.StateDir, b.opts.StorageReserve+memory); err != nil {
		return fmt.Errorf("%w: sandbox %s's memory image (up to %s) would take the node's free space below its reserve: %w; its processes are stopped and its files kept", backend.ErrNoCheckpoint, id, backend.HumanBytes(memory), err)
	}
	path := b.memoryPath(id)
	tmp := path + ".tmp"
	if err := v.SaveMemory(ctx, tmp); err != nil {
		_ = os.Remove(tmp)
		if v.Exited(0) {
			b.forget(id)
			return fmt.Errorf("vm: suspending sandbox %s, which ended it: %w", id, err)
		}
		return fmt.Errorf("vm: suspending sandbox %s: %w", id, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, b.stop(ctx, id))
	}
	_ = v.Stop(10 * time.Second)
	b.forget(id)
	return nil
}

// forget drops the backend's hold of sandbox id's VM, which has ended.
func (b *Backend) forget(id string) {
	b.mu.Lock()
	delete(b.vms, id)
	b.mu.Unlock()
}

// SaveMemory stops the guest and saves the VM's whole state to path (made
// anew, 0600) through QEMU's migration to a descriptor. QEMU is left
// paused, for the caller to end; on an error the guest goes on, unless
// QEMU has exited.
func (v *VM) SaveMemory(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	q, err := v.dialQMP(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	// Not stopped first: QEMU stops the guest itself once what is left to
	// send is small, and the state it saves is then a running guest's,
	// which the restore lets run on (a guest saved stopped stays stopped).
	goOn := func(err error) error {
		if _, cerr := q.execute("cont", nil); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}
	if _, err := q.execute("getfd", map[string]string{"fdname": "suspend"}, int(f.Fd())); err != nil {
		return goOn(err)
	}
	if _, err := q.execute("migrate", map[string]string{"uri": "fd:suspend"}); err != nil {
		return goOn(err)
	}
	for {
		ret, err := q.execute("query-migrate", nil)
		if err != nil {
			return goOn(err)
		}
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := json.Unmarshal(ret, &st); err != nil {
			return goOn(err)
		}
		switch st.Status {
		case "completed":
			return f.Sync()
		case "failed", "cancelled":
			return goOn(fmt.Errorf("vm: saving the VM's state: %s %s", st.Status, st.ErrorDesc))
		}
		select {
		case <-ctx.Done():
			_, _ = q.execute("migrate_cancel", nil)
			return goOn(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
