//go:build !linux

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

package cmdflags

import (
	"context"
	"flag"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/backend"
)

// VMFlags is empty here: the vm backend runs QEMU on Linux hosts only, so
// elsewhere `playground-dev` has no --vm-* flags and no vm backend.
type VMFlags struct{}

// AddVMFlags registers no flag here.
func AddVMFlags(*flag.FlagSet) *VMFlags { return &VMFlags{} }

// VMBackend is what playground-dev holds of the vm backend: a backend
// whose VMs it stops when it ends.
type VMBackend interface {
	backend.Backend
	StopAll(ctx context.Context) error
}

// Backend is nil: no vm backend here.
func (*VMFlags) Backend(context.Context, string, string, int64, logr.Logger) (VMBackend, error) {
	return nil, nil
}
