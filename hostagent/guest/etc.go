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

package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// WriteEtc replaces files of EtcDir, each atomically (a login shell reads
// the old profile or the new, never half of one). It refuses any name
// guestapi.EtcNames does not list, and a sandbox without EtcDir (a
// container).
func WriteEtc(files map[string]string) error {
	if _, err := os.Stat(guestapi.EtcDir); err != nil {
		return fmt.Errorf("this sandbox has no %s: its /etc is the agent's to write on the host", guestapi.EtcDir)
	}
	for name, content := range files {
		if !slices.Contains(guestapi.EtcNames, name) {
			return fmt.Errorf("/etc/%s is not a file the agent generates", name)
		}
		tmp := filepath.Join(guestapi.EtcDir, "."+name+".new")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Chmod(tmp, 0o644); err != nil { // past the umask
			return err
		}
		if err := os.Rename(tmp, filepath.Join(guestapi.EtcDir, name)); err != nil {
			return err
		}
	}
	return nil
}
