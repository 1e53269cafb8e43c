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
	"flag"
	"fmt"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
)

// backendFlags registers the flags of this system's backends beyond the
// common ones and returns their constructor: on Linux, the oci backend,
// whose options agent.go's flags fill.
func backendFlags(_ *flag.FlagSet, o *oci.Options) func() ([]backend.Backend, error) {
	return func() ([]backend.Backend, error) {
		be, err := oci.New(*o)
		if err != nil {
			return nil, fmt.Errorf("the oci backend: %w", err)
		}
		return []backend.Backend{be}, nil
	}
}
