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

package oci

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestTmpRepaired: a sandbox made before /tmp got its sticky bit (its
// layer's tmp was 0777) has 1777 from its next start on.
func TestTmpRepaired(t *testing.T) {
	b, id := newSandbox(t, backend.Spec{ID: "oldtmp"})
	ctx := context.Background()
	if err := b.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Stop unmounts the layer: mount it to damage it as an old agent had.
	sb, err := b.load(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.mountVolume(ctx, sb, b.volumes(sb)[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b.sandboxDir(id), layerName, "tmp"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, id, "stat -c %a /tmp"); got != "1777\n" {
		t.Fatalf("/tmp after a start: %s, want 1777", got)
	}
}
