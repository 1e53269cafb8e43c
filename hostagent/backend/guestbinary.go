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
	"os"
	"os/exec"
	"path/filepath"
)

// GuestBinaryName is the file name of the guest binary
// (cmd/playground-sandbox), which every backend but the in-memory one runs
// in its sandboxes.
const GuestBinaryName = "playground-sandbox"

// GuestBinaryNextToAgent is GuestBinaryName next to the running
// executable, or "" when there is none there.
func GuestBinaryNextToAgent() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if p := filepath.Join(filepath.Dir(exe), GuestBinaryName); FileExists(p) {
		return p
	}
	return ""
}

// FindGuestBinary is the default guest binary of a backend that needs
// one: GuestBinaryName next to the running executable, else on PATH.
func FindGuestBinary() (string, error) {
	if p := GuestBinaryNextToAgent(); p != "" {
		return p, nil
	}
	p, err := exec.LookPath(GuestBinaryName)
	if err != nil {
		return "", fmt.Errorf("guest binary %s not found next to the agent or on PATH; set it explicitly (--guest-binary)", GuestBinaryName)
	}
	return p, nil
}
