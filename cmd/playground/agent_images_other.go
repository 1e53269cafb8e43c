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

package main

import (
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// open checks the flags: this system's backends run no image, and the
// node has no image store (a Sandbox on an image is refused).
func (f imageStoreFlags) open(stateDir string, _ []backend.Backend) (nodeagent.ImageStore, error) {
	_, err := f.settings(stateDir)
	return nil, err
}
