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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindGuestBinary: without one next to the agent, the guest binary is
// the one on PATH; with none there either, the error says what to set.
func TestFindGuestBinary(t *testing.T) {
	if GuestBinaryNextToAgent() != "" {
		t.Skip("a guest binary lies next to this test's executable")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := FindGuestBinary(); err == nil || !strings.Contains(err.Error(), "--guest-binary") {
		t.Fatalf("no guest binary anywhere: %v, want an error naming --guest-binary", err)
	}
	want := filepath.Join(dir, GuestBinaryName)
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindGuestBinary(); err != nil || got != want {
		t.Fatalf("FindGuestBinary() = %q, %v; want %s, on PATH", got, err, want)
	}
}
