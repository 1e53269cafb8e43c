//go:build freebsd

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

package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/jail"
	"github.com/playground-dev/playground/hostagent/backend/oci"
)

// backendFlags registers the jail backend's flags and returns its
// constructor: a FreeBSD node offers jail only. Of the oci flags, it
// takes --state-dir, --guest-binary (playground-sandbox built for
// FreeBSD, whose reaper proves cleanup) and --network (none only).
func backendFlags(fs *flag.FlagSet, o *oci.Options) func(context.Context, logr.Logger) ([]backend.Backend, error) {
	var jo jail.Options
	fs.StringVar(&jo.BaseDir, "jail-base", "/", "the FreeBSD userland every jail sees read-only (its bin lib libexec sbin usr, nullfs-mounted), e.g. a tree extracted from base.txz of this node's release (docs/freebsd.md)")
	fs.StringVar(&jo.ZFSParent, "jail-zfs-parent", "", "a ZFS dataset (e.g. zroot/playground) under which each sandbox gets datasets for its files and its pile, bounded in bytes and files; empty: plain directories and no disk limits (docs/freebsd.md)")
	return func(context.Context, logr.Logger) ([]backend.Backend, error) {
		if o.Network != oci.NetworkNone {
			return nil, fmt.Errorf("--network %s: the jail backend offers network none only (a vnet jail with loopback)", o.Network)
		}
		jo.StateDir, jo.GuestBinary = o.StateDir, o.GuestBinary
		be, err := jail.New(jo)
		if err != nil {
			return nil, fmt.Errorf("the jail backend: %w", err)
		}
		return []backend.Backend{be}, nil
	}
}
