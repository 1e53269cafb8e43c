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

package backend

import (
	"fmt"
	"path/filepath"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// DefaultPileFiles are the files a new pile has when a backend's options
// name none: created empty, the tenant's to append to.
var DefaultPileFiles = []string{"self.pile"}

// PileFiles checks the files every new pile is to have (a backend's
// PileFiles option), nil for DefaultPileFiles, and returns them. Each is a
// plain file name, and none the tenant's signing key's, which is
// read-only (InstallSigningKey) where a pile file is the tenant's to
// append to.
func PileFiles(files []string) ([]string, error) {
	if files == nil {
		return DefaultPileFiles, nil
	}
	for _, f := range files {
		if !filepath.IsLocal(f) || filepath.Base(f) != f || f == "." {
			return nil, fmt.Errorf("pile file %q is not a plain file name", f)
		}
		if f == guestapi.SigningKeyFile {
			return nil, fmt.Errorf("pile file %q is the name of the tenant's signing key, which is read-only", f)
		}
	}
	return files, nil
}
