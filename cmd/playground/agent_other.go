//go:build !linux && !freebsd

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
	"runtime"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
)

// backendFlags: this system has no backend.
func backendFlags(*flag.FlagSet, *oci.Options) func(context.Context, logr.Logger) ([]backend.Backend, error) {
	return func(context.Context, logr.Logger) ([]backend.Backend, error) {
		return nil, fmt.Errorf("playground agent has no sandbox backend on %s: run it on Linux (oci) or FreeBSD (jail)", runtime.GOOS)
	}
}
