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

package devenv

import (
	"fmt"

	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// openImages opens the node's image store in dir: dev's sandboxes run
// the images their Tenants name, as a node's do.
func openImages(dir string, maxBytes int64, plainHTTP []string) (nodeagent.ImageStore, error) {
	store, err := imagestore.Open(imagestore.Options{Dir: dir, MaxBytes: maxBytes, PlainHTTP: plainHTTP})
	if err != nil {
		return nil, fmt.Errorf("the node's image store: %w", err)
	}
	return nodeagent.StoreImages(store), nil
}
