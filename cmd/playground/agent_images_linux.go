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
	"fmt"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// open opens the node's image store, if a backend of the node runs
// images; nil if none does.
func (f imageStoreFlags) open(stateDir string, bes []backend.Backend) (nodeagent.ImageStore, error) {
	s, err := f.settings(stateDir)
	if err != nil || !runsImages(bes) {
		return nil, err
	}
	opts := imagestore.Options{Dir: s.dir, MaxBytes: s.bytes, MaxLayerBytes: s.layerBytes, CheckTTL: f.checkTTL, PlainHTTP: f.plainHTTP}
	if f.caFile != "" {
		if opts.RootCAs, err = registryCAs(f.caFile); err != nil {
			return nil, err
		}
	}
	store, err := imagestore.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("the node's image store: %w", err)
	}
	return nodeagent.StoreImages(store), nil
}

// runsImages says whether a backend of the node runs sandboxes on images.
func runsImages(bes []backend.Backend) bool {
	for _, be := range bes {
		if be.Capabilities().Images {
			return true
		}
	}
	return false
}
