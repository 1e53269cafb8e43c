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

package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/cmd/internal/cmdflags"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
)

// backendFlags registers the flags of this system's backends beyond the
// common ones and returns their constructor: on Linux, the oci backend,
// whose options agent.go's flags fill, first (a Sandbox that names no
// backend runs there); vm when its image is given; lima when limactl is.
func backendFlags(fs *flag.FlagSet, o *oci.Options) func(context.Context, logr.Logger) ([]backend.Backend, error) {
	vmf := cmdflags.AddVMFlags(fs)
	lima := registerLimaFlags(fs)
	return func(ctx context.Context, log logr.Logger) ([]backend.Backend, error) {
		be, err := oci.New(*o)
		if err != nil {
			return nil, fmt.Errorf("the oci backend: %w", err)
		}
		bes := []backend.Backend{be}
		vmb, err := vmf.Backend(ctx, o.StateDir, o.GuestBinary, o.StorageReserve, log)
		if err != nil {
			return nil, err
		}
		if vmb != nil {
			bes = append(bes, vmb)
		}
		lb, err := lima.backend(o.StateDir, o.GuestBinary)
		if err != nil {
			return nil, err
		}
		if lb != nil {
			bes = append(bes, lb)
		}
		return bes, nil
	}
}
