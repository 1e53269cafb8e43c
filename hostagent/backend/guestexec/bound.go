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
	"net"
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

// Exec is a backend's Exec over its guest: req encoded for the guest, ctx
// bounded by the backend's startTimeout where the caller set none
// (BoundStart), the guest reached by dial (a connection an idle shepherd
// accepts, and this command's hooks), and the command started there
// (Start). The backend says why a start failed: Exec returns dial's
// error as it is, passes ErrInvalidRequest and ErrExhausted through, and
// returns any other failure of the start as a *StartError.
func Exec(ctx context.Context, req backend.ExecRequest, sink backend.Sink, startTimeout time.Duration, dial func(context.Context) (net.Conn, Hooks, error)) (backend.Process, error) {
	frames, err := Encode(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := BoundStart(ctx, startTimeout)
	defer cancel()
	conn, hooks, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	p, err := Start(ctx, conn, frames, sink, hooks)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, backend.ErrInvalidRequest), errors.Is(err, backend.ErrExhausted):
		return nil, err
	case ctx.Err() != nil:
		return nil, &StartError{Err: err, TimedOut: true}
	}
	return nil, &StartError{Err: err}
}

// StartError is a start that failed once the guest was reached (Exec):
// TimedOut when its bound passed first.
type StartError struct {
	Err      error
	TimedOut bool
}

func (e *StartError) Error() string { return e.Err.Error() }

func (e *StartError) Unwrap() error { return e.Err }

// StartFailed says whether err is a start that failed once the guest was
// reached (a *StartError), for the backend to say why; anything else is
// Exec's answer as it is.
func StartFailed(err error) (*StartError, bool) {
	var start *StartError
	ok := errors.As(err, &start)
	return start, ok
}
