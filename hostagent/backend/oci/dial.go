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
	"net"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
)

// DialSandbox implements backend.Dialer: an idle shepherd of the sandbox's
// init connects to port on the sandbox's loopback and relays bytes (the
// guest's Dial request). The relay holds that shepherd, a process charged
// to the sandbox, for as long as the connection is open.
func (b *Backend) DialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	return guestexec.DialPort(ctx, "oci", id, port, b.opts.StartTimeout, func(ctx context.Context) (net.Conn, error) { return b.dial(ctx, id) })
}
