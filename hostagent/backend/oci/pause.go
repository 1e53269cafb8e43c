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
	"fmt"

	"github.com/playground-dev/playground/hostagent/backend"
)

// Pause implements backend.Pauser: runc's (or runsc's) pause, the cgroup
// freezer over every process of the sandbox. A paused sandbox stays so.
func (b *Backend) Pause(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	rt, cid, err := b.container(id)
	if err != nil {
		return err
	}
	if err := rt.pause(ctx, cid); err != nil {
		if st, serr := rt.state(ctx, cid); serr == nil && st.Status == "paused" {
			return nil // paused already: as asked
		}
		return fmt.Errorf("oci: pausing sandbox %s: %w", id, err)
	}
	return nil
}

// Unpause implements backend.Pauser.
func (b *Backend) Unpause(ctx context.Context, id string) error {
	if err := backend.ValidateID(id); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	rt, cid, err := b.container(id)
	if err != nil {
		return err
	}
	st, err := rt.state(ctx, cid)
	if err != nil {
		return fmt.Errorf("oci: resuming sandbox %s: %w", id, err)
	}
	if st.Status != "paused" {
		return nil
	}
	if err := rt.resume(ctx, cid); err != nil {
		return fmt.Errorf("oci: resuming sandbox %s: %w", id, err)
	}
	return nil
}

// container is the runtime and the name of sandbox id's container;
// backend.ErrNotRunning when it has none.
func (b *Backend) container(id string) (*runc, string, error) {
	cid := containerID(id)
	rt := b.runtimeOf(id)
	if !rt.exists(cid) {
		return nil, "", backend.ErrNotRunning
	}
	return rt, cid, nil
}
