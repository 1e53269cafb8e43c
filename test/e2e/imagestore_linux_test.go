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

package e2e

import (
	"testing"

	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/hostagent/nodeagent"
)

// imageStore is a node's image store in dir, reaching the tests'
// registries (on loopback, in cleartext).
func imageStore(t *testing.T, dir string) nodeagent.ImageStore {
	t.Helper()
	store, err := imagestore.Open(imagestore.Options{Dir: dir, PlainHTTP: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return nodeagent.StoreImages(store)
}
