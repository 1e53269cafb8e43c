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

package guestexec

import (
	"context"
	"errors"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// BoundStart bounds ctx by timeout (a backend's start timeout) unless the
// caller bounded it already: a call that starts something in the guest
// (an exec, a dial) waits that long at most for it to start.
func BoundStart(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// Exec starts req in sandbox id over its guest, which g reaches: the
// kernel's exec on a backend whose sandboxes run the guest
// (Capabilities.Guest), and such a backend's Exec. req is encoded for the
// guest, ctx bounded by g.StartTimeout where the caller set none
// (BoundStart), the guest reached by g.Connect, and the command started
// there (Start). Connect's error is returned as it is, a refused request
// (ErrInvalidRequest, ErrExhausted) too; any other failure of the start
// is explained by the command's StartFailed hook.
func Exec(ctx context.Context, g *backend.Guest, id string, req backend.ExecRequest, sink backend.Sink) (backend.Process, error) {
	frames, err := Encode(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := BoundStart(ctx, g.StartTimeout)
	defer cancel()
	conn, hooks, err := g.Connect(ctx, id)
	if err != nil {
		return nil, err
	}
	p, err := Start(ctx, conn, frames, sink, hooks)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, backend.ErrInvalidRequest), errors.Is(err, backend.ErrExhausted), hooks.StartFailed == nil:
		return nil, err
	}
	return nil, hooks.StartFailed(err, ctx.Err() != nil)
}
